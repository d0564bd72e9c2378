#!/usr/bin/env bash
# Side by side: llm.c's CPU reference train_gpt2.c and Osprey's gpu/host training step, GPT-2
# 124M at B=4, T=64, both on the same number of OpenMP threads, run in alternation so that a
# change in the machine's load hits both (README-llmc.md).
#
#   bench/peers/llmc_cpu.sh LLMC_DIR OSPREY_BUILD [STEPS] [ROUNDS]
#
#   LLMC_DIR      holds llm.c's train_gpt2 binary (built by llm.c's `make train_gpt2`)
#   OSPREY_BUILD  an Osprey build tree with osprey_llmc_inputs and osprey_bench_train_step built
#   STEPS         timed steps per run of each program (default 5)
#   ROUNDS        runs of each program, alternating (default 3)
# Environment:
#   THREADS            OMP_NUM_THREADS for both (default 2)
#   WORK               where the inputs go and llm.c runs (default: a new temporary directory)
#   OSPREY_TOKENIZER   GPT-2 tokenizer directory (default <source>/.cache/gpt2-tokenizer, which
#                      scripts/fetch-tokenizer.sh fills)
#   OSPREY_TEXT        training text (default <source>/data/tinyshakespeare.txt)
#   HUGEPAGES=1        both programs' large mallocs on transparent huge pages (glibc >= 2.35
#                      tunable glibc.malloc.hugetlb=1): fewer first-touch faults in step 0
#
# Prints every step time of every run, then the medians of the first steps and of the later
# steps, and Osprey's median over llm.c's. The first step is reported apart: both programs
# allocate (and fault in) memory lazily during it (README-llmc.md, "The first step").
set -euo pipefail

usage() { sed -n 6,19p "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 2 ]] || usage
LLMC_DIR=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)
STEPS=${3:-5}
ROUNDS=${4:-3}
THREADS=${THREADS:-2}
SOURCE=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOKENIZER=${OSPREY_TOKENIZER:-$SOURCE/.cache/gpt2-tokenizer}
TEXT=${OSPREY_TEXT:-$SOURCE/data/tinyshakespeare.txt}
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/llmc-cpu.XXXXXX")}

TRAIN_GPT2=$LLMC_DIR/train_gpt2
INPUTS=$BUILD/bench/peers/osprey_llmc_inputs
STEP_BENCH=$BUILD/bench/train/osprey_bench_train_step
for f in "$TRAIN_GPT2" "$INPUTS" "$STEP_BENCH"; do
  [[ -x $f ]] || { echo "llmc_cpu.sh: $f is missing (see README-llmc.md)" >&2; exit 1; }
done
[[ $STEPS -ge 1 && $ROUNDS -ge 1 ]] || usage

# The inputs are deterministic (seed 1337, fixed text), so an existing set is reused.
if [[ ! -f $WORK/gpt2_124M.bin || ! -f $WORK/dev/data/tinyshakespeare/tiny_shakespeare_val.bin ]]; then
  echo "== writing llm.c's inputs under $WORK"
  "$INPUTS" --tokenizer "$TOKENIZER" --text "$TEXT" --out "$WORK"
fi

export OMP_NUM_THREADS=$THREADS
if [[ ${HUGEPAGES:-0} == 1 ]]; then
  export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
fi
echo "== $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), OMP_NUM_THREADS=$THREADS"
echo "   transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown);" \
  "GLIBC_TUNABLES=${GLIBC_TUNABLES:-}"
echo "   llm.c: $TRAIN_GPT2"
echo "   osprey: $STEP_BENCH --preset 124M --batch 4 --seq 64 --handlers host --repeats $STEPS"

LLMC_TIMES=$WORK/llmc_times.txt      # lines: round step seconds
OSPREY_TIMES=$WORK/osprey_times.txt
: >"$LLMC_TIMES"
: >"$OSPREY_TIMES"
load() { cut -d' ' -f1 /proc/loadavg; }

