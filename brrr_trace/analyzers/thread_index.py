"""Per-thread indexes of a trace's host times, made on first use and dropped on request.

The Locator (attribution.py) asks, for one host thread at a time, for its frames and ATen ops
in order (call sites), the times where a call starts or ends (the timeline's cut points) and
the start times of what the profiler recorded (the profiler's cost). Each is a copy of the
trace's times, so each is made a chunk at a time and can be let go once no later stage needs it.
"""

from __future__ import annotations

import numpy as np

from brrr_trace.traces.model import Trace

_COPY_CHUNK = 1 << 18  # times copied or compared at a time (_copy_kept, _without_repeats)

ThreadEvents = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# A thread's frames and ops in order: start, row, is_frame (``ThreadIndexes.events_of``).
ThreadOrder = tuple[np.ndarray, np.ndarray, np.ndarray]


class ThreadIndexes:
    """Indexes of one trace's host threads; ``marker_rows``: the CPU op rows of the
    recorder's ``brrr.line`` annotations."""

    def __init__(self, trace: Trace, marker_rows: np.ndarray) -> None:
        self.trace = trace
        self._marker_rows = marker_rows
        self._thread_events: dict[int, ThreadOrder] = {}
        self._traced: dict[int, ThreadEvents] = {}
        self._edges: dict[int, np.ndarray] = {}

    def events_of(self, thread: int) -> ThreadOrder:
        """Frames and ATen ops of a thread by start, outer first: start, row, is_frame. Their
        ends are not kept (``ends``, from the rows): the main thread's were 14 MB of the 0.86
        GB benchmark trace's peak, and the call sites read a few at a time."""
        found = self._thread_events.get(thread)
        if found is None:
            frames, cpu = self.trace.frames, self.trace.cpu_ops
            mine = frames.thread == thread
            ops = (cpu.thread == thread) & ~cpu.annotation
            nf = int(np.count_nonzero(mine))
            n = nf + int(np.count_nonzero(ops))
            # Each column made once, a chunk at a time, and put in order as soon as it is made:
            # the thread's longest table (a main thread with millions of frames) is held twice
            # one column at a time, not whole.
            start = np.empty(n, dtype=np.int64)
            _copy_kept(cpu.start_ns, ops, start, _copy_kept(frames.start_ns, mine, start, 0))
            end = np.empty(n, dtype=np.int64)
            _copy_kept(cpu.end_ns, ops, end, _copy_kept(frames.end_ns, mine, end, 0))
            # Frames before ops on a tie: a built-in frame wraps the op it calls. The frames
            # come first, so a stable order by start, then the longer first, puts them there.
            np.negative(end, out=end)
            order = np.lexsort((end, start))
            np.negative(end, out=end)
            del end
            start = start[order]
            is_frame = order < nf
            # Rows as int32 while the tables are shorter than 2**31 (always, in practice).
            wide = max(len(frames), len(cpu)) >= 1 << 31
            row = np.empty(n, dtype=np.int64 if wide else np.int32)
            _rows_kept(ops, row, _rows_kept(mine, row, 0))
            row = row[order]
            del order
            found = (start, row, is_frame)
            self._thread_events[thread] = found
        return found

    def ends(self, rows: np.ndarray, is_frame: np.ndarray) -> np.ndarray:
        """The ends of some of a thread's events (``events_of``'s rows and is_frame)."""
        out = np.empty(len(rows), dtype=np.int64)
        out[is_frame] = self.trace.frames.end_ns[rows[is_frame]]
        ops = ~is_frame
        out[ops] = self.trace.cpu_ops.end_ns[rows[ops]]
        return out

    def traced_starts(self, thread: int) -> ThreadEvents:
        """Start times of what the profiler recorded on a thread: Python frames, ATen ops, CUDA
        API calls, the recorder's ``brrr.line`` annotations."""
        found = self._traced.get(thread)
        if found is None:
            trace = self.trace
            cpu = trace.cpu_ops
            # The tables are sorted by start (traces/model.py), so what a mask keeps is too;
            # a thread that has a whole table (the main thread's frames) shares its column.
            frames = _of_thread(trace.frames.start_ns, trace.frames.thread == thread)
            ops = _of_thread(cpu.start_ns, (cpu.thread == thread) & ~cpu.annotation)
            calls = _of_thread(trace.host_calls.start_ns, trace.host_calls.thread == thread)
            markers = cpu.start_ns[self._marker_rows][cpu.thread[self._marker_rows] == thread]
            found = (frames, ops, calls, markers)
            self._traced[thread] = found
        return found

    def frame_edges(self, thread: int) -> np.ndarray:
        """Sorted times where a Python call or an ATen op starts or ends on the thread: an
        operator (``a < b``, ``x - y``) runs its op with no Python call around it."""
        found = self._edges.get(thread)
        if found is None:
            frames, cpu = self.trace.frames, self.trace.cpu_ops
            mine = frames.thread == thread
            ops = (cpu.thread == thread) & ~cpu.annotation
            parts = (frames.start_ns, frames.end_ns, cpu.start_ns, cpu.end_ns)
            masks = (mine, mine, ops, ops)
            # Made in one array and sorted and thinned in place: the main thread's edges are
            # tens of MB, and each copy of them was the timeline's peak.
            found = np.empty(sum(int(np.count_nonzero(m)) for m in masks), dtype=np.int64)
            at = 0
            for times, keep in zip(parts, masks, strict=True):
                at = _copy_kept(times, keep, found, at)
            found.sort()
            found = _without_repeats(found)
            self._edges[thread] = found
        return found

    def let_go(
        self, *, cut_points: bool = False, thread_events: bool = False, traced: bool = False
    ) -> None:
        """Drop the indexes named; one asked for again is rebuilt."""
        if cut_points:
            self._edges.clear()
        if thread_events:
            self._thread_events.clear()
        if traced:
            self._traced.clear()


