#!/usr/bin/env bash
# The differential harness (issue 8, docs/EXACTNESS.md): the tiny GPT-2's logits, 20-token
# greedy generation and training step, built under several compilers, optimisation levels and
# platforms; every build must produce the same bits.
#
#   scripts/differential.sh            every configuration (make differential)
#   scripts/differential.sh --cheap    two configurations, driver only (CI)
#   scripts/differential.sh --configs "gcc-O2 wasm32" [--cli] [--update-golden]
#
# Each configuration builds tools/differential's osprey-differential (raw bits of every output
# double, dump.hpp) in build-diff-<config>/ and runs it on each handler it links. With --cli
# (the default without --cheap) it also builds osprey-gpt2 there and keeps what `logits`,
# `generate` and `train-step` print after their header line (which names the handler).
# Compared: every dump with the first one and with tests/differential/golden-tiny.txt (the dump
# with the V logits folded into one hash), every CLI output with the first configuration's, and
# the logits osprey-gpt2 prints with the dump's. A mismatch prints the first differing value,
# the two configurations and handlers, and the quantity; for a hashed tensor, its first
# differing element. Exit status 1 on any mismatch or failed build.
#
# Environment: JOBS (build parallelism, default 2), NICE (default 10).
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly GOLDEN="$ROOT/tests/differential/golden-tiny.txt"
readonly JOBS="${JOBS:-2}"
readonly NICE="${NICE:-10}"
readonly ALL_CONFIGS="gcc-O0 gcc-O2 gcc-O3 gcc-O3-native clang-O0 clang-O2 clang-O3 clang-O3-native gcc-asan nvcc wasm32"
readonly CHEAP_CONFIGS="clang-O2 gcc-O3-native"
readonly PROMPT="The capital of France is"

configs="$ALL_CONFIGS"
cli=1
update_golden=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cheap) configs="$CHEAP_CONFIGS"; cli=0 ;;
    --configs) configs="$2"; shift ;;
    --cli) cli=1 ;;
    --no-cli) cli=0 ;;
    --update-golden) update_golden=1 ;;
    *) echo "differential: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "differential: $*" >&2; }
now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# Debian packages a configuration needs, installed when missing (as root).
# shellcheck source=debian-packages.sh
source "$ROOT/scripts/debian-packages.sh"
need_packages() { install_missing_packages "$@"; }

# cmake arguments of a configuration (compiler, flags, options).
config_args() {
  local release="-DCMAKE_BUILD_TYPE=Release"
  case "$1" in
    gcc-O0) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O0 -DOSPREY_CUDA=OFF ;;
    gcc-O2) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O2 -DOSPREY_CUDA=OFF ;;
    gcc-O3) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O3 -DOSPREY_CUDA=OFF ;;
    gcc-O3-native) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -march=native" -DOSPREY_CUDA=OFF ;;
    clang-O0) printf '%s\n' -DCMAKE_CXX_COMPILER=clang++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O0 -DOSPREY_CUDA=OFF ;;
    clang-O2) printf '%s\n' -DCMAKE_CXX_COMPILER=clang++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O2 -DOSPREY_CUDA=OFF ;;
    clang-O3) printf '%s\n' -DCMAKE_CXX_COMPILER=clang++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O3 -DOSPREY_CUDA=OFF ;;
    clang-O3-native) printf '%s\n' -DCMAKE_CXX_COMPILER=clang++ $release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -march=native" -DOSPREY_CUDA=OFF ;;
    gcc-asan) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DOSPREY_SANITIZE=ON -DOSPREY_CUDA=OFF ;;
    nvcc) printf '%s\n' -DCMAKE_CXX_COMPILER=g++ $release -DCMAKE_CXX_FLAGS_RELEASE=-O2 -DCMAKE_CUDA_FLAGS_RELEASE=-O2 -DOSPREY_CUDA=ON ;;
    wasm32) printf '%s\n' "$release" -DCMAKE_CXX_FLAGS_RELEASE=-O2 "-DOSPREY_EXACT_FLAGS_FILE=$ROOT/build-diff-clang-O2/osprey-exact-flags.txt" ;;
    *) return 1 ;;
  esac
}

# How a configuration's driver is run (a command prefix; the handler arguments follow).
driver_command() {
  case "$1" in
    nvcc) echo "$ROOT/build-diff-nvcc/osprey-differential-nvcc" ;;
    wasm32) echo "node $ROOT/build-diff-wasm32/osprey-differential.js" ;;
    *) echo "$ROOT/build-diff-$1/osprey-differential" ;;
  esac
}

