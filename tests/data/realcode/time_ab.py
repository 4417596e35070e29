"""Time a fix that is one setting of a running program, both sides in the same process.

    python3 time_ab.py cnn --log-every 1 50 [--warmup 20] [--region-steps 50] [--rounds 6] [FLAGS]
    python3 time_ab.py gpt --matmul-precision highest high [--record TRACE] [...] [FLAGS]
    python3 time_ab.py cnn --workers 0 4 --region-steps 100 [--record TRACE] [...] [FLAGS]

Between processes, the CNN's step time varies more than some of its fixes gain: its batches are
made by small CPU tensor ops in the main process, and one process ran them twice as fast as the
next (its two traces' ``__next__``: 18.5 vs 32.8 ms a step). A setting the step reads each time
it runs (here ``args.log_every``) can be switched between timed regions of one process, so both
sides see the same CPU. The regions alternate A, B, A, B...; each is synchronized at its edges
only. Prints one BENCH line: the per-step seconds of each side's regions.

``--workers A B`` switches the CNN's DataLoader: a second loader over the same dataset with the
other number of worker processes (pinned memory when it has workers, the fix as proposed), and
the batches come from the loader of the region's side. A region of a side with workers starts
from batches its workers made ahead while the other side ran (``prefetch_factor`` per worker);
regions of 100 steps keep that a few percent of a region.

``--matmul-precision`` switches ``torch.set_float32_matmul_precision`` instead (TF32 off and
on), which cuBLAS reads at every matmul: GPT small's timing processes ran 13.55-15.17 ms a step
apart, more than TF32 gains there. ``--record`` records the program first, in the same process
(``brrr_trace.record``: 20 wait steps, a warm-up, 10 recorded), so that the estimate from the
trace and the gain timed after it share one process's pace.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import train_utils  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    switch = parser.add_mutually_exclusive_group(required=True)
    switch.add_argument("--log-every", type=int, nargs=2, metavar=("A", "B"))
    switch.add_argument(
        "--matmul-precision", nargs=2, choices=["highest", "high", "medium"], metavar=("A", "B")
    )
    switch.add_argument("--workers", type=int, nargs=2, metavar=("A", "B"))
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--region-steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--record",
        metavar="TRACE",
        help="first record the program's steps there (brrr_trace.record, --wait 20 --steps 10), "
        "so that the trace and the gain come from one process",
    )
    # Flags this script does not know are the program's own.
    ours, extra = parser.parse_known_args()
    # The DataLoader side the batches come from now (--workers): one-element list, set per region.
    workers_now: list[int] = []
    if ours.log_every:
        sides: dict[str, object] = {f"log_every={n}": n for n in ours.log_every}
    elif ours.workers:
        sides = {f"workers={n}": ("workers", n) for n in ours.workers}
        workers_now.append(ours.workers[0])
    else:
        sides = {f"matmul_precision={p}": p for p in ours.matmul_precision}
    every_side = [v for v in sides.values() if isinstance(v, int)]
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    regions: list[tuple[str, float, float]] = []  # side, wall-clock start and end (epoch s)

    def alternate(args, program, train_step, device) -> None:
        step = 0

        def take(setting: object) -> None:
            nonlocal step
            if isinstance(setting, int):
                args.log_every = setting
                # Start on a step that logs under either setting, so that each region logs as
                # often as its setting says.
                step += (-step) % max(every_side)
            elif isinstance(setting, tuple):
                workers_now[0] = setting[1]
            else:
                import torch

                torch.set_float32_matmul_precision(str(setting))

        if ours.record:
            import brrr_trace

            # The first side's setting, as the program runs unfixed; 20 wait steps, a warm-up
            # and 10 recorded, a few more so that the window closes.
            take(next(iter(sides.values())))
            with brrr_trace.record(ours.record, steps=10, wait=20):
                for _ in range(34):
                    train_step(step)
                    step += 1
        # Each side warmed up: a DataLoader's workers start on its first batch, cuBLAS picks
        # its kernels for a precision on its first matmuls.
        for setting in sides.values():
            take(setting)
            for _ in range(ours.warmup):
                train_step(step)
                step += 1
        for _ in range(ours.rounds):
            for side, setting in sides.items():
                take(setting)
                train_utils._sync(device)
                start = time.perf_counter()
                for _ in range(ours.region_steps):
                    train_step(step)
                    step += 1
                train_utils._sync(device)
                seconds[side].append((time.perf_counter() - start) / ours.region_steps)
                regions.append(
                    (side, time.time() - seconds[side][-1] * ours.region_steps, time.time())
                )
        result = {"program": program, "seconds_per_step": seconds, "regions": regions}
        print("BENCH " + json.dumps(result), flush=True)

    # Programs with a loop of their own (gpt.py) time through run_timed with --time.
    train_utils.run_training = train_utils.run_timed = alternate
    module = importlib.import_module(ours.program)
    if ours.workers:
        module.infinite = _switching_batches(module.infinite, ours.workers, workers_now)
    module.main(["--device", "cuda", "--time", *extra])
    return 0


def _switching_batches(infinite, workers: list[int], workers_now: list[int]):
    """``cnn.infinite`` over one loader per side; each batch from the side ``workers_now`` names."""

    def switching(loader):
        from torch.utils.data import DataLoader

        streams = {}
        for n in workers:
            streams[n] = infinite(
                DataLoader(
                    loader.dataset,
                    batch_size=loader.batch_size,
                    shuffle=True,
                    drop_last=loader.drop_last,
                    num_workers=n,
                    pin_memory=n > 0,
                    persistent_workers=n > 0,
                    generator=loader.generator,
                )
            )
        while True:
            yield next(streams[workers_now[0]])

    return switching


if __name__ == "__main__":
    sys.exit(main())
