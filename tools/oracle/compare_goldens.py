#!/usr/bin/env python3
"""Compare a regenerated golden file with the committed one, number by number.

    tools/oracle/compare_goldens.py COMMITTED REGENERATED [--rtol 1e-12] [--floor 1e-3]

JSON goldens (block4.json, gpt2_tiny_logits.json) are walked key by key: every number must
agree within the float64 noise of an independent float64 computation, |a - b| <= rtol *
max(|a|, |b|, floor) (the oracles' own sums run in another order on another machine: BLAS and
thread counts differ, so a few ulps of every value and more of a cancellation residue near zero
are noise; rtol 1e-12 is about 4500 ulps, far below any real change), integers and strings
exactly, except the keys that name the environment (script, command, torch, transformers,
producer, regenerate, note). safetensors goldens (gpt2_train_tiny.safetensors) compare every
tensor the same way, the header's metadata except the torch version exactly. Prints the largest
relative difference found; exit status 1 on any difference beyond the tolerance, a missing or
extra key or tensor, or a shape change.
"""
import argparse
import json
import math
import struct
import sys

ENVIRONMENT_KEYS = {"script", "command", "torch", "transformers", "producer", "regenerate", "note"}


class Comparison:
    def __init__(self, rtol, floor):
        self.rtol, self.floor = rtol, floor
        self.worst, self.worst_at = 0.0, None
        self.problems = []

    def number(self, where, a, b):
        if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, int) and isinstance(b, int):
            if a != b:
                self.problems.append(f"{where}: {a!r} != {b!r}")
            return
        a, b = float(a), float(b)
        if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                self.problems.append(f"{where}: {a!r} != {b!r}")
            return
        scale = max(abs(a), abs(b), self.floor)
        relative = abs(a - b) / scale
        if relative > self.worst:
            self.worst, self.worst_at = relative, f"{where}: {a!r} vs {b!r}"
        if relative > self.rtol:
            self.problems.append(f"{where}: {a!r} vs {b!r} (relative {relative:.3g} > {self.rtol:g})")

    def value(self, where, a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if key in ENVIRONMENT_KEYS:
                    continue
                if key not in a or key not in b:
                    self.problems.append(f"{where}.{key}: only in the {'regenerated' if key in b else 'committed'} file")
                    continue
                self.value(f"{where}.{key}", a[key], b[key])
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                self.problems.append(f"{where}: {len(a)} elements committed, {len(b)} regenerated")
                return
            for i, (x, y) in enumerate(zip(a, b)):
                self.value(f"{where}[{i}]", x, y)
        elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
            self.number(where, a, b)
        elif a != b:
            self.problems.append(f"{where}: {a!r} != {b!r}")


def read_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F64":
            raise SystemExit(f"{path}: tensor {name} is {info['dtype']}, the goldens hold F64")
        start, end = info["data_offsets"]
        count = (end - start) // 8
        tensors[name] = (info["shape"], struct.unpack(f"<{count}d", data[start:end]))
    return header.get("__metadata__", {}), tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("committed")
    parser.add_argument("regenerated")
    parser.add_argument("--rtol", type=float, default=1e-12)
    parser.add_argument("--floor", type=float, default=1e-3)
    args = parser.parse_args()
    c = Comparison(args.rtol, args.floor)
    if args.committed.endswith(".safetensors"):
        meta_a, tensors_a = read_safetensors(args.committed)
        meta_b, tensors_b = read_safetensors(args.regenerated)
        c.value("metadata", meta_a, meta_b)
        for name in sorted(set(tensors_a) | set(tensors_b)):
            if name not in tensors_a or name not in tensors_b:
                c.problems.append(f"{name}: only in the {'regenerated' if name in tensors_b else 'committed'} file")
                continue
            (shape_a, a), (shape_b, b) = tensors_a[name], tensors_b[name]
            if shape_a != shape_b:
                c.problems.append(f"{name}: shape {shape_a} committed, {shape_b} regenerated")
                continue
            for i, (x, y) in enumerate(zip(a, b)):
                c.number(f"{name}[{i}]", x, y)
    else:
        with open(args.committed) as f:
            a = json.load(f)
        with open(args.regenerated) as f:
            b = json.load(f)
        c.value("$", a, b)
    print(f"largest relative difference {c.worst:.3g}" + (f" at {c.worst_at}" if c.worst_at else ""))
    for problem in c.problems[:20]:
        print("DIFFERENT:", problem)
    if len(c.problems) > 20:
        print(f"... and {len(c.problems) - 20} more")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
