#!/usr/bin/env bash
# How cost grows with size: GPT-2 124M, 350M, 774M and 1558M, PyTorch measured in the same run.
#   * fast training (--backend fast, bf16 products) at B16 T1024, or B8 where B16 runs out of
#     memory (the row's name says so): the median tokens/s of the steps after the first two, MFU,
#     peak memory; beside PyTorch bf16 autocast + torch.compile at the same size and batch
#     (bench/peers/torch_gpt2_fast.py --size S --only compile), and the ratio osprey fast / torch
#     per size (the bar: 1.2 at every size; reported as figures, not as PASS/FAIL);
#   * 1558M's timed run is 20 steps from the initialisation, and its loss must fall: PASS when the
#     mean loss of steps 16-20 is below that of steps 1-5;
#   * the exact step (--backend gpu --device cuda) at B4 T1024, 124M and 350M: the median of the
#     steps after the first, beside PyTorch float64 (bench/peers/torch_gpt2_fp64.py), and the ratio
#     torch / osprey per size (above 1: Osprey's step is the shorter).
# Timings count only for a handler whose tests passed in this run (OSPREY_FAST_CUDA_TESTS,
# OSPREY_EXACT_CUDA_TESTS), as in 30-torch-peers.sh and 35-fast.sh. The timed runs' losses are not
# compared with another handler's here: 35-fast.sh and 30-torch-peers.sh do that at 124M, and at
# the larger sizes the reference runs (exact at B16, gpu/host at B4) would take minutes each.
#
# The whole set takes minutes a full gpu-check run does not have (torch.compile is expected to take
# a minute or more a size to compile), so it runs only when asked:
#   OSPREY_SIZES=1 HOOKS=37 HOOK_TIMEOUT=580 scripts/gpu-check.sh hooks   (after a `run` in an earlier call)
# Each command runs within what is left of HOOK_TIMEOUT (gpu-check stops the hook at its end): a
# command the time ran out on, and everything after it, prints a SKIPPED row instead of its
# figures, so the rows already printed stay. Sizes run smallest first; SIZES="124M 350M" (any of the
# four, in any order) narrows the set, e.g. to split it over two device calls.
#
# Environment (besides gpu-check's): OSPREY_SIZES=1 (run at all), SIZES (default
# "124M 350M 774M 1558M"), OSPREY_GPT2 (the binary; default the build's), OSPREY_TRAIN_DATA,
# SIZES_STEPS (the timed fast runs' steps, two of them warm-up, default 8; 1558M always runs 20,
# which the loss check reads), EXACT_STEPS (default 4), SKIP_TORCH=1.
set -uo pipefail
cd "$OSPREY_ROOT" || exit 1
gpt2=${OSPREY_GPT2:-$OSPREY_BUILD_DIR/gpt2/osprey-gpt2}
logs=$OSPREY_GPU_CHECK_LOGS/sizes
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/data/tinyshakespeare.txt}
steps=${SIZES_STEPS:-8}
exact_steps=${EXACT_STEPS:-4}
export PYTHONUNBUFFERED=1
py() { python3 -c "print($1)"; }

if [[ ${OSPREY_SIZES:-0} != 1 ]]; then
  echo "RESULT|sizes 124M-1558M (fast vs torch.compile, exact vs torch fp64)|SKIPPED|minutes long: OSPREY_SIZES=1 HOOKS=37 HOOK_TIMEOUT=580 scripts/gpu-check.sh hooks"
  exit 0
fi
mkdir -p "$logs"
fast_ok=0 exact_ok=0
[[ ${OSPREY_FAST_CUDA_TESTS:-FAIL} == PASS ]] && fast_ok=1
[[ ${OSPREY_EXACT_CUDA_TESTS:-FAIL} == PASS ]] && exact_ok=1
((fast_ok)) || echo "RESULT|sizes: osprey fast timings|SKIPPED|the Fast.* tests did not pass in this run"
((exact_ok)) || echo "RESULT|sizes: osprey exact timings (cuda)|SKIPPED|the exact cuda tests did not pass in this run"

