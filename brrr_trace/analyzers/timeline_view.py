"""The GPU timeline made small enough to draw (docs/architecture.md §4, "The drawn timeline").

``timeline.py`` keeps every op and gap as arrays; a page cannot draw four million of them, and a
report should not carry them. Here each device's span becomes at most ``budget`` segments that
tile it exactly, in time order: a *kernel* (an op's exclusive piece of the busy time, so that
overlapping streams never draw twice), a *gap* (idle, with its cause and the line it is shown
on), or, beyond the budget, a *mixed* segment: a run of short kernels and gaps merged into one,
which keeps its busy time and its op and gap counts, and is shown on the line of its longest
piece, with the name of its longest kernel and the cause of its longest gap.
Segments longer than the merge resolution are never merged, so every long gap stays visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.attribution import LineKey
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.analyzers.paths import PathMapper
from brrr_trace.analyzers.timeline import CAUSES, DeviceTimeline, Timeline
from brrr_trace.traces.model import Trace

KERNEL = "kernel"
GAP = "gap"
MIXED = "mixed"
KINDS = (KERNEL, GAP, MIXED)
_REFINE_STEPS = 6  # halvings of the merge resolution tried when the first one leaves room
_NAME_CHARS = 500  # a drawn name is a label, not the record: templated names run to 5 k chars


@dataclass(frozen=True)
class Place:
    """A source line the timeline points at."""

    file: str
    path: str | None  # the local file, when it maps to one under the source root
    line: int
    function: str


@dataclass(frozen=True)
class DeviceSegments:
    """One device's span as segments, columns of equal length; times relative to ``start_ns``."""

    device: int
    start_ns: int  # trace time of the first GPU op's start
    span_ns: int
    ops: int  # GPU ops and gaps of the device before any merging
    gaps: int
    seg_start_ns: tuple[int, ...]
    seg_end_ns: tuple[int, ...]
    seg_kind: tuple[str, ...]  # KERNEL, GAP or MIXED
    seg_busy_ns: tuple[int, ...]  # GPU busy time inside (all of a kernel, none of a gap)
    seg_ops: tuple[int, ...]  # ops merged in (1 for a kernel)
    seg_gaps: tuple[int, ...]  # gaps merged in (1 for a gap)
    seg_place: tuple[int, ...]  # index into TimelineView.places, -1: no line
    seg_name: tuple[int, ...]  # index into TimelineView.names (the longest kernel), -1: none
    seg_cause: tuple[str, ...]  # the idle cause (of the longest gap), "" where there is no idle

    @property
    def merged(self) -> bool:
        return MIXED in self.seg_kind

    def __len__(self) -> int:
        return len(self.seg_start_ns)


@dataclass(frozen=True)
class StepWindow:
    """A ProfilerStep range on the first device's clock, with what the GPU did in it."""

    start_ns: int  # relative to the first device's start_ns (negative: before its first op)
    end_ns: int
    busy_ns: int
    idle_by_cause_ns: dict[str, int]


@dataclass(frozen=True)
class TimelineView:
    devices: tuple[DeviceSegments, ...]
    places: tuple[Place, ...]
    names: tuple[str, ...]
    budget: int  # segments per device at most
    steps: tuple[StepWindow, ...] = ()


def timeline_view(
    trace: Trace,
    ops: OpAttribution,
    timeline: Timeline,
    lines: Sequence[LineKey],
    mapper: PathMapper,
    budget: int,
    step_ranges: Sequence[tuple[int, int]] = (),
) -> TimelineView:
    """At most ``budget`` segments per device (at least 3), the places and names they name, and
    the busy and idle time of each step range."""
    budget = max(3, budget)
    place_ids: dict[int, int] = {}
    name_ids: dict[int, int] = {}
    devices = []
    step_windows: tuple[StepWindow, ...] = ()
    for dev in timeline.devices:
        rows = np.flatnonzero(trace.gpu.device == dev.device)
        pieces = _pieces(trace, ops, timeline, dev, rows)
        if not step_windows and step_ranges:
            step_windows = _step_windows(pieces, dev, step_ranges)
        devices.append(_segments(dev, pieces, budget, place_ids, name_ids))
    places = tuple(
        Place(key.file, mapper.map(key.file), key.line, key.function)
        for key in (lines[i] for i in place_ids)
    )
    names = tuple(_label(trace.strings[i]) for i in name_ids)
    return TimelineView(tuple(devices), places, names, budget, step_windows)


