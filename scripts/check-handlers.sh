#!/usr/bin/env bash
# Runs `osprey-gpt2 generate` on the lists and gpu(host) handlers with the same prompt and
# model, prints each run's wall time, and checks that everything after the header line is
# byte-identical (DESIGN.md §3). Exit status 1 on any difference.
# Usage: scripts/check-handlers.sh OSPREY_GPT2_BINARY PROMPT TOKENS [extra generate flags...]
set -euo pipefail

binary="$1" prompt="$2" tokens="$3"
shift 3
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

run() {
  local name="$1"
  shift
  local start end
  start=$(date +%s.%N)
  "$binary" generate "$@" --prompt "$prompt" --tokens "$tokens" --timing "${extra[@]}" \
    >"$work/$name.out" 2>"$work/$name.err"
  end=$(date +%s.%N)
  echo "check-handlers: $name: $(head -n 1 "$work/$name.out") — wall $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
  grep '^timing:' "$work/$name.err" | sed "s/^/check-handlers: $name: /" || true
}

extra=("$@")
run lists --backend lists
run gpu-host --backend gpu --device host

tail -n +2 "$work/lists.out" >"$work/lists.text"
tail -n +2 "$work/gpu-host.out" >"$work/gpu-host.text"
echo "check-handlers: text:"
cat "$work/lists.text"
if cmp -s "$work/lists.text" "$work/gpu-host.text"; then
  echo "check-handlers: OK: lists and gpu(host) printed the same bytes after the header"
else
  echo "check-handlers: MISMATCH between lists and gpu(host):" >&2
  diff "$work/lists.text" "$work/gpu-host.text" >&2 || true
  exit 1
fi
