"""Training steps: the ``ProfilerStep#N`` ranges torch.profiler's schedule writes, their times,
and how long each would take without the profiler (the replay's baseline)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.replay import StepGraph
from brrr_trace.traces.model import Trace

_STEP_PREFIX = "ProfilerStep#"


@dataclass(frozen=True)
class Steps:
    durations_ns: tuple[int, ...]  # each step's wall time in the (profiled) trace
    replayed_ns: int | None  # per step, replayed without the profiler's cost

    @property
    def count(self) -> int:
        return len(self.durations_ns)

    @property
    def median_ns(self) -> int:
        return int(np.median(self.durations_ns))

    @property
    def spread_ns(self) -> int:
        return max(self.durations_ns) - min(self.durations_ns)


def profiler_steps(trace: Trace) -> list[tuple[int, int]]:
    """(start, end) of each ProfilerStep range, in time order (one thread's: the first seen)."""
    cpu = trace.cpu_ops
    strings = trace.strings
    step_names = [sid for sid, text in enumerate(strings) if text.startswith(_STEP_PREFIX)]
    if not step_names:
        return []
    rows = np.flatnonzero(cpu.annotation & np.isin(cpu.name, step_names))
    if not len(rows):
        return []
    rows = rows[cpu.thread[rows] == cpu.thread[rows[0]]]
    return [(int(cpu.start_ns[r]), int(cpu.end_ns[r])) for r in rows.tolist()]


def measure_steps(trace: Trace, graph: StepGraph) -> Steps | None:
    ranges = profiler_steps(trace)
    if not ranges:
        return None
    replayed = graph.replayed_window(ranges[0][0], ranges[-1][1])
    return Steps(
        durations_ns=tuple(b - a for a, b in ranges),
        replayed_ns=replayed // len(ranges) if replayed is not None else None,
    )
