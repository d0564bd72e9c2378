#!/usr/bin/env bash
# A first training run: GPT-2 from its initialisation trained on tiny Shakespeare for a fixed wall
# time, then text sampled from the checkpoint it saved. `make shakespeare` runs the cpu form,
# `make shakespeare-gpu` the gpu form (scripts/gpu-check.d/45-shakespeare.sh too, on the H200).
#
#   scripts/shakespeare.sh cpu|gpu
#
#   cpu  the tiny preset (2 blocks, width 64) on the gpu backend's host device: every core,
#        float64, the same bits as lists; batch 4 x 64 tokens, AdamW lr 3e-3; 4 minutes
#   gpu  124M on the fast backend (an NVIDIA GPU, bf16 tensor-core products): batch 16 x 1024
#        tokens, AdamW lr 3e-4, beta2 0.95, weight decay 0.1 (GPT-2's recipe without its warm-up
#        and decay); 3 minutes
#
# The run stops after the step that reaches the time limit and saves DIR/checkpoint; DIR/loss.csv
# holds every step's training loss and the validation loss (the last 10% of the text) every few
# steps, and `train` draws both as DIR/loss.png when gnuplot is installed (else it says so;
# `gnuplot DIR/loss.gp` draws it later, also on a copy of DIR). The sample: SHAKESPEARE_TOKENS
# tokens after SHAKESPEARE_PROMPT, drawn at temperature 0.8 from the 40 likeliest tokens, seed 1337
# (--temperature 0.8 --top-k 40 --seed 1337: the same tokens on every run of the same checkpoint;
# greedy decoding of a model this young repeats its likeliest token, a newline, for ever).
#
# Environment: GPT2 (the osprey-gpt2 binary; default build/gpt2/osprey-gpt2), SHAKESPEARE_DATA
# (default data/tinyshakespeare.txt), SHAKESPEARE_DIR (the run directory; its run, if any, is
# replaced; default build/shakespeare or build/shakespeare-gpu), SHAKESPEARE_MINUTES,
# SHAKESPEARE_PROMPT (default "ROMEO:"), SHAKESPEARE_TOKENS (default 100 cpu, 200 gpu),
# SHAKESPEARE_TEMPERATURE, SHAKESPEARE_TOP_K, SHAKESPEARE_SEED.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mode="${1:-}"
gpt2="${GPT2:-$root/build/gpt2/osprey-gpt2}"
data="${SHAKESPEARE_DATA:-$root/data/tinyshakespeare.txt}"
prompt="${SHAKESPEARE_PROMPT:-ROMEO:}"
sampling=(--temperature "${SHAKESPEARE_TEMPERATURE:-0.8}" --top-k "${SHAKESPEARE_TOP_K:-40}"
          --seed "${SHAKESPEARE_SEED:-1337}")

case "$mode" in
  cpu)
    dir="${SHAKESPEARE_DIR:-$root/build/shakespeare}"
    minutes="${SHAKESPEARE_MINUTES:-4}"
    tokens="${SHAKESPEARE_TOKENS:-100}"
    handler=(--backend gpu --device host)
    training=(--preset tiny --batch 4 --seq 64 --lr 3e-3 --val-every 25 --val-batches 4)
    # OpenMP threads that sleep at a barrier instead of spinning: on a machine where another
    # program holds a core, spinning threads wait on the one that is not running, and a step took
    # 4.4 s instead of 0.69 s (2 cores, one compiling; the same bits either way).
    export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
    ;;
  gpu)
    dir="${SHAKESPEARE_DIR:-$root/build/shakespeare-gpu}"
    minutes="${SHAKESPEARE_MINUTES:-3}"
    tokens="${SHAKESPEARE_TOKENS:-200}"
    handler=(--backend fast)
    # The validation split (33,803 tokens) holds two batches of 16 x 1024 + 1.
    training=(--preset 124M --batch 16 --seq 1024 --lr 3e-4 --beta2 0.95 --weight-decay 0.1 --val-every 100
              --val-batches 2)
    ;;
  *)
    echo "usage: scripts/shakespeare.sh cpu|gpu" >&2
    exit 2
    ;;
esac

[[ -x "$gpt2" ]] || { echo "shakespeare: $gpt2 is not built (make build, or set GPT2)" >&2; exit 2; }
[[ -f "$data" ]] || {
  echo "shakespeare: $data is missing: put tiny shakespeare's input.txt there or set SHAKESPEARE_DATA=FILE" >&2
  exit 2
}
[[ "$minutes" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "shakespeare: SHAKESPEARE_MINUTES must be a number" >&2; exit 2; }
seconds="$(awk -v m="$minutes" 'BEGIN { printf "%g", m * 60 }')"

set -x
"$gpt2" train "${handler[@]}" "${training[@]}" --data "$data" --steps 1000000 --time-limit "$seconds" \
  --save "$dir" --overwrite
"$gpt2" generate "${handler[@]}" --model "$dir/checkpoint" --prompt "$prompt" --tokens "$tokens" "${sampling[@]}"
