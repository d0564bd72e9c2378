#!/usr/bin/env python3
"""Reads a block trace (osprey/gpu/cuda/kernels/block_trace.hpp) of replayed exact decoding and
prints, for the tokens it holds whole, each launch of a token in order: when its blocks passed their
wait for the kernels before, reached each phase and ended, as medians over the tokens.

    cmake -B build-trace -DOSPREY_BLOCK_TRACE=ON ... && cmake --build build-trace --target osprey-gpt2
    OSPREY_BLOCK_TRACE=trace.bin build-trace/gpt2/osprey-gpt2 generate ... --backend gpu --device cuda
    tools/profile/block_trace.py trace.bin [--tokens 8]

Times are %globaltimer nanoseconds from the token's start (the previous token's choice ending);
the phases' own lengths come from clock64 on the block's multiprocessor, at the clock the trace's
times and cycles give. `early` counts a launch's blocks that entered before the launch before it had
ended (its last block), `lead` how long before (their median); `gap` is from that end to the first
wait passed. Marks (a row product's): 0 entry, 1 past its wait, 2 row and first slice
in, 3 prologue's chains and operand built, 4 chains done, 5 stored. `prol_max` is a launch's
slowest block's prologue (a launch ends with its slowest block).
"""
import argparse
import statistics
import struct
import sys
from collections import defaultdict

RECORD = struct.Struct("<Q4I6Q6q")
KINDS = {1: "row", 2: "attention", 3: "normalise", 4: "bounds", 5: "choice"}


def read(path):
    data = open(path, "rb").read()
    out = []
    for off in range(0, len(data) - RECORD.size + 1, RECORD.size):
        tag, kind, block, sm, grid, *rest = RECORD.unpack_from(data, off)
        if kind == 0:
            continue
        out.append(dict(tag=tag, kind=kind, block=block, sm=sm, grid=grid, time=rest[:6], cycles=rest[6:]))
    return out


def med(values):
    return statistics.median(values) if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--tokens", type=int, default=8, help="the last N whole tokens")
    args = ap.parse_args()
    recs = read(args.trace)
    if not recs:
        sys.exit("block_trace: no records")
    # The clock: cycles against nanoseconds over every block's first to last mark.
    ratios = [(r["cycles"][5] - r["cycles"][0]) / (r["time"][5] - r["time"][0])
              for r in recs if r["time"][5] > r["time"][0] + 2000 and r["time"][0] and r["cycles"][5]]
    ghz = med(ratios)
    steps = sorted({b - a for r in recs for a, b in zip(r["time"], r["time"][1:]) if a and b > a})
    print(f"records {len(recs)}; clock {ghz:.3f} GHz (cycles per ns, median of {len(ratios)} blocks); "
          f"smallest timer step {steps[0] if steps else 'n/a'} ns")
    choices = sorted(r["time"][5] for r in recs if r["kind"] == 5)
    if len(choices) < 3:
        sys.exit("block_trace: fewer than two whole tokens")
    bounds = list(zip(choices[:-1], choices[1:]))[-args.tokens:]
    per_token = []
    for start, end in bounds:
        launches = defaultdict(list)
        for r in recs:
            at = r["time"][1] or r["time"][5]
            if start < at <= end:
                launches[(r["kind"], r["tag"])].append(r)
        order = sorted(launches.items(), key=lambda kv: min(x["time"][1] or x["time"][0] for x in kv[1]))
        per_token.append((start, end, order))
    n_launch = min(len(o) for _, _, o in per_token)
    print(f"tokens {len(per_token)}: {', '.join(f'{(e - s) / 1000:.1f}' for s, e, _ in per_token)} us; "
          f"launches a token {sorted({len(o) for _, _, o in per_token})}")
    rows = defaultdict(lambda: defaultdict(list))  # a launch's place in its token: column -> values
    names = {}
    for start, end, order in per_token:
        prev_end = start
        for i, ((kind, tag), blocks) in enumerate(order[:n_launch]):
            t = lambda m: [b["time"][m] - start for b in blocks if b["time"][m]]
            c = lambda a, z: [(b["cycles"][z] - b["cycles"][a]) / ghz for b in blocks
                              if b["cycles"][a] and b["cycles"][z]]
            row = rows[i]
            names[i] = f"{KINDS.get(kind, kind)} g{blocks[0]['grid']}"
            entry, passed, ends = t(0), t(1), t(5)
            row["entry"].append(min(entry) if entry else float("nan"))
            row["wait0"].append(min(passed) if passed else float("nan"))
            row["wait_med"].append(med(passed))
            row["wait_max"].append(max(passed) if passed else float("nan"))
            before = prev_end - start  # the launch before's end, from the token's start
            row["gap"].append((min(passed) if passed else min(ends)) - before)
            # Blocks resident before the launch before had ended, and how long before (their copies
            # in flight at that end hold back the release of this launch's wait: NOTES, fiftieth run).
            ahead = [before - e for e in entry if e < before]
            row["early"].append(len(ahead))
            row["lead"].append(med(ahead) if ahead else 0.0)
            row["load"].append(med(c(1, 2)))
            prologue = c(2, 3)
            row["prologue"].append(med(prologue))
            row["prol_max"].append(max(prologue, default=float("nan")))
            row["chains"].append(med(c(3, 4)))
            row["store"].append(med(c(4, 5)))
            row["end_med"].append(med(ends))
            row["end_max"].append(max(ends))
            row["blocks"].append(len(blocks))
            prev_end = start + max(ends)
    cols = ["entry", "early", "lead", "wait0", "wait_med", "wait_max", "gap", "load", "prologue", "prol_max", "chains",
            "store", "end_med", "end_max"]
    print("launch            blocks " + " ".join(f"{c:>9}" for c in cols) + "   (ns; medians over tokens)")
    total = defaultdict(float)
    for i in sorted(rows):
        row = rows[i]
        vals = {c: med(row[c]) for c in cols}
        for c in ("gap", "load", "prologue", "chains", "store"):
            if vals[c] == vals[c]:
                total[c] += vals[c]
        print(f"{i:3d} {names[i]:<14} {int(med(row['blocks'])):5d} " + " ".join(f"{vals[c]:9.0f}" for c in cols))
    print("sums over a token's launches (ns): " + ", ".join(f"{k} {v:.0f}" for k, v in total.items()))


if __name__ == "__main__":
    main()
