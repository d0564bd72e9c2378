#!/usr/bin/env python3
"""Oracle for Osprey's GPT-2 forward pass and greedy generation: transformers' GPT2LMHeadModel
in float64 on the `tiny` preset, loading the model directory Osprey itself wrote.

What it does:
  1. `osprey-gpt2 init --preset tiny --seed SEED --dtype f64 --out DIR` (or uses --model-dir):
     Osprey's own initialisation saved as a Hugging Face directory, weights in float64, so the
     oracle computes on exactly the numbers Osprey computes on.
  2. GPT2LMHeadModel.from_pretrained(DIR, torch_dtype=torch.float64) (eager attention, eval
     mode, no dropout) and GPT2Tokenizer.from_pretrained(DIR) (the vocab.json/merges.txt copied
     into DIR) -- this also checks that transformers loads Osprey's directory unchanged.
  3. The prompt's token ids, the last position's logits (float64), and a greedy continuation
     of TOKENS tokens, each token the argmax (first maximum) of a full recomputation over the
     whole sequence (no KV cache, so the oracle does not share Osprey's cache logic).

With --wpe-scale S the position embeddings are multiplied by S after loading (one float64
multiplication each, as Osprey's tests do): the initialisation's continuations repeat one token,
which would not notice a decoding bug that keeps the argmax; S = 200 gives the "lively" model
whose 20 tokens vary (tests/golden/gpt2_tiny_lively.json, tests/gpt2/oracle_test.cpp).

What it writes (tests/golden/gpt2_tiny_logits.json):
  {"script", "command", "torch", "transformers", "preset": "tiny", "seed", "dtype": "float64",
   "wpe_scale" (when not 1), "config": {...}, "prompt", "prompt_ids", "logits": [V floats], "continuation_ids": [TOKENS],
   "parameter_sums": {name: float64 sum of the tensor}}
Floats are written with Python's repr (shortest round-trip form), so they parse back exactly.
tests/gpt2/oracle_test.cpp compares Osprey's logits to these within 1e-10 relative and the
continuation exactly; parameter_sums tell "Osprey's initialisation changed since the golden
was made" apart from "the forward pass is wrong".

Run from the repository root, after building (needs torch and transformers; CPU is enough):
    python3 tools/oracle/gpt2_tiny.py --osprey build/gpt2/osprey-gpt2
    python3 tools/oracle/gpt2_tiny.py --osprey build/gpt2/osprey-gpt2 --wpe-scale 200 \
        --out tests/golden/gpt2_tiny_lively.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = "tools/oracle/gpt2_tiny.py"


def load_model(model_dir, torch, GPT2LMHeadModel):
    kwargs = {"torch_dtype": torch.float64}
    try:
        model = GPT2LMHeadModel.from_pretrained(model_dir, attn_implementation="eager", **kwargs)
    except TypeError:  # transformers older than 4.36 has only the eager implementation
        model = GPT2LMHeadModel.from_pretrained(model_dir, **kwargs)
    model.eval()
    for name, p in model.named_parameters():
        if p.dtype != torch.float64:
            sys.exit(f"{SCRIPT}: parameter {name} loaded as {p.dtype}, expected float64")
    # Tied head: the output projection must be the token embedding itself.
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        sys.exit(f"{SCRIPT}: lm_head is not tied to wte")
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--osprey", default="build/gpt2/osprey-gpt2", help="osprey-gpt2 binary")
    parser.add_argument("--model-dir", help="an existing directory written by `osprey-gpt2 init "
                        "--preset tiny --dtype f64` (default: write one to a temporary folder)")
    parser.add_argument("--seed", type=int, default=1337, help="Osprey's initialisation seed")
    parser.add_argument("--prompt", default="The capital of France is")
    parser.add_argument("--tokens", type=int, default=20, help="greedy tokens to generate")
    parser.add_argument("--wpe-scale", type=float, default=1.0,
                        help="multiply the position embeddings by this after loading (200: the lively model)")
    parser.add_argument("--out", default="tests/golden/gpt2_tiny_logits.json")
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import GPT2LMHeadModel, GPT2Tokenizer

    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir
        if model_dir is None:
            model_dir = os.path.join(tmp, "tiny")
            subprocess.run([args.osprey, "init", "--preset", "tiny", "--seed", str(args.seed),
                            "--dtype", "f64", "--out", model_dir], check=True)
        model = load_model(model_dir, torch, GPT2LMHeadModel)
        if args.wpe_scale != 1.0:
            model.transformer.wpe.weight.mul_(args.wpe_scale)
        tokenizer = GPT2Tokenizer.from_pretrained(model_dir)
        config = model.config

        prompt_ids = tokenizer.encode(args.prompt)
        if not prompt_ids:
            sys.exit(f"{SCRIPT}: the prompt encodes to no tokens")
        if len(prompt_ids) + args.tokens > config.n_positions:
            sys.exit(f"{SCRIPT}: prompt + tokens exceed the context of {config.n_positions}")

        logits = model(torch.tensor([prompt_ids], dtype=torch.long)).logits[0, -1]
        assert logits.dtype == torch.float64 and logits.shape == (config.vocab_size,)

        sequence = list(prompt_ids)
        continuation = []
        for _ in range(args.tokens):
            last = model(torch.tensor([sequence], dtype=torch.long)).logits[0, -1]
            token = int(torch.argmax(last))  # the first maximal index
            continuation.append(token)
            sequence.append(token)

        parameter_sums = {}
        for name, p in model.transformer.named_parameters():
            parameter_sums[name] = float(p.sum())

    golden = {
        "script": SCRIPT,
        "command": " ".join([SCRIPT] + sys.argv[1:]),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "preset": "tiny",
        "seed": args.seed,
        "dtype": "float64",
        "config": {"n_positions": config.n_positions, "vocab_size": config.vocab_size,
                   "n_layer": config.n_layer, "n_head": config.n_head, "n_embd": config.n_embd},
        "prompt": args.prompt,
        "prompt_ids": prompt_ids,
        "logits": [float(x) for x in logits.tolist()],
        "continuation_ids": continuation,
        "parameter_sums": parameter_sums,
    }
    if args.wpe_scale != 1.0:  # the plain golden keeps its keys
        golden["wpe_scale"] = args.wpe_scale
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    partial = args.out + ".part"
    with open(partial, "w") as f:
        json.dump(golden, f, indent=0)
        f.write("\n")
    os.replace(partial, args.out)
    print(f"{SCRIPT}: wrote {args.out}: {len(golden['logits'])} logits, continuation {continuation}")


if __name__ == "__main__":
    main()
