#!/usr/bin/env bash
# bench/cuda/decode_ab.sh on this machine: its checks of what it is given, a pack of this
# checkout's HEAD and of a base with patches applied, and a run of two builds on the host device
# (GPT-2 tiny) whose texts agree, then one with a build whose text differs and one whose tests
# fail, each of which must fail the run.
#   decode_ab_test.sh SOURCE_DIR OSPREY_GPT2 WORK_DIR
set -uo pipefail
source_dir=$1 gpt2=$2 work=$3
script=$source_dir/bench/cuda/decode_ab.sh
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# expect STATUS PATTERN -- COMMAND...: the command's exit status and a line of its output.
expect() {
  local status=$1 pattern=$2
  shift 3
  local out got
  out=$("$@" 2>&1)
  got=$?
  ((got == status)) || fail "$* exited $got, not $status: $out"
  grep -qE -- "$pattern" <<< "$out" || fail "$* printed no line matching /$pattern/: $out"
}

rm -rf "$work" && mkdir -p "$work" || exit 1
export WORK=$work/runs BUILD=0 TESTS='' DEVICE=host PRESET=tiny TOKENS="3 5" ROUNDS=2

expect 2 "LABEL=TREE" -- "$script" run
expect 2 "write LABEL=TREE" -- "$script" run "$source_dir"
expect 2 "label \`a b\`" -- "$script" run "a b=$source_dir"
expect 2 "given twice" -- "$script" run "a=$source_dir" "a=$source_dir"
expect 2 "neither a folder nor a file" -- "$script" run "a=$work/missing"
TOKENS=1 expect 2 "not a token count" -- "$script" run "a=$source_dir"
ROUNDS=0 expect 2 "ROUNDS=0" -- "$script" run "a=$source_dir"

if git -C "$source_dir" rev-parse --verify --quiet HEAD > /dev/null; then
  expect 2 "is not a commit here" -- "$script" pack "$work/packs" no-such-revision
  expect 0 "head.tar.gz" -- "$script" pack "$work/packs" head=HEAD
  listing=$(tar -tzf "$work/packs/head.tar.gz")
  grep -qx "tree/.gpu-check-commit" <<< "$listing" || fail "the pack holds no stamp"
  grep -qx "tree/CMakeLists.txt" <<< "$listing" || fail "the pack holds no tree"
fi

# Two builds of this tree (the same binary): the run passes, the baseline's ratio is 1, the texts agree.
for label in a b; do
  mkdir -p "$WORK/$label/build/gpt2" && ln -sf "$gpt2" "$WORK/$label/build/gpt2/osprey-gpt2"
done
expect 0 "^b +5 tokens .* texts the same" -- "$script" run "a=$source_dir" "b=$source_dir"
grep -qE "^a +3 tokens .* 1\.000x  texts the same" "$WORK/decode-ab.txt" || fail "no baseline row: $(cat "$WORK/decode-ab.txt")"
grep -qE "^b-5-2: 4 more tokens .* tokens/s\); .*; text [0-9a-f]{16}$" "$WORK/decode-ab.txt" ||
  fail "no timing line of b's second round: $(cat "$WORK/decode-ab.txt")"

# A build that prints another text fails the run.
mkdir -p "$WORK/c/build/gpt2"
cat > "$WORK/c/build/gpt2/osprey-gpt2" <<'FAKE'
#!/usr/bin/env bash
echo "gpt2 (tiny) on host"
echo "not the baseline's text"
echo "timing: 2 more tokens 0.001 s (2000.00 tokens/s); generation 0.002 s (1500.00 tokens/s overall)" >&2
FAKE
chmod +x "$WORK/c/build/gpt2/osprey-gpt2"
expect 1 "^c +3 tokens .* texts DIFFER" -- "$script" run "a=$source_dir" "c=$source_dir"

# A build whose tests fail is not timed, and fails the run.
mkdir -p "$WORK/a/build/tests"
printf '#!/usr/bin/env bash\necho "[  FAILED  ] 1 test"\nexit 1\n' > "$WORK/a/build/tests/failing"
chmod +x "$WORK/a/build/tests/failing"
TESTS=failing expect 1 "failing FAILED or missing .* not timed" -- "$script" run "a=$source_dir"

# Tests run at once, each build's own: one that passes is timed beside one that fails, which is
# not, and the run fails.
mkdir -p "$WORK/b/build/tests" && cp "$WORK/a/build/tests/failing" "$WORK/a/build/tests/checks"
printf '#!/usr/bin/env bash\necho "[  PASSED  ] 3 tests."\n' > "$WORK/b/build/tests/checks"
chmod +x "$WORK/b/build/tests/checks"
TESTS=checks expect 1 "^a: checks FAILED or missing" -- "$script" run "a=$source_dir" "b=$source_dir"
grep -qE "^b: checks \[  PASSED  \] 3 tests" "$WORK/decode-ab.txt" || fail "b's tests were not run: $(cat "$WORK/decode-ab.txt")"
grep -qE "^b-5-2: 4 more tokens" "$WORK/decode-ab.txt" || fail "b was not timed: $(cat "$WORK/decode-ab.txt")"