# train_gpt2 trains for 40 steps and prints "step N: train loss X (took Y ms)" after each; it is
# stopped once STEPS lines are out. Line buffering (stdbuf) makes each line visible when printed.
# Its validation pass (5 forward passes) and samples run outside its timed region.
run_llmc() {
  local round=$1 log=$WORK/llmc_round$1.log pid n
  (cd "$WORK" && exec stdbuf -oL "$TRAIN_GPT2") >"$log" 2>&1 &
  pid=$!
  while :; do
    n=$(grep -ac '^step [0-9]*: train loss' "$log" || true)
    [[ $n -ge $STEPS ]] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" || true
      n=$(grep -ac '^step [0-9]*: train loss' "$log" || true)
      [[ $n -ge $STEPS ]] && break
      echo "llmc_cpu.sh: train_gpt2 stopped after $n steps; its output:" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # (awk, not head, keeps the first STEPS lines: head closing the pipe early would fail it.)
  sed -nE 's/^step ([0-9]+): train loss ([0-9.]+) \(took ([0-9.]+) ms\)/\1 \2 \3/p' "$log" |
    awk -v r="$round" -v k="$STEPS" 'NR <= k { printf "%d %d %.6f\n", r, $1, $3 / 1000 }' >>"$LLMC_TIMES"
  echo "   llm.c  round $round: loss $(grep -a -m1 '^step 0:' "$log" | sed -E 's/.*train loss ([0-9.]+).*/\1/');" \
    "steps (s): $(awk -v r="$round" '$1 == r { printf "%.3f ", $3 }' "$LLMC_TIMES")"
}

# osprey_bench_train_step prints "  host: loss L; step M s median of K (t1 t2 ...), ...".
run_osprey() {
  local round=$1 log=$WORK/osprey_round$1.log
  "$STEP_BENCH" --preset 124M --batch 4 --seq 64 --handlers host --repeats "$STEPS" >"$log" 2>&1 || {
    echo "llmc_cpu.sh: osprey_bench_train_step failed; its output:" >&2
    cat "$log" >&2
    exit 1
  }
  sed -nE 's/^ *host: .*median of [0-9]+ \(([0-9. ]+)\).*/\1/p' "$log" | tr ' ' '\n' | grep . |
    awk -v r="$round" '{ printf "%d %d %.6f\n", r, NR - 1, $1 }' >>"$OSPREY_TIMES"
  echo "   osprey round $round: loss $(sed -nE 's/^ *host: loss ([0-9.]+);.*/\1/p' "$log");" \
    "steps (s): $(awk -v r="$round" '$1 == r { printf "%.3f ", $3 }' "$OSPREY_TIMES")"
}

# The order alternates too, so neither program always runs right after the other's memory use.
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "== round $round (load $(load))"
  if ((round % 2)); then run_llmc "$round"; run_osprey "$round"; else run_osprey "$round"; run_llmc "$round"; fi
done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
first() { awk '$2 == 0 { print $3 }' "$1" | median; }
later() { awk '$2 > 0 { print $3 }' "$1" | median; }
LF=$(first "$LLMC_TIMES"); LL=$(later "$LLMC_TIMES")
OF=$(first "$OSPREY_TIMES"); OL=$(later "$OSPREY_TIMES")
echo "== summary ($ROUNDS rounds x $STEPS steps, OMP_NUM_THREADS=$THREADS; times in $WORK)"
printf '   %-8s first step %8.3f s   later steps median %8.3f s\n' llm.c "$LF" "$LL" osprey "$OF" "$OL"
if [[ $STEPS -ge 2 ]]; then
  awk -v o="$OL" -v l="$LL" 'BEGIN { printf "   osprey / llm.c, later steps: %.3fx\n", o / l }'
fi
awk -v o="$OF" -v l="$LF" 'BEGIN { printf "   osprey / llm.c, first step:  %.3fx\n", o / l }'
