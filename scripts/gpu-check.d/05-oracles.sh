#!/usr/bin/env bash
# The independent oracles (PyTorch float64 / transformers), run where PyTorch is. Each one
# regenerates its golden file into the logs folder (the committed file is left alone), and
# tools/oracle/compare_goldens.py compares the two number by number, within the float64 noise it
# states (1e-12 relative): PASS only when they agree. The regenerated files are copied to
# $OUT/goldens/ when OUT is set, so a deliberate change can be committed from there.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/gpt2/osprey-gpt2
fresh=$OSPREY_GPU_CHECK_LOGS/goldens
mkdir -p "$fresh"
dest=${OUT:+$OUT/goldens}
[ -n "$dest" ] && mkdir -p "$dest"
export PYTHONUNBUFFERED=1

run() {  # run NAME COMMITTED COMMAND... (the command writes the golden to $fresh/<basename>)
  local name=$1 committed=$2; shift 2
  local log=$OSPREY_GPU_CHECK_LOGS/oracle-$name.log regenerated=$fresh/$(basename "$committed")
  if ! "$@" --out "$regenerated" > "$log" 2>&1; then
    echo "RESULT|oracle $name|FAIL|the oracle failed"
    tail -5 "$log"
    return
  fi
  [ -n "$dest" ] && cp "$regenerated" "$dest/"
  if [ ! -f "$committed" ]; then  # a new oracle: nothing to compare with until its golden is committed
    echo "RESULT|oracle $name|NEW|no committed $committed yet: review and commit ${dest:-$fresh}/$(basename "$committed")"
    return
  fi
  local verdict
  if verdict=$(python3 tools/oracle/compare_goldens.py "$committed" "$regenerated" 2>&1); then
    echo "RESULT|oracle $name: regenerated == committed|PASS|$(head -1 <<< "$verdict" | cut -c1-60)"
  else
    echo "RESULT|oracle $name: regenerated == committed|FAIL|$(sed -n 2p <<< "$verdict" | cut -c1-100)"
    echo "$verdict" | head -8
  fi
}

run block tests/golden/block4.json python3 tools/oracle/block.py
run gpt2-tiny tests/golden/gpt2_tiny_logits.json python3 tools/oracle/gpt2_tiny.py --osprey "$gpt2"
run gpt2-tiny-lively tests/golden/gpt2_tiny_lively.json python3 tools/oracle/gpt2_tiny.py --osprey "$gpt2" \
  --wpe-scale 200
run gpt2-train tests/golden/gpt2_train_tiny.safetensors python3 tools/oracle/gpt2_train.py
