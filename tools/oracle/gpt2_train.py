#!/usr/bin/env python3
"""Oracle for Osprey's GPT-2 training step: PyTorch float64 autograd on a tiny GPT-2.

What it writes (tests/golden/gpt2_train_tiny.safetensors, all tensors F64):

  tokens            (B, T+1)  token ids; row b's inputs are [:, :T], its targets [:, 1:]
  param.<name>      the initial weights (Hugging Face GPT-2 names without `transformer.`,
                    Conv1D layout (in, out), e.g. param.h.0.attn.c_attn.weight (C, 3C))
  grad.<name>       d(loss)/d(param), loss = mean cross-entropy over the B*T positions
  step1.<name>      the parameters after one torch.optim.AdamW step
  loss              (1)       the loss at the initial weights
  losses            (steps)   the loss before each of `steps` AdamW steps on the same batch
                              (losses[0] == loss)

and in the header's __metadata__: the script's name, the command line, the config (n_layer,
n_head, n_embd, n_positions, vocab_size), B, T, the AdamW hyper-parameters (as Python reprs,
which round-trip exactly through strtod), the seed and the torch version.

The weights and tokens are drawn here (torch.Generator, float64), not taken from Osprey, so the
golden file depends on nothing Osprey computes: tests/train/oracle_test.cpp loads param.* and
tokens into Osprey, runs its own step and compares every number.

Why a reduced vocabulary by default: the `tiny` preset (L=2, NH=2, C=64, maxT=128) has the full
vocabulary V=50257, so every gradient of wte alone would be 25 MB of float64. The code paths do
not depend on V, so the default golden keeps tiny's shape with V=512 (about 3 MB in all);
`--vocab 50257` writes the full-vocabulary golden for a one-off check.

The model is written out explicitly (no transformers dependency): learned positions, pre-LN
(eps 1e-5), causal multi-head attention with 1/sqrt(hs) scaling, GELU in its tanh form, tied
input/output embedding, no dropout. AdamW: torch.optim.AdamW, weight decay on 2-D tensors only
(two parameter groups), foreach=False so the update is the plain per-tensor formula.

Run (needs torch; CPU is enough, float64 throughout; on Debian `apt-get install python3-torch`
gives torch 1.13 for /usr/bin/python3). The committed golden file names the torch that wrote it
in its header's metadata (`torch`); scripts/gpu-check.d/05-oracles.sh regenerates it there and
compares it with the committed one (tools/oracle/compare_goldens.py):
    python3 tools/oracle/gpt2_train.py --out tests/golden/gpt2_train_tiny.safetensors
"""

import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

SCRIPT = "tools/oracle/gpt2_train.py"


def parameter_specs(L, C, V, maxT):
    """Names and shapes in Osprey's fixed order (gpt2/model/weights.hpp)."""
    specs = [("wte.weight", (V, C)), ("wpe.weight", (maxT, C))]
    for l in range(L):
        h = f"h.{l}."
        specs += [
            (h + "ln_1.weight", (C,)),
            (h + "ln_1.bias", (C,)),
            (h + "attn.c_attn.weight", (C, 3 * C)),
            (h + "attn.c_attn.bias", (3 * C,)),
            (h + "attn.c_proj.weight", (C, C)),
            (h + "attn.c_proj.bias", (C,)),
            (h + "ln_2.weight", (C,)),
            (h + "ln_2.bias", (C,)),
            (h + "mlp.c_fc.weight", (C, 4 * C)),
            (h + "mlp.c_fc.bias", (4 * C,)),
            (h + "mlp.c_proj.weight", (4 * C, C)),
            (h + "mlp.c_proj.bias", (C,)),
        ]
    specs += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return specs


def initial_params(specs, L, gen):
    """GPT-2-like scales, but every bias and LayerNorm parameter non-trivial, so that a gradient
    which is wrong only for non-zero biases or non-unit gains cannot hide."""
    params = {}
    for name, shape in specs:
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith(".bias"):
            t = 0.02 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("c_proj.weight"):
            t = (0.02 / math.sqrt(2 * L)) * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = 0.02 * torch.randn(shape, generator=gen, dtype=torch.float64)
        params[name] = t
    return params