# Builds run at once: each tree's gpu-check.sh (a stand-in) waits for the other's to start, for 10 s
# at most, so builds one after the other fail. A build whose row says FAIL fails the run; the other
# is still timed.
buildTree() {  # buildTree DIR PEER VERDICT
  mkdir -p "$1/scripts"
  cat > "$1/scripts/gpu-check.sh" <<FAKE
#!/usr/bin/env bash
touch "$1.started"
for _ in \$(seq 100); do [[ -e "$2.started" ]] && break; sleep 0.1; done
[[ -e "$2.started" ]] || { echo "build (osprey-gpt2) | FAIL | the other build never started"; exit 1; }
mkdir -p "\$BUILD_DIR/gpt2" && ln -sf "$gpt2" "\$BUILD_DIR/gpt2/osprey-gpt2"
echo "build (\$BUILD_TARGETS) | $3 |"
FAKE
  chmod +x "$1/scripts/gpu-check.sh"
}
buildTree "$work/tree-p" "$work/tree-q" PASS
buildTree "$work/tree-q" "$work/tree-p" FAIL
BUILD=1 expect 1 "^q: build FAILED" -- "$script" run "p=$work/tree-p" "q=$work/tree-q"
grep -qE "^p +5 tokens .* 1\.000x  texts the same" "$WORK/decode-ab.txt" ||
  fail "p was not built and timed beside q's failed build: $(cat "$WORK/decode-ab.txt")"

# A pack built here (BUILT=1) holds the stamp and the programs, no sources, and `run` times the
# build it carries without building again. The repository packed is a stand-in whose gpu-check.sh
# counts its builds and makes wrappers of this build's osprey-gpt2 and a passing test program.
repo=$work/repo
mkdir -p "$repo/bench/cuda" "$repo/scripts" && cp "$script" "$repo/bench/cuda/"
cat > "$repo/scripts/gpu-check.sh" <<FAKE
#!/usr/bin/env bash
echo built >> "$work/builds"
mkdir -p "\$BUILD_DIR/gpt2" "\$BUILD_DIR/tests"
printf '#!/bin/sh\nexec "%s" "\$@"\n' "$gpt2" > "\$BUILD_DIR/gpt2/osprey-gpt2"
printf '#!/bin/sh\necho "[  PASSED  ] 2 tests."\n' > "\$BUILD_DIR/tests/checks"
chmod +x "\$BUILD_DIR/gpt2/osprey-gpt2" "\$BUILD_DIR/tests/checks"
echo "build (\$BUILD_TARGETS) | PASS |"
FAKE
chmod +x "$repo/scripts/gpu-check.sh"
git -C "$repo" init -q && git -C "$repo" add -A &&
  git -C "$repo" -c user.name=t -c user.email=t@t commit -qm stand-in || fail "cannot make the stand-in repository"
# A pack of a base with patches applied: the patch's file is in the pack, the base untouched; a
# patch applied twice (it changes nothing the second time), a missing one or one that does not
# apply fails; no temporary worktree stays behind.
git -C "$repo" -c user.name=t -c user.email=t@t commit -q --allow-empty -m base &&
  echo added > "$repo/added.txt" && git -C "$repo" add added.txt &&
  git -C "$repo" -c user.name=t -c user.email=t@t commit -qm "adds a file" &&
  git -C "$repo" format-patch -q -1 --stdout > "$work/adds.patch" && git -C "$repo" reset -q --hard HEAD~1 ||
  fail "cannot make the stand-in patch"
expect 0 "series.tar.gz: [0-9a-f]+ adds a file" -- "$repo/bench/cuda/decode_ab.sh" pack "$work/packs" \
  "series=HEAD+$work/adds.patch"
tar -xzf "$work/packs/series.tar.gz" -O tree/added.txt 2> /dev/null | grep -qx added ||
  fail "the patch is not in the pack"
[[ -e $repo/added.txt ]] && fail "the patch reached the checkout"
tar -xzf "$work/packs/series.tar.gz" -O tree/.gpu-check-commit 2> /dev/null | grep -q "; HEAD + $work/adds.patch)" ||
  fail "the stamp does not name the series"
expect 2 "adds.patch does not apply on HEAD" -- "$repo/bench/cuda/decode_ab.sh" pack "$work/packs" \
  "twice=HEAD+$work/adds.patch+$work/adds.patch"
expect 2 "no patch bench/cuda/candidates/missing.patch" -- "$repo/bench/cuda/decode_ab.sh" pack "$work/packs" \
  "gone=HEAD+missing.patch"
(($(git -C "$repo" worktree list | wc -l) == 1)) || fail "worktrees left: $(git -C "$repo" worktree list)"

export WORK=$work/built
BUILT=1 TESTS=checks expect 0 "built.tar.xz" -- "$repo/bench/cuda/decode_ab.sh" pack "$work/packs" built=HEAD
listing=$(tar -tJf "$work/packs/built.tar.xz" 2> /dev/null)
for entry in tree/.gpu-check-commit build/gpt2/osprey-gpt2 build/tests/checks build/made-for; do
  grep -qx "$entry" <<< "$listing" || fail "the built pack holds no $entry: $listing"
done
grep -qx "tree/scripts/gpu-check.sh" <<< "$listing" && fail "the built pack holds the sources"
rm -rf "$WORK/built/build"
BUILD=1 TESTS=checks expect 0 "^built +5 tokens .* 1\.000x  texts the same" -- "$script" run "built=$work/packs/built.tar.xz"
grep -qx "# built: built with its pack" "$WORK/decode-ab.txt" || fail "no line says the pack's build was used"
grep -qE "^built: checks \[  PASSED  \] 2 tests" "$WORK/decode-ab.txt" || fail "the pack's tests did not run"
(($(wc -l < "$work/builds") == 1)) || fail "the run built again: $(wc -l < "$work/builds") builds"

((failures == 0)) && echo "decode_ab: every check passed"
exit $((failures > 0))
