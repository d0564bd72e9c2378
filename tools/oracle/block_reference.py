#!/usr/bin/env python3
"""Pure-Python float64 oracle for the width-4 transformer block (tests/block/block.hpp).

Writes tests/golden/block4.json: the input, every parameter, and every intermediate of one GPT-2
block (LayerNorm, causal 2-head self-attention, residual, LayerNorm, GELU-tanh MLP, residual).
No numpy, no PyTorch: plain loops over Python floats (IEEE double) with the math module, written
from the textbook definitions independently of the C++ code, so it can run anywhere python3 does.
tools/oracle/block.py computes the same block with PyTorch (float64) and writes the same file.

    python3 tools/oracle/block_reference.py [--out tests/golden/block4.json]
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import block_values as bv  # noqa: E402

T, C, NH, HS, EPS = bv.T, bv.C, bv.NH, bv.HS, bv.LAYER_NORM_EPS


def matrix(flat, rows, cols):
    assert len(flat) == rows * cols
    return [flat[r * cols:(r + 1) * cols] for r in range(rows)]


def flatten(m):
    return [v for row in m for v in row]


def layer_norm(x, gamma, beta):
    out = []
    for row in x:
        mean = sum(row) / len(row)
        var = sum((v - mean) ** 2 for v in row) / len(row)  # biased, as torch.nn.LayerNorm
        inv = 1.0 / math.sqrt(var + EPS)
        out.append([(v - mean) * inv * g + b for v, g, b in zip(row, gamma, beta)])
    return out


def linear(x, w, b):
    """x (rows, in) . w (in, out) + b: Conv1D layout."""
    n_out = len(b)
    return [[sum(row[k] * w[k][o] for k in range(len(row))) + b[o] for o in range(n_out)] for row in x]


def gelu_tanh(v):
    return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def causal_attention(qkv):
    """Returns (att (NH, T, T) with zeros above the diagonal, y (T, C))."""
    att = [[[0.0] * T for _ in range(T)] for _ in range(NH)]
    y = [[0.0] * C for _ in range(T)]
    for h in range(NH):
        lo = h * HS
        q = [row[lo:lo + HS] for row in qkv]
        k = [row[C + lo:C + lo + HS] for row in qkv]
        v = [row[2 * C + lo:2 * C + lo + HS] for row in qkv]
        for t in range(T):
            scores = [sum(a * b for a, b in zip(q[t], k[s])) / math.sqrt(HS) for s in range(t + 1)]
            top = max(scores)
            weights = [math.exp(s - top) for s in scores]
            total = sum(weights)
            for s in range(t + 1):
                att[h][t][s] = weights[s] / total
            for d in range(HS):
                y[t][lo + d] = sum(att[h][t][s] * v[s][d] for s in range(t + 1))
    return att, y


def block_forward(values):
    p = values
    x = matrix(p["x"], T, C)
    ln1 = layer_norm(x, p["ln_1.weight"], p["ln_1.bias"])
    qkv = linear(ln1, matrix(p["attn.c_attn.weight"], C, 3 * C), p["attn.c_attn.bias"])
    att, attn_y = causal_attention(qkv)
    proj = linear(attn_y, matrix(p["attn.c_proj.weight"], C, C), p["attn.c_proj.bias"])
    x1 = [[a + b for a, b in zip(r, s)] for r, s in zip(x, proj)]
    ln2 = layer_norm(x1, p["ln_2.weight"], p["ln_2.bias"])
    fc = linear(ln2, matrix(p["mlp.c_fc.weight"], C, 4 * C), p["mlp.c_fc.bias"])
    act = [[gelu_tanh(v) for v in row] for row in fc]
    mlp = linear(act, matrix(p["mlp.c_proj.weight"], 4 * C, C), p["mlp.c_proj.bias"])
    out = [[a + b for a, b in zip(r, s)] for r, s in zip(x1, mlp)]
    return {
        "ln1": flatten(ln1), "qkv": flatten(qkv), "att": [v for head in att for v in flatten(head)],
        "attn_y": flatten(attn_y), "proj": flatten(proj), "x1": flatten(x1), "ln2": flatten(ln2),
        "fc": flatten(fc), "gelu": flatten(act), "mlp": flatten(mlp), "out": flatten(out),
    }


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(root, "tests", "golden", "block4.json"))
    args = parser.parse_args()

    values = bv.host_values()
    outputs = block_forward(values)
    doc = bv.golden_document(
        "tools/oracle/block_reference.py (pure Python float64, math module)", values, outputs,
        "Width-4 GPT-2 block (T=5, C=4, 2 heads); every value is an IEEE double written with repr "
        "(shortest round-trip form). Compared by tests/block/block_test.cpp to 1e-12 relative.")
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}: out[0..3] = {outputs['out'][:4]}")


if __name__ == "__main__":
    main()
