"""Fit the profiler-cost model (``AnalysisOptions.profiler_cost_per_*``) to traces whose
unprofiled time was measured on the same host.

    python benchmarks/fit_profiler_cost.py [--evaluate-only] [--rounds 3]

Each point is a trace and the time its program took unprofiled on the machine (and mostly in
the process) that recorded it:

- the small fixtures of ``tests/data/h200/session8`` (``record_session8.sh``): the whole
  profiled call against the same process's unprofiled call (``measurements.json``);
- the 10-step GPT small and tiny MLP traces of ``tests/data/realcode/h200/hosts/{a,b}`` against
  the unfixed side's per-step time timed on that host (``pairs.json``);
- the ``brrr-trace record`` traces (``hosts/c``, ``record-timed``, session 11's) against their
  own unprofiled steps, and where the recorder timed the optimizer's steps too (session 11),
  the host time inside them against that (``OptimizerPoint``).

The replay's time (the whole call, or a step of the loop) is computed with a candidate set of
per-event costs; the fit minimizes the squared log ratio of replayed to measured time,
coordinate by coordinate over a few rounds. Prints each point's ratio before and after.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brrr_trace import pipeline  # noqa: E402
from brrr_trace.analyzers.optimizer_steps import step_ranges  # noqa: E402
from brrr_trace.analyzers.replay import build_graph  # noqa: E402
from brrr_trace.analyzers.steps import (  # noqa: E402
    RangesByThread,
    by_thread_of,
    calls_inside,
    host_inside,
    profiler_steps,
    ranges_in_steps,
    recorded_unprofiled_optimizer_step,
    recorded_unprofiled_step,
)
from brrr_trace.options import AnalysisOptions  # noqa: E402

DATA = ROOT / "tests" / "data"
REAL = DATA / "realcode"
HOSTS = REAL / "h200" / "hosts"
PARAMS = (
    "profiler_cost_per_frame_ns",
    "profiler_cost_per_op_ns",
    "profiler_cost_per_engine_op_ns",
    "profiler_cost_per_call_ns",
    "profiler_cost_per_launch_ns",
    "profiler_cost_per_marker_ns",
)


@dataclass
class Point:
    name: str
    target_ns: float  # unprofiled: the whole call, or a step
    context: object  # the rules' context of the trace (its locator, ops, timeline)
    steps: list[tuple[int, int]]

    def replayed_ns(self, options: AnalysisOptions) -> float:
        ctx = self.context
        ctx.locator.options = options  # the cost of what it traced comes from these
        ctx.locator.let_go(traced=True)
        graph = build_graph(ctx.trace, ctx.ops, ctx.locator, ctx.timeline.blocking_rows, options)
        if self.steps:
            return graph.as_loop(self.steps).period() / len(self.steps)
        first = int(graph.start.min()) if len(graph.start) else 0
        return graph._baseline() - first


@dataclass
class OptimizerPoint(Point):
    """The host time inside a record trace's optimizer steps, replayed at the model's cost,
    against the recorder's unprofiled ``optimizer.step()`` (times the steps): where the model
    puts the profiler's cost within a step, which a whole step's time cannot tell."""

    def replayed_ns(self, options: AnalysisOptions) -> float:
        ctx = self.context
        ctx.locator.options = options
        ctx.locator.let_go(traced=True)
        graph = build_graph(ctx.trace, ctx.ops, ctx.locator, ctx.timeline.blocking_rows, options)
        graph = graph.as_loop(self.steps)
        by_thread = _optimizer_ranges(ctx, self.steps)
        return float(host_inside(graph, by_thread, calls_inside(graph, by_thread)))


def _optimizer_ranges(ctx, steps: list[tuple[int, int]]) -> RangesByThread:
    return by_thread_of(ranges_in_steps(step_ranges(ctx.trace, ctx.optimizer_steps), steps))


def context_of(path: Path, source_root: Path) -> object:
    captured: dict[str, object] = {}
    find = pipeline.find_findings

    def keep(ctx):
        captured["ctx"] = ctx
        return []

    pipeline.find_findings = keep
    try:
        pipeline.analyze(path, AnalysisOptions(source_root=str(source_root)))
    finally:
        pipeline.find_findings = find
    return captured["ctx"]


def before_per_step_s(pairs: Path, program: str) -> float:
    rounds = json.loads(pairs.read_text())["rounds"]
    return statistics.median(
        s for r in rounds if r["program"] == program for run in r["before"] for s in run
    )


def points() -> list[Point]:
    out: list[Point] = []
    small = DATA / "h200" / "session8"
    if small.is_dir():
        fixtures = json.loads((small / "measurements.json").read_text())["fixtures"]
        for name, m in sorted(fixtures.items()):
            path = small / f"{name}.json.gz"
            if path.exists() and m.get("unprofiled_ms"):
                ctx = context_of(path, DATA)
                out.append(Point(f"small/{name}", m["unprofiled_ms"] * 1e6, ctx, []))
    for host in ("a", "b"):
        for program in ("gpt_small", "tiny_mlp"):
            path = HOSTS / host / f"{program}.steps10.json.gz"
            ctx = context_of(path, REAL)
            target = before_per_step_s(HOSTS / host / "pairs.json", program) * 1e9
            out.append(Point(f"{host}/{program}", target, ctx, profiler_steps(ctx.trace)))
    recorded = sorted((HOSTS / "c").glob("*.record.json.gz")) + sorted(
        (REAL / "h200" / "record-timed").glob("*.json.gz")
    )
    # The record traces whose optimizer steps were timed too (session 11): the step, and the
    # optimizer's part of it.
    timed_optimizer = [
        (DATA / "h200" / "session11b" / "optimizer_foreach_false.record.json.gz", DATA),
        *((REAL / "h200" / s / f"{p}.record.json.gz", REAL) for s, p in (
            ("session11b", "amp_transformer"), ("session11c", "gpt_small"),
            ("session11d", "gpt_small"),
        )),
    ]  # fmt: skip
    for path, root in [(p, REAL) for p in recorded] + timed_optimizer:
        if not path.exists():
            continue
        ctx = context_of(path, root)
        target = recorded_unprofiled_step(ctx.trace)
        if target:
            name = f"{path.parent.name}/{path.name.split('.')[0]}"
            steps = profiler_steps(ctx.trace)
            out.append(Point(name, target, ctx, steps))
            optimizer = recorded_unprofiled_optimizer_step(ctx.trace)
            if optimizer:
                n = sum(len(a) for a, _ in _optimizer_ranges(ctx, steps).values())
                out.append(OptimizerPoint(f"{name}:optimizer", optimizer * n, ctx, steps))
    return out


def loss(pts: list[Point], options: AnalysisOptions) -> tuple[float, dict[str, float]]:
    ratios = {p.name: p.replayed_ns(options) / p.target_ns for p in pts}
    return sum(math.log(max(r, 1e-3)) ** 2 for r in ratios.values()), ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluate-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pts = points()
    options = AnalysisOptions()
    best, ratios = loss(pts, options)
    start_ratios = ratios
    print("start", {k: getattr(options, k) for k in PARAMS}, f"loss {best:.3f}", flush=True)
    if not args.evaluate_only:
        for _ in range(args.rounds):
            for key in PARAMS:
                for factor in (0.5, 0.7, 0.85, 1.2, 1.4, 2.0):
                    trial = replace(options, **{key: int(getattr(options, key) * factor)})
                    value, trial_ratios = loss(pts, trial)
                    if value < best:
                        best, options, ratios = value, trial, trial_ratios
            print("round", {k: getattr(options, k) for k in PARAMS}, f"loss {best:.3f}", flush=True)
    for name in ratios:
        print(f"{name:28s} replayed/measured {start_ratios[name]:.2f} -> {ratios[name]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
