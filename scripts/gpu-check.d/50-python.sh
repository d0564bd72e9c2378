#!/usr/bin/env bash
# The Python module on the GPU (tests/python/test_cuda.py): the seed's program on OSPREY_GPU=cuda,
# torch.from_dlpack on a cuda Buffer and osprey.from_dlpack on a torch tensor with the same data
# pointer and values, refused addresses that leave no CUDA error behind, and GPT-2's logits on
# gpu/cuda the CLI's bytes. The module is built where the GPU machine has pybind11 and Python's
# headers (OSPREY_PYTHON=AUTO); the torch tests need torch in the interpreter it was built for
# (the launcher's first line names it). Whatever is missing is a SKIPPED row, never a pass.
set -uo pipefail
cd "$OSPREY_ROOT"
build=$OSPREY_BUILD_DIR
logs=$OSPREY_GPU_CHECK_LOGS
name="python module on cuda (seed, DLPack with torch, GPT-2 logits)"

if ! compgen -G "$build/python/osprey/_osprey*.so" > /dev/null; then
  echo "RESULT|$name|SKIPPED|not built here (pybind11 or Python's headers missing: see the configure log)"
  exit 0
fi
# The interpreter the module was built for (the launcher's first line), or another one of the same
# ABI that has pytest and numpy (the GPU machine keeps torch, numpy and pytest in a virtual
# environment over the system's python3, which the build finds first).
module=$(basename "$(compgen -G "$build/python/osprey/_osprey*.so" | head -1)")
python=
for candidate in "$(sed -n '1s/^#!//p' "$build/python/bin/osprey")" $(type -ap python3); do
  suffix=$("$candidate" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2> /dev/null) || continue
  [[ $module == _osprey$suffix ]] || continue
  if "$candidate" -c "import pytest, numpy" 2> /dev/null; then python=$candidate; break; fi
done
if [[ -z $python ]]; then
  echo "RESULT|$name|SKIPPED|no python3 for $module has pytest and numpy"
  exit 0
fi
echo "interpreter: $python"
"$python" -c "import torch" 2> /dev/null || echo "note: $python has no torch: its DLPack tests will be skipped"

PYTHONPATH=$build/python PYTHONDONTWRITEBYTECODE=1 OSPREY_SOURCE_DIR=$OSPREY_ROOT \
  OSPREY_GPT2_CLI=$build/gpt2/osprey-gpt2 OSPREY_PYTHON_LAUNCHER=$build/python/bin/osprey \
  XDG_CACHE_HOME=$build/test-xdg-cache \
  "$python" -m pytest -q -rs -p no:cacheprovider --rootdir="$OSPREY_ROOT/tests/python" \
  "$OSPREY_ROOT/tests/python/test_cuda.py" > "$logs/python-cuda.log" 2>&1
status=$?
tail -15 "$logs/python-cuda.log"
summary=$(tail -1 "$logs/python-cuda.log" | tr -d '=' | sed 's/^ *//; s/ in [0-9.]*s.*//')
if ((status != 0)); then
  echo "RESULT|$name|FAIL|$summary"
elif grep -q ' passed' <<< "$summary"; then
  echo "RESULT|$name|PASS|$summary"
else
  echo "RESULT|$name|SKIPPED|$summary (see logs/python-cuda.log)"
fi
