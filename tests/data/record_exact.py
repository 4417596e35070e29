"""Record fixture workloads with ``brrr_trace.record`` (exact call-site lines) on a GPU.

Each workload runs once unprofiled (warm-up: cuBLAS, torch.compile, allocator), then once under
``brrr_trace.record`` into ``<out>/exact_<name>.json.gz``. The analyzer must then report the hot
lines at ``exact`` precision (tests/test_exact_fixtures.py). Run from ``tests/data``:

    PYTHONPATH=../.. python3 record_exact.py --out h200 [--only item_in_loop,...]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import torch
import workloads

import brrr_trace

NAMES = (
    "item_in_loop",
    "elementwise_chain",
    "manual_attention",
    "tiny_op_loop",
    "cpu_tensor_each_step",
    "sample",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="h200")
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scale = 1.0 if device.type == "cuda" else 1 / 64
    names = [n for n in args.only.split(",") if n] or list(NAMES)
    failed = 0
    for name in names:
        fn = getattr(workloads, name)
        try:
            fn(device, scale)
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            with brrr_trace.record(out / f"exact_{name}.json.gz") as recorder:
                fn(device, scale)
                if device.type == "cuda":
                    torch.cuda.synchronize()
            print(f"{name}: {time.perf_counter() - start:.2f} s {recorder.stats}", file=sys.stderr)
        except Exception:
            failed += 1
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