@dataclass(frozen=True)
class _Pieces:
    """Kernels' exclusive pieces and gaps of one device, merged in time order."""

    start: np.ndarray
    end: np.ndarray
    is_gap: np.ndarray
    line: np.ndarray  # line id, NONE
    name: np.ndarray  # string id of the kernel, NONE for a gap
    cause: np.ndarray  # cause code of a gap, NONE for a kernel


def _pieces(
    trace: Trace, ops: OpAttribution, timeline: Timeline, dev: DeviceTimeline, rows: np.ndarray
) -> _Pieces:
    gpu = trace.gpu
    excl = timeline.exclusive_ns[rows]
    keep = rows[excl > 0]
    k_end = gpu.end_ns[keep]
    k_start = k_end - timeline.exclusive_ns[keep]
    n_gaps = len(dev.gap_start)
    gap_line = dev.gap_line if len(dev.gap_line) == n_gaps else np.full(n_gaps, NONE)
    start = np.concatenate((k_start, dev.gap_start)).astype(np.int64)
    order = np.argsort(start, kind="stable")
    none_k = np.full(len(keep), NONE, dtype=np.int64)
    none_g = np.full(n_gaps, NONE, dtype=np.int64)
    return _Pieces(
        start=start[order],
        end=np.concatenate((k_end, dev.gap_end)).astype(np.int64)[order],
        is_gap=np.concatenate((np.zeros(len(keep), bool), np.ones(n_gaps, bool)))[order],
        line=np.concatenate((ops.line[keep], gap_line)).astype(np.int64)[order],
        name=np.concatenate((gpu.name[keep].astype(np.int64), none_g))[order],
        cause=np.concatenate((none_k, dev.gap_cause.astype(np.int64)))[order],
    )


