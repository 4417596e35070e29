"""Does the GPU run the same kernels slower once the host stops waiting for it?

    python3 tests/data/gpu_pace.py --out pace.json [--iterations 500] [--calls 5]

``item_in_loop``'s fix (no ``.item()`` per step) gains 28 µs a step unprofiled, though its trace
shows the GPU idle 44 µs a step after each sync, and the trace's period (223 µs) is within 4% of
the unprofiled step (215 µs). If the kernels themselves take longer when they run back to back
(clocks lowered under sustained load), the gain is smaller than the idle it removes. Each side
runs ``--calls`` calls of ``--iterations`` steps; CUDA events time each matmul and each whole
call; nvidia-smi samples the SM clock and the power every 20 ms beside it. Prints one BENCH line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch


def run(fixed: bool, iterations: int) -> dict:
    device = torch.device("cuda")
    n = 3072
    x = torch.randn(2 * n, n, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    total = torch.zeros((), device=device) if fixed else 0.0
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iterations)]  # fmt: skip
    torch.cuda.synchronize()
    start = time.perf_counter()
    wall_start = time.time()
    for begin, end in events:
        begin.record()
        product = x @ w
        end.record()
        loss = product.sum()
        if fixed:
            total += loss
        else:
            total += loss.item()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    matmul_ms = [b.elapsed_time(e) for b, e in events]
    return {
        "fixed": fixed,
        "per_step_ms": elapsed / iterations * 1e3,
        "matmul_ms_by_fifth": [
            statistics.median(matmul_ms[i * iterations // 5 : (i + 1) * iterations // 5])
            for i in range(5)
        ],
        "wall": [wall_start, time.time()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    sampler = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
         "--format=csv,noheader,nounits", "-lms", "20"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    run(False, 50)  # warm-up: cuBLAS, allocator
    run(True, 50)
    calls = []
    for _ in range(args.calls):
        for fixed in (False, True):
            calls.append(run(fixed, args.iterations))
            time.sleep(0.2)
    sampler.terminate()
    samples = []
    for line in sampler.communicate()[0].splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            continue
    for call in calls:
        a, b = call.pop("wall")
        inside = [(c, p) for t, c, p in samples if a <= t <= b]
        call["sm_mhz_median"] = statistics.median(c for c, _ in inside) if inside else None
        call["power_w_median"] = statistics.median(p for _, p in inside) if inside else None
        call["samples"] = len(inside)
    print("BENCH " + json.dumps({"calls": calls}), flush=True)
    Path(args.out).write_text(json.dumps({"calls": calls}, indent=1))
    for call in calls:
        print(call)
    return 0


if __name__ == "__main__":
    sys.exit(main())
