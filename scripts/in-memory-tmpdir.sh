#!/usr/bin/env bash
# Runs a command with TMPDIR in memory: a fresh folder under /dev/shm where it is writable (else the
# system's own temporary folder, unchanged), removed with everything in it when the command ends.
#
#   scripts/in-memory-tmpdir.sh COMMAND [ARGS...]
#
# Why: the tests make their scratch folders under TMPDIR, and the checkpoints they save are
# written the way every save is (fsync before the rename), which on a disk waits for the disk:
# a third of the checkpointing tests' time on a CI machine. In memory the same calls run, the same
# files appear and are replaced, and nothing waits. The command's exit status is this script's.
set -uo pipefail
(( $# > 0 )) || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
scratch=""
if [[ -d /dev/shm && -w /dev/shm ]]; then
  scratch="$(mktemp -d /dev/shm/osprey-tmp-XXXXXX 2>/dev/null)" || scratch=""
fi
if [[ -n $scratch ]]; then
  trap 'rm -rf "$scratch"' EXIT
  export TMPDIR="$scratch"
fi
"$@"
