#!/usr/bin/env bash
# The independent oracles (PyTorch float64 / transformers), run where PyTorch is: they write the
# golden files the host tests compare against. Each golden is copied to $OUT/goldens/ when OUT is
# set, so it can be committed from the machine that ran this.
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/examples/gpt2/osprey-gpt2
dest=${OUT:+$OUT/goldens}
[ -n "$dest" ] && mkdir -p "$dest"
export PYTHONUNBUFFERED=1

run() {  # run NAME GOLDEN COMMAND...
  local name=$1 golden=$2; shift 2
  if "$@" > "$OSPREY_GPU_CHECK_LOGS/oracle-$name.log" 2>&1; then
    echo "RESULT|oracle $name|PASS|"
    [ -n "$dest" ] && [ -f "$golden" ] && cp "$golden" "$dest/"
  else
    echo "RESULT|oracle $name|FAIL|"
    tail -5 "$OSPREY_GPU_CHECK_LOGS/oracle-$name.log"
  fi
}

run block tests/golden/block4.json python3 tools/oracle/block.py
run gpt2-tiny tests/golden/gpt2_tiny_logits.json python3 tools/oracle/gpt2_tiny.py --osprey "$gpt2"
run gpt2-train tests/golden/gpt2_train_tiny.safetensors python3 tools/oracle/gpt2_train.py --out tests/golden/gpt2_train_tiny.safetensors
