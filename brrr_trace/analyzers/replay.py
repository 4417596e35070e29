"""What a fix would save, by replaying the host and the GPU's queues with the fix applied
(DESIGN §7; the method of Daydream, USENIX ATC 2020).

One host thread is replayed event by event: its launches and its blocking calls, with the time
between them as the trace shows it less the profiler's own estimated cost there (the trace was
recorded with stacks, which slows the host down). A launch puts its GPU ops on their streams;
each starts when launched (plus the launch latency the trace shows) or when its stream is free,
whichever is later. A blocking call holds the host until every op launched so far has finished.
GPU ops launched by other threads keep their times and hold their streams. The fix changes the
replay (a removed wait no longer blocks); the saving is the baseline replay's end minus the
fixed replay's, so it is zero where the GPU, not the host, sets the pace, and never more than
the time the fix takes away.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.attribution import Locator, OpAttribution
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.traces.model import Trace

_CALL_NS = 2_000  # what a blocking call costs the host when there is nothing to wait for
_MAX_LATENCY_NS = 20_000  # longer than this from launch to start is not launch latency


@dataclass(frozen=True)
class _HostEvent:
    start: int
    end: int
    row: int  # host call row
    blocks: bool  # a blocking call (sync, device-to-host copy)
    ops: tuple[int, ...]  # GPU rows it launched


def saving_without_waits(
    trace: Trace,
    ops: OpAttribution,
    locator: Locator,
    blocking_rows: np.ndarray,
    removed_rows: set[int],
) -> int:
    """ns saved if the host calls ``removed_rows`` (all on one thread) no longer blocked.

    ``blocking_rows`` are every blocking host call of the trace (they still block where kept).
    """
    if not removed_rows or not len(trace.gpu):
        return 0
    host = trace.host_calls
    thread = int(host.thread[next(iter(removed_rows))])
    events = _host_events(trace, ops, thread, blocking_rows)
    if not events:
        return 0
    work = _host_work(locator, thread, events)
    latency = _latencies(trace, ops)
    replayed = np.zeros(len(trace.gpu), dtype=bool)
    for event in events:
        replayed[list(event.ops)] = True
    others = _fixed_ops(trace, replayed)
    gpu = trace.gpu
    columns = (gpu.stream.tolist(), (gpu.end_ns - gpu.start_ns).tolist(), latency.tolist())
    before = _replay(events, work, columns, others, set())
    after = _replay(events, work, columns, others, removed_rows)
    return max(0, before - after)


def _host_events(
    trace: Trace, ops: OpAttribution, thread: int, blocking_rows: np.ndarray
) -> list[_HostEvent]:
    host = trace.host_calls
    has = np.flatnonzero(ops.launch != NONE)
    mine = has[host.thread[ops.launch[has]] == thread]
    mine = mine[np.argsort(ops.launch[mine], kind="stable")]
    calls, first = np.unique(ops.launch[mine], return_index=True)
    groups = np.split(mine, first[1:]) if len(mine) else []
    launched = dict(zip(calls.tolist(), (g.tolist() for g in groups), strict=True))
    blocking = {int(r) for r in blocking_rows.tolist() if int(host.thread[r]) == thread}
    rows = sorted(set(launched) | blocking, key=lambda r: (int(host.start_ns[r]), r))
    return [
        _HostEvent(
            int(host.start_ns[r]),
            int(host.end_ns[r]),
            r,
            r in blocking,
            tuple(launched.get(r, ())),
        )
        for r in rows
    ]


def _host_work(locator: Locator, thread: int, events: list[_HostEvent]) -> np.ndarray:
    """Host time before each event since the previous one returned, less the profiler's cost;
    a non-blocking call's own duration is host work too."""
    starts = np.array([e.start for e in events], dtype=np.int64)
    ends = np.array([e.end for e in events], dtype=np.int64)
    prev_end = np.concatenate(([starts[0]], ends[:-1]))
    gaps = np.maximum(0, starts - prev_end)
    cost = locator.profiler_cost_between(np.full(len(events), thread), prev_end, starts)
    return np.maximum(0, gaps - cost)


def _latencies(trace: Trace, ops: OpAttribution) -> np.ndarray:
    """Launch-to-start delay of each GPU op where its stream was idle at launch, else 0."""
    gpu, host = trace.gpu, trace.host_calls
    out = np.zeros(len(gpu), dtype=np.int64)
    if not len(gpu):
        return out
    order = np.lexsort((gpu.start_ns, gpu.stream))
    stream = gpu.stream[order]
    # When each op's stream finished its previous op (never, for a stream's first op).
    free = np.concatenate(([np.iinfo(np.int64).min], gpu.end_ns[order][:-1]))
    free[np.concatenate(([True], stream[1:] != stream[:-1]))] = np.iinfo(np.int64).min
    launch = ops.launch[order]
    has = launch != NONE
    launched = np.where(has, host.start_ns[np.maximum(launch, 0)], 0)
    idle = has & (free <= launched)
    lag = np.clip(gpu.start_ns[order] - launched, 0, _MAX_LATENCY_NS)
    out[order[idle]] = lag[idle]
    return out


def _fixed_ops(trace: Trace, replayed: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, end, stream) of the GPU ops launched by other threads, by start."""
    gpu = trace.gpu
    rows = np.flatnonzero(~replayed)
    rows = rows[np.argsort(gpu.start_ns[rows], kind="stable")]
    return list(
        zip(
            gpu.start_ns[rows].tolist(),
            gpu.end_ns[rows].tolist(),
            gpu.stream[rows].tolist(),
            strict=True,
        )
    )


def _replay(
    events: list[_HostEvent],
    work: np.ndarray,
    columns: tuple[list[int], list[int], list[int]],  # per GPU op: stream, duration, latency
    others: list[tuple[int, int, int]],
    removed: set[int],
) -> int:
    streams, durations, latency = columns
    # Ops of other threads keep their times; they hold their streams in start order.
    other_k = 0
    stream_free: dict[int, int] = {}
    clock = events[0].start
    finish = max((end for _, end, _ in others), default=0)
    queued_end = 0
    for event, before in zip(events, work.tolist(), strict=True):
        clock += before
        while other_k < len(others) and others[other_k][0] <= clock:
            start, end, stream = others[other_k]
            stream_free[stream] = max(stream_free.get(stream, 0), end)
            other_k += 1
        launch_at = clock
        for row in event.ops:
            stream = streams[row]
            start = max(launch_at + latency[row], stream_free.get(stream, 0))
            end = start + durations[row]
            stream_free[stream] = end
            queued_end = max(queued_end, end)
            finish = max(finish, end)
        if event.blocks and event.row not in removed:
            clock = max(clock + _CALL_NS, queued_end)
        else:
            clock += event.end - event.start if not event.blocks else _CALL_NS
    return finish  # the GPU's last op: host work after the last launch changes nothing there
