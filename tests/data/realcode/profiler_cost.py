"""What torch.profiler (shapes + stacks, CPU + CUDA) costs the host per event it records.

    python3 profiler_cost.py --out DIR [--iterations 3000] [--repeats 5]

Loops of one kind of work each, timed unprofiled and profiled the way the training scripts
profile (``train_utils.make_profiler``'s settings): empty Python calls, ops on a tiny CPU tensor,
views (no kernel), ops on a tiny GPU tensor (one launch each), an ``nn.Linear`` call, the same
from 20 Python frames down, a tiny backward, and a small MLP's training step. The
profiled trace of each loop is written to DIR (gzip) so the events per iteration can be
counted from it; the times go to DIR/profiler_cost.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def empty() -> None:
    pass


def nested(depth: int, work: Callable[[], object]) -> Callable[[], object]:
    """``work`` called from ``depth`` Python frames down."""
    if depth == 0:
        return work

    def call() -> object:
        return inner()

    inner = nested(depth - 1, work)
    return call


def cases(device: torch.device) -> dict[str, Callable[[], object]]:
    host = torch.ones(4)
    gpu = torch.ones(4, device=device)
    layer = torch.nn.Linear(4, 4).to(device)
    x = torch.ones(2, 4, device=device)
    weight = torch.ones(4, device=device, requires_grad=True)
    mlp = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(6)]).to(device)
    batch = torch.ones(8, 16, device=device)
    sgd = torch.optim.SGD(mlp.parameters(), lr=1e-3)

    def backward() -> None:
        (weight * 2).sum().backward()

    def train_step() -> None:
        sgd.zero_grad(set_to_none=True)
        mlp(batch).sum().backward()
        sgd.step()

    return {
        "python_call_depth20": nested(20, empty),
        "gpu_op_depth20": nested(20, lambda: torch.add(gpu, 1)),
        "backward": backward,
        "mlp_train_step": train_step,
        "python_call": empty,
        "cpu_op": lambda: torch.add(host, 1),
        "cpu_view": lambda: host.view(-1),
        "gpu_op": lambda: torch.add(gpu, 1),
        "gpu_view": lambda: gpu.view(-1),
        "linear": lambda: layer(x),
    }


def loop(work: Callable[[], object], n: int, device: torch.device) -> float:
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(n):
        work()
    torch.cuda.synchronize(device)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda")
    results = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "cases": {}}
    only = {n for n in args.only.split(",") if n}
    for name, work in cases(device).items():
        if only and name not in only:
            continue
        loop(work, 200, device)  # warm up
        plain = [loop(work, args.iterations, device) for _ in range(args.repeats)]
        profiled = []
        for repeat in range(args.repeats):
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                record_shapes=True,
                with_stack=True,
            ) as prof:
                profiled.append(loop(work, args.iterations, device))
            if repeat == 0:
                path = os.path.join(args.out, f"{name}.json")
                prof.export_chrome_trace(path)
                with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.remove(path)
        per_iter = {
            "unprofiled_us": statistics.median(plain) / args.iterations * 1e6,
            "profiled_us": statistics.median(profiled) / args.iterations * 1e6,
        }
        results["cases"][name] = {"iterations": args.iterations, **per_iter}
        print(name, json.dumps(per_iter), file=sys.stderr, flush=True)
    with open(os.path.join(args.out, "profiler_cost.json"), "w") as handle:
        json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
