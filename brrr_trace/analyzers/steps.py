"""Training steps: the ``ProfilerStep#N`` ranges torch.profiler's schedule writes, their times,
and how long each would take without the profiler (the replay's baseline).

A trace from ``brrr-trace record`` also carries the wall times of the steps it ran unprofiled
before recording (``brrr_record.unprofiled_step_ns``). Then the profiler's estimated cost is
scaled until the replayed step takes that long (``calibrated``): the per-event costs are a model
fitted on a few programs, and a program's own measurement is better than any model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.backward import EVALUATE_PREFIX
from brrr_trace.analyzers.replay import PHASE_BACKWARD, PHASE_OPTIMIZER, StepGraph
from brrr_trace.arraysets import distinct, member
from brrr_trace.traces.brrr_fields import (
    RECORD_KEY,
    UNPROFILED_BACKWARD_KEY,
    UNPROFILED_OPTIMIZER_STEPS_KEY,
    UNPROFILED_STEPS_KEY,
    UNPROFILED_WINDOW_KEY,
)
from brrr_trace.traces.model import Trace

_STEP_PREFIX = "ProfilerStep#"


_MAX_COST_SCALE = 4.0
_CALIBRATION_ROUNDS = 14


@dataclass(frozen=True)
class Steps:
    durations_ns: tuple[int, ...]  # each step's wall time in the (profiled) trace
    replayed_ns: int | None  # per step, replayed without the profiler's cost
    recorded_unprofiled_ns: int | None = None  # per step, timed unprofiled by the recorder
    profiler_cost_scale: float = 1.0  # what the cost model was scaled by to match it
    # Inside the optimizer's steps, where the recorder timed them too: the scale there.
    optimizer_cost_scale: float | None = None
    # In the autograd engine's threads, where the recorder timed the backward passes too.
    backward_cost_scale: float | None = None

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
    return [(int(cpu.start_ns[r]), int(cpu.end_ns[r])) for r in _step_rows(trace).tolist()]


def _step_rows(trace: Trace) -> np.ndarray:
    """The CPU-op rows of the ProfilerStep annotations, of the first thread that has one."""
    cpu = trace.cpu_ops
    strings = trace.strings
    step_names = [sid for sid, text in enumerate(strings) if text.startswith(_STEP_PREFIX)]
    if not step_names:
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(cpu.annotation & member(cpu.name, step_names))
    if not len(rows):
        return rows
    found: np.ndarray = rows[cpu.thread[rows] == cpu.thread[rows[0]]]
    return found


def measure_steps(trace: Trace, graph: StepGraph) -> Steps | None:
    ranges = profiler_steps(trace)
    if not ranges:
        return None
    replayed = _replayed_step(graph, ranges)
    return Steps(
        durations_ns=tuple(b - a for a, b in ranges),
        replayed_ns=replayed,
        recorded_unprofiled_ns=recorded_unprofiled_step(trace),
        profiler_cost_scale=graph.cost_scale,
        optimizer_cost_scale=graph.phase_scales.get(PHASE_OPTIMIZER),
        backward_cost_scale=graph.phase_scales.get(PHASE_BACKWARD),
    )


def recorded_unprofiled_step(trace: Trace) -> int | None:
    """The program's own step time as the recorder timed it before profiling, or None.

    The later half of the timed steps is used: the first ones can still be warming up, or, in a
    GPU-bound program, run ahead of the GPU until the launch queue fills. Where the recorder
    timed that half as one window between device synchronizations, the window's mean."""
    record = trace.metadata.get(RECORD_KEY)
    window = record.get(UNPROFILED_WINDOW_KEY) if isinstance(record, dict) else None
    if isinstance(window, dict):
        steps, ns = window.get("steps"), window.get("ns")
        if (
            isinstance(steps, int)
            and isinstance(ns, int)
            and 0 < steps <= 10**6
            and 0 < ns < 10**15
        ):
            return ns // steps
    timed = record.get(UNPROFILED_STEPS_KEY) if isinstance(record, dict) else None
    if not isinstance(timed, list):
        return None
    valid = [ns for ns in timed if isinstance(ns, int) and 0 < ns < 10**13][:1000]
    if len(valid) < 2:
        return None
    return int(np.median(valid[len(valid) // 2 :]))


def recorded_unprofiled_optimizer_step(trace: Trace) -> int | None:
    """The host time of one ``optimizer.step()`` as the recorder timed it unprofiled (the
    median of the later wait steps'), or None."""
    return _recorded_median(trace, UNPROFILED_OPTIMIZER_STEPS_KEY)


def recorded_unprofiled_backward(trace: Trace) -> int | None:
    """The host time of a step's backward passes as the recorder timed them unprofiled (the
    median of the later wait steps'), or None."""
    return _recorded_median(trace, UNPROFILED_BACKWARD_KEY)


def _recorded_median(trace: Trace, key: str) -> int | None:
    record = trace.metadata.get(RECORD_KEY)
    timed = record.get(key) if isinstance(record, dict) else None
    if not isinstance(timed, list):
        return None
    valid = [ns for ns in timed[:1000] if type(ns) is int and 0 < ns < 10**13]
    return int(np.median(valid)) if valid else None


ThreadRange = tuple[int, int, int]  # (host thread, start, end): an ``Optimizer.step#``, a step


def calibrated(
    graph: StepGraph,
    trace: Trace,
    tolerance: float = 0.0,
    optimizer_ranges: Sequence[ThreadRange] = (),
) -> StepGraph:
    """The graph with the profiler's cost scaled so that the replayed step matches the step the
    recorder timed unprofiled; the graph as it is without such a measurement, or where the
    model's own cost already replays a step within ``tolerance`` (a share) of it.

    Where the recorder also timed the optimizer's steps, the cost inside them is scaled first,
    on its own, until the replayed host takes that long there (``_phase_calibrated``): in a
    per-parameter Adam the model puts 8.2 ms of a step's profiler cost in the optimizer and 12.3
    outside it, where the trace and the timed steps say 15.8 and 8.9 (tests/data/h200/session11b),
    and one scale for both makes the rest of the step too fast and a fused optimizer's saving
    too large. Likewise the backward passes, in the autograd engine's threads: GPT small's took
    4.0-6.8 ms a step unprofiled, where one scale for the step left 1.0-1.4 of them
    (tests/data/realcode/h200/session12b).

    A GPU-bound step replays the same for every scale that leaves the host faster than the GPU,
    so there the measurement cannot tell those scales apart; the scale that matches it exactly
    would be the edge of that flat stretch, which makes the host as slow as the step allows
    (and a GPU fix look as if it saved little)."""
    steps = profiler_steps(trace)
    graph = _phase_calibrated(
        graph,
        PHASE_OPTIMIZER,
        optimizer_ranges,
        steps,
        recorded_unprofiled_optimizer_step(trace),
    )
    backward_ns = recorded_unprofiled_backward(trace)
    if backward_ns is not None:  # the engine's threads looked for only where there is a time
        graph = _phase_calibrated(
            graph, PHASE_BACKWARD, backward_ranges(trace, steps), steps, backward_ns
        )
    timed = _timed_step(graph, trace)
    if timed is None:
        return graph
    target, ranges, step_at = timed
    at_model = graph.with_cost_scale(1.0)  # returned as it is, with the period it replayed
    if abs((_replayed_step(at_model, ranges) or 0) - target) <= tolerance * target:
        return at_model
    if step_at(0.0) <= target:  # even with no cost taken out the replay is not slower
        return graph.with_cost_scale(0.0)
    if step_at(_MAX_COST_SCALE) >= target:
        return graph.with_cost_scale(_MAX_COST_SCALE)
    low, high = _bracket(step_at, target)
    return graph.with_cost_scale(round((low + high) / 2, 3))


_StepAt = Callable[[float], int]  # the replayed step at a profiler-cost scale


def _phase_calibrated(
    graph: StepGraph,
    phase: int,
    phase_ranges: Sequence[ThreadRange],
    steps: list[tuple[int, int]],
    timed_ns: int | None,
) -> StepGraph:
    """The graph with the profiler's cost inside the ranges scaled so that the replayed host
    spends there what the recorder timed per step (``timed_ns``): the host work inside those
    ranges (``host_work_inside``) and the calls made in them, other phases' calls left out. As
    it was where the trace has no such time, or where its steps do not hold one range each
    (the recorder timed one optimizer's steps; a step's backward passes, summed, per thread)."""
    if timed_ns is None or not steps or graph.gap_ns is None or not len(graph.start):
        return graph
    inside = ranges_in_steps(phase_ranges, steps)
    threads = {thread for thread, _, _ in inside}
    if not inside or len(inside) != len(steps) * len(threads):
        return graph
    by_thread = by_thread_of(inside)
    events = calls_inside(graph, by_thread)
    if graph.phase_of_event is not None:
        events &= (graph.phase_of_event == 0) | (graph.phase_of_event == phase)
    if not events.any():
        return graph
    wanted = timed_ns * len(steps)

    def host_at(scale: float) -> int:
        return host_inside(graph.with_phase_cost_scale(phase, events, scale), by_thread, events)

    if host_at(0.0) <= wanted:
        return graph.with_phase_cost_scale(phase, events, 0.0)
    if host_at(_MAX_COST_SCALE) >= wanted:
        return graph.with_phase_cost_scale(phase, events, _MAX_COST_SCALE)
    low, high = _bracket(host_at, wanted)
    return graph.with_phase_cost_scale(phase, events, round((low + high) / 2, 3))


def backward_ranges(trace: Trace, steps: list[tuple[int, int]]) -> list[ThreadRange]:
    """(thread, start, end) of each step for each autograd engine thread: a thread other than
    the steps' own that runs the engine's ``evaluate_function`` ops (with CUDA tensors, torch
    runs the backward there; on the CPU it runs on the caller's thread, not told apart)."""
    if not steps:
        return []
    cpu = trace.cpu_ops
    names = [i for i, text in enumerate(trace.strings) if text.startswith(EVALUATE_PREFIX)]
    if not names:
        return []
    engine = member(cpu.name, names)
    main = int(cpu.thread[_step_rows(trace)[0]])
    threads = sorted({int(t) for t in distinct(cpu.thread[engine]).tolist()} - {main})
    return [(thread, start, end) for thread in threads for start, end in steps]


RangesByThread = dict[int, tuple[np.ndarray, np.ndarray]]  # thread -> (starts, ends)


def ranges_in_steps(
    ranges: Sequence[ThreadRange], steps: list[tuple[int, int]]
) -> list[ThreadRange]:
    """The ranges that start within the steps."""
    return [r for r in ranges if steps[0][0] <= r[1] < steps[-1][1]]


def by_thread_of(ranges: Sequence[ThreadRange]) -> RangesByThread:
    out: dict[int, tuple[list[int], list[int]]] = {}
    for thread, start, end in ranges:
        starts, ends = out.setdefault(thread, ([], []))
        starts.append(start)
        ends.append(end)
    return {
        t: (np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        for t, (a, b) in out.items()
    }


def host_inside(graph: StepGraph, by_thread: RangesByThread, events: np.ndarray) -> int:
    """The replayed host's time inside the ranges: the host work there and the calls made in
    them (``events``, from ``calls_inside``)."""
    work = sum(
        sum(graph.host_work_inside(thread, starts, ends).values())
        for thread, (starts, ends) in by_thread.items()
    )
    return work + int(graph.own[events].sum())


def calls_inside(graph: StepGraph, by_thread: RangesByThread) -> np.ndarray:
    """Per event: whether its call lies inside one of its thread's ranges (start, end)."""
    events = np.zeros(len(graph.start), dtype=bool)
    for thread, (starts, ends) in by_thread.items():
        order = np.argsort(starts, kind="stable")
        begins, finish = starts[order], ends[order]
        sel = np.flatnonzero(graph.event_thread == thread)
        at = graph.start[sel]
        k = np.searchsorted(begins, at, side="right") - 1
        events[sel] = (k >= 0) & (at < finish[np.maximum(k, 0)])
    return events


def _timed_step(
    graph: StepGraph, trace: Trace
) -> tuple[int, list[tuple[int, int]], _StepAt] | None:
    """The step the recorder timed, the steps, and the replayed step at a scale; None without
    such a measurement or anything to replay."""
    target = recorded_unprofiled_step(trace)
    ranges = profiler_steps(trace)
    if target is None or not ranges or not len(graph.start):
        return None

    def step_at(scale: float) -> int:
        return _replayed_step(graph.with_cost_scale(scale), ranges) or 0

    return target, ranges, step_at


def _bracket(step_at: Callable[[float], int], bound: float) -> tuple[float, float]:
    """Scales ``low < high`` a bisection apart, the replayed step above ``bound`` at ``low`` and
    not at ``high`` (the step falls as the scale grows; 0 is above it, the bound is not)."""
    low, high = 0.0, _MAX_COST_SCALE
    for _ in range(_CALIBRATION_ROUNDS):
        middle = (low + high) / 2
        if step_at(middle) > bound:
            low = middle
        else:
            high = middle
    return low, high


def calibration_band(
    graph: StepGraph, trace: Trace, tolerance: float
) -> tuple[float, float] | None:
    """The least and the most profiler-cost scale whose replayed step lies within ``tolerance``
    (a share) of the step the recorder timed; None without such a measurement.

    Near the point where the host and the GPU take equally long, the replayed step changes
    little with the scale while the host's own pace changes a lot (GPT small's recorded
    trace: scales 1.2 to 2.0 replay 13.4-13.8 ms against 13.5 timed, their hosts 11.4 to
    6.9 ms), so one calibrated scale is no more certain than this band."""
    timed = _timed_step(graph, trace)
    if timed is None:
        return None
    target, _, step_at = timed

    def least_scale_at_or_below(bound: float) -> float:
        """The least scale whose replayed step takes at most ``bound``."""
        if step_at(0.0) <= bound:
            return 0.0
        if step_at(_MAX_COST_SCALE) > bound:
            return _MAX_COST_SCALE
        return round(_bracket(step_at, bound)[1], 3)

    return (
        least_scale_at_or_below(target * (1 + tolerance)),
        least_scale_at_or_below(target * (1 - tolerance) - 1),
    )


def _replayed_step(graph: StepGraph, ranges: list[tuple[int, int]]) -> int | None:
    """A step of the loop replayed without the profiler: its pass over the steps; None where
    no host event lies in the steps (the graph is the loop of these ranges, ``as_loop``)."""
    starts = np.asarray(graph.start, dtype=np.int64)
    if not graph.periodic or not ((starts >= ranges[0][0]) & (starts < ranges[-1][1])).any():
        return None
    return graph.period() // len(ranges)