def inside(times: np.ndarray, a: int, b: int) -> np.ndarray:
    """The sorted times strictly inside (a, b)."""
    return times[np.searchsorted(times, a, side="right") : np.searchsorted(times, b, side="left")]


def _of_thread(times: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The times a mask keeps; the column itself (no copy) where it keeps all of them."""
    return times if keep.all() else times[keep]


def _copy_kept(times: np.ndarray, keep: np.ndarray, out: np.ndarray, at: int) -> int:
    """The times a mask keeps, written into ``out`` from ``at`` a chunk at a time (a masked
    copy of a whole column is tens of MB for a moment); the position after them."""
    for lo in range(0, len(times), _COPY_CHUNK):
        kept = times[lo : lo + _COPY_CHUNK][keep[lo : lo + _COPY_CHUNK]]
        out[at : at + len(kept)] = kept
        at += len(kept)
    return at


def _rows_kept(keep: np.ndarray, out: np.ndarray, at: int) -> int:
    """The rows a mask keeps, written into ``out`` from ``at`` a chunk at a time (as
    ``_copy_kept``); the position after them."""
    for lo in range(0, len(keep), _COPY_CHUNK):
        kept = np.flatnonzero(keep[lo : lo + _COPY_CHUNK]) + lo
        out[at : at + len(kept)] = kept
        at += len(kept)
    return at


def _without_repeats(times: np.ndarray) -> np.ndarray:
    """Sorted times with each value once, thinned in place a chunk at a time (a mask and a
    copy of the whole held it twice); ``times`` must own its memory."""
    n = len(times)
    if not n:
        return times
    written = 1
    for lo in range(1, n, _COPY_CHUNK):
        hi = min(n, lo + _COPY_CHUNK)
        new = times[lo:hi][times[lo:hi] != times[lo - 1 : hi - 1]]
        times[written : written + len(new)] = new
        written += len(new)
    times.resize(written, refcheck=False)  # the caller's own array: no other view of it
    return times