# Each size's parameter count P, blocks L and width C (gpt2/model/config.hpp's presets). FLOPs per
# token: 6·P for the products plus 6·L·C·T for attention (forward + backward), the count llm.c's MFU
# uses; MFU is against the 790 TFLOP/s bf16 rate measured on this H200, as in 35-fast.sh.
declare -A params=([124M]=124439808 [350M]=354823168 [774M]=774030080 [1558M]=1557611200)
declare -A blocks=([124M]=12 [350M]=24 [774M]=36 [1558M]=48)
declare -A width=([124M]=768 [350M]=1024 [774M]=1280 [1558M]=1600)
mfu() { py "round($2 * (6 * ${params[$1]} + 6 * ${blocks[$1]} * ${width[$1]} * 1024) / 790e12 * 100, 2)"; }

# ---- the time budget ------------------------------------------------------------------------------
# The hook's own clock starts a moment after gpu-check's; the margin leaves time to print the rows
# of a command that was stopped.
budget=$(( ${HOOK_TIMEOUT:-300} - 15 ))
out_of_time=0
left() { echo $(( budget - SECONDS )); }
# timed CMD...: CMD within what is left; when the time runs out, sets out_of_time (the status then
# is timeout's 124, or 137 where the command had to be killed).
timed() {
  local t
  t=$(left)
  if ((out_of_time || t <= 0)); then out_of_time=1; return 124; fi
  timeout -k 5 "$t" "$@"
  local status=$?
  ((status == 124 || status == 137)) && (( $(left) <= 0 )) && out_of_time=1
  return "$status"
}
skipped() { echo "RESULT|$1|SKIPPED|out of time after $SECONDS s (HOOK_TIMEOUT ${HOOK_TIMEOUT:-300} s less a 15 s margin)"; }

# A failure for want of device memory (the cuda device's allocator says "out of memory"; PyTorch
# raises OutOfMemoryError), the one a smaller batch may get past.
out_of_memory() { cat "$@" 2>/dev/null | grep -qiE 'out of memory|OutOfMemoryError|cudaErrorMemoryAllocation|ALLOC_FAILED'; }
# The median of the tokens/s of the step lines after step $2 of train's output $1 (each step line's
# tokens/s is that step's own time; the s/step column is the running average since the start).
median_tps() {
  sed -n 's/^step \([0-9]*\)\/[0-9]*:.* | \([0-9.]*\) tokens\/s |.*/\1 \2/p' "$1" |
    awk -v after="$2" '$1 > after {print $2}' | sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'
}
peak_of() { sed -n 's/.*peak device memory \([0-9.]*\) GiB.*/\1/p' "$1" | tail -1; }
losses_of() { sed -n 's/^step \([0-9]*\)\/[0-9]*: train loss \([0-9.eE+-]*\) .*/\1 \2/p' "$1"; }
# The value of the last RESULT row of file $2 whose name ends in $1.
row_of() { awk -F'|' -v k="$1" '$1 == "RESULT" && substr($2, length($2) - length(k) + 1) == k {v = $4} END {print v}' "$2"; }

