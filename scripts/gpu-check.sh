#!/usr/bin/env bash
# One command for the GPU machine: builds Osprey for sm_90a (H100/H200), runs every test for the
# cuda device, the bit-identity checks and the benchmarks, and prints a short table LAST.
#
#   scripts/gpu-check.sh [all|build|run|hooks] [--no-host-tests]
#
#     all    (default) build, then run
#     build  configure build-gpu/ with -DOSPREY_CUDA_ARCH=90a and build every target
#     run    with an existing build: host tests (unless --no-host-tests), compile-fail tests,
#            the cuda test programs, osprey_cuda_bench, then every hook in scripts/gpu-check.d/
#     hooks  the hooks alone (HOOKS: which, e.g. "30 35"; default all), after a `run` in an earlier
#            call on the same machine: they take that run's cuda test results, and their rows join
#            that run's table when the tree is the same commit (a FAIL row otherwise)
#
#   Environment: OUT (logs and the table are copied to $OUT/gpu-check/ when set), BUILD_DIR
#   (default build-gpu), BUILD_TARGETS (build only these, e.g. "osprey-gpt2", for a quick
#   measurement: `run` then finds what was not built missing), JOBS (default: every core),
#   OSPREY_CUDA_ARCH (default 90a), HOOKS_DIR (default scripts/gpu-check.d), BUILD_TIMEOUT / HOST_TESTS_TIMEOUT / HOOK_TIMEOUT (seconds),
#   CMAKE_ARGS (more configure options, split at spaces: "-DOSPREY_BLOCK_TRACE=ON" for a traced build).
#
# Each command of the device machine may run for at most 10 minutes; the build alone takes a few.
# The build tree stays on the machine between calls while it is warm, so the usual pair is
#   scripts/gpu-check.sh build      # one call
#   scripts/gpu-check.sh run        # the next call: tests, benchmarks, hooks, table
# and `all` when one call has the time for both. `run` prints the build's rows too.
#
# Dependencies: the GPU machine has a compiler, CMake, ninja and CUDA but may lack the Debian
# packages Osprey builds against (fmt, nlohmann-json, CLI11, PCRE2, GoogleTest, Google Benchmark,
# pkg-config), and it cannot install any. The configure step first tries the system's own; if that
# fails and `.deps/` is present (made on a machine that has them by scripts/carry-deps.sh, and
# carried along with the tree), it configures again against `.deps/` alone.
#
# Hooks: every executable scripts/gpu-check.d/*.sh runs in name order after the benchmarks (with
# OSPREY_ROOT, OSPREY_BUILD_DIR and OSPREY_GPU_CHECK_LOGS set). A hook reports by printing lines
#   RESULT|<check name>|<result>|<number>       (the number may be empty)
# which join the table; a hook that exits non-zero adds a FAIL row. See scripts/gpu-check.d/README.md.
#
# Exit status: 0 when no row of the table says FAIL.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# The cuda test programs, as the configured build names them (tests/CMakeLists.txt writes the list;
# CMake's target osprey_cuda_test_programs builds them all). The fast handler's tests are the
# program whose name ends in _fast.
cuda_test_programs() {
  cat "$build/tests/cuda_test_programs.txt" 2>/dev/null
}
build=${BUILD_DIR:-$root/build-gpu}
[[ $build = /* ]] || build=$root/$build
jobs=${JOBS:-$(nproc)}
arch=${OSPREY_CUDA_ARCH:-90a}
phase=all
host_tests=1
for arg in "$@"; do
  case $arg in
    all | build | run | hooks) phase=$arg ;;
    --no-host-tests) host_tests=0 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument \`$arg\` (all | build | run | hooks | --no-host-tests)" >&2; exit 2 ;;
  esac
done

state=$build/gpu-check          # survives between calls with the build tree
joined=0                        # a hooks call whose rows join the earlier run's table
logs=$state/logs
mkdir -p "$logs"
started=$(date +%s)

# ---- the table ------------------------------------------------------------------------------------
# Rows are "name|result|number", one file per phase so `run` can show the build's rows.
record() { printf '%s|%s|%s\n' "$1" "$2" "${3:-}" >> "$rows"; }
# RESULT|name|result[|number] lines from a log into the table.
collect() { grep -a '^RESULT|' "$1" | while IFS='|' read -r _ name result number; do record "$name" "$result" "$number"; done; }
say() { printf '\n== %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }

# The commit the tree was copied from: scripts/stamp-commit.sh's stamp, written on the development
# machine before the copy; without one, git here (whose .git may be older than the files).
commit_line() {
  if [[ -f $root/.gpu-check-commit ]]; then
    cat "$root/.gpu-check-commit"
  else
    echo "$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown) (no stamp: as this machine's .git says$(git -C "$root" diff --quiet 2>/dev/null || echo ', with uncommitted changes'))"
  fi
}

# The rows files of this call's table: the build's, the run's (in a hooks call, only when it joined
# that run), the hooks'.
table_files() {
  [[ -f $state/build.rows ]] && echo "$state/build.rows"
  [[ -f $state/run.rows && ($phase == run || $phase == all || $joined == 1) ]] && echo "$state/run.rows"
  [[ -f $state/hooks.rows && $phase == hooks ]] && echo "$state/hooks.rows"
  return 0
}

print_table() {
  local files
  mapfile -t files < <(table_files)
  ((${#files[@]})) || return 0
  {
    echo
    echo "gpu-check: $(date -u +%Y-%m-%dT%H:%MZ), commit $(commit_line)"
    cat "${files[@]}" | awk -F'|' '
      { name[NR] = $1; result[NR] = $2; number[NR] = $3
        if (length($1) > w1) w1 = length($1); if (length($2) > w2) w2 = length($2) }
      END {
        if (w1 < 5) w1 = 5; if (w2 < 6) w2 = 6
        fmt = "%-" w1 "s | %-" w2 "s | %s\n"
        printf fmt, "check", "result", "number"
        line1 = sprintf("%" w1 "s", ""); gsub(/ /, "-", line1)
        line2 = sprintf("%" w2 "s", ""); gsub(/ /, "-", line2)
        printf "%s-+-%s-+-------\n", line1, line2
        for (i = 1; i <= NR; i++) printf fmt, name[i], result[i], number[i]
      }'
  } | tee "$state/table.txt"
}

finish() {
  print_table
  if [[ -n ${OUT:-} ]]; then
    # The device tool brings back at most 8 files: the table, plus every log in one archive.
    cp "$state/table.txt" "$OUT/gpu-check-table.txt" 2>/dev/null
    tar czf "$OUT/gpu-check-logs.tgz" -C "$state" . 2>/dev/null
  fi
  local files
  mapfile -t files < <(table_files)
  ((${#files[@]})) || exit 1
  if cut -d'|' -f2 "${files[@]}" | grep -q '^FAIL'; then exit 1; fi
  exit 0
}

# ---- NCCL (data-parallel training): nccl.h to build, libnccl.so.2 to run (scripts/nccl-env.sh) ----
source "$root/scripts/nccl-env.sh"

# ---- build ----------------------------------------------------------------------------------------
configure() {  # configure [extra cmake args...], then CMAKE_ARGS's words
  local more=()
  read -r -a more <<< "${CMAKE_ARGS:-}"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DOSPREY_CUDA_ARCH="$arch" "$@" "${more[@]}"
}

run_build() {
  rows=$state/build.rows
  : > "$rows"
  say "machine"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
  echo "$gpu"
  record "GPU (nvidia-smi)" "$( [[ $gpu == *NVIDIA* || $gpu == *H100* || $gpu == *H200* ]] && echo seen || echo FAIL)" "$gpu"
  record "nvcc" "$(command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] && echo seen || echo FAIL)" \
    "$( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>/dev/null) | grep -o 'release [0-9.]*' | head -1)"
  record "g++ / cmake" "seen" "$(g++ -dumpfullversion 2>/dev/null) / $(cmake --version | head -1 | awk '{print $3}')"
  record "NCCL" "seen" "header ${OSPREY_NCCL_INCLUDE:-system}, library ${OSPREY_NCCL_LIBRARY:-system}"

  say "configure ($build, sm_$arch)"
  local how="system packages"
  if ! configure > "$logs/configure.log" 2>&1; then
    if [[ -d $root/.deps ]]; then
      how="carried .deps"
      echo "configure against the system's packages failed (see configure-system.log); using .deps/"
      mv "$logs/configure.log" "$logs/configure-system.log"
      rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
      local extra=(-DCMAKE_PREFIX_PATH="$root/.deps")
      command -v pkg-config >/dev/null || extra+=(-DPKG_CONFIG_EXECUTABLE="$root/.deps/bin/pkg-config")
      export PKG_CONFIG_PATH="$root/.deps/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
      configure "${extra[@]}" > "$logs/configure.log" 2>&1 || how=FAIL
    else
      how=FAIL
    fi
  fi
  tail -3 "$logs/configure.log"
  if [[ $how == FAIL ]]; then
    tail -30 "$logs/configure.log"
    record "configure" "FAIL" "see logs/configure.log"
    return
  fi
  record "configure" "PASS" "$how"

  say "build (-j$jobs)"
  # -k 0: keep going, so one broken target does not hide the state of the others.
  local targets=()
  [[ -n ${BUILD_TARGETS:-} ]] && targets=(--target $BUILD_TARGETS)
  timeout "${BUILD_TIMEOUT:-540}" cmake --build "$build" -j "$jobs" "${targets[@]}" -- -k 0 > "$logs/build.log" 2>&1
  local status=$?
  local failed
  failed=$(grep -c '^FAILED:' "$logs/build.log")
  tail -3 "$logs/build.log"
  if ((status == 0)); then
    record "build (${BUILD_TARGETS:-all targets})" "PASS" ""
  else
    grep -A12 '^FAILED:' "$logs/build.log" | head -60
    record "build (${BUILD_TARGETS:-all targets})" "FAIL" "$( ((status == 124)) && echo 'timed out' || echo "$failed failed steps")"
  fi
  # The host tests' binary only where this call runs them (--no-host-tests: not needed).
  local needed=(bench/cuda/osprey_cuda_bench) program
  while read -r program; do needed+=("tests/$program"); done < <(cuda_test_programs)
  ((host_tests)) && needed+=(tests/osprey_tests)
  for target in "${needed[@]}"; do
    [[ -x $build/$target ]] || record "built: $(basename "$target")" "FAIL" "missing"
  done
}

# ---- run ------------------------------------------------------------------------------------------
# ctest_rows <name> <label> <timeout>: one row for a ctest label.
ctest_rows() {
  local name=$1 label=$2 limit=$3 log=$logs/ctest-$2.log
  timeout "$limit" ctest --test-dir "$build" -L "$label" -j "$jobs" --timeout 300 --output-on-failure > "$log" 2>&1
  local status=$?
  local summary
  # CTest 3 writes "100% tests passed, 0 tests failed out of N"; CTest 4 drops the middle part
  # when nothing failed ("100% tests passed out of N").
  summary=$(grep -E 'tests passed(, [0-9]+ tests failed)? out of [0-9]+' "$log" | tail -1)
  echo "${summary:-no summary (see $log)}"
  if [[ -z $summary ]]; then
    record "$name" "FAIL" "$( ((status == 124)) && echo 'timed out' || echo "no tests ran (see logs/ctest-$label.log)")"
  elif ((status == 0)); then
    record "$name" "PASS" "$(sed -E 's/.*out of ([0-9]+).*/\1 tests/' <<< "$summary")"
  else
    grep -E '^\s*[0-9]+ - ' "$log" | head -20
    record "$name" "FAIL" "$( ((status == 124)) && echo 'timed out' || sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1 of \2 failed/' <<< "$summary")"
  fi
}

run_checks() {
  rows=$state/run.rows
  : > "$rows"
  : > "$state/hooks.rows"  # hooks of a later call complete this run's table
  commit_line > "$state/run.commit"
  if [[ ! -f $build/CMakeCache.txt ]]; then
    record "run" "FAIL" "no build in $build: run \`scripts/gpu-check.sh build\` first"
    return
  fi
  [[ -d $root/.deps ]] && export PKG_CONFIG_PATH="$root/.deps/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

  if ((host_tests)); then
    say "host tests (ctest -L host)"
    ctest_rows "host tests (lists, gpu/host)" host "${HOST_TESTS_TIMEOUT:-240}"
  fi
  say "compile-fail tests (ctest -L compile_fail; device purity included)"
  ctest_rows "compile-fail tests" compile_fail 240

  # The cuda tests are several programs (tests/CMakeLists.txt says why): osprey_cuda_tests and
  # one per unit that instantiates the model's templates. The hooks time a handler only when its
  # tests passed in this run (they read these): the fast handler's are osprey_cuda_tests_fast's
  # (Fast.*), the exact cuda handler's all the other programs'.
  local programs=()
  mapfile -t programs < <(cuda_test_programs)
  say "cuda tests (${programs[*]:-none configured})"
  exact_tests=PASS fast_tests=PASS
  ((${#programs[@]})) || exact_tests=FAIL fast_tests=FAIL
  local passed_all=0 broken=() program
  for program in "${programs[@]}"; do
    local tests=$build/tests/$program log=$logs/$program.log status passed failed
    timeout 300 "$tests" --gtest_output="xml:$logs/$program.xml" > "$log" 2>&1
    status=$?
    passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    failed=$(grep -oE '\[  FAILED  \] [0-9]+ tests?,' "$log" | grep -oE '[0-9]+' | tail -1)
    grep -m1 ' multiprocessors)' "$log"
    tail -2 "$log"
    passed_all=$((passed_all + ${passed:-0}))
    ((status == 0)) && continue
    [[ $program == *_fast ]] && fast_tests=FAIL || exact_tests=FAIL
    grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | head -20
    if [[ -n $passed ]]; then
      broken+=("$program: ${failed:-?} failed")
    elif [[ ! -x $tests ]]; then
      broken+=("$program not built")
    else  # no summary line: the program stopped (crash or timeout)
      broken+=("$program $( ((status == 124)) && echo 'timed out' || echo "stopped with status $status")")
    fi
  done
  local row="cuda tests (typed effect + cuda device, ${#programs[@]} programs)"
  if ((${#programs[@]} == 0)); then
    record "$row" "FAIL" "no programs configured (tests/cuda_test_programs.txt)"
  elif ((${#broken[@]} == 0)); then
    record "$row" "PASS" "$passed_all tests"
  else
    record "$row" "FAIL" "$(IFS=';'; echo "${broken[*]}"); $passed_all passed"
  fi

  echo "$exact_tests $fast_tests" > "$state/cuda-tests.status"

  say "cuda benchmarks (osprey_cuda_bench)"
  local bench=$build/bench/cuda/osprey_cuda_bench
  if [[ -x $bench ]]; then
    timeout 300 "$bench" > "$logs/cuda_bench.log" 2>&1
    local status=$?
    grep -av '^RESULT|' "$logs/cuda_bench.log"
    collect "$logs/cuda_bench.log"
    ((status == 0)) || record "cuda matMul benchmark" "FAIL" "exit status $status (see logs/cuda_bench.log)"
  else
    record "cuda matMul benchmark" "FAIL" "osprey_cuda_bench was not built"
  fi

  run_hooks
}

# ---- hooks: the GPT-2 bit-identity digests, PyTorch comparisons, ... -----------------------------
run_hooks() {
  local hook
  for hook in "${HOOKS_DIR:-$root/scripts/gpu-check.d}"/*.sh; do
    [[ -x $hook ]] || continue
    local name
    name=$(basename "$hook" .sh)
    if [[ -n ${HOOKS:-} ]] && ! grep -qw "${name%%-*}" <<< "$HOOKS"; then continue; fi
    say "hook $name"
    # OSPREY_TRAIN_DATA relative to the root, where every hook runs: a training command prints its
    # data's path and the digests cover that line, so they stay the same wherever the tree lies.
    OSPREY_TRAIN_DATA=${OSPREY_TRAIN_DATA:-data/tinyshakespeare.txt} \
    OSPREY_ROOT=$root OSPREY_BUILD_DIR=$build OSPREY_GPU_CHECK_LOGS=$logs OSPREY_EXACT_CUDA_TESTS=$exact_tests OSPREY_FAST_CUDA_TESTS=$fast_tests \
      timeout "${HOOK_TIMEOUT:-300}" "$hook" > "$logs/hook-$name.log" 2>&1
    local status=$?
    grep -av '^RESULT|' "$logs/hook-$name.log" | tail -15
    collect "$logs/hook-$name.log"
    ((status == 0)) || record "hook $name" "FAIL" "$( ((status == 124)) && echo 'timed out' || echo "exit status $status")"
  done
}

# Hooks after a `run` of the same commit on this machine join that run's table (build, run and
# every later call's hooks, in order), so a check too long for one call still makes one table.
hooks_only() {
  rows=$state/hooks.rows
  local ran now
  ran=$(cat "$state/run.commit" 2>/dev/null)
  now=$(commit_line)
  exact_tests=FAIL fast_tests=FAIL
  if [[ -f $state/cuda-tests.status && -n $ran && ${ran%%, stamped*} == "${now%%, stamped*}" ]]; then
    read -r exact_tests fast_tests < "$state/cuda-tests.status"
    joined=1
    touch "$rows"
  else
    : > "$rows"
    if [[ ! -f $state/cuda-tests.status || -z $ran ]]; then
      record "hooks" "FAIL" "no earlier \`run\` on this machine: its cuda test results are what the hooks' timings rest on"
    else
      record "hooks" "FAIL" "the earlier \`run\` on this machine was of ${ran%%, stamped*}), not this tree's ${now%%, stamped*})"
    fi
  fi
  run_hooks
}

case $phase in
  build) run_build ;;
  run) run_checks ;;
  hooks) hooks_only ;;
  all) run_build; run_checks ;;
esac
say "done"
finish