# Configure (once) and build one configuration's targets.
build_config() {
  local name="$1" dir="$ROOT/build-diff-$1" targets
  config_args "$name" >/dev/null || { log "unknown configuration $name (known: $ALL_CONFIGS)"; return 1; }
  case "$name" in
    clang-*) need_packages clang || return 1 ;;
    nvcc) [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null || { log "nvcc: no nvcc installed"; return 1; } ;;
    wasm32)
      need_packages emscripten node-acorn clang || return 1
      command -v node >/dev/null || need_packages nodejs || return 1
      # The exact flags come from the native clang build's configuration (configure only).
      [[ -f "$ROOT/build-diff-clang-O2/osprey-exact-flags.txt" ]] || build_config_configure clang-O2 || return 1 ;;
  esac
  build_config_configure "$name" || return 1
  targets="osprey-differential"
  [[ "$name" == nvcc ]] && targets="osprey-differential-nvcc"
  [[ $cli -eq 1 && "$name" != wasm32 ]] && targets="$targets osprey-gpt2"
  # Debian's emscripten runs its JavaScript tools with node, which must find Debian's acorn.
  # shellcheck disable=SC2086
  NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}" nice -n "$NICE" \
    cmake --build "$dir" -j "$JOBS" --target $targets >"$dir/differential-build.log" 2>&1 ||
    { tail -40 "$dir/differential-build.log" >&2; log "$name: build failed (log: $dir/differential-build.log)"; return 1; }
}

build_config_configure() {
  local name="$1" dir="$ROOT/build-diff-$1" args
  mapfile -t args < <(config_args "$name")
  [[ -f "$dir/build.ninja" ]] && return 0
  mkdir -p "$dir"
  local cmake=(cmake)
  [[ "$name" == wasm32 ]] && cmake=(emcmake cmake)
  "${cmake[@]}" -S "$ROOT/tools/differential" -B "$dir" -G Ninja "${args[@]}" >"$dir/differential-configure.log" 2>&1 ||
    { tail -30 "$dir/differential-configure.log" >&2; log "$name: configuration failed (log: $dir/differential-configure.log)"; return 1; }
}

# The dump with the V logits folded into one line: what tests/differential/golden-tiny.txt holds.
summary() {
  { grep -v '^logits\.last ' "$1"; echo "logits.last * $(grep '^logits\.last ' "$1" | sha256sum | cut -c1-64)"; }
}

# The first line where two files differ, as "<line>\t<a>\t<b>" (nothing when equal).
first_difference() {
  awk 'NR == FNR { a[FNR] = $0; n = FNR; next }
       { if (!(FNR in a) || a[FNR] != $0) { printf "%d\t%s\t%s\n", FNR, (FNR in a) ? a[FNR] : "(end of file)", $0; found = 1; exit } }
       END { if (!found && FNR < n) printf "%d\t%s\t(end of file)\n", FNR + 1, a[FNR + 1] }' "$1" "$2"
}

# Report how dump $2 (config/handler $4) differs from dump $1 (config/handler $3).
explain_dump_difference() {
  local ref="$1" cur="$2" ref_name="$3" cur_name="$4" line a b
  line="$(first_difference "$ref" "$cur")"
  IFS=$'\t' read -r n a b <<<"$line"
  echo "MISMATCH: $cur_name differs from $ref_name at line $n"
  echo "  quantity: $(awk '{print $1, $2}' <<<"$a")"
  echo "  $ref_name: $a"
  echo "  $cur_name: $b"
  # A hashed tensor: list both sides' elements and name the first that differs.
  local quantity key
  read -r quantity key _ <<<"$a"
  case "$quantity" in
    train.grad|train.weights|generate.logits)
      local ref_cmd cur_cmd tmp
      ref_cmd="$(driver_command "${ref_name%/*}") --handler ${ref_name#*/}"
      cur_cmd="$(driver_command "${cur_name%/*}") --handler ${cur_name#*/}"
      tmp="$(mktemp -d)"
      $ref_cmd --expand "$quantity $key" 2>/dev/null | grep "^$quantity\[" >"$tmp/a" || true
      $cur_cmd --expand "$quantity $key" 2>/dev/null | grep "^$quantity\[" >"$tmp/b" || true
      line="$(first_difference "$tmp/a" "$tmp/b")"
      if [[ -n "$line" ]]; then
        IFS=$'\t' read -r n a b <<<"$line"
        echo "  first differing element: $ref_name: $a"
        echo "                           $cur_name: $b"
      fi
      rm -rf "$tmp" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
results="$ROOT/build-diff-results"
rm -rf "$results"
mkdir -p "$results/dumps" "$results/cli"
data="$results/cli/train.txt"
cp "$ROOT/tools/differential/train.txt" "$data"
table=()
failed=0
reference_dump=""
reference_name=""
reference_cli=""

