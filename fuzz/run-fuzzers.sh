#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++ and runs each for a bounded time.
#   fuzz/run-fuzzers.sh [seconds per target, default 60] [build dir, default build-fuzz]
# Seeds come from fuzz/corpus/<target>/; new inputs the fuzzer finds go to <build>/corpus/, never
# into the source tree. Exits non-zero if a target crashes (the crashing input is kept in <build>).
set -euo pipefail
seconds="${1:-60}"
here="$(cd "$(dirname "$0")" && pwd)"
build="${2:-$here/../build-fuzz}"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j2

run() {  # name, seed folder, extra libFuzzer flags...
  local name="$1" seeds="$2"
  shift 2
  [[ -x "$build/$name" ]] || { echo "$name: not built (skipped)"; return 0; }
  mkdir -p "$build/corpus/$name"
  echo "== $name for ${seconds}s"
  (cd "$build" && "./$name" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/$name-" \
     "$@" "corpus/$name" "$here/corpus/$seeds")
}

run fuzz_safetensors_header safetensors -dict="$here/safetensors.dict" -max_len=4096
run fuzz_tokenizer_loader tokenizer -max_len=8192
