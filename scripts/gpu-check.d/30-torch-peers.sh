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

# Osprey: one exact step at the same shape (the step's own timer, so loading is not counted).
if "$gpt2" train-step --preset 124M --data "$data" --batch 4 --seq 1024 --backend gpu --device cuda \
     --timing > "$logs/osprey-step.out" 2> "$logs/osprey-step.err"; then
  ms=$(sed -n 's/.*step \([0-9.]*\) s on.*/\1/p' "$logs/osprey-step.err" | tail -1 | awk '{print $1 * 1000}')
  echo "RESULT|osprey exact train step B4 T1024 (cuda)|ms|$ms"
  [[ -n $torch_ms && -n $ms ]] && echo "RESULT|train step: torch fp64 / osprey exact|ratio|$(python3 -c "print(f'{$torch_ms / $ms:.2f}')")"
else
  echo "RESULT|osprey exact train step B4 T1024 (cuda)|FAIL|$(tail -1 "$logs/osprey-step.err")"
fi

# Osprey: batch-1 greedy decoding with the KV cache, 100 tokens after a 5-token prompt.
if "$gpt2" generate --preset 124M --prompt "The capital of France is" --tokens 100 --backend gpu \
     --device cuda --timing > "$logs/osprey-decode.out" 2> "$logs/osprey-decode.err"; then
  tps=$(sed -n 's/.*more tokens .*(\([0-9.]*\) tokens\/s).*/\1/p' "$logs/osprey-decode.err" | tail -1)
  echo "RESULT|osprey exact generate batch 1 (cuda)|tok/s|$tps"
  [[ -n $torch_tps && -n $tps ]] && echo "RESULT|decode: osprey exact / torch fp64|ratio|$(python3 -c "print(f'{$tps / $torch_tps:.2f}')")"
else
  echo "RESULT|osprey exact generate batch 1 (cuda)|FAIL|$(tail -1 "$logs/osprey-decode.err")"
fi
