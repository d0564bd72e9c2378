#!/usr/bin/env python3
"""Sum Nsight Compute's per-kernel durations by kernel, from `ncu --csv --metrics gpu__time_duration.sum`.

    ncu --csv --metrics gpu__time_duration.sum ... > run.csv
    tools/profile/kernel_times.py run.csv [--top 25] [--minus shorter-run.csv]

With --minus, the second run's totals are taken from the first's, kernel by kernel: profile
`train --steps 2` and `--steps 1` and the difference is one steady step, without the first
step's one-time work (algorithm choice and checks).

Prints one line per kernel (template arguments and lambda types shortened), its launch count,
total and mean time, and its share of all kernel time, largest first. Used by
scripts/profile-cuda.sh to say where a decoded token's or a training step's GPU time goes.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict


def short_name(name: str) -> str:
    # Lambda closure types and long template arguments say little; keep the kernel and the
    # first level of its template arguments, cut to a readable width.
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    name = re.sub(r"osprey::", "", name)
    name = re.sub(r"__nv_dl_wrapper_t<.*", "<lambda>", name)
    name = re.sub(r"\(.*", "", name)
    return name[:110]


def read_times(path: str):
    total = defaultdict(float)
    count = defaultdict(int)
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(unit, 1e-3)
        key = short_name(row["Kernel Name"])
        total[key] += value * scale
        count[key] += 1
    return total, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--minus", help="a shorter run's csv whose kernels are subtracted")
    args = parser.parse_args()
    total, count = read_times(args.csv)
    if args.minus:
        less_total, less_count = read_times(args.minus)
        for key in list(total):
            total[key] -= less_total.get(key, 0.0)
            count[key] -= less_count.get(key, 0)
            if count[key] <= 0:
                del total[key], count[key]
    if not total:
        print("kernel_times: no gpu__time_duration.sum rows in", args.csv, file=sys.stderr)
        return 1
    grand = sum(total.values())
    print(f"{'share':>6} {'total us':>11} {'launches':>8} {'mean us':>9}  kernel")
    for key, us in sorted(total.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{100 * us / grand:5.1f}% {us:11.1f} {count[key]:8d} {us / count[key]:9.2f}  {key}")
    print(f"{'100%':>6} {grand:11.1f} {sum(count.values()):8d}  all kernels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