# ---- fast training: Osprey, then PyTorch at the batch Osprey ran --------------------------------
# fast_train SIZE STEPS: prints the rows; sets fast_batch and fast_tps (empty on failure).
fast_train() {
  local size=$1 n=$2 b note="" out err tps name
  fast_batch='' fast_tps=''
  for b in 16 8; do
    out=$logs/fast-$size-B$b.out err=$logs/fast-$size-B$b.err
    name="osprey fast $size B$b T1024$note"
    if timed "$gpt2" train --preset "$size" --data "$data" --batch "$b" --seq 1024 --steps "$n" --backend fast \
         > "$out" 2> "$err"; then
      break
    fi
    if ((out_of_time)); then skipped "$name train"; return; fi
    if ((b == 16)) && out_of_memory "$out" "$err"; then note=" (B16 out of memory)"; continue; fi
    echo "RESULT|$name train|FAIL|$(tail -1 "$err")"
    return
  done
  tps=$(median_tps "$out" 2)
  if [[ -z $tps ]]; then
    echo "RESULT|$name train|FAIL|no step lines after step 2 in $out"
    return
  fi
  echo "RESULT|$name train step (steps 3-$n)|ms|$(py "round($b * 1024 / $tps * 1000, 2)")"
  echo "RESULT|$name train tokens/s|tok/s|$tps"
  echo "RESULT|$name train MFU (of 790 TFLOP/s bf16)|%|$(mfu "$size" "$tps")"
  echo "RESULT|$name train peak memory|GiB|$(peak_of "$out")"
  fast_batch=$b fast_tps=$tps
  [[ $size == 1558M ]] && loss_falls "$name" "$out" "$err" "$n"
}

