"""Innermost-interval lookups over nested spans (frames, ops) on each host thread."""

from __future__ import annotations

import numpy as np

NONE = -1


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of [start, end) intervals (each of non-negative length)."""
    if not len(starts):
        return 0
    order = np.lexsort((ends, starts))
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    before = np.concatenate(([starts[0]], reach[:-1]))
    return int(np.maximum(0, ends - np.maximum(starts, before)).sum())


class Innermost:
    """Answers "which interval is innermost at time t on thread h" with one binary search.

    Nested intervals are flattened once per thread into segments: each segment starts at a
    boundary and names the innermost interval open from there to the next boundary.
    """

    def __init__(self, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        self._segments: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if len(start) == 0:
            return
        order = np.lexsort((-end, start, thread))
        threads = thread[order]
        cuts = np.flatnonzero(np.diff(threads)) + 1
        for chunk in np.split(order, cuts):
            self._segments[int(thread[chunk[0]])] = _flatten(chunk, start, end)

    def at(self, thread: int, t: int) -> int:
        found = self._segments.get(thread)
        if found is None:
            return NONE
        seg_start, seg_id = found
        k = int(np.searchsorted(seg_start, t, side="right")) - 1
        return int(seg_id[k]) if k >= 0 else NONE

    def at_many(self, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
        result = np.full(len(t), NONE, dtype=np.int64)
        for h, (seg_start, seg_id) in self._segments.items():
            sel = np.flatnonzero(thread == h)
            if len(sel) == 0:
                continue
            k = np.searchsorted(seg_start, t[sel], side="right") - 1
            ok = k >= 0
            result[sel[ok]] = seg_id[k[ok]]
        return result

    def positions(self, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Segment position at each query; equal positions on a thread mean no boundary between."""
        result = np.full(len(t), NONE, dtype=np.int64)
        for h, (seg_start, _) in self._segments.items():
            sel = np.flatnonzero(thread == h)
            if len(sel):
                result[sel] = np.searchsorted(seg_start, t[sel], side="right") - 1
        return result

    def overlaps(self, thread: int, a: int, b: int) -> list[tuple[int, int]]:
        """(interval, ns) pairs: how long each innermost interval covers [a, b); NONE included."""
        found = self._segments.get(thread)
        if found is None or b <= a:
            return [(NONE, b - a)] if b > a else []
        seg_start, seg_id = found
        k = max(int(np.searchsorted(seg_start, a, side="right")) - 1, 0)
        out: dict[int, int] = {}
        cursor = a
        if seg_start[0] > a:
            first = min(int(seg_start[0]), b)
            out[NONE] = first - a
            cursor = first
        n = len(seg_start)
        while cursor < b and k < n:
            seg_end = int(seg_start[k + 1]) if k + 1 < n else b
            lo, hi = max(cursor, int(seg_start[k])), min(seg_end, b)
            if hi > lo:
                key = int(seg_id[k])
                out[key] = out.get(key, 0) + hi - lo
                cursor = hi
            k += 1
        if cursor < b:
            out[NONE] = out.get(NONE, 0) + b - cursor
        return list(out.items())


# Intervals flattened per chunk (``_flatten_stack``): a thread's millions of events as Python
# lists at once, with an int object per time, were hundreds of MB for a moment on the 0.86 GB
# trace.
_CHUNK = 1 << 16
# Up to this many intervals a thread is flattened by arrays (``_flatten_nested``): its ~12
# temporaries of one int64 per interval stay a few MB, where a 0.86 GB trace's main thread (2-3
# million intervals) would add ~200 MB to the peak; there the stack loop keeps its chunks.
_NESTED_MAX = 1 << 20


