#!/usr/bin/env bash
# Fails when two of the given object files (the translation units linked into one program) both
# define a function that copies, calls or destroys the same extended __host__ __device__ lambda.
#
#   tools/build/lambda_sharing.sh <program name> <object file>...
#
# Why: for such a lambda nvcc keeps the copy, call and delete functions' pointers in a helper in
# each translation unit's anonymous namespace, set when that unit constructs the lambda, while the
# code that reads them is inline and the linker keeps one unit's copy of it. A program whose units
# share one of these instantiations may read the pointers of a unit that never constructed the
# lambda: a call through a null pointer, in host code, only in some test orders (nvcc's
# __nv_hdl_wrapper_t; reported upstream for CUDA 11.2 to 12.x and seen here with 13.0).
# Exit status: 0 when no such symbol is defined in more than one object, 1 (listing them) when
# one is, 2 on a usage or nm failure.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 <program> <object>..." >&2; exit 2; }
program=$1
shift
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
for object in "$@"; do
  [[ -f $object ]] || { echo "lambda_sharing: $object: no such object file (build $program first)" >&2; exit 2; }
  # Weak (inline or template) functions whose mangled name involves the wrapper type.
  nm --defined-only -P "$object" | awk -v o="$object" '$2 == "W" && $1 ~ /__nv_hdl_wrapper_t/ { print $1, o }' \
    | sort -u >> "$listing"
done
shared=$(awk '{ units[$1] = units[$1] " " $2; n[$1]++ } END { for (s in n) if (n[s] > 1) print s units[s] }' "$listing")
if [[ -z $shared ]]; then
  echo "lambda_sharing: $program: $# units, no extended __host__ __device__ lambda instantiated in two of them"
  exit 0
fi
count=$(wc -l <<< "$shared")
echo "lambda_sharing: $program: $count functions over extended __host__ __device__ lambdas are defined in more than one" \
     "of its units, which nvcc does not support (see this script's comment); give one of these units a program of" \
     "its own (tests/CMakeLists.txt) or move the shared instantiation into one unit. The first few:" >&2
head -5 <<< "$shared" | while read -r symbol units; do
  echo "  $(c++filt <<< "$symbol" | cut -c1-240)..." >&2
  for u in $units; do echo "      in $(basename "$u")" >&2; done
done
exit 1