def gpt2_loss(p, tokens, L, NH, C):
    """Mean cross-entropy of next-token prediction for tokens (B, T+1)."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    B, T = inputs.shape
    hs = C // NH
    x = p["wte.weight"][inputs] + p["wpe.weight"][:T]  # (B, T, C)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        q = lambda s: p[f"h.{l}.{s}"]
        h = F.layer_norm(x, (C,), q("ln_1.weight"), q("ln_1.bias"), eps=1e-5)
        qkv = h @ q("attn.c_attn.weight") + q("attn.c_attn.bias")  # (B, T, 3C)
        qq, kk, vv = qkv.split(C, dim=2)
        qq = qq.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        kk = kk.view(B, T, NH, hs).transpose(1, 2)
        vv = vv.view(B, T, NH, hs).transpose(1, 2)
        att = (qq @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ vv).transpose(1, 2).contiguous().view(B, T, C)
        y = y @ q("attn.c_proj.weight") + q("attn.c_proj.bias")
        x = x + y
        h = F.layer_norm(x, (C,), q("ln_2.weight"), q("ln_2.bias"), eps=1e-5)
        h = h @ q("mlp.c_fc.weight") + q("mlp.c_fc.bias")
        h = F.gelu(h, approximate="tanh")
        h = h @ q("mlp.c_proj.weight") + q("mlp.c_proj.bias")
        x = x + h
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = x @ p["wte.weight"].t()  # tied lm head, (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def write_safetensors(path, tensors, metadata):
    """The safetensors layout: 8-byte little-endian header length, JSON header, data; F64."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float64).contiguous().cpu()
        raw = struct.pack(f"<{t.numel()}d", *t.reshape(-1).tolist())
        header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/gpt2_train_tiny.safetensors")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()

    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True)
    L, NH, C, maxT, V = args.layers, args.heads, args.channels, args.context, args.vocab
    B, T = args.batch, args.seq
    if C % NH != 0 or T > maxT:
        sys.exit("gpt2_train.py: need channels % heads == 0 and seq <= context")

    gen = torch.Generator().manual_seed(args.seed)
    specs = parameter_specs(L, C, V, maxT)
    init = initial_params(specs, L, gen)
    tokens = torch.randint(0, V, (B, T + 1), generator=gen, dtype=torch.int64)

    params = {n: t.clone().requires_grad_(True) for n, t in init.items()}
    matrices = [params[n] for n, s in specs if len(s) == 2]
    vectors = [params[n] for n, s in specs if len(s) != 2]
    opt = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": args.weight_decay}, {"params": vectors, "weight_decay": 0.0}],
        lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps, foreach=False)

    out = {"tokens": tokens.to(torch.float64)}
    for n, t in init.items():
        out["param." + n] = t
    losses = []
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = gpt2_loss(params, tokens, L, NH, C)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            out["loss"] = loss.detach().reshape(1)
            for n, t in params.items():
                out["grad." + n] = t.grad.detach().clone()
        opt.step()
        if step == 0:
            for n, t in params.items():
                out["step1." + n] = t.detach().clone()
    out["losses"] = torch.tensor(losses, dtype=torch.float64)

    metadata = {
        "script": SCRIPT,
        "command": " ".join(["python3", SCRIPT] + sys.argv[1:]),
        "n_layer": str(L), "n_head": str(NH), "n_embd": str(C), "n_positions": str(maxT),
        "vocab_size": str(V), "batch": str(B), "seq": str(T), "steps": str(args.steps),
        "lr": repr(args.lr), "beta1": repr(args.beta1), "beta2": repr(args.beta2),
        "eps": repr(args.eps), "weight_decay": repr(args.weight_decay),
        "seed": str(args.seed), "torch": torch.__version__,
    }
    write_safetensors(args.out, out, metadata)
    print(f"{SCRIPT}: wrote {args.out}: loss {losses[0]!r}, last of {args.steps} losses {losses[-1]!r}")


if __name__ == "__main__":
    main()
