"""Record a small workload of workloads.py the way ``brrr-trace record --wait W --steps N`` does.

    python3 tests/data/record_small.py NAME OUT.json.gz [--wait 20] [--steps 10]

A record trace carries the unprofiled time of its wait steps, which the analysis calibrates the
profiler's cost against (docs/architecture.md §7); the plain traces of the small pairs model that
cost only, and it differed two-fold from host to host for the optimizer loop. Without the line
mode (``exact_ops=False``): these loops make a few torch calls per 0.2 ms step, and the mode's
several µs per call would be most of what the calibration measures.

``optimizer_foreach_false`` steps at its ``optimizer.step()`` (the recorder's own counting);
``item_in_loop`` has no optimizer, so its loop is written here once more with a ``step()`` call
at the end of each iteration (the same statements as workloads.py's, whose lines the small
fixtures' traces reference and which therefore stay as they are).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import workloads

import brrr_trace
from brrr_trace.recording.recorder import Recorder


def item_in_loop(device: torch.device, recorder: Recorder, steps: int) -> float:
    n = 3072
    x = torch.randn(2 * n, n, device=device, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    total = 0.0
    for _ in range(steps):
        loss = (x @ w).sum()
        total += loss.item()
        recorder.step()
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=["item_in_loop", "optimizer_foreach_false"])
    parser.add_argument("out")
    parser.add_argument("--wait", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    total = args.wait + 1 + args.steps + 4  # and a few after, so that the window closes
    if args.name == "item_in_loop":
        recorder = brrr_trace.record(
            args.out, steps=args.steps, wait=args.wait, exact_ops=False, auto_step=False
        )
        with recorder:
            item_in_loop(device, recorder, total)
    else:
        recorder = brrr_trace.record(args.out, steps=args.steps, wait=args.wait, exact_ops=False)
        with recorder:
            workloads.optimizer_foreach_false(device, steps=total)
    print(args.name, "written" if recorder.written else "NOT written", recorder.steps_recorded)


if __name__ == "__main__":
    main()
