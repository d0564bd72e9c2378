#!/usr/bin/env bash
# The opencl device on the H200, through NVIDIA's OpenCL: the driver's libnvidia-opencl.so.1 is
# present on the GPU machine but not registered with the ICD loader, so this hook registers it
# (an ICD file in its own folder, named by OCL_ICD_VENDORS) and picks its platform. Then:
#   * osprey_opencl_tests (the effect, strict, math, layer, model, train-step and CLI tests) on it;
#   * tiny and 124M logits, a 20-token greedy continuation and one training step: every line after
#     the first equal to gpu/host's (the sha256 of stdout minus its first line);
#   * the 124M training step and 100-token decoding timed beside the cuda device (speed is second:
#     every kernel is a traced OpenCL program, each launch waits for its fault check).
set -uo pipefail
cd "$OSPREY_ROOT"
gpt2=$OSPREY_BUILD_DIR/gpt2/osprey-gpt2
tests=$OSPREY_BUILD_DIR/tests/osprey_opencl_tests
logs=$OSPREY_GPU_CHECK_LOGS
data=${OSPREY_TRAIN_DATA:-$OSPREY_ROOT/data/tinyshakespeare.txt}
prompt="The capital of France is"

library=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1 /{print $NF; exit}')
[[ -n $library ]] || library=$(ls /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -1)
if [[ -z $library ]]; then
  echo "RESULT|opencl: NVIDIA's OpenCL library (libnvidia-opencl.so.1)|FAIL|not found"; exit 0
fi
vendors=$logs/icd && mkdir -p "$vendors" && echo "$library" > "$vendors/nvidia.icd"
export OCL_ICD_VENDORS=$vendors OSPREY_OPENCL_PLATFORM=NVIDIA
export XDG_CACHE_HOME=$logs/xdg-cache

if [[ ! -x $tests ]]; then
  echo "RESULT|opencl tests|FAIL|osprey_opencl_tests not built (OpenCL headers and loader: scripts/carry-deps.sh)"; exit 0
fi
if "$tests" > "$logs/opencl-tests.log" 2>&1; then
  echo "RESULT|opencl tests on NVIDIA's platform (OSPREY_OPENCL_PLATFORM=NVIDIA)|PASS|$(grep -o '[0-9]* tests from [0-9]* test suites ran' "$logs/opencl-tests.log"), $(grep -m1 -o 'PASSED  \] [0-9]* tests' "$logs/opencl-tests.log" | grep -o '[0-9]*') passed"
else
  echo "RESULT|opencl tests|FAIL|$(grep -m3 'FAILED  \]' "$logs/opencl-tests.log" | tr '\n' ' ')"
fi

digest() { tail -n +2 "$1" | sha256sum | cut -c1-16; }
compare() {  # compare NAME ARGS...: opencl's digest against gpu/host's
  local name=$1; shift
  local out=$logs/$name-opencl.out ref=$logs/$name-host.out t0 t1
  if ! "$gpt2" "$@" --backend gpu --device host > "$ref" 2> "$ref.err"; then
    echo "RESULT|$name host|FAIL|$(tail -1 "$ref.err")"; return
  fi
  t0=$(date +%s.%N)
  if ! "$gpt2" "$@" --backend gpu --device opencl > "$out" 2> "$out.err"; then
    echo "RESULT|$name opencl|FAIL|$(tail -1 "$out.err")"; return
  fi
  t1=$(date +%s.%N)
  local ok=PASS
  [[ $(digest "$out") == $(digest "$ref") ]] || { ok=FAIL; diff <(tail -n +2 "$out") <(tail -n +2 "$ref") | head -5; }
  echo "RESULT|$name: opencl == host (sha256 $(digest "$ref"); $(head -1 "$out"))|$ok|$(python3 -c "print(f'{$t1 - $t0:.2f} s opencl')")"
}
compare "opencl tiny logits" logits --preset tiny --prompt "$prompt"
compare "opencl tiny generate 20" generate --preset tiny --prompt "$prompt" --tokens 20
[[ -f $data ]] && compare "opencl tiny train-step B4 T64" train-step --preset tiny --data "$data" --batch 4 --seq 64
compare "opencl 124M logits" logits --preset 124M --prompt "$prompt"
compare "opencl 124M generate 20" generate --preset 124M --prompt "$prompt" --tokens 20
[[ -f $data ]] && compare "opencl 124M train-step B4 T64" train-step --preset 124M --data "$data" --batch 4 --seq 64

# Decoding speed beside cuda's (the run's own --timing line).
for device in opencl cuda; do
  if "$gpt2" generate --preset 124M --prompt "$prompt" --tokens 100 --backend gpu --device "$device" --timing \
       > "$logs/decode-$device.out" 2>&1; then
    echo "RESULT|124M decoding 100 tokens, gpu/$device|tok/s|$(grep -o '[0-9.]* tokens/s' "$logs/decode-$device.out" | head -1)"
  else
    echo "RESULT|124M decoding, gpu/$device|FAIL|$(tail -1 "$logs/decode-$device.out")"
  fi
done
exit 0
