"""Across the ranks of one run: who waits in each collective, for whom, and why
(docs/architecture.md §13).

Each rank's worker reduces its trace to a ``RankPiece`` (its steps, its collectives, its lines'
times: never its events); ``merge`` matches the collectives of all ranks and charges the wait.

A collective call is matched across ranks by its process group and its order in the group,
checked by its name and (where every rank's size is fixed) its size. Clocks of different hosts
disagree, so the wait is measured without them: a rank's time in a matched call minus the
shortest time any rank spent in it. The rank with the shortest time arrived last (the others
were already waiting when it came); that shortest time is what moving the data took.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from brrr_trace.analyzers.intervals import union_ns
from brrr_trace.analyzers.steps import profiler_steps
from brrr_trace.arraysets import member
from brrr_trace.traces.model import Trace

# Collectives whose message size is per rank (each rank sends its own split).
_VARIABLE_SIZE = ("alltoall", "all_to_all", "allgather_v", "send", "recv", "gather", "scatter")


class Collective(Protocol):
    """The fields of ``analyzers.collectives.CollectiveCall`` the merge reads."""

    @property
    def group(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def bytes(self) -> int | None: ...
    @property
    def step(self) -> int | None: ...
    @property
    def host_start_ns(self) -> int: ...
    @property
    def host_end_ns(self) -> int: ...
    @property
    def kernel_start_ns(self) -> int | None: ...
    @property
    def kernel_end_ns(self) -> int | None: ...
    @property
    def line(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class StepTime:
    number: int | None  # ProfilerStep#N; None: the whole trace, which has no steps
    start_ns: int
    end_ns: int
    compute_ns: int  # GPU busy time outside collective kernels, in the step


@dataclass(frozen=True, slots=True)
class LineTime:
    file: str
    path: str | None
    line: int
    function: str
    total_ns: int  # the line's GPU time plus the idle charged to it, on this rank
    work_ns: int  # of which not communication (collective kernels, waiting in collectives)
    # The line issues collectives: its time there is waiting and moving data, which cannot be
    # what made a rank late.
    collective: bool = False


@dataclass(frozen=True, slots=True)
class RankPiece:
    """What one rank's worker sends back: small, whatever the trace's size."""

    rank: int
    path: str
    span_ns: int
    steps: tuple[StepTime, ...]
    collectives: CallTable | tuple[Collective, ...]  # the worker sends a CallTable
    lines: tuple[LineTime, ...]
    problems: tuple[str, ...] = ()  # the kinds of the problems its report has


@dataclass(frozen=True, slots=True)
class RankStep:
    step: int | None
    compute_ns: int
    wait_ns: int  # in collectives, for ranks that came later
    transfer_ns: int  # in collectives, moving data (the fastest rank's time in the same calls)


@dataclass(frozen=True, slots=True)
class RankTimes:
    rank: int
    path: str
    compute_ns: int
    wait_ns: int
    transfer_ns: int
    late_calls: int  # matched calls this rank arrived at last (the others waited for it)
    steps: tuple[RankStep, ...]
    # Its wait per line that issued the calls ("path.py:LINE" of CollectiveCall.line; "" for
    # calls on no line).
    wait_by_line: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class LineSpread:
    file: str
    path: str | None
    line: int
    function: str
    p50_ns: int
    max_ns: int
    max_rank: int
    ranks: int  # ranks that ran the line


@dataclass(frozen=True, slots=True)
class LateLine:
    file: str
    path: str | None
    line: int
    function: str
    excess_ns: int  # the straggler's time on the line above the other ranks' median


@dataclass(frozen=True, slots=True)
class Straggler:
    rank: int
    late_ns: int  # how long the others waited for it, over the calls it came last to
    others_wait_ns: int  # every other rank's wait in those calls, summed
    calls: int
    per_call_late_ns: int  # the median of those longest waits
    agrees_with_clock: float | None  # share of those calls it also started last by the clock
    lines: tuple[LateLine, ...]
    collective_lines: tuple[str, ...]  # "path.py:LINE" of the calls the others waited in
    per_step_late_ns: int = 0  # the median over steps of its lateness in the step
    steady_late_ns: int = 0  # late by at least this in every step (0: on time in some step)


@dataclass(frozen=True, slots=True)
class CrossRank:
    ranks: tuple[RankTimes, ...]
    matched_calls: int
    unmatched_calls: int  # calls some rank has and another lacks, or with another name or size
    stragglers: tuple[Straggler, ...]  # largest late time first
    line_spread: tuple[LineSpread, ...]  # by max_ns, descending


def call_ns(call: Collective) -> int:
    """Time the rank spent in the call: its kernel's, else (gloo, CPU) its host op's."""
    if call.kernel_start_ns is not None and call.kernel_end_ns is not None:
        return max(0, call.kernel_end_ns - call.kernel_start_ns)
    return max(0, call.host_end_ns - call.host_start_ns)


def _arrival_ns(call: Collective) -> int:
    return call.kernel_start_ns if call.kernel_start_ns is not None else call.host_start_ns


def _end_ns(call: Collective) -> int:
    if call.kernel_start_ns is not None and call.kernel_end_ns is not None:
        return call.kernel_end_ns
    return call.host_end_ns


# An absent step or size in a CallTable column (no real one is this small).
_ABSENT = int(np.iinfo(np.int64).min)


@dataclass(frozen=True, slots=True)
class CallTable:
    """A rank's collective calls as columns, in the rank's order: what the merge reads of each
    call, about 60 bytes a call (a ``CollectiveCall`` object takes several hundred), so that the
    driver holding every rank's calls stays small."""

    groups: tuple[str, ...]
    names: tuple[str, ...]
    lines: tuple[str, ...]
    group: np.ndarray  # int32, into groups
    index: np.ndarray  # int64
    name: np.ndarray  # int32, into names
    bytes: np.ndarray  # int64; _ABSENT: not known
    step: np.ndarray  # int64; _ABSENT: in no step
    ns: np.ndarray  # int64: call_ns
    end_ns: np.ndarray  # int64: its kernel's end, else its host op's
    arrival_ns: np.ndarray  # int64: its kernel's start, else its host op's
    line: np.ndarray  # int32, into lines; -1: on no source line

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def of(cls, calls: CallTable | Sequence[Collective]) -> CallTable:
        if isinstance(calls, CallTable):
            return calls
        codes: tuple[dict[str, int], dict[str, int], dict[str, int]] = ({}, {}, {})
        groups, names, lines = codes
        columns: list[list[int]] = [[] for _ in range(9)]
        for c in calls:
            row = (
                groups.setdefault(c.group, len(groups)),
                c.index,
                names.setdefault(c.name, len(names)),
                _ABSENT if c.bytes is None else c.bytes,
                _ABSENT if c.step is None else c.step,
                call_ns(c),
                _end_ns(c),
                _arrival_ns(c),
                -1 if c.line is None else lines.setdefault(c.line, len(lines)),
            )
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        small = (0, 2, 8)
        arrays = [
            np.array(column, dtype=np.int32 if i in small else np.int64)
            for i, column in enumerate(columns)
        ]
        return cls(tuple(groups), tuple(names), tuple(lines), *arrays)


