"""Time the before/after pairs of workloads.py unprofiled, the two sides in alternating processes.

    python3 tests/data/time_small_pairs.py --out small_pairs.json [--rounds 2] [--budget-s 400]
        [--only RULE,RULE] [--profiled shapes|stack]

A workload call includes its set-up (tensors made, a model built, DataLoader workers started),
whose time varies from call to call by more than some fixes gain per step (pinning 256 MiB
takes about 60 ms, give or take 10). So a step's cost is taken from calls of two lengths in one
warmed-up process: (T(k·N) - T(N)) / ((k - 1)·N), set-up cancelled, each T the median of
``--repeats`` calls. The two sides alternate process by process (before, after, before, ...),
``--rounds`` processes a side; ``per_step_ms`` of a side is the median of its processes'.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (rule, before, after): the pairs of tests/test_savings.py, the ones furthest off first.
PAIRS = [
    ("host-sync", "item_in_loop", "item_in_loop_fixed"),
    ("pageable-memcpy", "pageable_copy", "pinned_copy"),
    ("dataloader-stall", "dataloader_slow", "dataloader_workers"),
    ("fp32-matmul", "fp32_matmul", "fp32_matmul_tf32"),
    ("unfused-elementwise", "elementwise_chain", "elementwise_chain_compiled"),
    ("unfused-optimizer", "optimizer_foreach_false", "optimizer_fused"),
    ("manual-attention", "manual_attention", "sdpa_attention"),
    ("cpu-to-device", "cpu_tensor_each_step", "device_tensor_each_step"),
    ("misaligned-shape", "misaligned_matmul", "bf16_matmul"),
]

_ONE_SIDE = """
import inspect, json, statistics, sys, time
import torch
sys.path.insert(0, {here!r})
import workloads
fn = getattr(workloads, {name!r})
n = inspect.signature(fn).parameters["steps"].default
device = torch.device("cuda")

def call(steps):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn(device, steps=steps)
    torch.cuda.synchronize()
    return time.perf_counter() - t

profiled = {profiled!r}
if profiled:  # the profiler records every call below, as its traces were recorded; no export
    from torch.profiler import ProfilerActivity, profile
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                   with_stack=profiled == "stack")
    prof.start()

call(n)
call({k} * n)
short, long = [], []
for _ in range({repeats}):
    short.append(call(n))
    long.append(call({k} * n))
if profiled:
    prof.stop()
print("BENCH " + json.dumps({{"steps": n, "k": {k}, "short_s": short, "long_s": long}}))
"""


def one_side(
    name: str, k: int, repeats: int, timeout: float, profiled: str | None = None
) -> dict | None:
    code = _ONE_SIDE.format(here=str(HERE), name=name, k=k, repeats=repeats, profiled=profiled)
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        print(f"timed out: {name}", file=sys.stderr)
        return None
    bench = [line for line in done.stdout.splitlines() if line.startswith("BENCH ")]
    if done.returncode or not bench:
        print(f"failed: {name}\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    run = json.loads(bench[-1][len("BENCH ") :])
    extra = statistics.median(run["long_s"]) - statistics.median(run["short_s"])
    run["per_step_ms"] = extra / ((k - 1) * run["steps"]) * 1e3
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=400)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--only", default="", help="comma-separated rules (default: every pair)")
    parser.add_argument(
        "--profiled",
        choices=["shapes", "stack"],
        help="time under the profiler (shapes, or shapes and stacks as the traces were recorded)",
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    started = time.perf_counter()
    results = [
        {"rule": r, "before": b, "after": a, "runs": {b: [], a: []}}
        for r, b, a in PAIRS
        if not only or r in only
    ]
    for round_ in range(args.rounds):
        for entry in results:
            if time.perf_counter() - started > args.budget_s:
                break
            for side in (entry["before"], entry["after"]):
                run = one_side(side, args.k, args.repeats, args.timeout, args.profiled)
                if run:
                    entry["runs"][side].append(run)
            Path(args.out).write_text(json.dumps({"pairs": results}, indent=1))
        print(f"round {round_ + 1} done at {time.perf_counter() - started:.0f} s", flush=True)
    for entry in results:
        per = {
            side: statistics.median(r["per_step_ms"] for r in runs) if runs else float("nan")
            for side, runs in entry["runs"].items()
        }
        print(f"{entry['rule']}: {per[entry['before']]:.3f} -> {per[entry['after']]:.3f} ms/step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