def _flatten(
    order: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One thread's intervals (``order``: rows sorted by start, longest first) as segments:
    the boundary times and the innermost row open from each (``NONE`` outside all)."""
    if len(order) <= _NESTED_MAX:
        found = _flatten_nested(order, start, end)
        if found is not None:
            return found
    return _flatten_stack(order, start, end)


def _flatten_nested(
    order: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """``_flatten_stack``'s segments by array operations, the same arrays, when no interval
    outlives the one it opens in (then the stack loop never clips an end); None otherwise.

    In the stack loop an interval j closes just before the first later interval that starts
    at or after its end (its "slot"; past the last, at the end), inner intervals of a slot
    first, and it hands its segment to the interval open around it (its parent). The open
    intervals at i are the earlier ones whose slot is after i: their count is i's depth, and
    i's parent is the last earlier interval one level up. The loop's result is this one
    exactly when every interval ends by its parent's end: each interval pushed then ends no
    later than the one below it, so the pops take exactly the intervals ended by then."""
    n = len(order)
    s, e = start[order], end[order]
    index = np.arange(n, dtype=np.int64)
    # The slot of each interval: the first later start at or after its end (starts ascend).
    slot = np.maximum(np.searchsorted(s, e, side="left"), index + 1)
    before = np.cumsum(np.bincount(slot, minlength=n + 1))  # closes in slots up to each
    depth = index - before[:n]
    # Intervals level by level, in order within a level (a stable sort of small ints).
    small = int(depth.max()) < 1 << 15
    by_level = np.argsort(depth.astype(np.int16) if small else depth, kind="stable")
    level_key = depth[by_level] * (n + 1) + by_level
    up = np.searchsorted(level_key, (depth - 1) * (n + 1) + index, side="left") - 1
    has_parent = depth > 0
    parent = np.full(n, -1, dtype=np.int64)
    parent[has_parent] = by_level[up[has_parent]]
    if np.any(depth[parent[has_parent]] != depth[has_parent] - 1):
        return None  # not a nesting: cannot happen, but the loop is the definition
    if np.any(e[has_parent] > e[parent[has_parent]]):
        return None  # a child outlives its parent: the loop clips it
    # Each slot's closes (inner first: later intervals first), then the slot's own open: the
    # k-th close in that order sits after the opens of the slots before its own.
    closes = index[::-1][np.argsort(slot[::-1], kind="stable")]
    open_at = index + before[:n]
    close_at = np.empty(n, dtype=np.int64)
    close_at[closes] = index + slot[closes]
    ids = order.astype(np.int64)
    seg_start = np.empty(2 * n, dtype=np.int64)
    seg_id = np.empty(2 * n, dtype=np.int32 if len(start) < 1 << 31 else np.int64)
    seg_start[open_at] = s
    seg_id[open_at] = ids
    seg_start[close_at] = e
    seg_id[close_at] = np.where(has_parent, ids[np.maximum(parent, 0)], NONE)
    return seg_start, seg_id


def _flatten_stack(
    order: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    # Each interval opens one segment and, when it ends, opens its parent's again: exactly two
    # per interval, written a chunk at a time into arrays made once. Ids are rows of the
    # table: int32 while the table is shorter than 2**31.
    n = len(order)
    seg_start = np.empty(2 * n, dtype=np.int64)
    seg_id = np.empty(2 * n, dtype=np.int32 if len(start) < 1 << 31 else np.int64)
    written = 0
    # The open intervals, innermost last, above a sentinel that outlasts every time (ends are
    # below 2**62 ns): the loop runs once per interval, so its top is kept in a local too.
    outside = 1 << 64
    stack_end, stack_id = [outside], [NONE]
    push_end, push_id = stack_end.append, stack_id.append
    pop_end, pop_id = stack_end.pop, stack_id.pop
    top = outside
    for lo in range(0, n, _CHUNK):
        part = order[lo : lo + _CHUNK]
        seg_t: list[int] = []
        seg_i: list[int] = []
        emit_t, emit_i = seg_t.append, seg_i.append
        for s, e, i in zip(start[part].tolist(), end[part].tolist(), part.tolist(), strict=True):
            while top <= s:
                emit_t(pop_end())
                pop_id()
                emit_i(stack_id[-1])
                top = stack_end[-1]
            if e > top:
                # A child that outlives its parent (clock rounding): clip it to the parent.
                e = top
            push_end(e)
            push_id(i)
            top = e
            emit_t(s)
            emit_i(i)
        if lo + _CHUNK >= n:
            while len(stack_end) > 1:
                emit_t(pop_end())
                pop_id()
                emit_i(stack_id[-1])
        seg_start[written : written + len(seg_t)] = seg_t
        seg_id[written : written + len(seg_i)] = seg_i
        written += len(seg_t)
    return seg_start, seg_id