def _segments(
    dev: DeviceTimeline,
    p: _Pieces,
    budget: int,
    place_ids: dict[int, int],
    name_ids: dict[int, int],
) -> DeviceSegments:
    n = len(p.start)
    length = p.end - p.start
    if n <= budget:
        starts_group = np.ones(n, dtype=bool)
    else:
        # Pieces at least `resolution` long stay whole (at most budget/3 of them); the short
        # ones merge with their neighbours inside one bucket of that width (budget/3 buckets),
        # each run cut at most once more by a whole piece: budget segments at most. Real
        # timelines are uneven, so a finer resolution usually fits as well: halve it while
        # it does.
        offset = p.start - dev.first_ns
        resolution = -(-max(1, dev.span_ns) * 3 // (budget - 2))
        starts_group = _group_starts(offset, length, resolution)
        for _ in range(_REFINE_STEPS):
            if resolution < 2:
                break
            finer = _group_starts(offset, length, resolution // 2)
            if int(finer.sum()) > budget:
                break
            resolution, starts_group = resolution // 2, finer
    group = np.cumsum(starts_group) - 1
    first = np.flatnonzero(starts_group)
    count = len(first)
    last = np.r_[first[1:] - 1, n - 1] if n else np.zeros(0, dtype=np.int64)
    busy_len = np.where(p.is_gap, 0, length)
    idle_len = np.where(p.is_gap, length, 0)
    if n:
        n_gaps = np.add.reduceat(p.is_gap.astype(np.int64), first)
        n_ops = (last - first + 1) - n_gaps
        busy = np.add.reduceat(busy_len, first)
    else:
        n_gaps = n_ops = busy = np.zeros(0, dtype=np.int64)
    # A merged segment is shown on the line of its longest piece, kernel or gap, with the name
    # of its longest kernel and the cause of its longest gap.
    line = _longest(group, p.line, length, first, count)
    name = _longest(group, p.name, busy_len, first, count)
    cause = _longest(group, p.cause, idle_len, first, count)
    kind = np.where(n_ops + n_gaps > 1, 2, np.where(n_gaps > 0, 1, 0))
    return DeviceSegments(
        device=dev.device,
        start_ns=dev.first_ns,
        span_ns=dev.span_ns,
        ops=int((~p.is_gap).sum()),
        gaps=int(p.is_gap.sum()),
        seg_start_ns=tuple((p.start[first] - dev.first_ns).tolist()),
        seg_end_ns=tuple((p.end[last] - dev.first_ns).tolist()),
        seg_kind=tuple(KINDS[k] for k in kind.tolist()),
        seg_busy_ns=tuple(busy.tolist()),
        seg_ops=tuple(n_ops.tolist()),
        seg_gaps=tuple(n_gaps.tolist()),
        seg_place=tuple(_index(place_ids, i) for i in line.tolist()),
        seg_name=tuple(_index(name_ids, i) for i in name.tolist()),
        seg_cause=tuple(str(CAUSES[c]) if c != NONE else "" for c in cause.tolist()),
    )


def _group_starts(start: np.ndarray, length: np.ndarray, resolution: int) -> np.ndarray:
    """Where a segment starts: at each whole piece, after it, and where a bucket of the
    resolution begins."""
    whole = length >= resolution
    bucket = start // resolution
    starts = np.ones(len(start), dtype=bool)
    starts[1:] = whole[1:] | whole[:-1] | (bucket[1:] != bucket[:-1])
    return starts


def _longest(
    group: np.ndarray, value: np.ndarray, weight: np.ndarray, first: np.ndarray, count: int
) -> np.ndarray:
    """Per group, the value of its longest piece that has one (the first of equals); NONE where
    no piece has weight. Linear: a trace of millions of pieces merges without a sort."""
    out = np.full(count, NONE, dtype=np.int64)
    w = np.where(value != NONE, weight, 0)
    if not len(w):
        return out
    most = np.maximum.reduceat(w, first)
    at = np.flatnonzero((w == most[group]) & (w > 0))
    if not len(at):
        return out
    lead = at[np.r_[True, group[at][1:] != group[at][:-1]]]
    out[group[lead]] = value[lead]
    return out


def _index(table: dict[int, int], key: int) -> int:
    if key == NONE:
        return -1
    found = table.get(key)
    if found is None:
        found = table[key] = len(table)
    return found


def _label(name: str) -> str:
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def _step_windows(
    p: _Pieces, dev: DeviceTimeline, ranges: Sequence[tuple[int, int]]
) -> tuple[StepWindow, ...]:
    bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
    lo, hi = bounds[:, 0], bounds[:, 1]
    busy = _covered(p.start[~p.is_gap], p.end[~p.is_gap], lo, hi)
    by_cause = {}
    for code, cause in enumerate(CAUSES):
        mine = p.cause == code
        by_cause[str(cause)] = _covered(p.start[mine], p.end[mine], lo, hi)
    return tuple(
        StepWindow(
            start_ns=int(lo[k] - dev.first_ns),
            end_ns=int(hi[k] - dev.first_ns),
            busy_ns=int(busy[k]),
            idle_by_cause_ns={c: int(v[k]) for c, v in by_cause.items()},
        )
        for k in range(len(lo))
    )


def _covered(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each window [lo, hi): how much of it the disjoint, sorted intervals cover."""
    covered: np.ndarray = _covered_until(start, end, hi) - _covered_until(start, end, lo)
    return covered


def _covered_until(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    if len(start) == 0:
        return np.zeros(len(t), dtype=np.int64)
    before = np.concatenate(([0], np.cumsum(end - start)))
    i = np.searchsorted(start, t, side="right")  # intervals starting at or before t
    inside = np.zeros(len(t), dtype=np.int64)
    has = i > 0
    j = i[has] - 1
    inside[has] = np.minimum(t[has], end[j]) - start[j]
    covered: np.ndarray = before[np.maximum(i - 1, 0)] * has + inside
    return covered
