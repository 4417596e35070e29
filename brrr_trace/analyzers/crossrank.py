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

from brrr_trace.analyzers.steps import profiler_steps
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
    collectives: tuple[Collective, ...]
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


def _sizes_agree(calls: Sequence[Collective]) -> bool:
    name = calls[0].name.lower()
    if any(tag in name for tag in _VARIABLE_SIZE):
        return True
    sizes = {c.bytes for c in calls if c.bytes is not None}
    return len(sizes) <= 1


@dataclass(frozen=True, slots=True)
class _Match:
    ns: tuple[int, ...]  # per rank (in piece order), time in the call
    calls: tuple[Collective, ...]


def _matches(pieces: Sequence[RankPiece]) -> tuple[list[_Match], int]:
    keyed = [{(c.group, c.index): c for c in p.collectives} for p in pieces]
    keys = set().union(*keyed) if keyed else set()
    matched: list[_Match] = []
    unmatched = 0
    for key in sorted(keys):
        calls = [k.get(key) for k in keyed]
        present = [c for c in calls if c is not None]
        if len(present) < len(calls) or len({c.name for c in present}) > 1:
            unmatched += len(present)
            continue
        if not _sizes_agree(present):
            unmatched += len(present)
            continue
        matched.append(_Match(tuple(call_ns(c) for c in present), tuple(present)))
    return matched, unmatched


