#!/usr/bin/env python3
"""PyTorch float64 oracle for the width-4 transformer block (tests/block/block.hpp).

Computes one GPT-2 block with PyTorch's own layers (F.layer_norm, explicit causal softmax checked
against F.scaled_dot_product_attention, F.gelu(approximate="tanh")) in float64 on the CPU, from
the same deterministic input and parameters as the C++ test (block_values.py), and writes
tests/golden/block4.json in the same format as block_reference.py.

    python3 tools/oracle/block.py            # write tests/golden/block4.json
    python3 tools/oracle/block.py --check    # compare with the existing golden file, write nothing

--check exits non-zero if any element differs from the golden file by more than 1e-12 relative
(the tolerance tests/block/block_test.cpp applies), so it confirms a golden file made by the
pure-Python oracle. Needs torch (any 2.x).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import block_values as bv  # noqa: E402

T, C, NH, HS, EPS = bv.T, bv.C, bv.NH, bv.HS, bv.LAYER_NORM_EPS
RTOL, TINY = 1e-12, 1e-3  # the C++ test's tolerance: |a - b| <= RTOL * max(|b|, TINY)


def block_forward(values):
    def tensor(name, *shape):
        return torch.tensor(values[name], dtype=torch.float64).reshape(*shape)

    x = tensor("x", T, C)
    ln1 = F.layer_norm(x, (C,), tensor("ln_1.weight", C), tensor("ln_1.bias", C), eps=EPS)
    # Hugging Face Conv1D: weight (in, out), y = x @ W + b.
    qkv = ln1 @ tensor("attn.c_attn.weight", C, 3 * C) + tensor("attn.c_attn.bias", 3 * C)
    q, k, v = (part.reshape(T, NH, HS).transpose(0, 1) for part in qkv.split(C, dim=1))  # (NH, T, HS)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)  # 0 above the diagonal
    y = att @ v
    y_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if not torch.allclose(y, y_sdpa, rtol=1e-13, atol=1e-15):
        sys.exit(f"block.py: explicit attention and F.scaled_dot_product_attention disagree: "
                 f"max |diff| = {(y - y_sdpa).abs().max().item()}")
    attn_y = y.transpose(0, 1).reshape(T, C)
    proj = attn_y @ tensor("attn.c_proj.weight", C, C) + tensor("attn.c_proj.bias", C)
    x1 = x + proj
    ln2 = F.layer_norm(x1, (C,), tensor("ln_2.weight", C), tensor("ln_2.bias", C), eps=EPS)
    fc = ln2 @ tensor("mlp.c_fc.weight", C, 4 * C) + tensor("mlp.c_fc.bias", 4 * C)
    act = F.gelu(fc, approximate="tanh")
    mlp = act @ tensor("mlp.c_proj.weight", 4 * C, C) + tensor("mlp.c_proj.bias", C)
    out = x1 + mlp
    results = {"ln1": ln1, "qkv": qkv, "att": att, "attn_y": attn_y, "proj": proj, "x1": x1,
               "ln2": ln2, "fc": fc, "gelu": act, "mlp": mlp, "out": out}
    for name, shape in bv.OUTPUT_SHAPES:
        assert tuple(results[name].shape) == shape, (name, results[name].shape, shape)
    return {name: [float(v) for v in t.reshape(-1).tolist()] for name, t in results.items()}


def check(golden_path, outputs):
    with open(golden_path) as f:
        golden = json.load(f)
    worst, failures = 0.0, 0
    for name, _ in bv.OUTPUT_SHAPES:
        for i, (got, want) in enumerate(zip(outputs[name], golden["outputs"][name])):
            err = abs(got - want) / max(abs(want), TINY)
            worst = max(worst, err)
            if err > RTOL:
                failures += 1
                print(f"  {name}[{i}]: torch {got!r} vs golden {want!r} (relative {err:.3g})")
    print(f"{golden_path} ({golden['producer']}): max relative difference to PyTorch {worst:.3g}")
    return failures == 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(root, "tests", "golden", "block4.json"))
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = parser.parse_args()

    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True)
    values = bv.host_values()
    outputs = block_forward(values)
    if args.check:
        sys.exit(0 if check(args.out, outputs) else 1)

    doc = bv.golden_document(
        f"tools/oracle/block.py (PyTorch {torch.__version__}, float64, CPU)", values, outputs,
        "Width-4 GPT-2 block (T=5, C=4, 2 heads); every value is an IEEE double written with repr "
        "(shortest round-trip form). Compared by tests/block/block_test.cpp to 1e-12 relative.")
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: out[0..3] = {outputs['out'][:4]}")


if __name__ == "__main__":
    main()
