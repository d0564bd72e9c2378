#!/usr/bin/env bash
# Exact batch-1 decoding of several builds side by side in one call of the GPU machine, each
# build's recorded decoding tests first, its texts checked against the first build's, its rates
# as ratios to the first build's measured in the same rounds. Speed is compared only within one
# call (one machine): H100s and H200s, and one H100 and another, differ by more than most changes.
#
#   bench/cuda/decode_ab.sh pack DIR REV [REV ...]     on the development machine: each commit as
#                                                      DIR/<label>.tar.gz (git archive, stamped);
#                                                      the label is the commit's short hash, or
#                                                      LABEL=REV names it; with BUILT=1 each is
#                                                      built here instead and DIR/<label>.tar.xz
#                                                      holds its stamp and the two programs alone;
#                                                      REV may be BASE+A.patch+B.patch: BASE with
#                                                      those patches applied (git am, in order) as
#                                                      commits of a temporary worktree
#   bench/cuda/decode_ab.sh run LABEL=TREE [LABEL=TREE ...]
#                                                      on the GPU machine; TREE is a source tree or
#                                                      a pack's .tar.gz; the first is the baseline
#
#   Environment (pack): BUILT, and with it CMAKE_ARGS (scripts/gpu-check.sh's: "-DOSPREY_BLOCK_TRACE=ON"
#   makes a traced build, tools/profile/block_trace.py).
#   Environment (run): TOKENS (default "100 300"), ROUNDS (2), PRESET (124M), PROMPT ("The capital
#   of France is"), DEVICE (cuda), WORK (where packs are unpacked and every build kept:
#   /tmp/decode-ab, so a second call on the same warm machine rebuilds nothing), BUILD (1; 0 uses
#   the builds already in WORK), TESTS (the test program run before timing:
#   osprey_cuda_tests_recorded_decoding; empty: none), JOBS (every core, shared by the builds, which
#   run at once), OUT (the log is copied to $OUT/decode-ab.txt when set).
#
# A build made here (BUILT=1) saves the GPU machine's minutes: four trees take it about 200 s to
# build, and its time is scarcer than this machine's. Such a build is for WORK's folder of its label
# (the tokenizer is found through the source folder the build was configured in), so `pack` and
# `run` must be given the same WORK; `run` uses a pack's build, whatever BUILD says, when it was made
# for that folder, and builds the tree otherwise (which a pack without sources cannot be: it fails).
# The packed programs link the Debian libraries carried in .deps (scripts/carry-deps.sh).
#
# Each timing is one `osprey-gpt2 generate --timing` process; its rate is the "more tokens" one
# (the tokens after the first, so neither the upload nor the prompt counts), and its text is the
# sha256 of what it printed after its first line. Builds alternate within each round, so a drift
# of the machine's clock reaches every build alike.
#
# Exit status: 0 when every build was built, passed its tests and printed the baseline's texts.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() {
  echo "decode-ab: $*" >&2
  exit 2
}

# A label names files and report rows: letters, digits, '.', '_' and '-' only.
checkLabel() { [[ $1 =~ ^[A-Za-z0-9._-]+$ ]] || die "label \`$1\`: use letters, digits, '.', '_' or '-'"; }