def _matched(tables: Sequence[CallTable]) -> tuple[np.ndarray, int]:
    """Per rank (rows) and matched call (columns), the call's row in the rank's table; and the
    number of calls left unmatched (a rank lacks the call, or names or sizes disagree)."""
    n = len(tables)
    group_codes: dict[str, int] = {}
    name_codes: dict[str, int] = {}
    parts = []
    for r, t in enumerate(tables):
        if not len(t):
            continue
        groups = np.array([group_codes.setdefault(g, len(group_codes)) for g in t.groups])
        names = np.array([name_codes.setdefault(m, len(name_codes)) for m in t.names])
        rows = np.arange(len(t))
        parts.append((np.full(len(t), r), rows, groups[t.group], t.index, names[t.name], t.bytes))
    if not parts:
        return np.zeros((n, 0), dtype=np.int64), 0
    rank, row, group, index, name, size = (np.concatenate(c) for c in zip(*parts, strict=True))
    keys, key = np.unique(np.stack([group, index], axis=1), axis=0, return_inverse=True)
    key = key.reshape(-1)
    # One call per rank and key, the rank's last (as a dict keyed by group and index keeps).
    ranked = rank * len(keys) + key
    _, first_of_reversed = np.unique(ranked[::-1], return_index=True)
    keep = len(ranked) - 1 - first_of_reversed
    rank, row, key, name, size = rank[keep], row[keep], key[keep], name[keep], size[keep]
    present = np.bincount(key, minlength=len(keys))
    lowest = np.full(len(keys), np.iinfo(np.int64).max)
    highest = np.full(len(keys), -1)
    np.minimum.at(lowest, key, name)
    np.maximum.at(highest, key, name)
    known = size != _ABSENT
    least = np.full(len(keys), np.iinfo(np.int64).max)
    most = np.full(len(keys), np.iinfo(np.int64).min)
    np.minimum.at(least, key[known], size[known])
    np.maximum.at(most, key[known], size[known])
    spelled = list(name_codes)
    variable = np.array(
        [any(tag in text.lower() for tag in _VARIABLE_SIZE) for text in spelled], dtype=bool
    )
    one_name = lowest == highest
    sizes_agree = variable[np.where(one_name, lowest, 0)] | (least >= most)
    ok = (present == n) & one_name & sizes_agree
    unmatched = int(present[~ok].sum())
    column = np.cumsum(ok) - 1
    out = np.zeros((n, int(ok.sum())), dtype=np.int64)
    mine = ok[key]
    out[rank[mine], column[key[mine]]] = row[mine]
    return out, unmatched


