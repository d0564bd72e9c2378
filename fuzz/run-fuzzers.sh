#!/usr/bin/env bash
# Builds the libFuzzer targets with clang++ (ASan + UBSan) and fuzzes each for a bounded time.
#
#   fuzz/run-fuzzers.sh [seconds per target] [build dir, default build-fuzz-libfuzzer]
#
# Environment:
#   FUZZ_SECONDS   seconds per target when no argument gives them (default 60); 0 runs each
#                  target over its seeds only
#   FUZZ_JOBS      targets fuzzed at the same time (default 1); each still gets its full seconds
#   FUZZ_TARGETS   the targets to run, space-separated (default: all of them, see the table below)
#   JOBS           build parallelism (default 2)
#
# clang and its libFuzzer runtime are installed from Debian when missing, the way
# scripts/install-deps.sh installs packages (as root; otherwise the command to run is printed).
# Seeds come from fuzz/corpus/<seeds>/; new inputs the fuzzer finds go to <build>/corpus/<target>/,
# never into the source tree; each target's output is kept in <build>/logs/<target>.log.
# Exit status: 0 when no target crashed; 1 when one did (a crash, sanitizer report, broken
# promise, leak, timeout or out-of-memory), printing each crash input's path, the command that
# reproduces it and the end of the report; 2 when the setup or the build failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds="${1:-${FUZZ_SECONDS:-60}}"
build="${2:-$root/build-fuzz-libfuzzer}"
jobs="${FUZZ_JOBS:-1}"
build_jobs="${JOBS:-2}"

# target | seed folder | dictionary | largest input (bytes)
readonly TABLE="
safetensors_header | safetensors     | safetensors.dict     | 4096
tokenizer_loader   | tokenizer       |                      | 8192
llmc_checkpoint    | llmc_checkpoint | llmc_checkpoint.dict | 4096
hf_config          | hf_config       | hf_config.dict       | 2048
training_data      | training_data   | training_data.dict   | 2048
llmc_shard         | llmc_shard      | llmc_shard.dict      | 2048
trainer_state      | trainer_state   | trainer_state.dict   | 2048
"
all_targets="$(awk -F'|' 'NF == 4 { gsub(/ /, "", $1); printf "%s ", $1 }' <<<"$TABLE")"
targets="${FUZZ_TARGETS:-$all_targets}"