pack() {
  (($# >= 2)) || die "pack DIR REV [REV ...]"
  local dir=$1
  shift
  mkdir -p "$dir" || die "cannot make $dir"
  local spec label rev commit stage file series built=${BUILT:-0}
  work=${WORK:-/tmp/decode-ab}
  for spec in "$@"; do
    rev=${spec#*=}
    # A series' commit exists only in this repository's objects: its stamp names the series too.
    series=
    [[ $rev == *+* ]] && { series="; ${rev//+/ + }" && rev=$(applied "$rev") || exit 2; }
    commit=$(git -C "$root" rev-parse --verify --quiet "$rev^{commit}") || die "\`$rev\` is not a commit here"
    label=$(git -C "$root" rev-parse --short=7 "$commit")
    [[ $spec == *=* ]] && label=${spec%%=*}
    checkLabel "$label"
    stage=$(mktemp -d) || die "cannot make a temporary folder"
    git -C "$root" archive --format=tar --prefix=tree/ "$commit" | tar -x -C "$stage" || die "git archive of $rev failed"
    printf '%s (clean, %s %s%s)\n' "$(git -C "$root" rev-parse --short=12 "$commit")" \
      "$([[ $built == 1 ]] && echo 'built on the development machine' || echo packed)" \
      "$(date -u +%Y-%m-%dT%H:%MZ)" "$series" > "$stage/tree/.gpu-check-commit"
    if [[ $built == 1 ]]; then
      file=$dir/$label.tar.xz
      buildHere "$label" "$stage" || exit 2
      tar -cJf "$file" -C "$stage" tree build || die "cannot write $file"
    else
      file=$dir/$label.tar.gz
      tar -czf "$file" -C "$stage" tree || die "cannot write $file"
    fi
    rm -rf "$stage"
    echo "$file: $(git -C "$root" log -1 --format='%h %s' "$commit" | cut -c1-100)"
  done
}

# applied BASE+A.patch+...: the commit that BASE becomes with each patch applied by `git am` in
# order, made in a temporary worktree (removed; the commit stays in the object store, unreferenced).
applied() {
  local spec=$1 base patch tree commit before parts
  IFS=+ read -r -a parts <<< "$spec"
  base=${parts[0]}
  tree=$(mktemp -d) || die "cannot make a temporary folder"
  if ! git -C "$root" worktree add -q --detach "$tree" "$base" 2> /dev/null; then
    rmdir "$tree"
    die "\`$base\` is not a commit here"
  fi
  for patch in "${parts[@]:1}"; do
    [[ -f $patch ]] || patch=$root/bench/cuda/candidates/$patch
    [[ -f $patch ]] || { git -C "$root" worktree remove --force "$tree"; die "no patch ${patch#"$root/"}"; }
    before=$(git -C "$tree" rev-parse HEAD)
    # A patch whose changes are already there applies as nothing: as much a mistake as a conflict.
    if ! git -C "$tree" am -q -3 "$(realpath "$patch")" > /dev/null 2>&1 ||
      [[ $(git -C "$tree" rev-parse HEAD) == "$before" ]]; then
      git -C "$tree" am --abort > /dev/null 2>&1
      git -C "$root" worktree remove --force "$tree"
      die "$patch does not apply on $base with the patches before it in \`$spec\` (or changes nothing)"
    fi
  done
  commit=$(git -C "$tree" rev-parse HEAD)
  git -C "$root" worktree remove --force "$tree"
  echo "$commit"
}

# buildHere LABEL STAGE: STAGE/tree built where `run` will unpack it (WORK/LABEL/src), one tree at
# a time with every core of this machine; STAGE/tree becomes its stamp alone and STAGE/build the two
# programs, with the folder they were made for.
buildHere() {
  local label=$1 stage=$2 tests=${TESTS-osprey_cuda_tests_recorded_decoding}
  local src=$work/$label/src build=$work/$label/build program
  rm -rf "${work:?}/$label" && mkdir -p "$work/$label" || die "cannot make $work/$label"
  mv "$stage/tree" "$src" || die "cannot move the tree to $src"
  mkdir -p "$stage/tree" "$stage/build/gpt2" "$stage/build/tests" || die "cannot make $stage/build"
  cp "$src/.gpu-check-commit" "$stage/tree/" || die "cannot copy the stamp"
  echo "$label: building in $build (log: $work/$label/build.log)"
  BUILD_DIR=$build BUILD_TARGETS="osprey-gpt2${tests:+ $tests}" BUILD_TIMEOUT=${BUILD_TIMEOUT:-3600} OUT='' \
    "$src/scripts/gpu-check.sh" build > "$work/$label/build.log" 2>&1
  grep -qE '^build \(.*\| PASS' "$work/$label/build.log" || die "$label: build FAILED (see $work/$label/build.log)"
  cp "$build/gpt2/osprey-gpt2" "$stage/build/gpt2/" || die "$label: no osprey-gpt2 in $build"
  if [[ -n $tests ]]; then
    program=$build/tests/$tests
    cp "$program" "$stage/build/tests/" || die "$label: no $program"
  fi
  echo "$src" > "$stage/build/made-for"
}

# The source tree of LABEL=TREE: the folder itself, or the pack unpacked into WORK (again only
# when the pack changed).
sourceOf() {
  local label=$1 tree=$2
  local dir=$work/$label/src
  if [[ -d $tree ]]; then
    (cd "$tree" && pwd)
    return
  fi
  [[ -f $tree ]] || die "$label: \`$tree\` is neither a folder nor a file"
  local sum
  sum=$(sha256sum "$tree" | cut -c1-64)
  if [[ ! -f $work/$label/packed || $(cat "$work/$label/packed") != "$sum" ]]; then
    rm -rf "$dir"
    mkdir -p "$work/$label" || die "cannot make $work/$label"
    local stage=$work/$label/unpack
    rm -rf "$stage"
    mkdir -p "$stage" || die "cannot make $stage"
    tar -xf "$tree" -C "$stage" || die "$label: cannot unpack $tree"
    [[ -d $stage/tree ]] || die "$label: $tree holds no tree/ (make packs with \`$0 pack\`)"
    mv "$stage/tree" "$dir" || die "$label: cannot move the tree to $dir"
    if [[ -d $stage/build ]]; then
      rm -rf "$work/$label/build" && mv "$stage/build" "$work/$label/build" || die "$label: cannot move its build"
    fi
    rm -rf "$stage"
    echo "$sum" > "$work/$label/packed"
  fi
  # The Debian packages carried for the GPU machine (scripts/carry-deps.sh) and the tokenizer's
  # files (scripts/fetch-tokenizer.sh, which needs npm, so the GPU machine cannot) serve every tree.
  local carried
  for carried in .deps .cache; do
    [[ -d $root/$carried && ! -e $dir/$carried ]] && ln -s "$root/$carried" "$dir/$carried"
  done
  echo "$dir"
}

run() {
  (($# >= 1)) || die "run LABEL=TREE [LABEL=TREE ...]"
  work=${WORK:-/tmp/decode-ab}
  local tokensList=${TOKENS:-100 300} rounds=${ROUNDS:-2} preset=${PRESET:-124M} device=${DEVICE:-cuda}
  local prompt=${PROMPT:-The capital of France is} tests=${TESTS-osprey_cuda_tests_recorded_decoding}
  [[ $rounds =~ ^[1-9][0-9]?$ ]] || die "ROUNDS=$rounds: a whole number from 1 to 99"
  local n
  for n in $tokensList; do
    if [[ ! $n =~ ^[1-9][0-9]{0,4}$ ]] || ((n < 2)); then
      die "TOKENS: \`$n\` is not a token count from 2 to 99999"
    fi
  done
  mkdir -p "$work" || die "cannot make $work"
  local log=$work/decode-ab.txt
  : > "$log"
  say() { echo "$*" | tee -a "$log"; }

  local labels=() spec label
  declare -A src=() ok=()
  gpt2Of() { echo "$work/$1/build/gpt2/osprey-gpt2"; }
  for spec in "$@"; do
    [[ $spec == *=* ]] || die "\`$spec\`: write LABEL=TREE"
    label=${spec%%=*}
    checkLabel "$label"
    [[ -z ${src[$label]+x} ]] || die "label $label given twice"
    labels+=("$label")
    src[$label]=$(sourceOf "$label" "${spec#*=}") || exit 2
  done

  say "# decode-ab $(date -u +%Y-%m-%dT%H:%MZ) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi')"
  say "# generate --preset $preset --prompt \"$prompt\" --tokens N --backend gpu --device $device --timing; rounds $rounds"
  local failed=0 targets
  # Every build at once, the cores shared among them: a tree's few large CUDA units are most of its
  # build, so one build at a time leaves most cores idle (three trees built in 143-176 s together on
  # a 16-core H100 machine, 2026-12-06). Then every build's tests at once (each its own process and
  # CUDA context), before any timing.
  declare -A pid=()
  local building=${BUILD:-1} share=$(( ${JOBS:-$(nproc)} / ${#labels[@]} ))
  ((share >= 2)) || share=2
  for label in "${labels[@]}"; do
    say "# $label: $(cat "${src[$label]}/.gpu-check-commit" 2>/dev/null || git -C "${src[$label]}" log -1 --format='%h (git)' 2>/dev/null || echo 'unstamped tree')"
    mkdir -p "$work/$label" || die "cannot make $work/$label"
    if [[ $(cat "$work/$label/build/made-for" 2>/dev/null) == "${src[$label]}" ]]; then
      say "# $label: built with its pack"
    elif [[ $building != 0 ]]; then
      targets="osprey-gpt2${tests:+ $tests}"
      BUILD_DIR=$work/$label/build BUILD_TARGETS=$targets JOBS=$share OUT='' \
        "${src[$label]}/scripts/gpu-check.sh" build > "$work/$label/build.log" 2>&1 &
      pid[$label]=$!
    fi
  done
  for label in "${!pid[@]}"; do wait "${pid[$label]}"; done
  for label in "${labels[@]}"; do
    if [[ -n ${pid[$label]+x} ]] && ! grep -qE '^build \(.*\| PASS' "$work/$label/build.log"; then
      # gpu-check's own exit status counts every target it did not build as missing: its build
      # row says whether these were built.
      say "$label: build FAILED (the last lines of $work/$label/build.log:)"
      tail -5 "$work/$label/build.log" | tee -a "$log"
      failed=1
      continue
    fi
    [[ -x $(gpt2Of "$label") ]] || { say "$label: no $(gpt2Of "$label")"; failed=1; continue; }
    ok[$label]=1
  done
  if [[ -n $tests ]]; then
    pid=()
    local program
    for label in "${!ok[@]}"; do
      program=$work/$label/build/tests/$tests
      if [[ -x $program ]]; then
        "$program" --gtest_brief=1 > "$work/$label/tests.log" 2>&1 &
        pid[$label]=$!
      fi
    done
    for label in "${labels[@]}"; do
      [[ -n ${ok[$label]+x} ]] || continue
      if [[ -z ${pid[$label]+x} ]] || ! wait "${pid[$label]}"; then
        say "$label: $tests FAILED or missing (see $work/$label/tests.log); not timed"
        unset "ok[$label]"
        failed=1
        continue
      fi
      say "$label: $tests $(grep -o '\[  PASSED  \] [0-9]* tests\?' "$work/$label/tests.log" | tail -1)"
    done
  fi

  # One timing: "LABEL-N-ROUND: <the timing line> ; text <hash>", its rate kept for the summary.
  declare -A rates=() texts=()
  local round rate text line out=$work/generate.out err=$work/generate.err
  for ((round = 1; round <= rounds; ++round)); do
    for n in $tokensList; do
      for label in "${labels[@]}"; do
        [[ -n ${ok[$label]+x} ]] || continue
        if ! "$(gpt2Of "$label")" generate --preset "$preset" --prompt "$prompt" --tokens "$n" --backend gpu \
          --device "$device" --timing > "$out" 2> "$err"; then
          say "$label-$n-$round: generate FAILED: $(tail -1 "$err")"
          failed=1
          continue
        fi
        line=$(grep -o '[0-9]* more tokens .*' "$err" | head -1)
        rate=$(sed -n 's/.* more tokens [0-9.]* s (\([0-9.]*\) tokens\/s).*/\1/p' <<< "$line")
        text=$(tail -n +2 "$out" | sha256sum | cut -c1-16)
        say "$label-$n-$round: $line; text $text"
        [[ -n $rate ]] || { say "$label-$n-$round: no rate in its timing line"; failed=1; continue; }
        rates[$label-$n]+="$rate "
        texts[$label-$n]+="$text "
      done
    done
  done

  # The summary: each build's median rate at each length, its ratio to the baseline's, and whether
  # its texts were the baseline's.
  local base=${labels[0]} median baseMedian same ref
  medianOf() { tr ' ' '\n' <<< "$1" | sed '/^$/d' | sort -g | awk '{v[NR] = $1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
  say "# summary: median tokens/s over $rounds rounds (ratio to $base); texts against $base's"
  for n in $tokensList; do
    baseMedian=$(medianOf "${rates[$base-$n]:-}") || baseMedian=
    # Every text of each build (the baseline's own included) against the baseline's first.
    ref=$(awk '{print $1}' <<< "${texts[$base-$n]:-}")
    for label in "${labels[@]}"; do
      median=$(medianOf "${rates[$label-$n]:-}") || { say "$label $n tokens: not timed"; continue; }
      same=yes
      for text in ${texts[$label-$n]}; do [[ $text == "$ref" ]] || same=no; done
      [[ $same == yes ]] || failed=1
      if [[ -n $baseMedian ]]; then
        say "$(printf '%-12s %6s tokens %10.2f tokens/s  %6.3fx  texts %s' "$label" "$n" "$median" \
          "$(awk -v a="$median" -v b="$baseMedian" 'BEGIN {print a / b}')" \
          "$([[ $same == yes ]] && echo "the same ($ref)" || echo DIFFER)")"
      else
        say "$(printf '%-12s %6s tokens %10.2f tokens/s  (no baseline)' "$label" "$n" "$median")"
      fi
    done
  done
  [[ -n ${OUT:-} ]] && mkdir -p "$OUT" && cp "$log" "$OUT/decode-ab.txt"
  return "$failed"
}

case ${1:-} in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  -h | --help) usage ;;
  *) usage >&2; exit 2 ;;
esac
