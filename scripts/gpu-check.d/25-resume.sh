#!/usr/bin/env bash
# Resume == uninterrupted on the GPU: 2 steps, save, resume for 2 more, against 4 steps in one
# run, on the exact cuda handler and on fast (tiny, B4 T64, validation every 2 steps). The saved
# weights and optimizer state are compared tensor by tensor on their bytes
# (tools/compare_safetensors.py), and the loss histories line by line. Each handler is checked
# only when its tests passed in this run.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/gpt2/osprey-gpt2
logs=$OSPREY_GPU_CHECK_LOGS
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/data/tinyshakespeare.txt}
shape=(--data "$data" --batch 4 --seq 64 --val-every 2 --val-batches 1 --weight-decay 0.1)

resume_check() {  # resume_check NAME BACKEND-ARGS...
  local name=$1; shift
  local dir=$logs/resume-$name
  rm -rf "$dir"; mkdir -p "$dir"
  if ! "$gpt2" train --preset tiny --steps 2 --save "$dir/split" "${shape[@]}" "$@" > "$dir/first.log" 2>&1 ||
     ! "$gpt2" train --resume "$dir/split" --steps 2 --save "$dir/split" "${shape[@]}" "$@" > "$dir/second.log" 2>&1 ||
     ! "$gpt2" train --preset tiny --steps 4 --save "$dir/whole" "${shape[@]}" "$@" > "$dir/whole.log" 2>&1; then
    echo "RESULT|resume == uninterrupted ($name)|FAIL|a run failed: $(tail -1 "$dir"/*.log | tr '\n' ' ' | cut -c1-120)"
    return
  fi
  local verdict=PASS detail=""
  for f in model optimizer; do
    local said
    said=$(python3 tools/compare_safetensors.py "$dir/split/checkpoint/$f.safetensors" "$dir/whole/checkpoint/$f.safetensors") ||
      verdict=FAIL
    detail+="$f: $said; "
  done
  cmp -s <(cut -d, -f1-3 "$dir/split/loss.csv") <(cut -d, -f1-3 "$dir/whole/loss.csv") || { verdict=FAIL; detail+="loss.csv differs; "; }
  echo "RESULT|resume == uninterrupted, bytes of every tensor ($name)|$verdict|${detail:0:150}"
}

if [[ ${OSPREY_EXACT_CUDA_TESTS:-FAIL} == PASS ]]; then
  resume_check cuda --backend gpu --device cuda
else
  echo "RESULT|resume == uninterrupted (cuda)|SKIPPED|the exact cuda tests did not pass in this run"
fi
if [[ ${OSPREY_FAST_CUDA_TESTS:-FAIL} == PASS ]]; then
  resume_check fast --backend fast
else
  echo "RESULT|resume == uninterrupted (fast)|SKIPPED|the fast tests did not pass in this run"
fi