log() { echo "run-fuzzers: $*" >&2; }
[[ "$seconds" =~ ^[0-9]+$ ]] || { log "seconds must be a whole number, not '$seconds'"; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { log "FUZZ_JOBS must be a positive number, not '$jobs'"; exit 2; }

# --- clang + libFuzzer ---------------------------------------------------------------------------
# shellcheck source=../scripts/debian-packages.sh
source "$root/scripts/debian-packages.sh"
install_packages() { install_missing_packages "$@" || exit 2; }

mkdir -p "$build"
links_libfuzzer() {
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' |
    clang++ -x c++ -fsanitize=fuzzer,address,undefined - -o "$build/.libfuzzer-probe" >/dev/null 2>&1
}
"$root/scripts/install-deps.sh" || exit 2  # the libraries the readers use (fmt, nlohmann-json, ...)
command -v clang++ >/dev/null || install_packages clang
if ! links_libfuzzer; then
  # Debian ships libFuzzer's runtime in libclang-rt-<major>-dev, which clang only recommends.
  install_packages "libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev"
  links_libfuzzer || { log "clang++ cannot link -fsanitize=fuzzer,address,undefined"; exit 2; }
fi

# --- build ---------------------------------------------------------------------------------------
started=$SECONDS
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ >/dev/null ||
  { log "cmake configure failed"; exit 2; }
cmake --build "$build" -j "$build_jobs" || { log "build failed"; exit 2; }
log "built in $((SECONDS - started)) s ($(clang++ --version | head -1))"

# --- fuzz ----------------------------------------------------------------------------------------
mkdir -p "$build/logs" "$build/artifacts" "$build/tmp"
# The targets' scratch files (each process makes its own folder there, and a crash leaves it
# behind): in memory when /dev/shm is writable, since the readers' atomic saves wait for the disk
# (fsync) otherwise, two thirds of the time of the llm.c shard and trainer_state targets; removed
# when this script ends.
scratch="$build/tmp"
if [[ -d /dev/shm && -w /dev/shm ]] && shm="$(mktemp -d /dev/shm/osprey-fuzz-XXXXXX 2>/dev/null)"; then
  scratch="$shm"
  trap 'rm -rf "$shm"' EXIT
fi
export TMPDIR="$scratch"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

fuzz_one() {  # target: runs it, leaves <build>/logs/<target>.log and .status
  local name="$1" row seeds dict max_len
  row="$(awk -F'|' -v n="$name" 'NF == 4 { t = $1; gsub(/ /, "", t); if (t == n) print }' <<<"$TABLE")"
  seeds="$(cut -d'|' -f2 <<<"$row" | tr -d ' ')"
  dict="$(cut -d'|' -f3 <<<"$row" | tr -d ' ')"
  max_len="$(cut -d'|' -f4 <<<"$row" | tr -d ' ')"
  local options=(-max_len="$max_len" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1
                 -artifact_prefix="$build/artifacts/$name-")
  [[ -n "$dict" ]] && options+=(-dict="$here/$dict")
  if [[ "$seconds" -eq 0 ]]; then options+=(-runs=0); else options+=(-max_total_time="$seconds"); fi
  mkdir -p "$build/corpus/$name"
  local status=0
  (cd "$build" && exec "./fuzz_$name" "${options[@]}" "corpus/$name" "$here/corpus/$seeds") \
    >"$build/logs/$name.log" 2>&1 || status=$?
  echo "$status" >"$build/logs/$name.status"
}

known=" $all_targets "
for name in $targets; do
  [[ "$known" == *" $name "* ]] || { log "unknown target '$name' (known: $all_targets)"; exit 2; }
  [[ -x "$build/fuzz_$name" ]] || { log "fuzz_$name was not built"; exit 2; }
done

stamp="$build/logs/.started"
touch "$stamp"
log "fuzzing $(wc -w <<<"$targets") targets for ${seconds} s each, $jobs at a time"
running=0
for name in $targets; do
  if [[ $running -ge $jobs ]]; then wait -n || true; running=$((running - 1)); fi
  rm -f "$build/logs/$name.status"
  fuzz_one "$name" &
  running=$((running + 1))
done
wait || true

failed=0
for name in $targets; do
  logfile="$build/logs/$name.log"
  status="$(cat "$build/logs/$name.status" 2>/dev/null || echo 'lost')"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -1)"
  corpus="$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' "$logfile" | tail -1 | cut -d' ' -f2 || true)"
  rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$logfile" | tail -1)"
  mapfile -t found < <(find "$build/artifacts" -maxdepth 1 -type f -name "$name-*" -newer "$stamp" | sort)
  if [[ "$status" == 0 && ${#found[@]} -eq 0 ]]; then
    echo "fuzz_$name: ok, ${runs:-?} inputs run, corpus ${corpus:-?}, peak ${rss:-?} MB"
    continue
  fi
  failed=1
  echo "fuzz_$name: FAILED (exit status $status) after ${runs:-?} inputs; log: $logfile"
  for input in "${found[@]}"; do
    echo "  crash input: $input"
    echo "  reproduce:   (cd $build && TMPDIR=$build/tmp ./fuzz_$name $input)"
  done
  [[ ${#found[@]} -eq 0 ]] && echo "  (no crash input was written; see the log)"
  echo "  --- end of the report ---"
  { grep -vE '^#[0-9]+.*(NEW|REDUCE|pulse|INITED|DONE) ' "$logfile" || true; } | tail -n 40 | sed 's/^/  | /'
done
exit "$failed"