def merge(
    pieces: Sequence[RankPiece], min_wait_ns: int, late_lines: int = 5, spread_lines: int = 50
) -> CrossRank:
    """Match the ranks' collectives, charge each rank's wait, name the stragglers.

    Waits are intervals on the waiting rank's own clock (the last ``wait`` ns before its call
    ended), and a straggler's lateness intervals are on its own clock (the ``wait`` ns before it
    arrived), so that calls in flight together (DDP's buckets) are counted once, and no two
    ranks' clocks are ever compared."""
    pieces = sorted(pieces, key=lambda p: p.rank)
    tables = [CallTable.of(p.collectives) for p in pieces]
    rows, unmatched = _matched(tables)
    n, matched = rows.shape

    def column(name: str) -> np.ndarray:
        return (
            np.stack([getattr(t, name)[rows[r]] for r, t in enumerate(tables)])
            if n
            else np.zeros((0, 0), dtype=np.int64)
        )

    ns, end, step, arrival, line = (
        column(c) for c in ("ns", "end_ns", "step", "arrival_ns", "line")
    )
    fastest = ns.min(axis=0) if n else np.zeros(0, dtype=np.int64)
    # The rank with the shortest time in the call arrived last: the others waited for it.
    last = ns.argmin(axis=0) if n else np.zeros(0, dtype=np.int64)
    caused = ns.max(axis=0) - fastest if n else fastest
    # Late, not jitter: the others waited longer than the call takes once all are in.
    # Ranks' hosts and the transport vary by a fraction of a call's own time (gloo buckets:
    # up to half of it between balanced ranks); a late rank keeps them waiting far longer.
    late = (caused >= np.maximum(min_wait_ns, fastest)) if n > 1 else np.zeros(matched, bool)
    late_at = np.flatnonzero(late)
    late_rank = last[late_at]
    arrived = arrival[late_rank, late_at]
    late_start = arrived - caused[late_at]
    late_step = step[late_rank, late_at]
    others = (ns.sum(axis=0) - n * fastest)[late_at]
    agrees = arrived >= (arrival.max(axis=0)[late_at] if n else arrived)

    times = []
    for r, piece in enumerate(pieces):
        steps = piece.steps or (StepTime(None, 0, piece.span_ns, 0),)
        waiting = ns[r] > fastest
        moves = _ByStep(step[r], end[r] - fastest, end[r])
        waits = _ByStep(step[r][waiting], (end[r] - ns[r])[waiting], (end[r] - fastest)[waiting])
        # Calls outside every step (before the first, or with no step) go with the first.
        outside = set(moves.steps) - {_code(s.number) for s in steps}
        done: dict[frozenset[int], RankStep] = {}
        out_rows = []
        for i, s in enumerate(steps):
            numbers = frozenset({_code(s.number)} | (outside if i == 0 else set()))
            if numbers not in done:
                done[numbers] = RankStep(
                    s.number, s.compute_ns, waits.union(numbers), moves.union(numbers)
                )
            found = done[numbers]
            out_rows.append(RankStep(s.number, s.compute_ns, found.wait_ns, found.transfer_ns))
        by_line: dict[str, int] = {}
        lost = (ns[r] - fastest)[waiting]
        for code, ns_lost in zip(line[r][waiting].tolist(), lost.tolist(), strict=True):
            where = tables[r].lines[code] if code >= 0 else ""  # "": a call on no source line
            by_line[where] = by_line.get(where, 0) + ns_lost
        times.append(
            RankTimes(
                rank=piece.rank,
                path=piece.path,
                compute_ns=sum(s.compute_ns for s in out_rows),
                wait_ns=sum(s.wait_ns for s in out_rows),
                transfer_ns=sum(s.transfer_ns for s in out_rows),
                late_calls=int((late_rank == r).sum()),
                steps=tuple(out_rows),
                wait_by_line=tuple(sorted(by_line.items())),
            )
        )

    stragglers = []
    for r, piece in enumerate(pieces):
        mine = late_rank == r
        if not mine.any():
            continue
        lateness = _ByStep(late_step[mine], late_start[mine], arrived[mine])
        late_steps = [lateness.union(frozenset({number})) for number in lateness.steps]
        total = sum(late_steps)
        if total < min_wait_ns:
            continue
        counted = len(piece.steps) or 1
        steady = min(late_steps) if len(late_steps) >= counted else 0
        table = tables[r]
        in_late_step = (table.line >= 0) & member(table.step, list(lateness.steps))
        stragglers.append(
            Straggler(
                rank=piece.rank,
                late_ns=total,
                others_wait_ns=int(others[mine].sum()),
                calls=int(mine.sum()),
                per_call_late_ns=int(np.median(caused[late_at][mine])),
                agrees_with_clock=int(agrees[mine].sum()) / int(mine.sum()),
                lines=_late_lines(pieces, r, late_lines, total // 20),
                collective_lines=tuple(
                    dict.fromkeys(table.lines[c] for c in table.line[in_late_step].tolist())
                )[:late_lines],
                per_step_late_ns=int(np.median(late_steps + [0] * (counted - len(late_steps)))),
                steady_late_ns=steady,
            )
        )
    # The rank late in every step first (by how late it is at least), then by total lateness.
    stragglers.sort(key=lambda s: (-s.steady_late_ns, -s.late_ns))
    return CrossRank(
        ranks=tuple(times),
        matched_calls=matched,
        unmatched_calls=unmatched,
        stragglers=tuple(stragglers),
        line_spread=_spread(pieces, spread_lines),
    )


def _code(step: int | None) -> int:
    return _ABSENT if step is None else step


class _ByStep:
    """Intervals [start, end) of one rank, grouped by the step of the call they come from."""

    def __init__(self, steps: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        order = np.argsort(steps, kind="stable")
        self._starts, self._ends = starts[order], ends[order]
        values, first, counts = np.unique(steps[order], return_index=True, return_counts=True)
        self.steps: dict[int, slice] = {
            int(v): slice(int(f), int(f + c))
            for v, f, c in zip(values.tolist(), first.tolist(), counts.tolist(), strict=True)
        }

    def union(self, numbers: frozenset[int]) -> int:
        """Length of the union of the intervals of these steps."""
        parts = [self.steps[s] for s in numbers if s in self.steps]
        if not parts:
            return 0
        starts = np.concatenate([self._starts[p] for p in parts])
        ends = np.concatenate([self._ends[p] for p in parts])
        return union_ns(starts, ends)


_LineId = tuple[str, int, str]


def _by_line(piece: RankPiece) -> dict[_LineId, LineTime]:
    return {(lt.file, lt.line, lt.function): lt for lt in piece.lines}


def _late_lines(
    pieces: Sequence[RankPiece], late: int, count: int, least_ns: int
) -> tuple[LateLine, ...]:
    """The straggler's lines that took longer on it than the median of the other ranks, by at
    least ``least_ns`` (a twentieth of its late time: noise is not a reason)."""
    own = _by_line(pieces[late])
    others = [_by_line(p) for i, p in enumerate(pieces) if i != late]
    out = []
    for key, mine in own.items():
        if mine.collective:
            continue
        typical = float(np.median([o[key].work_ns if key in o else 0 for o in others]))
        excess = int(mine.work_ns - typical)
        if excess > 0 and excess >= least_ns:
            out.append(LateLine(mine.file, mine.path, mine.line, mine.function, excess))
    out.sort(key=lambda ln: (-ln.excess_ns, ln.file, ln.line))
    return tuple(out[:count])


def _spread(pieces: Sequence[RankPiece], count: int) -> tuple[LineSpread, ...]:
    per_rank = [_by_line(p) for p in pieces]
    keys: dict[_LineId, LineTime] = {}
    for lines in per_rank:
        for key, lt in lines.items():
            keys.setdefault(key, lt)
    out = []
    for key, first in keys.items():
        values = [lines[key].total_ns if key in lines else 0 for lines in per_rank]
        top = int(np.argmax(values))
        out.append(
            LineSpread(
                file=first.file,
                path=first.path,
                line=first.line,
                function=first.function,
                p50_ns=int(np.median(values)),
                max_ns=values[top],
                max_rank=pieces[top].rank,
                ranks=sum(1 for lines in per_rank if key in lines),
            )
        )
    out.sort(key=lambda s: (-s.max_ns, s.file, s.line))
    return tuple(out[:count])


_COLLECTIVE_KERNEL = ("nccl", "rccl", "c10d", "gloo")
# Op-level lines (no Python stack) named after a collective's host op or region.
_COLLECTIVE_OP = re.compile(r"^(?:record_param_comms|c10d|_c10d_functional|(?:nccl|rccl|gloo):)")


def same_line(call_line: str, file: str, path: str | None, line: int) -> bool:
    """Whether a collective's "path.py:LINE" names this report line (paths differ in prefix)."""
    where, _, number = call_line.rpartition(":")
    return (
        number == str(line)
        and bool(where)
        and (file.endswith(where) or where.endswith(file) or (path or "").endswith(where))
    )


def issues_collectives(
    file: str, path: str | None, line: int, call_lines: Sequence[str | None]
) -> bool:
    """Whether the line is where collectives were issued (one of the calls' ``line``, e.g. a
    ``CallTable``'s ``lines``), or, without a Python stack, an op named after one."""
    if line == 0 and _COLLECTIVE_OP.match(file):
        return True
    for call_line in call_lines:
        if call_line is None:
            continue
        where, _, number = call_line.rpartition(":")
        if (
            number == str(line)
            and where
            and (file.endswith(where) or where.endswith(file) or (path or "").endswith(where))
        ):
            return True
    return False


def step_times(trace: Trace) -> tuple[StepTime, ...]:
    """Each ProfilerStep's range and the GPU busy time in it outside collective kernels (the whole
    trace as one step when it has none)."""
    gpu = trace.gpu
    names = np.array(
        [any(tag in text.lower() for tag in _COLLECTIVE_KERNEL) for text in trace.strings],
        dtype=bool,
    )
    compute = ~names[gpu.name] if len(gpu) and len(names) else np.ones(len(gpu), dtype=bool)
    starts, ends = gpu.start_ns[compute], gpu.end_ns[compute]
    ranges = profiler_steps(trace)
    number_at = _step_numbers(trace)
    numbers: list[int | None] = [number_at.get(start) for start, _ in ranges]
    if not ranges:
        span = (int(gpu.start_ns.min()), int(gpu.end_ns.max())) if len(gpu) else (0, 0)
        ranges, numbers = [span], [None]
    return tuple(
        StepTime(number, a, b, _busy_within(starts, ends, a, b))
        for number, (a, b) in zip(numbers, ranges, strict=True)
    )


def _step_numbers(trace: Trace) -> dict[int, int]:
    """Start time -> N of the first ``ProfilerStep#N`` annotation (in row order) that starts then:
    one pass over the annotations, however many steps."""
    cpu = trace.cpu_ops
    strings = trace.strings
    out: dict[int, int] = {}
    rows = np.flatnonzero(cpu.annotation)
    for row, start in zip(rows.tolist(), cpu.start_ns[rows].tolist(), strict=True):
        if start in out:
            continue
        text = strings[cpu.name[row]]
        if text.startswith("ProfilerStep#") and text[13:].isdigit():
            out[start] = int(text[13:])
    return out


def _busy_within(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> int:
    """Length of the union of the intervals, clipped to [lo, hi)."""
    a = np.clip(starts, lo, hi)
    b = np.clip(ends, lo, hi)
    keep = b > a
    a, b = a[keep], b[keep]
    if not len(a):
        return 0
    order = np.argsort(a, kind="stable")
    a, b = a[order], np.maximum.accumulate(b[order])
    gaps = np.maximum(0, a[1:] - b[:-1])
    return int(b[-1] - a[0] - gaps.sum())
