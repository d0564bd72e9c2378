#!/usr/bin/env bash
# The GPU form of the first training run (`make shakespeare-gpu`, scripts/shakespeare.sh gpu):
# GPT-2 124M from its initialisation on the fast backend, trained on tiny Shakespeare for
# SHAKESPEARE_MINUTES (default 3), then 200 sampled tokens. Reports the steps it ran, the last
# training and validation losses and whether the sample came out; the run's output, loss.csv and
# loss.gp are kept in logs/shakespeare-gpu/ (the checkpoint stays in the build tree: too large to
# copy back). The device machine has no gnuplot: `gnuplot logs/shakespeare-gpu/loss.gp` draws
# loss.png where the logs are copied to.
#
# It takes minutes a full gpu-check run does not have, so it runs only when asked, on its own:
#   OSPREY_SHAKESPEARE=1 HOOKS=45 scripts/gpu-check.sh hooks      (after a `run` in an earlier call)
# HOOK_TIMEOUT must exceed the training time plus the start and the save (the default 300 s holds
# the default 3 minutes).
set -uo pipefail
cd "$OSPREY_ROOT"
logs=$OSPREY_GPU_CHECK_LOGS/shakespeare-gpu
run=$OSPREY_BUILD_DIR/shakespeare-gpu
mkdir -p "$logs"

if [[ ${OSPREY_SHAKESPEARE:-0} != 1 ]]; then
  echo "RESULT|shakespeare-gpu (124M, fast)|SKIPPED|minutes long: OSPREY_SHAKESPEARE=1 HOOKS=45 scripts/gpu-check.sh hooks"
  exit 0
fi
if [[ ${OSPREY_FAST_CUDA_TESTS:-FAIL} != PASS ]]; then
  echo "RESULT|shakespeare-gpu (124M, fast)|SKIPPED|the Fast.* tests did not pass in this run"
  exit 0
fi

GPT2=${OSPREY_GPT2:-$OSPREY_BUILD_DIR/gpt2/osprey-gpt2} SHAKESPEARE_DIR=$run \
  scripts/shakespeare.sh gpu > "$logs/output.txt" 2>&1
status=$?
cp "$run/loss.csv" "$run/loss.gp" "$logs/" 2>/dev/null
if [[ $status -ne 0 ]]; then
  tail -5 "$logs/output.txt"
  echo "RESULT|shakespeare-gpu (124M, fast)|FAIL|exit status $status, see logs/shakespeare-gpu/output.txt"
  exit 0
fi
last=$(awk -F, 'NR > 1 && $1 != "" { step = $1; loss = $2 } NR > 1 && $3 != "" { val = $3 }
                END { printf "%s steps, last train loss %.4f, last val loss %.4f", step, loss, val }' "$logs/loss.csv")
echo "RESULT|shakespeare-gpu (124M, fast): trained|PASS|$last"
# The sample: everything after generate's header line (train prints the same header first).
header=$(grep -n '^gpt2 (124M) on fast' "$logs/output.txt" | tail -1 | cut -d: -f1)
sample=$( [[ -n $header ]] && tail -n +"$((header + 1))" "$logs/output.txt")
if [[ -n ${sample//[[:space:]]/} ]]; then
  echo "RESULT|shakespeare-gpu (124M, fast): sample|PASS|$(wc -w <<<"$sample") words"
else
  echo "RESULT|shakespeare-gpu (124M, fast): sample|FAIL|no text after the header"
fi
[[ -n $header ]] && tail -n +"$header" "$logs/output.txt"
exit 0
