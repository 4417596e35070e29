"""Shrink a Chrome trace for the repository: drop the per-op argument lists that no check of
this folder reads (input shapes, types, strides, concrete values), keep everything else.

    python3 slim_trace.py IN.json[.gz] OUT.json.gz [--keep-shapes]

``--keep-shapes`` keeps the input dims and types, which the savings of some rules read (a
matmul's FLOPs, a copy's bytes): a third smaller instead of about half, and the findings' bytes
differ by less than 0.01% (strides are dropped).
"""

from __future__ import annotations

import gzip
import json
import sys

DROPPED_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs", "Ev Idx")
SHAPES = ("Input Dims", "Input type")


def main() -> int:
    source, target = sys.argv[1], sys.argv[2]
    dropped = [k for k in DROPPED_ARGS if "--keep-shapes" not in sys.argv[3:] or k not in SHAPES]
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    for event in trace.get("traceEvents", []):
        args = event.get("args")
        if isinstance(args, dict):
            for key in dropped:
                args.pop(key, None)
    with gzip.open(target, "wt", encoding="utf-8", compresslevel=9) as handle:
        json.dump(trace, handle, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