# loss_falls NAME OUT ERR N: the first five steps' mean loss against the last five's (steps 16-20 of
# 20), at train's default learning rate (its header on ERR says which).
loss_falls() {
  local verdict lr
  lr=$(sed -n 's/.*AdamW lr \([^ ]*\) weight decay.*/\1/p' "$3" | tail -1)
  verdict=$(losses_of "$2" | awk -v n="$4" '
    $1 <= 5 { early += $2; ne++ } $1 > n - 5 && $1 <= n { late += $2; nl++ } { seen++ }
    END { if (ne < 5 || nl < 5) { print "FAIL " seen " of " n " step lines"; exit }
          printf "%s steps 1-5 mean %.4f, steps %d-%d mean %.4f\n", (late / nl < early / ne ? "PASS" : "FAIL"),
                 early / ne, n - 4, n, late / nl }')
  echo "RESULT|$1, $4 steps from initialisation (AdamW lr ${lr:-?}): loss falls|${verdict%% *}|${verdict#* }"
}

# torch_compile SIZE BATCH: prints the rows; sets torch_batch and torch_tps (empty on failure).
torch_compile() {
  local size=$1 b=$2 note="" log name tps
  torch_batch='' torch_tps=''
  while :; do
    log=$logs/torch-compile-$size-B$b.log
    name="torch $size B$b T1024$note bf16 autocast + compile"
    if ! timed python3 bench/peers/torch_gpt2_fast.py --size "$size" --batch "$b" --seq 1024 --only compile \
         > "$log" 2>&1; then
      if ((out_of_time)); then skipped "$name train"; return; fi
      echo "RESULT|$name train|FAIL|$(tail -1 "$log" | cut -c1-200)"
      return
    fi
    tps=$(row_of "train tokens/s" "$log")
    [[ -n $tps ]] && break
    if ((b == 16)) && out_of_memory "$log"; then b=8 note=" (B16 out of memory)"; continue; fi
    echo "RESULT|$name train|FAIL|$(grep -m1 '|FAIL|' "$log" | cut -d'|' -f4 | cut -c1-200)"
    return
  done
  echo "RESULT|$name train step|ms|$(row_of "T1024" "$log")"
  echo "RESULT|$name train tokens/s|tok/s|$tps"
  echo "RESULT|$name train MFU (of 790 TFLOP/s bf16)|%|$(mfu "$size" "$tps")"
  echo "RESULT|$name train peak memory|GiB|$(row_of "train peak memory" "$log")"
  torch_batch=$b torch_tps=$tps
}

# ---- the exact step beside PyTorch float64 --------------------------------------------------------
exact_pair() {
  local size=$1 tps ms torch_ms
  local out=$logs/exact-$size.out err=$logs/exact-$size.err log=$logs/torch-fp64-$size.log
  local name="osprey exact $size train step B4 T1024 (cuda, steps 2-$exact_steps)"
  if ! timed "$gpt2" train --preset "$size" --data "$data" --batch 4 --seq 1024 --steps "$exact_steps" \
       --backend gpu --device cuda > "$out" 2> "$err"; then
    if ((out_of_time)); then skipped "$name"; else echo "RESULT|$name|FAIL|$(tail -1 "$err")"; fi
    return
  fi
  tps=$(median_tps "$out" 1)
  if [[ -z $tps ]]; then
    echo "RESULT|$name|FAIL|no step lines after step 1 in $out"
    return
  fi
  ms=$(py "round(4 * 1024 / $tps * 1000, 1)")
  echo "RESULT|$name|ms|$ms"
  echo "RESULT|osprey exact $size train B4 T1024 peak memory|GiB|$(peak_of "$out")"
  [[ ${SKIP_TORCH:-0} == 1 ]] && return
  if ! timed python3 bench/peers/torch_gpt2_fp64.py --size "$size" --batch 4 --seq 1024 --skip-decode > "$log" 2>&1; then
    if ((out_of_time)); then skipped "torch $size fp64 train step B4 T1024"; else
      echo "RESULT|torch $size fp64 train step B4 T1024|FAIL|$(tail -1 "$log" | cut -c1-200)"; fi
    return
  fi
  torch_ms=$(row_of "T1024" "$log")
  echo "RESULT|torch $size fp64 train step B4 T1024|ms|$torch_ms"
  echo "RESULT|torch $size fp64 train B4 T1024 peak memory|GiB|$(row_of "train peak memory" "$log")"
  [[ -n $torch_ms ]] && echo "RESULT|train step $size B4 T1024: torch fp64 / osprey exact|ratio|$(py "round($torch_ms / $ms, 3)")"
}

# ---- the sizes -------------------------------------------------------------------------------------
at_bar=() below_bar=()
for size in 124M 350M 774M 1558M; do
  [[ " ${SIZES:-124M 350M 774M 1558M} " == *" $size "* ]] || continue
  fast_tps='' torch_tps=''
  if ((fast_ok)); then
    if ((out_of_time)); then
      skipped "osprey fast $size train"
    else
      fast_train "$size" "$([[ $size == 1558M ]] && echo 20 || echo "$steps")"
    fi
    if [[ -n $fast_tps && ${SKIP_TORCH:-0} != 1 ]]; then
      if ((out_of_time)); then skipped "torch $size B$fast_batch T1024 bf16 autocast + compile train"; else
        torch_compile "$size" "$fast_batch"
      fi
      if [[ -n $torch_tps ]]; then
        ratio=$(py "round($fast_tps / $torch_tps, 3)")
        echo "RESULT|train tokens/s $size: osprey fast B$fast_batch / torch compile B$torch_batch (bar 1.2)|ratio|$ratio"
        if python3 -c "import sys; sys.exit(0 if $ratio >= 1.2 else 1)"; then at_bar+=("$size"); else below_bar+=("$size"); fi
      fi
    fi
  fi
  if ((exact_ok)) && [[ $size == 124M || $size == 350M ]]; then
    if ((out_of_time)); then skipped "osprey exact $size train step B4 T1024"; else exact_pair "$size"; fi
  fi
done
for size in ${SIZES:-}; do
  [[ -n ${params[$size]:-} ]] || echo "RESULT|sizes: SIZES names $size|FAIL|the sizes are 124M 350M 774M 1558M"
done
if ((${#at_bar[@]} + ${#below_bar[@]})); then
  echo "RESULT|sizes where osprey fast / torch compile >= 1.2|sizes|${#at_bar[@]}/$(( ${#at_bar[@]} + ${#below_bar[@]} ))${below_bar[*]:+ (below: ${below_bar[*]})}"
fi
echo "sizes: $SECONDS s in all"
exit 0