def merge(
    pieces: Sequence[RankPiece], min_wait_ns: int, late_lines: int = 5, spread_lines: int = 50
) -> CrossRank:
    """Match the ranks' collectives, charge each rank's wait, name the stragglers.

    Waits are intervals on the waiting rank's own clock (the last ``wait`` ns before its call
    ended), and a straggler's lateness intervals are on its own clock (the ``wait`` ns before it
    arrived), so that calls in flight together (DDP's buckets) are counted once, and no two
    ranks' clocks are ever compared."""
    pieces = sorted(pieces, key=lambda p: p.rank)
    matched, unmatched = _matches(pieces)
    n = len(pieces)
    Key = tuple[int, int | None]  # (rank position, step)
    waits: dict[Key, list[tuple[int, int]]] = {}
    moves: dict[Key, list[tuple[int, int]]] = {}
    by_line: list[dict[str, int]] = [{} for _ in range(n)]
    # Per rank, calls it came last to: (the longest wait it caused, the others' wait, step,
    # its lateness interval on its own clock).
    late_by: list[list[tuple[int, int, int | None, tuple[int, int]]]] = [[] for _ in range(n)]
    clock_agrees: list[list[bool]] = [[] for _ in range(n)]
    for match in matched:
        fastest = min(match.ns)
        last = match.ns.index(fastest)
        for r, (ns, call) in enumerate(zip(match.ns, match.calls, strict=True)):
            end = _end_ns(call)
            key = (r, call.step)
            moves.setdefault(key, []).append((end - fastest, end))
            if ns > fastest:
                waits.setdefault(key, []).append((end - ns, end - fastest))
                where = call.line or ""  # "": a call placed on no source line
                by_line[r][where] = by_line[r].get(where, 0) + ns - fastest
        caused = max(match.ns) - fastest
        # Late, not jitter: the others waited longer than the call takes once all are in.
        # Ranks' hosts and the transport vary by a fraction of a call's own time (gloo buckets:
        # up to half of it between balanced ranks); a late rank keeps them waiting far longer.
        if n > 1 and caused >= max(min_wait_ns, fastest):
            arrived = _arrival_ns(match.calls[last])
            late_by[last].append(
                (caused, sum(match.ns) - n * fastest, match.calls[last].step,
                 (arrived - caused, arrived))
            )  # fmt: skip
            clock_agrees[last].append(arrived >= max(_arrival_ns(c) for c in match.calls))

    times = []
    for r, piece in enumerate(pieces):
        steps = piece.steps or (StepTime(None, 0, piece.span_ns, 0),)
        known = {s.number for s in steps}
        rows = []
        for step in steps:
            # Calls outside every step (before the first, or with no step) go with the first.
            numbers = {step.number} | (
                set(_steps_of(waits, moves, r)) - known if step is steps[0] else set()
            )
            mine = [k for k in (*waits, *moves) if k[0] == r and k[1] in numbers]
            rows.append(
                RankStep(
                    step=step.number,
                    compute_ns=step.compute_ns,
                    wait_ns=_union([iv for k in set(mine) for iv in waits.get(k, ())]),
                    transfer_ns=_union([iv for k in set(mine) for iv in moves.get(k, ())]),
                )
            )
        times.append(
            RankTimes(
                rank=piece.rank,
                path=piece.path,
                compute_ns=sum(s.compute_ns for s in rows),
                wait_ns=sum(s.wait_ns for s in rows),
                transfer_ns=sum(s.transfer_ns for s in rows),
                late_calls=len(late_by[r]),
                steps=tuple(rows),
                wait_by_line=tuple(sorted(by_line[r].items())),
            )
        )

    stragglers = []
    for r, piece in enumerate(pieces):
        came_last = late_by[r]
        per_step: dict[int | None, list[tuple[int, int]]] = {}
        for _, _, number, interval in came_last:
            per_step.setdefault(number, []).append(interval)
        late_steps = [_union(ivs) for ivs in per_step.values()]
        late = sum(late_steps)
        if not came_last or late < min_wait_ns:
            continue
        counted = len(piece.steps) or 1
        steady = min(late_steps) if len(per_step) >= counted else 0
        agrees = clock_agrees[r]
        stragglers.append(
            Straggler(
                rank=piece.rank,
                late_ns=late,
                others_wait_ns=sum(o for _, o, _, _ in came_last),
                calls=len(came_last),
                per_call_late_ns=int(np.median([c for c, _, _, _ in came_last])),
                agrees_with_clock=sum(agrees) / len(agrees) if agrees else None,
                lines=_late_lines(pieces, r, late_lines, late // 20),
                collective_lines=tuple(
                    dict.fromkeys(
                        m.line
                        for m in piece.collectives
                        if m.line is not None and any(m.step == s for s in per_step)
                    )
                )[:late_lines],
                per_step_late_ns=int(np.median(late_steps + [0] * (counted - len(per_step)))),
                steady_late_ns=steady,
            )
        )
    # The rank late in every step first (by how late it is at least), then by total lateness.
    stragglers.sort(key=lambda s: (-s.steady_late_ns, -s.late_ns))
    return CrossRank(
        ranks=tuple(times),
        matched_calls=len(matched),
        unmatched_calls=unmatched,
        stragglers=tuple(stragglers),
        line_spread=_spread(pieces, spread_lines),
    )


def _steps_of(
    waits: dict[tuple[int, int | None], list[tuple[int, int]]],
    moves: dict[tuple[int, int | None], list[tuple[int, int]]],
    r: int,
) -> list[int | None]:
    return [k[1] for k in (*waits, *moves) if k[0] == r]


def _end_ns(call: Collective) -> int:
    if call.kernel_start_ns is not None and call.kernel_end_ns is not None:
        return call.kernel_end_ns
    return call.host_end_ns


def _union(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


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


def issues_collectives(file: str, path: str | None, line: int, calls: Sequence[Collective]) -> bool:
    """Whether the line is where collectives were issued (by their ``line``), or, without a
    Python stack, an op named after one."""
    if line == 0 and _COLLECTIVE_OP.match(file):
        return True
    for call in calls:
        if call.line is None:
            continue
        where, _, number = call.line.rpartition(":")
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
    numbers: list[int | None] = []
    for start, _ in ranges:
        numbers.append(_step_number(trace, start))
    if not ranges:
        span = (int(gpu.start_ns.min()), int(gpu.end_ns.max())) if len(gpu) else (0, 0)
        ranges, numbers = [span], [None]
    return tuple(
        StepTime(number, a, b, _busy_within(starts, ends, a, b))
        for number, (a, b) in zip(numbers, ranges, strict=True)
    )


def _step_number(trace: Trace, start_ns: int) -> int | None:
    cpu = trace.cpu_ops
    rows = np.flatnonzero(cpu.annotation & (cpu.start_ns == start_ns))
    for row in rows.tolist():
        text = trace.strings[cpu.name[row]]
        if text.startswith("ProfilerStep#") and text[13:].isdigit():
            return int(text[13:])
    return None


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
