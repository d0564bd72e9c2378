#!/usr/bin/env bash
# Writes .gpu-check-commit: the commit of this working tree and whether it has changes, as git
# sees it here. Run it on the development machine just before the tree is copied to the GPU
# machine: the copy's own .git may be older than the files that travel, so scripts/gpu-check.sh
# prints this stamp (when present) rather than asking git there. The stamp is ignored by git
# (.gitignore), so it never makes the tree look changed; the copy to the GPU machine must carry it.
#
#   scripts/stamp-commit.sh        # prints the stamp it wrote
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stamp=$root/.gpu-check-commit
rm -f "$stamp"
commit=$(git -C "$root" rev-parse --short=12 HEAD)
state=clean
if ! git -C "$root" diff --quiet HEAD -- || [[ -n $(git -C "$root" ls-files --others --exclude-standard) ]]; then
  state="with uncommitted changes"
fi
printf '%s (%s, stamped %s)\n' "$commit" "$state" "$(date -u +%Y-%m-%dT%H:%MZ)" > "$stamp"
cat "$stamp"
