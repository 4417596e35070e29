"""Where the CNN's step time goes with and without its per-step ``.item()``, in one process.

    python3 cnn_phases.py [--warmup 20] [--region-steps 50] [--rounds 6] [FLAGS]

Removing the CNN's per-step ``.item()`` gains 5-7 ms a step unprofiled (``time_ab.py``), more
than the 4 ms its trace's GPU is busy in a step, so overlapping the batch making with the GPU's
work cannot be all of it. Three settings alternate region by region in one warmed-up process
(in reverse order every other round):

- ``item``: ``.item()`` every step (log_every=1), the program as written;
- ``none``: ``.item()`` every 50 steps (the fix);
- ``sync``: the fix, plus ``torch.cuda.synchronize()`` at the end of every step: the same wait
  as ``item`` without the ``.item()`` calls and the logging.

Within each region the host's time is split, with ``time.perf_counter`` around the calls, into
making the batch (the DataLoader's ``__next__``), the two host-to-device copies, waiting in
``.item()`` / ``synchronize``, and the rest (launching forward, backward and the optimizer step).
The GPU's span of a step is timed by CUDA events from the batch's copy to the end of the step's
work (its kernels and the gaps between them, not the time it waits for the next batch).
Prints one BENCH line.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import torch  # noqa: E402
import train_utils  # noqa: E402
from torch.utils.data import dataloader  # noqa: E402

PHASES = ("batch", "copy", "wait", "rest")
ON_GPU = torch.cuda.is_available()  # without one (a smoke test: --small), no GPU spans


class PhaseClock:
    """Adds the host seconds spent in wrapped calls to the current phase totals."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.enabled = False

    def wrap(self, phase: str, fn):
        clock = self

        def timed(*args, **kwargs):
            if not clock.enabled:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                clock.totals[phase] += time.perf_counter() - start

        return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--region-steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    ours, extra = parser.parse_known_args()
    clock = PhaseClock()
    it = dataloader._SingleProcessDataLoaderIter
    it.__next__ = clock.wrap("batch", it.__next__)
    dataloader._MultiProcessingDataLoaderIter.__next__ = clock.wrap(
        "batch", dataloader._MultiProcessingDataLoaderIter.__next__
    )
    step_begins: list[torch.cuda.Event] = []
    to = clock.wrap("copy", torch.Tensor.to)

    def first_copy_marks_the_step(*args, **kwargs):
        if clock.enabled and not step_begins and ON_GPU:
            step_begins.append(torch.cuda.Event(enable_timing=True))
            step_begins[0].record()
        return to(*args, **kwargs)

    torch.Tensor.to = first_copy_marks_the_step
    torch.Tensor.item = clock.wrap("wait", torch.Tensor.item)
    timed_sync = clock.wrap("wait", torch.cuda.synchronize)
    sides = {"item": 1, "none": 50, "sync": 50}
    result: dict[str, dict[str, list[float]]] = {
        side: {key: [] for key in ("step", *PHASES, "gpu_span")} for side in sides
    }

    def alternate(args, program, train_step, device) -> None:
        step = 0
        for _ in range(ours.warmup):
            train_step(step)
            step += 1
        for round_ in range(ours.rounds):
            # Every other round in reverse order, so that a drift of the host's pace over the
            # run (the batches' time halved in one process) favours no side.
            order = list(sides.items())
            for side, every in order if round_ % 2 == 0 else order[::-1]:
                args.log_every = every
                step += (-step) % 50
                train_utils._sync(device)
                clock.totals.clear()
                clock.enabled = True
                spans = []
                start = time.perf_counter()
                for _ in range(ours.region_steps):
                    step_begins.clear()
                    train_step(step)
                    if ON_GPU:
                        end = torch.cuda.Event(enable_timing=True)
                        end.record()
                        spans.append((step_begins[0], end))
                    if side == "sync" and ON_GPU:
                        timed_sync(device)
                    step += 1
                train_utils._sync(device)
                elapsed = time.perf_counter() - start
                clock.enabled = False
                n = ours.region_steps
                per = result[side]
                per["step"].append(elapsed / n)
                for phase in ("batch", "copy", "wait"):
                    per[phase].append(clock.totals[phase] / n)
                per["rest"].append(
                    (elapsed - sum(clock.totals[p] for p in ("batch", "copy", "wait"))) / n
                )
                gpu_ms = [b.elapsed_time(e) for b, e in spans] or [0.0]
                per["gpu_span"].append(statistics.median(gpu_ms) / 1e3)
        print("BENCH " + json.dumps({"program": "cnn", "seconds_per_step": result}), flush=True)

    train_utils.run_training = alternate
    device = ["--device", "cuda"] if ON_GPU else ["--device", "cpu"]
    importlib.import_module("cnn").main([*device, *extra])
    return 0


if __name__ == "__main__":
    sys.exit(main())