for name in $configs; do
  start="$(now)"
  if ! build_config "$name"; then failed=1; table+=("$name|build failed|||"); continue; fi
  built="$(now)"
  driver="$(driver_command "$name")"
  for handler in $($driver --handlers); do
    dump="$results/dumps/$name.$handler.dump"
    run_start="$(now)"
    if ! OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" $driver --handler "$handler" >"$dump" 2>"$dump.err"; then
      cat "$dump.err" >&2; log "$name/$handler: the driver failed"; failed=1
      table+=("$name/$handler|run failed|$(seconds "$start" "$built")||"); continue
    fi
    run_s="$(seconds "$run_start" "$(now)")"
    digest="$(sha256sum "$dump" | cut -c1-64)"
    table+=("$name/$handler|$digest|$(seconds "$start" "$built")|$run_s|")
    if [[ -z "$reference_dump" ]]; then
      reference_dump="$dump"; reference_name="$name/$handler"
    elif ! cmp -s "$reference_dump" "$dump"; then
      explain_dump_difference "$reference_dump" "$dump" "$reference_name" "$name/$handler"; failed=1
    fi
  done

  [[ $cli -eq 1 && "$name" != wasm32 ]] || continue
  gpt2="$ROOT/build-diff-$name/osprey/gpt2/osprey-gpt2"
  for backend in lists gpu; do
    out="$results/cli/$name.$backend.txt"
    device=(); [[ $backend == gpu ]] && device=(--device host)
    cli_start="$(now)"
    if ! ( cd "$results/cli" &&
           "$gpt2" logits --preset tiny --backend $backend "${device[@]}" --prompt "$PROMPT" | tail -n +2 &&
           "$gpt2" generate --preset tiny --backend $backend "${device[@]}" --prompt "$PROMPT" --tokens 20 | tail -n +2 &&
           "$gpt2" train-step --preset tiny --backend $backend "${device[@]}" --data train.txt --batch 2 --seq 16 | tail -n +2
         ) >"$out" 2>"$out.err"; then
      cat "$out.err" >&2; log "$name/cli-$backend: osprey-gpt2 failed"; failed=1; continue
    fi
    table+=("$name/cli-$backend|$(sha256sum "$out" | cut -c1-64)||$(seconds "$cli_start" "$(now)")|cli")
    if [[ -z "$reference_cli" ]]; then
      reference_cli="$out"
      # The logits osprey-gpt2 prints are the dump's doubles in decimal.
      if [[ -n "$reference_dump" ]] &&
         ! cmp -s <(head -n "$(grep -c '^logits\.last ' "$reference_dump")" "$out") \
                  <(awk '$1 == "logits.last" { print $4 }' "$reference_dump"); then
        echo "MISMATCH: osprey-gpt2 logits ($name/$backend) are not the driver's doubles ($reference_name):"
        line="$(first_difference <(awk '$1 == "logits.last" { print $4 }' "$reference_dump") "$out")"
        echo "  line $(cut -f1 <<<"$line"): driver $(cut -f2 <<<"$line"), osprey-gpt2 $(cut -f3 <<<"$line")"
        failed=1
      fi
    elif ! cmp -s "$reference_cli" "$out"; then
      line="$(first_difference "$reference_cli" "$out")"
      echo "MISMATCH: osprey-gpt2 output of $name/$backend differs from $(basename "$reference_cli" .txt) at line $(cut -f1 <<<"$line"):"
      echo "  expected: $(cut -f2 <<<"$line")"
      echo "  got:      $(cut -f3 <<<"$line")"
      failed=1
    fi
  done
done

# The committed summary of the dump (what every build, including ones not run here, must give).
if [[ -n "$reference_dump" ]]; then
  summary "$reference_dump" >"$results/summary.txt"
  if [[ $update_golden -eq 1 ]]; then
    cp "$results/summary.txt" "$GOLDEN"; log "wrote $GOLDEN"
  elif [[ ! -f "$GOLDEN" ]]; then
    log "no $GOLDEN: run with --update-golden to record one"; failed=1
  elif ! cmp -s "$GOLDEN" "$results/summary.txt"; then
    line="$(first_difference "$GOLDEN" "$results/summary.txt")"
    echo "MISMATCH: $reference_name differs from the recorded $GOLDEN at line $(cut -f1 <<<"$line"):"
    echo "  recorded: $(cut -f2 <<<"$line")"
    echo "  got:      $(cut -f3 <<<"$line")"
    echo "  (an intended change of the model's numbers: rerun with --update-golden and say why)"
    failed=1
  fi
fi

echo
printf '%-28s %-66s %9s %8s\n' "configuration/handler" "sha256 of the dump (cli: of the printed output)" "build s" "run s"
for row in "${table[@]}"; do
  IFS='|' read -r what digest build run _ <<<"$row"
  printf '%-28s %-66s %9s %8s\n' "$what" "$digest" "$build" "$run"
done | tee "$results/table.txt"
if [[ $failed -ne 0 ]]; then
  echo "differential: FAILED (dumps in $results)"
  exit 1
fi
echo "differential: all $(( ${#table[@]} )) outputs identical (dumps in $results)"
