#!/usr/bin/env bash
# GPT-2 on the H200 against the CPU: logits, a 20-token greedy continuation, 20 sampled tokens
# (temperature, top-k, top-p and the seed's Philox draws) and one training
# step (loss, the 148 gradient sums, the loss after AdamW), for `tiny` and for 124M. Every line
# after the first (which names the handler) must be byte-identical, so the check compares the
# sha256 of stdout minus its first line. The CPU side is gpu/host (bit-identical to lists by the
# host test suite); tiny is also compared against lists directly.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/gpt2/osprey-gpt2
logs=$OSPREY_GPU_CHECK_LOGS
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/data/tinyshakespeare.txt}
prompt="The capital of France is"

digest() { tail -n +2 "$1" | sha256sum | cut -c1-16; }

compare() {  # compare NAME ARGS... : runs the reference backends and cuda, compares digests
  local name=$1; shift
  local refs=(gpu:host)
  [[ $name == tiny* ]] && refs=(lists gpu:host)
  local cuda_log=$logs/$name-cuda.out t0 t1
  t0=$(date +%s.%N)
  if ! "$gpt2" "$@" --backend gpu --device cuda > "$cuda_log" 2> "$logs/$name-cuda.err"; then
    echo "RESULT|$name cuda|FAIL|$(tail -1 "$logs/$name-cuda.err")"; return
  fi
  t1=$(date +%s.%N)
  local want ok=PASS
  want=$(digest "$cuda_log")
  for ref in "${refs[@]}"; do
    local backend=${ref%%:*} device=${ref#*:} log=$logs/$name-${ref/:/-}.out
    local args=(--backend "$backend"); [[ $ref == *:* ]] && args+=(--device "$device")
    if ! "$gpt2" "$@" "${args[@]}" > "$log" 2> "$log.err"; then
      echo "RESULT|$name ${ref}|FAIL|$(tail -1 "$log.err")"; ok=FAIL; continue
    fi
    [[ $(digest "$log") == "$want" ]] || { ok=FAIL; diff <(tail -n +2 "$log") <(tail -n +2 "$cuda_log") | head -5; }
  done
  echo "RESULT|$name: cuda == ${refs[*]} (sha256 $want)|$ok|$(python3 -c "print(f'{$t1 - $t0:.2f} s cuda')")"
}

compare "tiny logits" logits --preset tiny --prompt "$prompt"
compare "tiny generate 20" generate --preset tiny --prompt "$prompt" --tokens 20
compare "tiny sampled 20 (T 1, top-k 40, top-p 0.9, seed 7)" generate --preset tiny --prompt "$prompt" --tokens 20 \
  --temperature 1 --top-k 40 --top-p 0.9 --seed 7
if [[ -f $data ]]; then
  compare "tiny train-step B4 T64" train-step --preset tiny --data "$data" --batch 4 --seq 64
fi
compare "124M logits" logits --preset 124M --prompt "$prompt"
compare "124M generate 20" generate --preset 124M --prompt "$prompt" --tokens 20
compare "124M sampled 20 (T 1, top-k 40, top-p 0.9, seed 7)" generate --preset 124M --prompt "$prompt" --tokens 20 \
  --temperature 1 --top-k 40 --top-p 0.9 --seed 7
if [[ -f $data ]]; then
  compare "124M train-step B4 T64" train-step --preset 124M --data "$data" --batch 4 --seq 64
fi
