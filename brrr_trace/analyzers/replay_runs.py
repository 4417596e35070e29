"""The replay of a graph run by run: between two blocking calls the host's clock is a running
sum and each stream's ends a running maximum, so a run costs a few dozen numpy calls instead of
a Python step per event. ``StepGraph._replay`` uses it where the runs are long enough; it gives
the same ints as the event loop (``tests/test_replay_runs.py``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from brrr_trace.analyzers.intervals import NONE

if TYPE_CHECKING:
    from brrr_trace.analyzers.replay import Fix, StepGraph

CALL_NS = 2_000  # what a blocking call costs the host when there is nothing to wait for

# Fewer events than this between two blocking calls on average, and the loop replays the graph:
# each run between two blocking calls costs a few dozen numpy calls.
MIN_EVENTS_PER_RUN = 32
_MAX_VECTOR_NS = 1 << 61  # int64 holds sums of times up to 2**63; the loop's ints any


@dataclass
class Runs:
    """A graph as arrays: every GPU op it launches, in launch order (``entry``), per event."""

    n: int
    first_clock: int
    work: np.ndarray  # per event
    own: np.ndarray
    blocks: np.ndarray
    entry_row: np.ndarray  # per entry: the GPU op row
    entry_event: np.ndarray
    entry_stream: np.ndarray
    entry_latency: np.ndarray
    entry_duration: np.ndarray
    entry_of_row: np.ndarray  # per GPU op row: its entry, NONE when not launched
    event_entries: np.ndarray  # per event: its first entry (n + 1 values)
    other_start: np.ndarray
    other_end: np.ndarray
    other_stream: np.ndarray
    finish: int  # the end of the last op launched outside

    @staticmethod
    def of(graph: StepGraph) -> Runs | None:
        n = len(graph.launched)
        blocking = int(np.count_nonzero(graph.blocks))
        if graph.after or not n or n < MIN_EVENTS_PER_RUN * (blocking + 1):
            return None
        others = graph.others
        times = [graph.work, graph.own, others[:, :2], graph.duration]
        largest = max(
            [abs(int(graph.gap_start[0]))] + [int(np.abs(t).max(initial=0)) for t in times]
        )
        if largest >= _MAX_VECTOR_NS:
            return None
        entries = graph._shared.get("entries")
        if entries is None:  # the same for every cost scale: made once, shared
            rows = graph.launched.rows
            entry_of_row = np.full(len(graph.duration), NONE, dtype=np.int64)
            entry_of_row[rows] = np.arange(len(rows))
            entries = graph._shared["entries"] = (
                rows,
                np.repeat(np.arange(n), graph.launched.counts()),
                graph.stream[rows],
                graph.latency[rows],
                graph.duration[rows],
                entry_of_row,
                graph.launched.first,
                others[:, 0].copy(),
                others[:, 1].copy(),
                others[:, 2].copy(),
            )
        row, event, stream, latency, duration, of_row, first, o_start, o_end, o_stream = entries
        return Runs(
            n=n,
            first_clock=int(graph.gap_start[0]),
            work=graph.work,
            own=graph.own,
            blocks=graph.blocks,
            entry_row=row,
            entry_event=event,
            entry_stream=stream,
            entry_latency=latency,
            entry_duration=duration,
            entry_of_row=of_row,
            event_entries=first,
            other_start=o_start,
            other_end=o_end,
            other_stream=o_stream,
            finish=int(o_end.max(initial=0)),
        )


def replay_runs(
    runs: Runs,
    fix: Fix,
    passes: int,
    pass_ends: list[int] | None,
    waits: np.ndarray | None = None,
) -> int:
    """``StepGraph._replay`` run by run: the host's clock between two blocking calls is a sum,
    and each stream's ends follow ``end = max(ready, previous end) + duration``, which is
    ``D[k] + max(free, max over j <= k of ready[j] - D[j - 1])`` with ``D`` the running sum of
    durations: a cumulative maximum per stream. Only a blocking call waits for the GPU, so the
    loop over events becomes a loop over the runs between blocking calls, with the same ints."""
    n = runs.n
    step = runs.work
    if fix.host_saved:
        step = step.copy()
        saved = [(e, ns) for e, ns in fix.host_saved.items() if 0 <= e < n]
        step[[e for e, _ in saved]] -= np.asarray([ns for _, ns in saved], dtype=np.int64)
    step = np.maximum(step, 0)
    blocking = runs.blocks
    advance = runs.own.copy()
    if fix.unblocked:
        unblocked = np.zeros(n, dtype=bool)
        unblocked[[e for e in fix.unblocked if 0 <= e < n]] = True
        advance[blocking & unblocked] = CALL_NS
        blocking = blocking & ~unblocked
    for event, own_ns in fix.own.items():
        if not blocking[event]:
            advance[event] = own_ns
    duration = runs.entry_duration
    keep: np.ndarray | None = None
    if fix.durations:
        duration = duration.copy()
        rows = np.fromiter(fix.durations, dtype=np.int64, count=len(fix.durations))
        new_ns = np.fromiter(fix.durations.values(), dtype=np.int64, count=len(rows))
        entries = runs.entry_of_row[rows]
        launched = entries != NONE
        entries, new_ns = entries[launched], new_ns[launched]
        duration[entries] = new_ns
        if (new_ns <= 0).any():
            keep = np.ones(len(duration), dtype=bool)
            keep[entries[new_ns <= 0]] = False
    ends_of_runs = np.flatnonzero(blocking).tolist()
    if not ends_of_runs or ends_of_runs[-1] != n - 1:
        ends_of_runs.append(n - 1)
    stream_free: dict[int, int] = {}
    clock = runs.first_clock
    queued_end = 0
    other_k = 0
    n_others = len(runs.other_start)
    end = 0
    for pass_ in range(passes):
        first = 0
        for last in ends_of_runs:
            # The host's clock at each event of the run, once its work before the event is done.
            at = clock + np.cumsum(step[first : last + 1])
            at[1:] += np.cumsum(advance[first:last])
            lo, hi = int(runs.event_entries[first]), int(runs.event_entries[last + 1])
            local = runs.entry_event[lo:hi] - first
            ready = at[local] + runs.entry_latency[lo:hi]
            length = duration[lo:hi]
            streams = runs.entry_stream[lo:hi]
            is_op = np.ones(hi - lo, dtype=bool)
            if keep is not None:
                kept = keep[lo:hi]
                local, ready, length, streams = (
                    local[kept],
                    ready[kept],
                    length[kept],
                    streams[kept],
                )
                is_op = is_op[kept]
            # Ops launched outside the program free their stream once the host's clock has
            # passed their start (before the ops of that event).
            if other_k < n_others:
                reach = np.maximum.accumulate(at)
                taken = int(np.searchsorted(runs.other_start[other_k:], reach[-1], side="right"))
                if taken:
                    k = slice(other_k, other_k + taken)
                    other_local = np.searchsorted(reach, runs.other_start[k], side="left")
                    # Others before the ops of their event, each group in its own order.
                    key = np.concatenate((local * 2 + 1, other_local * 2))
                    order = np.argsort(key, kind="stable")
                    local = key[order]
                    ready = np.concatenate((ready, runs.other_end[k]))[order]
                    length = np.concatenate((length, np.zeros(taken, dtype=np.int64)))[order]
                    streams = np.concatenate((streams, runs.other_stream[k]))[order]
                    is_op = np.concatenate((is_op, np.zeros(taken, dtype=bool)))[order]
                    other_k += taken
            if len(ready):
                by_stream = np.argsort(streams, kind="stable")
                sorted_streams = streams[by_stream]
                cuts = np.flatnonzero(sorted_streams[1:] != sorted_streams[:-1]) + 1
                bounds = [0, *cuts.tolist(), len(by_stream)]
                op_end = queued_end
                for a, b in itertools.pairwise(bounds):
                    chosen = by_stream[a:b]
                    s = int(sorted_streams[a])
                    total = np.cumsum(length[chosen])
                    lead = np.maximum.accumulate(ready[chosen] - (total - length[chosen]))
                    ends = total + np.maximum(lead, stream_free.get(s, 0))
                    stream_free[s] = int(ends[-1])
                    ops_here = is_op[chosen]
                    if ops_here.any():
                        op_end = max(op_end, int(ends[ops_here].max()))
                queued_end = op_end
            last_at = int(at[-1])
            if blocking[last]:
                if waits is not None and pass_ == passes - 1 and queued_end > last_at + CALL_NS:
                    waits[last] = queued_end - last_at - CALL_NS
                clock = max(last_at + CALL_NS, queued_end)
            else:
                clock = last_at + int(advance[last])
            first = last + 1
        end = max(runs.finish, queued_end, clock)
        if pass_ends is not None:
            pass_ends.append(end)
    return end
