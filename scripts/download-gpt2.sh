#!/usr/bin/env bash
# Downloads a real GPT-2 checkpoint from the Hugging Face hub, openai-community/MODEL (MODEL: gpt2,
# the 124M default, or gpt2-medium, gpt2-large, gpt2-xl; second argument or $OSPREY_GPT2_MODEL):
# config.json, model.safetensors (~548 MB for gpt2, 6.4 GB for gpt2-xl), vocab.json, merges.txt,
# into a folder (default ~/.cache/osprey/MODEL; first argument or $OSPREY_GPT2_DIR to change it),
# which can then be given as `osprey-gpt2 --model DIR` or as $OSPREY_GPT2.
#
#   scripts/download-gpt2.sh [DIR] [MODEL]
#
# Needs network access to huggingface.co. Offline it stops within seconds with a clear message
# and exit status 1; nothing half-downloaded is left under the final names (each file is
# written to NAME.part and renamed when complete). Files already present are kept.
set -euo pipefail

readonly MODEL="${2:-${OSPREY_GPT2_MODEL:-gpt2}}"
case $MODEL in
  gpt2) readonly SIZE=124M ;;
  gpt2-medium) readonly SIZE=350M ;;
  gpt2-large) readonly SIZE=774M ;;
  gpt2-xl) readonly SIZE=1558M ;;
  *) echo "download-gpt2: unknown model \`$MODEL\`: choose gpt2, gpt2-medium, gpt2-large or gpt2-xl" >&2; exit 1 ;;
esac
readonly REPO="openai-community/$MODEL"
readonly BASE_URL="${OSPREY_HF_ENDPOINT:-https://huggingface.co}/$REPO/resolve/main"
readonly FILES=(config.json vocab.json merges.txt model.safetensors)
# The tokenizer files are OpenAI's, whose hashes are known (see scripts/fetch-tokenizer.sh).
readonly VOCAB_SHA256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
readonly MERGES_SHA256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

dest="${1:-${OSPREY_GPT2_DIR:-$HOME/.cache/osprey/$MODEL}}"

fail() {
  echo "download-gpt2: $*" >&2
  exit 1
}

command -v curl >/dev/null 2>&1 || fail "curl is not installed (Debian: apt-get install curl)."

# Reachability first, with a short connect timeout, so being offline fails fast and clearly.
errors="$(mktemp)"
trap 'rm -f "$errors"' EXIT
if ! curl --silent --show-error --fail --location --head --connect-timeout 10 --max-time 30 \
        --output /dev/null "$BASE_URL/config.json" 2>"$errors"; then
  reason="$(tr '\n' ' ' <"$errors" | sed 's/ *$//')"
  fail "cannot reach the Hugging Face hub for $REPO (${reason:-no answer}). \
This needs network access; offline, osprey-gpt2 runs without a checkpoint (random \
initialisation) and takes its tokenizer from scripts/fetch-tokenizer.sh."
fi

mkdir -p "$dest" || fail "cannot create $dest"
for file in "${FILES[@]}"; do
  if [[ -s "$dest/$file" ]]; then
    echo "download-gpt2: $dest/$file already present"
    continue
  fi
  echo "download-gpt2: fetching $file ..."
  if ! curl --fail --location --connect-timeout 10 --retry 2 --progress-bar \
          --output "$dest/$file.part" "$BASE_URL/$file"; then
    rm -f "$dest/$file.part"
    fail "downloading $BASE_URL/$file failed"
  fi
  mv "$dest/$file.part" "$dest/$file"
done

check() {
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  [[ "$got" == "$2" ]] || fail "$1 has sha256 $got, expected $2 (remove it and run again)"
}
check "$dest/vocab.json" "$VOCAB_SHA256"
check "$dest/merges.txt" "$MERGES_SHA256"

echo "download-gpt2: GPT-2 ($SIZE, $REPO) is in $dest"
