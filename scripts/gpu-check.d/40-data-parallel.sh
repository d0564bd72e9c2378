#!/usr/bin/env bash
# Data-parallel training over NCCL, on a machine with 2 or more GPUs (skipped with one):
#
#   exact     GPT-2 124M, 10 steps of a global batch of 8 rows x 64 tokens, one-row micro-batches,
#             on 1 GPU and on 2 (and 4, 8 where the machine has them) with `train --gpus N`:
#             the saved weights and AdamW moments must be the same bytes, and every step's loss
#             the same number.
#   failures  (tiny preset) a rank killed mid-run ends the launcher within seconds, naming the
#             rank; a rank whose peer never starts gives up joining NCCL after OSPREY_NCCL_TIMEOUT
#             with an error instead of hanging.
#   scaling   the all-reduce sum (fast mode) at 16 rows x 1024 tokens per GPU: steady-state
#             tokens/s on 1 GPU and on all of them; efficiency = tokens/s(N) / (N x tokens/s(1)).
#             DP_ROWS overrides the 16 (the exact handler keeps every activation in float64).
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0), as shared machines require.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/gpt2/osprey-gpt2
logs=$OSPREY_GPU_CHECK_LOGS/data-parallel
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/data/tinyshakespeare.txt}
mkdir -p "$logs"
export NCCL_NVLS_ENABLE=0

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[[ -f $data ]] || { echo "RESULT|data-parallel|FAIL|no training text at $data"; exit 0; }
tiny_train=(train --backend gpu --device cuda --preset tiny --data "$data" --batch 4 --seq 64 --steps 100000)

# ---- a rank whose peer never starts: needs one GPU only -------------------------------------------
rendezvous=$logs/lonely-rank.id
rm -f "$rendezvous"
t0=$(date +%s.%N)
OSPREY_RANK=0 OSPREY_WORLD_SIZE=2 OSPREY_RENDEZVOUS=$rendezvous OSPREY_NCCL_TIMEOUT=15 \
  timeout 120 "$gpt2" "${tiny_train[@]}" > "$logs/lonely.out" 2> "$logs/lonely.err"
status=$?
t1=$(date +%s.%N)
waited=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
if ((status != 0 && status != 124)) && grep -q 'not done after 15 s' "$logs/lonely.err"; then
  echo "RESULT|rank 0 of 2 alone: NCCL join times out with an error (OSPREY_NCCL_TIMEOUT=15)|PASS|$waited s"
else
  echo "RESULT|rank 0 of 2 alone: NCCL join timeout|FAIL|exit $status: $(tail -1 "$logs/lonely.err")"
fi

if ((gpus < 2)); then
  echo "RESULT|data-parallel (needs 2 or more GPUs)|skipped|${gpus} GPU"
  exit 0
fi
echo "NCCL library: ${OSPREY_NCCL_LIBRARY:-libnccl.so.2 from the loader path}"

counts=(1 2)
((gpus >= 4)) && counts+=(4)
((gpus >= 8)) && counts+=(8)

# ---- exact: the same bytes on every GPU count -------------------------------------------------------
exact_run() {  # exact_run N
  local n=$1 dir=$logs/exact-$1
  rm -rf "$dir"
  local launch=()
  ((n > 1)) && launch=(--gpus "$n")
  local t0 t1
  t0=$(date +%s.%N)
  "$gpt2" train --backend gpu --device cuda --preset 124M --data "$data" --steps 10 --batch 8 --seq 64 \
    --micro-batch 1 --grad-sum exact --save "$dir" "${launch[@]}" > "$logs/exact-$n.out" 2> "$logs/exact-$n.err"
  local status=$?
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.1f}')" > "$logs/exact-$n.seconds"
  return $status
}

