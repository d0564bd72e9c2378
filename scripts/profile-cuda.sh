#!/usr/bin/env bash
# Where the cuda device's GPU time goes, by kernel: Nsight Compute's duration of every kernel of
# a short 124M decode and of one 124M exact training step (B=4, T=1024), summed by kernel name.
#
#   scripts/profile-cuda.sh [decode|train|steady|all]     (after scripts/gpu-check.sh build)
#   scripts/profile-cuda.sh times                        one steady step's device time by kind of
#                                                         launch as it runs, without Nsight Compute
#                                                         (OSPREY_CUDA_KERNEL_TIMES: the difference
#                                                         of `train --steps 5` and `--steps 2`, / 3)
#   scripts/profile-cuda.sh decode-times                 the same for one decoded token (`generate
#                                                         --tokens 40` minus `--tokens 10`, / 30)
#   scripts/profile-cuda.sh detail REGEX [COUNT]          why the kernels named by REGEX take their
#                                                         time: Nsight Compute's throughput, occupancy,
#                                                         stall and instruction sections for the first
#                                                         COUNT (default 4) such launches of a step
#
# `steady` profiles `train --steps 2` and `--steps 1` and prints their difference: one training
# step after the first, without the first step's algorithm choice and checks.
#
# Environment: BUILD_DIR (default build-gpu), OUT (summaries copied to $OUT/profile/ when set),
# DECODE_TOKENS (default 6), TRAIN_BATCH / TRAIN_SEQ (default 4 / 1024).
# ncu runs with --clock-control none (the device notes ask that clocks be left alone).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-gpu}
[[ $build = /* ]] || build=$root/$build
gpt2=$build/gpt2/osprey-gpt2
what=${1:-all}
dir=$build/profile
mkdir -p "$dir"
[[ -x $gpt2 ]] || { echo "profile-cuda: $gpt2 is missing; run scripts/gpu-check.sh build first" >&2; exit 2; }
[[ $what = times || $what = decode-times ]] || command -v ncu >/dev/null || { echo "profile-cuda: ncu is not on PATH" >&2; exit 2; }
data=${OSPREY_TRAIN_DATA:-$root/data/tinyshakespeare.txt}
# Enough launches for `steady`'s two steps with the first step's checks (a cap below that would cut
# the second step short and its difference would miss kernels).
ncu_args=(--clock-control none --csv --metrics gpu__time_duration.sum --launch-count "${LAUNCH_COUNT:-20000}")

measure() {  # measure NAME -- command...: the run's kernel times in $dir/NAME.csv
  local name=$1; shift; shift
  echo "== $name: $*"
  local start=$SECONDS
  ncu "${ncu_args[@]}" "$@" > "$dir/$name.csv" 2> "$dir/$name.err" || { echo "ncu failed:"; tail -5 "$dir/$name.err"; }
  echo "(${name}: $((SECONDS - start)) s under ncu)"
}
profile() {  # profile NAME -- command...
  measure "$@"
  python3 "$root/tools/profile/kernel_times.py" "$dir/$1.csv" --top 30 | tee "$dir/$1.txt"
}

if [[ $what = decode || $what = all ]]; then
  profile decode -- "$gpt2" generate --preset 124M --prompt "The capital of France is" \
    --tokens "${DECODE_TOKENS:-6}" --backend gpu --device cuda
fi
if [[ $what = train || $what = all ]]; then
  profile train -- "$gpt2" train-step --preset 124M --data "$data" --batch "${TRAIN_BATCH:-4}" \
    --seq "${TRAIN_SEQ:-1024}" --backend gpu --device cuda
fi
if [[ $what = steady ]]; then
  steps() { echo train --preset 124M --data "$data" --batch "${TRAIN_BATCH:-4}" --seq "${TRAIN_SEQ:-1024}" \
    --steps "$1" --backend gpu --device cuda; }
  measure steady-2 -- "$gpt2" $(steps 2)
  measure steady-1 -- "$gpt2" $(steps 1)
  python3 "$root/tools/profile/kernel_times.py" "$dir/steady-2.csv" --minus "$dir/steady-1.csv" --top 40 |
    tee "$dir/steady.txt"
fi
# clocked NAME LONGER SHORTER PER -- command...: the command run with LONGER and SHORTER appended
# (its steps or tokens) under the kernel clock, and their difference per step or token.
clocked() {
  local name=$1 longer=$2 shorter=$3 per=$4; shift 5
  local n
  for n in "$longer" "$shorter"; do
    OSPREY_CUDA_KERNEL_TIMES="$dir/$name-$n.tsv" "$@" "$n" > "$dir/$name-$n.out" 2>&1 ||
      { echo "profile-cuda: $* $n failed:"; tail -5 "$dir/$name-$n.out"; }
  done
  python3 "$root/tools/profile/kernel_clock_steps.py" "$dir/$name-$longer.tsv" "$dir/$name-$shorter.tsv" \
    --per "$per" --top 40 | tee "$dir/$name.txt"
}
if [[ $what = times ]]; then
  clocked times 5 2 3 -- "$gpt2" train --preset 124M --data "$data" --batch "${TRAIN_BATCH:-4}" \
    --seq "${TRAIN_SEQ:-1024}" --backend gpu --device cuda --steps
fi
if [[ $what = decode-times ]]; then
  clocked decode-times 40 10 30 -- "$gpt2" generate --preset 124M --prompt "The capital of France is" \
    --backend gpu --device cuda --tokens
fi
if [[ $what = detail ]]; then
  regex=${2:?"profile-cuda: detail needs a regular expression naming kernels"}
  echo "== detail: kernels matching $regex"
  ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" --launch-count "${3:-4}" \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats --section InstructionStats \
    "$gpt2" train-step --preset 124M --data "$data" --batch "${TRAIN_BATCH:-4}" --seq "${TRAIN_SEQ:-1024}" \
    --backend gpu --device cuda > "$dir/detail.txt" 2> "$dir/detail.err" || tail -5 "$dir/detail.err"
  grep -v '^==PROF==' "$dir/detail.txt" | cut -c1-160
fi
if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT/profile" && cp "$dir"/*.txt "$OUT/profile/" 2>/dev/null; fi
exit 0
