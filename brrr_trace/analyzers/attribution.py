"""From a GPU op to the source line that caused it (DESIGN §3, §5).

GPU op -> launching API call by ``correlation`` (the one link valid in every torch version);
launch -> innermost CPU op and innermost *user* Python frame on the same thread by time
containment; backward ops -> their forward op by autograd ``Sequence number``, so backward GPU
time lands on the forward line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.frames import parse_call_stack, parse_frame, user_frame_mask
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import NO_ID, Trace
from brrr_trace.vocabulary import Precision

_BACKWARD_PREFIX = "autograd::engine::evaluate_function:"
_DATALOADER_NEXT = ("dataloader.py", "__next__")


@dataclass(frozen=True)
class LineKey:
    file: str
    line: int
    function: str
    precision: Precision


class Locator:
    """Source lines of host threads at points and over windows of time."""

    def __init__(self, trace: Trace, options: AnalysisOptions) -> None:
        self.trace = trace
        self.options = options
        self.lines: list[LineKey] = []
        self._line_ids: dict[LineKey, int] = {}
        frames = trace.frames
        strings = trace.strings
        user = user_frame_mask(strings, frames.name, options)
        self.user_rows = np.flatnonzero(user)
        self.user_frames = Innermost(
            frames.thread[user], frames.start_ns[user], frames.end_ns[user]
        )
        # Line id of each frame name (function precision: the def line).
        self._frame_line = np.full(len(strings), NONE, dtype=np.int64)
        for sid in np.unique(frames.name[user]) if len(self.user_rows) else ():
            parsed = parse_frame(strings[sid])
            if parsed is not None:
                key = LineKey(parsed.file, parsed.line, parsed.function, Precision.FUNCTION)
                self._frame_line[sid] = self._intern(key)
        cpu = trace.cpu_ops
        with_stack = cpu.call_stack != NO_ID
        self._stack_rows = np.flatnonzero(with_stack)
        self._stacks = Innermost(
            cpu.thread[with_stack], cpu.start_ns[with_stack], cpu.end_ns[with_stack]
        )
        self._stack_line: dict[int, int] = {}
        is_dataloader = np.zeros(len(strings), dtype=bool)
        for sid in np.unique(frames.name) if len(frames) else ():
            parsed = parse_frame(strings[sid])
            if parsed is not None and parsed.file.endswith(_DATALOADER_NEXT[0]):
                is_dataloader[sid] = parsed.function == _DATALOADER_NEXT[1]
        dl = is_dataloader[frames.name] if len(frames) else np.zeros(0, dtype=bool)
        self.dataloader_rows = np.flatnonzero(dl)
        self.dataloader = Innermost(frames.thread[dl], frames.start_ns[dl], frames.end_ns[dl])

    def _intern(self, key: LineKey) -> int:
        found = self._line_ids.get(key)
        if found is None:
            found = self._line_ids[key] = len(self.lines)
            self.lines.append(key)
        return found

    def frame_line(self, frame_row: int) -> int:
        if frame_row == NONE:
            return NONE
        return int(self._frame_line[self.trace.frames.name[frame_row]])

    def _legacy_line(self, stack_row: int) -> int:
        sid = int(self.trace.cpu_ops.call_stack[stack_row])
        found = self._stack_line.get(sid)
        if found is None:
            frame = parse_call_stack(self.trace.strings[sid], self.options)
            found = NONE
            if frame is not None:
                found = self._intern(
                    LineKey(frame.file, frame.line, frame.function, Precision.EXACT)
                )
            self._stack_line[sid] = found
        return found

    def lines_at(self, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Line id at each (thread, time), NONE where nothing in the trace says."""
        out = np.full(len(t), NONE, dtype=np.int64)
        if len(self.user_rows):
            local = self.user_frames.at_many(thread, t)
            found = local != NONE
            rows = self.user_rows[local[found]]
            out[found] = self._frame_line[self.trace.frames.name[rows]]
        if len(self._stack_rows):
            local = self._stacks.at_many(thread, t)
            for k in np.flatnonzero(local != NONE):
                line = self._legacy_line(int(self._stack_rows[local[k]]))
                if line != NONE:
                    out[k] = line
        return out

    def line_at(self, thread: int, t: int) -> int:
        return int(self.lines_at(np.array([thread]), np.array([t]))[0])

    def lines_over(self, thread: int, a: int, b: int) -> list[tuple[int, int]]:
        """(line id, ns) of the user code a thread ran during [a, b), by innermost frame."""
        out: dict[int, int] = {}
        for local, ns in self.user_frames.overlaps(thread, a, b):
            line = NONE if local == NONE else self.frame_line(int(self.user_rows[local]))
            out[line] = out.get(line, 0) + ns
        return list(out.items())

    def dataloader_wait(self, thread: int, a: int, b: int) -> tuple[int, int]:
        """ns of [a, b) the thread spent in DataLoader ``__next__``, and the line that called it."""
        covered = 0
        caller = NONE
        for local, ns in self.dataloader.overlaps(thread, a, b):
            if local == NONE:
                continue
            covered += ns
            if caller == NONE:
                row = int(self.dataloader_rows[local])
                caller = self.line_at(thread, int(self.trace.frames.start_ns[row]))
        return covered, caller


