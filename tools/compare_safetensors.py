#!/usr/bin/env python3
"""Compare two safetensors files tensor by tensor, on their bytes (no dependencies).

    tools/compare_safetensors.py A.safetensors B.safetensors

Prints "same" and exits 0 when both hold the same tensor names, dtypes, shapes and bytes (so
+0.0 and -0.0 differ); otherwise prints the first differences and exits 1. For fp32/fp64 tensors
that differ it also prints the largest absolute difference, to tell a tolerance gap from a bug.
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def largest_gap(dtype, x, y):
    fmt = {"F64": "d", "F32": "f"}.get(dtype)
    if not fmt:
        return None
    size = struct.calcsize(fmt)
    a = struct.unpack(f"<{len(x) // size}{fmt}", x)
    b = struct.unpack(f"<{len(y) // size}{fmt}", y)
    return max(abs(p - q) for p, q in zip(a, b))


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    problems = []
    if sorted(a) != sorted(b):
        problems.append(f"tensor names differ: {sorted(set(a) ^ set(b))[:5]}")
    for name in sorted(set(a) & set(b)):
        (da, sa, xa), (db, sb, xb) = a[name], b[name]
        if (da, sa) != (db, sb):
            problems.append(f"{name}: {da}{sa} against {db}{sb}")
        elif xa != xb:
            problems.append(f"{name}: bytes differ (largest gap {largest_gap(da, xa, xb)})")
    if problems:
        print(f"{len(problems)} differences; first: " + "; ".join(problems[:3]))
        return 1
    print(f"same ({len(a)} tensors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
