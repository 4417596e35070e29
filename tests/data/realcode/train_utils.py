"""Bits every training script in this folder shares: CLI flags, seeding, profiling and timing."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile, schedule

# The profiler records steps [wait + warmup, wait + warmup + active) and writes the trace when the
# last active step ends, so a run needs at least wait + warmup + active steps for a trace to appear.
PROFILE_WAIT, PROFILE_WARMUP, PROFILE_ACTIVE = 1, 1, 2


def add_common_args(
    parser: argparse.ArgumentParser, *, steps: int = 8, log_every: int = 10
) -> argparse.ArgumentParser:
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    g = parser.add_argument_group("common")
    g.add_argument("--device", choices=["cpu", "cuda"], default=default_device)
    g.add_argument("--steps", type=int, default=steps, help="optimizer steps to run")
    g.add_argument("--small", action="store_true", help="tiny model and batch (CPU smoke tests)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--log-every", type=int, default=log_every, metavar="N")
    g.add_argument("--profile", metavar="PATH", help="write a torch.profiler Chrome trace here")
    g.add_argument(
        "--profile-active",
        type=int,
        default=PROFILE_ACTIVE,
        metavar="N",
        help="steps the trace records (--profile)",
    )
    g.add_argument("--time", action="store_true", help="time the steps and print a BENCH line")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps before timing (--time)")
    g.add_argument("--repeats", type=int, default=1, help="timed regions to run (--time)")
    g.add_argument(
        "--time-profiled",
        choices=["stack", "nostack"],
        help="--time with the profiler recording all along (shapes, with or without stacks; "
        "nothing is exported): the profiler's cost on the step",
    )
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None):
    args = parser.parse_args(argv)
    if args.profile and args.time:
        parser.error("--profile and --time are exclusive")
    if args.profile_active < 1:
        parser.error("--profile-active must be >= 1")
    needed = PROFILE_WAIT + PROFILE_WARMUP + args.profile_active
    if args.profile and args.steps < needed:
        parser.error(f"--profile needs --steps >= {needed}")
    if args.time_profiled and not args.time:
        parser.error("--time-profiled needs --time")
    if args.time and args.steps <= args.warmup:
        parser.error("--time needs --steps > --warmup")
    if args.log_every < 1:
        parser.error("--log-every must be >= 1")
    return args


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(seed)


def pick_device(args) -> torch.device:
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device available")
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(0)
    return device


def log_metrics(step: int, loss_value: float, **extra) -> None:
    parts = [f"step {step:5d}", f"loss {loss_value:.4f}"]
    for key, value in extra.items():
        parts.append(f"{key} {value:.4g}" if isinstance(value, float) else f"{key} {value}")
    # stdout is kept for the BENCH line
    print(" | ".join(parts), file=sys.stderr, flush=True)


class _NullProfiler:
    """Stands in for torch.profiler.profile when --profile is not given."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def step(self) -> None:
        pass


def make_profiler(args):
    if not args.profile:
        return _NullProfiler()
    activities = [ProfilerActivity.CPU]
    if args.device == "cuda" and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    path = args.profile

    def on_trace_ready(prof) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        prof.export_chrome_trace(path)
        print(f"wrote trace {path}", file=sys.stderr, flush=True)

    return profile(
        activities=activities,
        schedule=schedule(
            wait=PROFILE_WAIT, warmup=PROFILE_WARMUP, active=args.profile_active, repeat=1
        ),
        on_trace_ready=on_trace_ready,
        record_shapes=True,
        with_stack=True,
    )


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_timed(
    args, program: str, train_step: Callable[[int], object], device: torch.device
) -> dict:
    """Run --warmup untimed steps, then time the other steps (--repeats times) and print BENCH.

    The GPU is synchronized only at the edges of each timed region, never inside it. With
    --time-profiled the profiler records the whole run (its trace is dropped, never exported).
    """
    if not getattr(args, "time_profiled", None):
        return _run_timed(args, program, train_step, device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(
        activities=activities, record_shapes=True, with_stack=args.time_profiled == "stack"
    ):
        return _run_timed(args, program, train_step, device)


def _run_timed(
    args, program: str, train_step: Callable[[int], object], device: torch.device
) -> dict:
    step = 0
    for _ in range(args.warmup):
        train_step(step)
        step += 1
    timed_steps = args.steps - args.warmup
    seconds = []
    for _ in range(args.repeats):
        _sync(device)
        start = time.perf_counter()
        for _ in range(timed_steps):
            train_step(step)
            step += 1
        _sync(device)
        seconds.append(time.perf_counter() - start)
    result = {"program": program, "args": vars(args), "steps": timed_steps, "seconds": seconds}
    print("BENCH " + json.dumps(result), flush=True)
    return result


def run_training(
    args, program: str, train_step: Callable[[int], object], device: torch.device
) -> None:
    """The outer loop: --time benchmarks, otherwise run --steps steps (profiled with --profile)."""
    if args.time:
        run_timed(args, program, train_step, device)
        return
    start = time.perf_counter()
    with make_profiler(args) as prof:
        for step in range(args.steps):
            train_step(step)
            prof.step()
    _sync(device)
    elapsed = time.perf_counter() - start
    per_step_ms = elapsed / args.steps * 1e3
    print(
        f"{program}: {args.steps} steps in {elapsed:.2f}s ({per_step_ms:.1f} ms/step)",
        file=sys.stderr,
    )
