"""Shrink a Chrome trace for the repository: drop the per-op argument lists that no check of
this folder reads (input shapes, types, strides, concrete values), keep everything else.

    python3 slim_trace.py IN.json[.gz] OUT.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys

DROPPED_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs", "Ev Idx")


def main() -> int:
    source, target = sys.argv[1], sys.argv[2]
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rt", encoding="utf-8") as handle:
        trace = json.load(handle)
    for event in trace.get("traceEvents", []):
        args = event.get("args")
        if isinstance(args, dict):
            for key in DROPPED_ARGS:
                args.pop(key, None)
    with gzip.open(target, "wt", encoding="utf-8", compresslevel=9) as handle:
        json.dump(trace, handle, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
