"""`osprey PROGRAM.py [--run] [ARGS...]` (or `python3 -m osprey ...`): runs a Python program with the
osprey module importable, as the seed's `OSPREY_GPU=host osprey product.py --run` does.

--run is what it does, so it may be left out; the program sees sys.argv = [PROGRAM, ARGS...].
"""

import os
import runpy
import sys

USAGE = "usage: osprey PROGRAM.py [--run] [ARGS...]   (OSPREY_GPU=host|cuda|opencl chooses the device)"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    program, rest = argv[0], argv[1:]
    if rest[:1] == ["--run"]:
        rest = rest[1:]
    sys.argv = [program, *rest]
    sys.path.insert(0, os.path.dirname(os.path.abspath(program)))  # as `python3 PROGRAM.py` does
    try:
        runpy.run_path(program, run_name="__main__")
    except FileNotFoundError as missing:
        if missing.filename == program:
            print(f"osprey: error: no such program: {program}", file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
