#!/usr/bin/env python3
"""One step's device time by kind of launch, from two OSPREY_CUDA_KERNEL_TIMES files.

    kernel_clock_steps.py LONGER SHORTER [--per N] [--top N]

LONGER and SHORTER are the files of two runs that differ by N steps (`train --steps 5` and
`--steps 2`, N = 3; or `generate --tokens 40` and `--tokens 10`, N = 30), so their difference
divided by N is one step after the first, as it runs (see include/osprey/gpu/cuda/kernel_clock.hpp).
Averaging over several steps keeps one step's outliers (a product whose algorithm is timed in the
longer run only) from showing as a shape's cost. Prints milliseconds, launches and share per
label, then the step's busy total and how long the device waited for the host.
"""
import argparse
import re
import sys


def read(path):
    rows, busy, span = {}, None, None
    with open(path) as f:
        for number, line in enumerate(f):
            ms, count, label = line.rstrip("\n").split("\t", 2)
            if number == 0:
                busy = float(ms)
                found = re.search(r"last: ([0-9.]+) ms", label)
                span = float(found.group(1)) if found else None
                continue
            rows[label] = (float(ms), int(count))
    if busy is None:
        sys.exit(f"kernel_clock_steps: {path} is empty")
    return rows, busy, span


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("longer")
    parser.add_argument("shorter")
    parser.add_argument("--per", type=int, default=1, help="how many steps the two runs differ by")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    longer, busy_l, span_l = read(args.longer)
    shorter, busy_s, span_s = read(args.shorter)
    step = []
    for label, (ms, count) in longer.items():
        ms_s, count_s = shorter.get(label, (0.0, 0))
        if count - count_s > 0 or abs(ms - ms_s) > 1e-6:
            step.append(((ms - ms_s) / args.per, (count - count_s) / args.per, label))
    step.sort(reverse=True)
    busy = (busy_l - busy_s) / args.per
    print(f"{'share':>6} {'ms':>10} {'launches':>8} {'us each':>9}  label")
    for ms, count, label in step[: args.top]:
        each = 1000 * ms / count if count else 0.0
        print(f"{100 * ms / busy:5.1f}% {ms:10.3f} {count:8.1f} {each:9.2f}  {label[:150]}")
    print(f"{'100%':>6} {busy:10.3f} {sum(c for _, c, _ in step):8.1f}            busy, one step")
    if span_l is not None and span_s is not None:
        span = (span_l - span_s) / args.per
        print(f"step span {span:.3f} ms: the device waited for the host {span - busy:.3f} ms of it")


if __name__ == "__main__":
    main()
