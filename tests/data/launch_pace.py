"""How long a kernel launch takes the host with the GPU busy (the launch queued behind work) and
with it idle (each launch runs as soon as it arrives), unprofiled.

    python3 tests/data/launch_pace.py [--launches 500] [--rounds 20]

The replay takes a launch call's time from the profiled trace, where the host is slow and the
GPU mostly waits for it. Without the profiler the host runs ahead and its launches queue behind
the GPU's work; GPT small's steps took 9.7 ms each while ahead of the GPU in its recorder's wait
steps, and 11.5-13.3 ms once TF32 let the GPU keep up (tests/data/realcode/h200/session11d).
Prints one BENCH line: the per-launch µs of each round, busy and idle, alternating.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    x = torch.zeros(1024, device="cuda")
    a = torch.randn(8192, 8192, device="cuda")
    b = torch.randn(8192, 8192, device="cuda")

    def timed_launches() -> float:
        start = time.perf_counter()
        for _ in range(args.launches):
            x.add_(1.0)
        return (time.perf_counter() - start) / args.launches * 1e6

    for _ in range(3):  # warm up: kernels loaded, allocator primed
        timed_launches()
        a @ b
    torch.cuda.synchronize()
    busy, idle = [], []
    for _ in range(args.rounds):
        # Six FP32 8192 x 8192 matmuls queued (~1.1 TFLOP each, over 100 ms in all): every
        # launch below waits behind them.
        for _ in range(6):
            a @ b
        busy.append(timed_launches())
        torch.cuda.synchronize()
        idle.append(timed_launches())  # the queue empty: each add runs as it arrives
        torch.cuda.synchronize()
    result = {
        "launches": args.launches,
        "busy_us": busy,
        "idle_us": idle,
        "busy_median_us": statistics.median(busy),
        "idle_median_us": statistics.median(idle),
    }
    print("BENCH " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