reference=""
for n in "${counts[@]}"; do
  if ! exact_run "$n"; then
    echo "RESULT|exact 124M, 10 steps, $n GPU(s)|FAIL|$(tail -1 "$logs/exact-$n.err")"
    continue
  fi
  dir=$logs/exact-$n/checkpoint
  digest=$(cat "$dir/model.safetensors" "$dir/optimizer.safetensors" | sha256sum | cut -c1-16)
  losses=$(cut -d, -f2 "$logs/exact-$n/loss.csv" | tail -n +2 | tr '\n' ' ')
  echo "$n GPU(s): weights+moments sha256 $digest; losses $losses"
  echo "$digest $losses" > "$logs/exact-$n.digest"
  if [[ -z $reference ]]; then
    reference=$(cat "$logs/exact-$n.digest")
    echo "RESULT|exact 124M 10 steps B8 T64 M1: 1 GPU (sha256 $digest)|seen|$(cat "$logs/exact-$n.seconds") s"
  elif [[ $(cat "$logs/exact-$n.digest") == "$reference" ]]; then
    echo "RESULT|exact 124M 10 steps: $n GPUs == 1 GPU (weights, moments, losses)|PASS|$(cat "$logs/exact-$n.seconds") s"
  else
    echo "RESULT|exact 124M 10 steps: $n GPUs == 1 GPU|FAIL|$digest vs ${reference%% *}"
  fi
done

# ---- a rank killed mid-run: the launcher stops the other and names it -------------------------------
"$gpt2" "${tiny_train[@]}" --gpus 2 --time-limit 300 > "$logs/kill.out" 2> "$logs/kill.err" &
launcher=$!
for _ in $(seq 1 60); do  # until rank 0 has logged a step (both ranks are inside collectives)
  grep -q '^step ' "$logs/kill.out" 2>/dev/null && break
  sleep 0.5
done
victim=$(ps -o pid=,args= --ppid "$launcher" | awk '{print $1}' | tail -1)
t0=$(date +%s.%N)
kill -9 "$victim" 2>/dev/null
wait "$launcher"
status=$?
t1=$(date +%s.%N)
stopped=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
if ((status != 0)) && grep -q 'rank 1 of 2 was killed by signal 9' "$logs/kill.err"; then
  echo "RESULT|rank 1 killed mid-run: launcher stops rank 0 and names rank 1|PASS|$stopped s"
else
  echo "RESULT|rank 1 killed mid-run|FAIL|exit $status: $(tail -1 "$logs/kill.err")"
fi

# ---- scaling: the all-reduce sum at 16 x 1024 tokens per GPU ------------------------------------------
rows=${DP_ROWS:-16}
steps=${DP_STEPS:-4}
# Mean tokens/s of every step but the first (allocations, NCCL set-up), from the log lines.
steady_rate() {
  grep -oE '[0-9]+ tokens/s' "$1" | awk 'NR > 1 { s += $1; n++ } END { if (n) printf "%.0f", s / n }'
}
scale_run() {  # scale_run N
  local n=$1 launch=()
  ((n > 1)) && launch=(--gpus "$n")
  "$gpt2" train --backend gpu --device cuda --preset 124M --data "$data" --steps "$steps" \
    --batch $((rows * n)) --seq 1024 --grad-sum allreduce "${launch[@]}" > "$logs/scale-$n.out" 2> "$logs/scale-$n.err"
}
one=""
for n in 1 "${counts[-1]}"; do
  if ! scale_run "$n"; then
    echo "RESULT|all-reduce B$rows/GPU T1024, $n GPU(s)|FAIL|$(tail -1 "$logs/scale-$n.err")"
    continue
  fi
  rate=$(steady_rate "$logs/scale-$n.out")
  echo "RESULT|all-reduce 124M train, B$rows/GPU T1024, $n GPU(s)|tok/s|$rate"
  if ((n == 1)); then
    one=$rate
  elif [[ -n $one && -n $rate ]]; then
    echo "RESULT|scaling efficiency at $n GPUs (target 0.90)|ratio|$(python3 -c "print(f'{$rate / ($n * $one):.3f}')")"
  fi
done
exit 0
