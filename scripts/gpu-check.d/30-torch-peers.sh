#!/usr/bin/env bash
# Speed against PyTorch in the same run (issue 5): the 124M exact training step at B=4, T=1024
# and batch-1 greedy decoding, Osprey gpu/cuda vs PyTorch float64. Prints ratios.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/examples/gpt2/osprey-gpt2
logs=$OSPREY_GPU_CHECK_LOGS
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/.cache/tinyshakespeare.txt}
export PYTHONUNBUFFERED=1

python3 bench/peers/torch_gpt2_fp64.py --batch 4 --seq 1024 --tokens 100 > "$logs/torch-peers.log" 2>&1
grep '^RESULT|' "$logs/torch-peers.log"
torch_ms=$(awk -F'|' '/train step/ {print $4}' "$logs/torch-peers.log")
torch_tps=$(awk -F'|' '/generate batch 1/ {print $4}' "$logs/torch-peers.log")

# Timings count only for a handler whose tests passed in this run, and only when the timed run's
# output is the host's (gpu/host, bit-identical to lists): the step's loss, its 148 gradient sums
# and the loss after AdamW; the decoded text.
if [[ ${OSPREY_EXACT_CUDA_TESTS:-FAIL} != PASS ]]; then
  echo "RESULT|osprey exact timings (cuda)|SKIPPED|the exact cuda tests did not pass in this run"
  exit 0
fi
same_as_host() {  # same_as_host NAME CUDA_STDOUT ARGS...: the host's stdout after its header line
  local name=$1 cuda_out=$2; shift 2
  if ! "$gpt2" "$@" --backend gpu --device host > "$logs/$name-host.out" 2> "$logs/$name-host.err"; then
    echo "RESULT|$name: timed cuda output == host|FAIL|the host run failed: $(tail -1 "$logs/$name-host.err")"
    return 1
  fi
  if cmp -s <(tail -n +2 "$cuda_out") <(tail -n +2 "$logs/$name-host.out"); then
    echo "RESULT|$name: timed cuda output == host|PASS|$(tail -n +2 "$cuda_out" | sha256sum | cut -c1-16)"
  else
    echo "RESULT|$name: timed cuda output == host|FAIL|$(diff <(tail -n +2 "$cuda_out") <(tail -n +2 "$logs/$name-host.out") | head -2 | tail -1 | cut -c1-80)"
    return 1
  fi
}

# Osprey: one exact step at the same shape (the step's own timer, so loading is not counted).
if "$gpt2" train-step --preset 124M --data "$data" --batch 4 --seq 1024 --backend gpu --device cuda \
     --timing > "$logs/osprey-step.out" 2> "$logs/osprey-step.err"; then
  ms=$(sed -n 's/.*step \([0-9.]*\) s on.*/\1/p' "$logs/osprey-step.err" | tail -1 | awk '{print $1 * 1000}')
  if same_as_host "exact train step B4 T1024" "$logs/osprey-step.out" train-step --preset 124M --data "$data" \
       --batch 4 --seq 1024; then
    echo "RESULT|osprey exact train step B4 T1024 (cuda)|ms|$ms"
    [[ -n $torch_ms && -n $ms ]] && echo "RESULT|train step: torch fp64 / osprey exact|ratio|$(python3 -c "print(f'{$torch_ms / $ms:.2f}')")"
  fi
else
  echo "RESULT|osprey exact train step B4 T1024 (cuda)|FAIL|$(tail -1 "$logs/osprey-step.err")"
fi

# Osprey: batch-1 greedy decoding with the KV cache, 100 tokens after a 5-token prompt.
if "$gpt2" generate --preset 124M --prompt "The capital of France is" --tokens 100 --backend gpu \
     --device cuda --timing > "$logs/osprey-decode.out" 2> "$logs/osprey-decode.err"; then
  tps=$(sed -n 's/.*more tokens .*(\([0-9.]*\) tokens\/s).*/\1/p' "$logs/osprey-decode.err" | tail -1)
  if same_as_host "exact generate 100" "$logs/osprey-decode.out" generate --preset 124M \
       --prompt "The capital of France is" --tokens 100; then
    echo "RESULT|osprey exact generate batch 1 (cuda)|tok/s|$tps"
    [[ -n $torch_tps && -n $tps ]] && echo "RESULT|decode: osprey exact / torch fp64|ratio|$(python3 -c "print(f'{$tps / $torch_tps:.2f}')")"
  fi
else
  echo "RESULT|osprey exact generate batch 1 (cuda)|FAIL|$(tail -1 "$logs/osprey-decode.err")"
fi