@dataclass(frozen=True)
class OpAttribution:
    """Per GPU op (rows of ``trace.gpu``): its launch, CPU op and line."""

    launch: np.ndarray  # host call row, NONE
    cpu_op: np.ndarray  # innermost CPU op row around the launch, NONE
    line: np.ndarray  # line id, NONE
    backward: np.ndarray  # True when launched by the autograd engine for a backward op


def attribute_ops(trace: Trace, locator: Locator) -> OpAttribution:
    gpu, host, cpu = trace.gpu, trace.host_calls, trace.cpu_ops
    n = len(gpu)
    launch = link_launches(gpu.correlation, host.correlation)
    has = launch != NONE
    thread = np.full(n, NONE, dtype=np.int64)
    t = np.zeros(n, dtype=np.int64)
    thread[has] = host.thread[launch[has]]
    t[has] = host.start_ns[launch[has]]

    ops = Innermost(cpu.thread, cpu.start_ns, cpu.end_ns)
    cpu_op = np.full(n, NONE, dtype=np.int64)
    cpu_op[has] = ops.at_many(thread[has], t[has])

    backward = np.zeros(n, dtype=bool)
    where_thread, where_t = thread.copy(), t.copy()
    is_bwd_name = np.array([s.startswith(_BACKWARD_PREFIX) for s in trace.strings], dtype=bool)
    bwd_mask = is_bwd_name[cpu.name] if len(cpu) else np.zeros(0, dtype=bool)
    if bwd_mask.any() and has.any():
        bwd_rows = np.flatnonzero(bwd_mask)
        bwd_ops = Innermost(cpu.thread[bwd_mask], cpu.start_ns[bwd_mask], cpu.end_ns[bwd_mask])
        local = np.full(n, NONE, dtype=np.int64)
        local[has] = bwd_ops.at_many(thread[has], t[has])
        inside = np.flatnonzero(local != NONE)
        backward[inside] = True
        seq = cpu.sequence[bwd_rows[local[inside]]]
        forward = _forward_ops(trace, bwd_mask, bwd_ops)
        fwd_row = np.array([forward.get(int(s), NONE) for s in seq], dtype=np.int64)
        ok = fwd_row != NONE
        where_thread[inside[ok]] = cpu.thread[fwd_row[ok]]
        where_t[inside[ok]] = cpu.start_ns[fwd_row[ok]]

    line = np.full(n, NONE, dtype=np.int64)
    line[has] = locator.lines_at(where_thread[has], where_t[has])
    return OpAttribution(launch=launch, cpu_op=cpu_op, line=line, backward=backward)


def link_launches(gpu_correlation: np.ndarray, host_correlation: np.ndarray) -> np.ndarray:
    """Host call row for each GPU op by correlation id (many GPU ops may share one: graphs)."""
    out = np.full(len(gpu_correlation), NONE, dtype=np.int64)
    valid = np.flatnonzero(host_correlation != NO_ID)
    if len(valid) == 0 or len(gpu_correlation) == 0:
        return out
    order = valid[np.argsort(host_correlation[valid], kind="stable")]
    keys = host_correlation[order]
    pos = np.searchsorted(keys, gpu_correlation)
    pos = np.minimum(pos, len(keys) - 1)
    hit = (keys[pos] == gpu_correlation) & (gpu_correlation != NO_ID)
    out[hit] = order[pos[hit]]
    return out


def _forward_ops(trace: Trace, bwd_mask: np.ndarray, bwd_ops: Innermost) -> dict[int, int]:
    """Sequence number -> the outermost forward op that carries it.

    Ops that run inside a backward node have sequence numbers of their own (a thread-local
    counter), so they are left out.
    """
    cpu = trace.cpu_ops
    rows = np.flatnonzero((cpu.sequence != NO_ID) & ~bwd_mask & ~cpu.annotation)
    rows = rows[bwd_ops.at_many(cpu.thread[rows], cpu.start_ns[rows]) == NONE]
    forward: dict[int, int] = {}
    # Rows are sorted by start, outer first: the first row seen for a number is the outermost.
    for row, seq in zip(rows.tolist(), cpu.sequence[rows].tolist(), strict=True):
        forward.setdefault(seq, row)
    return forward
