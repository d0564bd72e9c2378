#!/usr/bin/env python3
"""GPT-2 token ids by OpenAI's own algorithm (gpt-2/src/encoder.py) in Python with the `regex`
module, the engine GPT-2's pattern was written for. Writes tests/golden/tokenizer_reference_ids.json.

    python3 tools/oracle/tokenizer_reference.py      # needs: pip install regex

It covers what the JavaScript oracle (tokenizer_goldens.mjs) cannot: the cases with U+0085 and
U+FEFF, where JavaScript's \\s is not Unicode White_Space. It also re-checks every JavaScript
golden and the tinyshakespeare fingerprint, and fails if any differs.

Note: `regex` ships its own Unicode tables, newer than PCRE2 10.42's (Unicode 14); the cases use
no character assigned after Unicode 14, so both engines classify them alike.
"""
import hashlib
import json
import pathlib
import sys

import regex

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHARED = ROOT.parent / "shared" / "data"
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """Byte -> printable character, as GPT-2 spells its vocabulary."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


class Encoder:
    def __init__(self, vocab_path, merges_path):
        self.encoder = json.loads(vocab_path.read_text(encoding="utf-8"))
        lines = merges_path.read_text(encoding="utf-8").split("\n")[1:-1]
        self.ranks = {tuple(line.split()): i for i, line in enumerate(lines)}
        self.byte_encoder = bytes_to_unicode()
        self.cache = {}

    def bpe(self, token):
        """OpenAI's loop: merge the lowest-ranked adjacent pair everywhere, until none ranks."""
        if token in self.cache:
            return self.cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            first, second = best
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == first and word[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        self.cache[token] = word
        return word

    def encode(self, text):
        ids = []
        for piece in PATTERN.findall(text):
            spelled = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder[t] for t in self.bpe(spelled))
        return ids


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for k in range(4):
            h ^= (i >> (8 * k)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def visible(text):
    """JSON with invisible characters as \\u escapes (as tokenizer_goldens.mjs writes them)."""
    import unicodedata
    return "".join(c if c == " " or unicodedata.category(c)[0] not in "CZ" else f"\\u{ord(c):04x}"
                   for c in text)


def main():
    enc = Encoder(SHARED / "gpt2" / "vocab.json", SHARED / "gpt2" / "merges.txt")
    cases = json.loads((HERE / "tokenizer_cases.json").read_text(encoding="utf-8"))["cases"]
    js = json.loads((ROOT / "tests" / "golden" / "tokenizer_ids.json").read_text(encoding="utf-8"))
    js_ids = {c["name"]: c["ids"] for c in js["cases"]}

    problems = []
    out = []
    for case in cases:
        ids = enc.encode(case["text"])
        if case["name"] in js_ids and js_ids[case["name"]] != ids:
            problems.append(f"{case['name']}: python {ids} != javascript {js_ids[case['name']]}")
        out.append({"name": case["name"], "text": case["text"], "ids": ids})

    corpus = (SHARED / "tinyshakespeare" / "input.txt").read_bytes()
    corpus_ids = enc.encode(corpus.decode("utf-8"))
    expected = js["corpora"][0]
    if (len(corpus_ids), fnv1a64(corpus_ids)) != (expected["tokens"], expected["fnv1a64_ids"]):
        problems.append(f"tinyshakespeare: python {len(corpus_ids)} tokens / {fnv1a64(corpus_ids)}, "
                        f"javascript {expected['tokens']} / {expected['fnv1a64_ids']}")
    if hashlib.sha256(corpus).hexdigest() != expected["sha256"]:
        problems.append("tinyshakespeare: input.txt is not the file the goldens were made from")

    if problems:
        print("tokenizer_reference: the implementations disagree:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1

    lines = ["{",
             ' "about": ' + json.dumps("GPT-2 token ids by OpenAI's encoder.py algorithm with Python's regex "
                                       "module; written by tools/oracle/tokenizer_reference.py (do not edit by "
                                       "hand). Agrees with tokenizer_ids.json on every case both have.") + ",",
             ' "regex_version": ' + json.dumps(regex.__version__) + ",",
             ' "cases": [']
    for i, entry in enumerate(out):
        lines.append("  " + visible(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
                     + ("," if i + 1 < len(out) else ""))
    lines += [" ]", "}"]
    target = ROOT / "tests" / "golden" / "tokenizer_reference_ids.json"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"tokenizer_reference: {len(out)} cases and tinyshakespeare ({len(corpus_ids)} tokens) agree with "
          f"the JavaScript oracle; wrote {target.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
