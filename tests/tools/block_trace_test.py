#!/usr/bin/env python3
"""tools/profile/block_trace.py over a trace whose answers are known: three tokens of two launches
(a row product of three blocks, an attention of one) and a choice each, written as the kernels
write them (osprey/gpu/cuda/kernels/block_trace.hpp's TraceRecord, 120 bytes), in a shuffled order
with empty slots between; then a file with no records, which must fail."""
import random
import re
import struct
import subprocess
import sys
import tempfile

tool = sys.argv[1]
RECORD = struct.Struct("<Q4I6Q6q")
assert RECORD.size == 120
GHZ = 2  # cycles a nanosecond


def record(tag, kind, block, grid, times):
    return RECORD.pack(tag, kind, block, block, grid, *times, *[t * GHZ if t else 0 for t in times])


recs = []
t = 1_000_000
for token in range(3):
    # The row product: entry, past the wait at +1000 (+10 a block), row in +300, prologue +2000
    # (+100 a block), chains +4000, stored +100.
    for b in range(3):
        w, p = t + 1000 + 10 * b, 100 * b
        recs.append(record(0xA0, 1, b, 3, [t, w, w + 300, w + 2300 + p, w + 6300 + p, w + 6400 + p]))
    row_end = t + 1000 + 20 + 6400 + 200
    # The attention: past its wait 1500 after the product's last block ended; 2000 to its end.
    a = row_end + 1500
    recs.append(record(0xB0, 2, 0, 1, [row_end - 500, a, a + 100, a + 200, a + 300, a + 2000]))
    # The choice (no wait mark): ends 800 after the attention.
    c = a + 2000 + 800
    recs.append(record(0xC0, 5, 0, 1, [c - 300, 0, c - 200, c - 100, 0, c]))
    t = c + 50
random.Random(7).shuffle(recs)
with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
    for r in recs:
        f.write(r)
        f.write(bytes(RECORD.size))  # an empty slot
    path = f.name

out = subprocess.run([sys.executable, tool, path, "--tokens", "2"], capture_output=True, text=True)
print(out.stdout, out.stderr)
assert out.returncode == 0, "the tool failed on a good trace"
assert "clock 2.000 GHz" in out.stdout, "the clock from cycles against nanoseconds"
assert "tokens 2:" in out.stdout and "launches a token [3]" in out.stdout
rows = {m.group(1): m.group(2).split() for m in re.finditer(r"^\s*\d+ (\w+) g\d+\s+(.*)$", out.stdout, re.M)}
# columns: blocks entry early lead wait0 wait_med wait_max gap load prologue prol_max chains store end_med
# end_max
row, att = rows["row"], rows["attention"]
assert row[0] == "3", row
assert [float(v) for v in row[8:13]] == [300, 2100, 2200, 4000, 100], row  # the phases, by clock64
assert float(row[6]) - float(row[4]) == 20, row  # the blocks' waits: first to last
assert float(att[7]) == 1500, att  # the hand-over: the product's last block to the attention's wait
assert float(att[14]) - float(att[4]) == 2000, att
# Resident early: the attention's block entered 500 before the product's last block ended; the
# product's blocks entered after the token's start (the choice before it ended).
assert row[2] == "0" and float(row[3]) == 0, row
assert att[2] == "1" and float(att[3]) == 500, att

with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
    f.write(bytes(RECORD.size * 4))
    empty = f.name
out = subprocess.run([sys.executable, tool, empty], capture_output=True, text=True)
assert out.returncode != 0 and "no records" in out.stderr, "an empty trace must fail, naming why"
print("block_trace_test: passed")
