"""From a GPU op to the source line that caused it (docs/architecture.md §3, §5).

GPU op -> launching API call by ``correlation`` (the one link valid in every torch version);
launch -> innermost CPU op and innermost *user* Python frame on the same thread by time
containment; backward ops -> their forward op by autograd ``Sequence number``, so backward GPU
time lands on the forward line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from brrr_trace.analyzers.alignment import align
from brrr_trace.analyzers.backward import BackwardIndex, BackwardPoints
from brrr_trace.analyzers.frames import (
    FrameName,
    parse_call_stack,
    parse_frame,
    user_frame_mask,
)
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.paths import PathMapper
from brrr_trace.analyzers.safe_read import SourceSkipped, source_mtime
from brrr_trace.analyzers.source import Body, Observed, find_body, frame_function, observe
from brrr_trace.analyzers.thread_index import ThreadIndexes, inside
from brrr_trace.analyzers.user_frames import compiled_frames, local_files
from brrr_trace.arraysets import distinct, distinct_rows, member
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.brrr_fields import LINE_ANNOTATION_PREFIX
from brrr_trace.traces.model import NO_ID, Trace
from brrr_trace.vocabulary import Precision

_DATALOADER_NEXT = ("dataloader.py", "__next__")
_MAX_CUTS = 4096  # pieces of a host gap looked up for the statement running (lines_over)
_PIECES_AT_ONCE = 1 << 16  # pieces of many gaps looked up together (lines_over_many)
_QUERIES_AT_ONCE = 1 << 16  # call-site recovery's queries looked up together (_recover)


@dataclass(frozen=True)
class LineKey:
    file: str
    line: int
    function: str
    precision: Precision


class Locator:
    """Source lines of host threads at points and over windows of time."""

    def __init__(
        self, trace: Trace, options: AnalysisOptions, mapper: PathMapper | None = None
    ) -> None:
        self.trace = trace
        self.options = options
        self.mapper = mapper
        self._children: dict[int, _Children] = {}
        self._alignments: dict[tuple[Any, ...], tuple[int | None, ...]] = {}
        self._bodies: dict[int, Body | None] = {}
        self.skipped_sources: dict[str, str] = {}  # source files not read, and why
        self._observed: dict[tuple[int, bool, tuple[str, ...]], Observed] = {}
        self._backward: BackwardIndex | None = None
        self._parents: np.ndarray | None = None
        self._top_ops: tuple[np.ndarray, Innermost, Innermost, np.ndarray] | None = None
        self._callers: dict[int, tuple[int, ...]] = {}
        # frame -> its caller's statement (name id, line, precision), None: the def line.
        self._caller_keys: dict[int, tuple[int, int, Precision] | None] = {}
        # (frame name id, line, precision) -> line id: statements are looked up many times.
        self._statements: dict[tuple[int, int, Precision], int] = {}
        self.lines: list[LineKey] = []
        self._line_ids: dict[tuple[str, int, str], int] = {}
        frames = trace.frames
        strings = trace.strings
        self.is_local = local_files(trace, options, mapper)
        user = user_frame_mask(strings, frames.name, options, self.is_local)
        user &= ~compiled_frames(trace, user)
        self.user_rows = np.flatnonzero(user)
        self.user_frames = Innermost(
            frames.thread[user], frames.start_ns[user], frames.end_ns[user]
        )
        # Line id of each frame name (function precision: the def line).
        self._frame_line = np.full(len(strings), NONE, dtype=np.int64)
        for sid in distinct(frames.name[user]) if len(self.user_rows) else ():
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
        for sid in distinct(frames.name) if len(frames) else ():
            parsed = parse_frame(strings[sid])
            if parsed is not None and parsed.file.endswith(_DATALOADER_NEXT[0]):
                is_dataloader[sid] = parsed.function == _DATALOADER_NEXT[1]
        dl = is_dataloader[frames.name] if len(frames) else np.zeros(0, dtype=bool)
        self.dataloader_rows = np.flatnonzero(dl)
        self.dataloader = Innermost(frames.thread[dl], frames.start_ns[dl], frames.end_ns[dl])
        self._marker_line = np.full(len(strings), NONE, dtype=np.int64)
        for sid, text in enumerate(strings):
            if text.startswith(LINE_ANNOTATION_PREFIX):
                number = text[len(LINE_ANNOTATION_PREFIX) :].strip()
                if number.isdigit():
                    self._marker_line[sid] = int(number)
        marked = (
            cpu.annotation & (self._marker_line[cpu.name] != NONE) if len(cpu) else cpu.annotation
        )
        self._marker_rows = np.flatnonzero(marked)
        self._markers = Innermost(cpu.thread[marked], cpu.start_ns[marked], cpu.end_ns[marked])
        self._threads = ThreadIndexes(trace, self._marker_rows)

    def _backward_index(self) -> BackwardIndex:
        if self._backward is None:
            self._backward = BackwardIndex(self.trace)
        return self._backward

    def backward_points(self, thread: np.ndarray, t: np.ndarray) -> BackwardPoints:
        """Where the forward code of backward work at (thread, t) ran; Python code that the
        engine itself runs (hooks, a custom ``Function.backward``) stays where it is."""
        found = self._backward_index().points(thread, t)
        if len(self.user_rows) and found.inside.any():
            local = self.user_frames.at_many(thread, t)
            own = found.inside & (local != NONE)
            starts = self.trace.frames.start_ns[self.user_rows[local[own]]]
            own[own] = starts >= found.node_start[own]
            found.thread[own] = NONE
        return found

    def work_lines(self, thread: np.ndarray, t: np.ndarray) -> WorkLines:
        """The line responsible for work started at (thread, t): a kernel launch or a CPU op.
        Backward work goes to the forward line that made it."""
        moved = self.backward_points(thread, t)
        go = moved.thread != NONE
        where_thread, where_t = thread.copy(), t.copy()
        where_thread[go] = moved.thread[go]
        where_t[go] = moved.t[go]
        frame = (
            self.user_frames.at_many(where_thread, where_t)
            if len(self.user_rows)
            else np.full(len(t), NONE, dtype=np.int64)
        )
        return WorkLines(self.lines_at(where_thread, where_t, frame), moved.inside, frame)

    def op_lines(self, thread: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Rows for work that no Python frame explains (a trace without stacks, a thread with
        no user code): one per top-level op and ``record_function`` region around it."""
        if self._top_ops is None:
            self._top_ops = _top_level_ops(self.trace)
        rows, index, regions, region_rows = self._top_ops
        out = np.full(len(t), NONE, dtype=np.int64)
        op = index.at_many(thread, t)
        found = np.flatnonzero(op != NONE)
        if not len(found):
            return out
        cpu, strings = self.trace.cpu_ops, self.trace.strings
        region = regions.at_many(thread[found], t[found])
        op_name = cpu.name[rows[op[found]]]
        region_name = np.full(len(found), NONE, dtype=np.int64)
        inside = region != NONE
        region_name[inside] = cpu.name[region_rows[region[inside]]]
        pairs, inverse = distinct_rows(np.stack([op_name, region_name], axis=1))
        ids = np.array(
            [
                self._intern(
                    LineKey(strings[r] if r != NONE else "<ops>", 0, strings[o], Precision.OP)
                )
                for o, r in pairs.tolist()
            ],
            dtype=np.int64,
        )
        out[found] = ids[inverse.reshape(-1)]
        return out

    def callers(self, frame: int) -> tuple[int, ...]:
        """Line ids of the statements that called a user frame invocation (``frame``: an index
        into ``user_rows``), innermost caller first, one per enclosing user frame."""
        found = self._callers.get(frame)
        if found is not None:
            return found
        parents = self._user_parents()
        frames = self.trace.frames
        parent = int(parents[frame])
        if parent == NONE:
            found = ()
        elif frame in self._caller_keys:
            key = self._caller_keys.pop(frame)  # interned now: ids in the same order
            line = self._statement_id(*key) if key else self.frame_line(int(self.user_rows[parent]))
            found = (line, *self.callers(parent))
        else:
            t = np.array([frames.start_ns[self.user_rows[frame]]], dtype=np.int64)
            row = int(self.user_rows[parent])
            out = np.array([self.frame_line(row)], dtype=np.int64)
            self._recover(out, np.array([0]), np.array([row]), t)
            found = (int(out[0]), *self.callers(parent))
        self._callers[frame] = found
        return found

    def prefetch_callers(self, frames: list[int]) -> None:
        """The caller statements ``callers`` of these frames needs, up their chains, in one
        ``_recover`` (~0.1 ms each alone: ~670 on the 79 MB benchmark trace)."""
        parents, known = self._user_parents(), self._callers.keys() | self._caller_keys.keys()
        todo: dict[int, None] = {}
        for frame in frames:
            while frame not in known and frame not in todo and parents[frame] != NONE:
                todo[frame] = None
                frame = int(parents[frame])
        if not todo:
            return
        child = np.fromiter(todo, dtype=np.int64, count=len(todo))
        rows = self.user_rows[parents[child]]
        sink: list[tuple[np.ndarray, np.ndarray]] = []
        t = self.trace.frames.start_ns[self.user_rows[child]].astype(np.int64)
        self._recover(sink, np.arange(len(child)), rows, t)
        self._caller_keys.update(dict.fromkeys(todo))
        for where, keys in sink:
            for k, (name_id, line, code) in zip(where.tolist(), keys.tolist(), strict=True):
                self._caller_keys[int(child[k])] = (name_id, line, _PRECISION_OF[code])

    def _user_parents(self) -> np.ndarray:
        """For each user frame, the user frame it runs inside (through library frames too)."""
        if self._parents is None:
            frames = self.trace.frames
            rows = self.user_rows
            parents = np.full(len(rows), NONE, dtype=np.int64)
            order = np.lexsort((-frames.end_ns[rows], frames.start_ns[rows], frames.thread[rows]))
            stack: list[int] = []
            thread_now = None
            for k in order.tolist():
                row = int(rows[k])
                thread = int(frames.thread[row])
                if thread != thread_now:
                    stack, thread_now = [], thread
                start = int(frames.start_ns[row])
                while stack and int(frames.end_ns[rows[stack[-1]]]) + _ROUNDING_NS <= start:
                    stack.pop()
                parents[k] = stack[-1] if stack else NONE
                stack.append(k)
            self._parents = parents
        return self._parents

    def _intern(self, key: LineKey) -> int:
        """One id per (file, line, function); the line keeps the best precision seen for it."""
        identity = (key.file, key.line, key.function)
        found = self._line_ids.get(identity)
        if found is None:
            found = self._line_ids[identity] = len(self.lines)
            self.lines.append(key)
        elif _RANK[key.precision] > _RANK[self.lines[found].precision]:
            self.lines[found] = key
        return found

    def frame_line(self, frame_row: int) -> int:
        if frame_row == NONE:
            return NONE
        return int(self._frame_line[self.trace.frames.name[frame_row]])

    def _legacy_line(self, stack_row: int) -> int:
        sid = int(self.trace.cpu_ops.call_stack[stack_row])
        found = self._stack_line.get(sid)
        if found is None:
            frame = parse_call_stack(self.trace.strings[sid], self.options, self.is_local)
            found = NONE
            if frame is not None:
                found = self._intern(
                    LineKey(frame.file, frame.line, frame.function, Precision.EXACT)
                )
            self._stack_line[sid] = found
        return found

    def lines_at(
        self, thread: np.ndarray, t: np.ndarray, local: np.ndarray | None = None
    ) -> np.ndarray:
        """Line id at each (thread, time): a source line, else the op row of the top-level op
        running there, NONE where nothing in the trace says. ``local``: the innermost user
        frames there, when the caller already looked them up."""
        out = np.full(len(t), NONE, dtype=np.int64)
        if len(self.user_rows):
            if local is None:
                local = self.user_frames.at_many(thread, t)
            found = np.flatnonzero(local != NONE)
            rows = self.user_rows[local[found]]
            out[found] = self._frame_line[self.trace.frames.name[rows]]
            self._recover(out, found, rows, t)
        if len(self._stack_rows):
            local = self._stacks.at_many(thread, t)
            for k in np.flatnonzero(local != NONE):
                line = self._legacy_line(int(self._stack_rows[local[k]]))
                if line != NONE:
                    out[k] = line
        lost = np.flatnonzero(out == NONE)
        if len(lost):
            out[lost] = self.op_lines(thread[lost], t[lost])
        return out

    # -- call-site recovery -----------------------------------------------------------------

    def _recover(self, out: Out, where: np.ndarray, rows: np.ndarray, t: np.ndarray) -> None:
        """Replace def-line results by statement lines: exact where the recorder wrote them,
        recovered from the source where it is at hand (into a list: the keys, not interned)."""
        if not len(rows):
            return
        order = np.argsort(rows, kind="stable")
        grouped = rows[order]
        sel = where[order]
        bounds = [*np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1]))).tolist()]
        bounds.append(len(order))
        # Whole invocations at a time, at most _QUERIES_AT_ONCE queries (beyond one invocation's)
        # in order: the same ids in the same order as all at once, and the temporaries bounded
        # (all of the 0.86 GB benchmark trace's queries at once added ~30 MB to the peak).
        g = 0
        while g < len(bounds) - 1:
            h = g + 1
            while h < len(bounds) - 1 and bounds[h + 1] - bounds[g] <= _QUERIES_AT_ONCE:
                h += 1
            part = slice(bounds[g], bounds[h])
            self._recover_part(out, grouped[part], sel[part], t)
            g = h

    def _recover_part(self, out: Out, grouped: np.ndarray, sel: np.ndarray, t: np.ndarray) -> None:
        frames = self.trace.frames
        firsts = np.flatnonzero(np.concatenate(([True], grouped[1:] != grouped[:-1])))
        ends = [*firsts[1:].tolist(), len(grouped)]
        when = t[sel]
        # Each invocation's children once (a Python step per invocation), then every query at
        # once over the children of all of them laid end to end.
        children = [
            self._invocation(row, self._body(int(frames.name[row])))
            for row in grouped[firsts].tolist()
        ]
        sizes = np.array([len(c.starts) for c in children], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        k = np.empty(len(sel), dtype=np.int64)
        for child, lo, hi in zip(children, firsts.tolist(), ends, strict=True):
            k[lo:hi] = np.searchsorted(child.starts, when[lo:hi], side="right") - 1
        group = np.repeat(np.arange(len(children)), np.diff(np.append(firsts, len(grouped))))
        n, base = sizes[group], offsets[group]
        starts = np.concatenate([c.starts for c in children])
        child_ends = np.concatenate([c.ends for c in children])
        at = base + np.maximum(k, 0)
        has_child = n > 0
        inside = has_child & (k >= 0)
        inside[inside] = when[inside] < child_ends[at[inside]]
        has_next = k + 1 < n
        move = ~inside & has_next
        # Between two children, the time belongs to the statement about to run.
        t_eff = when.copy()
        t_eff[move] = starts[(base + k + 1)[move]]
        # The child whose line a query takes: the one it is in, else the next, else the last.
        near = base + np.where(inside, k, np.where(has_next, k + 1, k))
        marked = self._marked_lines(grouped, t_eff)
        # The recorder's marks first, then its call-site lines, then the source's.
        code = np.where(marked != NONE, _EXACT, _NO_LINE)
        line = marked
        take = has_child & (code == _NO_LINE)
        if take.any():
            exact = np.full(len(sel), NONE, dtype=np.int64)
            aligned = np.full(len(sel), NONE, dtype=np.int64)
            exact[take] = np.concatenate([c.exact_line for c in children])[near[take]]
            aligned[take] = np.concatenate([c.aligned_line for c in children])[near[take]]
            by_exact = exact != NONE
            by_aligned = ~by_exact & (aligned != NONE)
            line = np.where(by_exact, exact, np.where(by_aligned, aligned, marked))
            code = np.where(by_exact, _EXACT, np.where(by_aligned, _RECOVERED, code))
        hit = np.flatnonzero(code != _NO_LINE)
        if not len(hit):
            return
        name_ids = frames.name[grouped[hit]].astype(np.int64)
        if isinstance(out, list):
            out.append((sel[hit], np.stack((name_ids, line[hit], code[hit]), axis=1)))
            return
        # Each (frame, line, precision) interned once, in the order the queries first meet it
        # (the order ids are handed out in, as one lookup per query would).
        keys, inverse = distinct_rows(np.stack((name_ids, line[hit], code[hit]), axis=1))
        first = np.full(len(keys), len(inverse), dtype=np.int64)
        np.minimum.at(first, inverse, np.arange(len(inverse)))
        ids = np.empty(len(keys), dtype=np.int64)
        statement = self._statement_id
        for u in np.argsort(first, kind="stable").tolist():
            name_id, number, precision = keys[u].tolist()
            ids[u] = statement(name_id, number, _PRECISION_OF[precision])
        out[sel[hit]] = ids[inverse]

    def _marked_lines(self, frame_rows: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Lines from ``brrr.line N`` annotations (written by ``brrr-trace record``) around each
        t, when they lie inside the frame invocation (row) that t is in."""
        out = np.full(len(t), NONE, dtype=np.int64)
        if not len(self._marker_rows):
            return out
        frames, cpu = self.trace.frames, self.trace.cpu_ops
        local = self._markers.at_many(frames.thread[frame_rows].astype(np.int64), t)
        found = np.flatnonzero(local != NONE)
        marker = self._marker_rows[local[found]]
        inside = cpu.start_ns[marker] >= frames.start_ns[frame_rows[found]]
        out[found[inside]] = self._marker_line[cpu.name[marker[inside]]]
        return out

    def _statement_id(self, name_id: int, line: int, precision: Precision) -> int:
        # Interning a key again changes nothing (a line's precision only goes up), so the id
        # of each (frame name, line, precision) is looked up once.
        memo = (name_id, line, precision)
        found = self._statements.get(memo)
        if found is None:
            parsed = parse_frame(self.trace.strings[name_id])
            assert parsed is not None
            found = self._intern(LineKey(parsed.file, line, parsed.function, precision))
            self._statements[memo] = found
        return found

    def _body(self, name_id: int) -> Body | None:
        if name_id in self._bodies:
            return self._bodies[name_id]
        body = None
        parsed = parse_frame(self.trace.strings[name_id])
        if parsed is not None and self.mapper is not None:
            body = _load_body(
                parsed, self.mapper, self.options.max_source_bytes, self.skipped_sources
            )
        self._bodies[name_id] = body
        return body

    def _invocation(self, row: int, body: Body | None) -> _Children:
        """The events directly inside one invocation of a user frame, with their lines."""
        cached = self._children.get(row)
        if cached is not None:
            return cached
        frames, cpu = self.trace.frames, self.trace.cpu_ops
        thread = int(frames.thread[row])
        s, e = int(frames.start_ns[row]), int(frames.end_ns[row])
        starts, rows, is_frame = self._threads.events_of(thread)
        lo = int(np.searchsorted(starts, s, side="left"))
        hi = int(np.searchsorted(starts, e, side="right"))
        ends = self._threads.ends(rows[lo:hi], is_frame[lo:hi])
        keep = np.ones(hi - lo, dtype=bool)
        keep &= ~(is_frame[lo:hi] & (rows[lo:hi] == row))
        # ts and dur are rounded separately, so a child can end a few ns after its parent.
        keep &= ends <= e + _ROUNDING_NS
        kept = np.flatnonzero(keep)
        idx = kept + lo
        # A child starts at or after the end of everything before it: nested events do not.
        reach = np.maximum.accumulate(ends[kept]) if len(idx) else ends[kept]
        prior = np.concatenate(([s], reach[:-1])) if len(idx) else reach
        nested = starts[idx] >= np.maximum(prior, s)
        idx, kept = idx[nested], kept[nested]
        names = self.trace.strings
        seen: list[Observed] = []
        exact: list[int | None] = []
        lines_of_body = (body.first_line, body.last_line) if body is not None else None
        events, child_frame = rows[idx], is_frame[idx]
        name_ids = cpu.name[np.where(child_frame, 0, events)] if len(cpu) else events.copy()
        name_ids[child_frame] = frames.name[events[child_frame]]
        call_lines = np.full(len(idx), NONE, dtype=np.int64)
        call_lines[child_frame] = frames.call_line[events[child_frame]]
        children = zip(
            idx.tolist(), child_frame.tolist(), name_ids.tolist(), call_lines.tolist(), strict=True
        )
        # Where each child frame's inner events end, in one search.
        ends_at = np.searchsorted(starts, frames.end_ns[events[child_frame]], side="left")
        last_of = iter(ends_at.tolist())
        for k, frame, name_id, call_line in children:
            inner = self._inner_names(k, next(last_of), rows, is_frame) if frame else ()
            observed = self._observed.get((name_id, frame, inner))
            if observed is None:
                observed = observe(names[name_id], frame, frozenset(inner))
                self._observed[(name_id, frame, inner)] = observed
            if lines_of_body is not None and not (
                lines_of_body[0] <= call_line <= lines_of_body[1]
            ):
                call_line = NONE  # not a line of this function: the event is not its child
            seen.append(observed)
            exact.append(call_line if call_line > 0 else None)
        child_start = starts[idx]
        child_end = ends[kept]
        aligned: tuple[int | None, ...] = (None,) * len(seen)
        if body is not None:
            memo_key = (id(body), tuple(seen), tuple(exact))
            found = self._alignments.get(memo_key)
            if found is None:
                found = self._alignments[memo_key] = align(body, tuple(seen), tuple(exact))
            aligned = found
        result = _Children(
            child_start, child_end, tuple(exact), aligned, _line_array(exact), _line_array(aligned)
        )
        self._children[row] = result
        return result

    def _inner_names(
        self,
        k: int,
        last: int,
        rows: np.ndarray,
        is_frame: np.ndarray,
    ) -> tuple[str, ...]:
        """Functions of the first frames a child frame runs (wrappers hide the called name):
        of the events after it up to ``last``, the first to start once it ended."""
        out: list[str] = []
        j = k + 1
        names, frame_names = self.trace.strings, self.trace.frames.name
        while j < last and len(out) < _INNER_FRAMES:
            stop = min(last, j + 4 * _INNER_FRAMES)
            for name_id in frame_names[rows[j:stop][is_frame[j:stop]]].tolist():
                function = frame_function(names[name_id])
                if function is not None:
                    out.append(function)
                    if len(out) == _INNER_FRAMES:
                        break
            j = stop
        return tuple(sorted(set(out)))

    def profiler_cost_between(self, thread: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Estimated time the profiler spent on each thread in [a, b): what it traced there."""
        out = np.zeros(len(a), dtype=np.int64)
        o = self.options
        for h in distinct(thread).tolist():
            if h == NONE:
                continue
            sel = np.flatnonzero(thread == h)
            traced = self._threads.traced_starts(int(h))
            runs_python = len(traced[0]) > 0
            costs = (
                o.profiler_cost_per_frame_ns,
                o.profiler_cost_per_op_ns if runs_python else o.profiler_cost_per_engine_op_ns,
                o.profiler_cost_per_call_ns,
                o.profiler_cost_per_marker_ns,
            )
            for starts, cost in zip(traced, costs, strict=True):
                count = np.searchsorted(starts, b[sel]) - np.searchsorted(starts, a[sel])
                out[sel] += count * cost
        capped: np.ndarray = np.minimum(out, b - a)
        return capped

    def let_go(
        self, *, cut_points: bool = False, thread_events: bool = False, traced: bool = False
    ) -> None:
        """Drop per-thread indexes that the stages still to come do not need; one asked for
        again is rebuilt. They are copies of the trace's times: on the 0.86 GB benchmark trace
        the cut points (``lines_over``, ``calls_between``: the timeline) are 29 MB, the events
        by thread (call sites, ``_invocation``) 45 MB, the traced starts (the profiler's cost)
        20 MB, all alive at the analysis's peak, when the rules replay their fixes."""
        self._threads.let_go(cut_points=cut_points, thread_events=thread_events, traced=traced)

    def line_at(self, thread: int, t: int) -> int:
        return int(self.lines_at(np.array([thread]), np.array([t]))[0])

    def lines_over(self, thread: int, a: int, b: int) -> list[tuple[int, int]]:
        """(line id, ns) of the user code a thread ran during [a, b): the statement running in
        its innermost user frame, call sites recovered as in ``lines_at``; NONE where no user
        frame was running. The statement can change only where a Python call or an ATen op
        starts or ends, so [a, b) is cut there (at most ``_MAX_CUTS`` pieces, evenly thinned
        beyond that)."""
        return self.lines_over_many(
            np.array([thread], dtype=np.int64),
            np.array([a], dtype=np.int64),
            np.array([b], dtype=np.int64),
        )[0]

    def lines_over_many(
        self, thread: np.ndarray, a: np.ndarray, b: np.ndarray
    ) -> list[list[tuple[int, int]]]:
        """``lines_over`` of each window [a, b) of a thread, the pieces of many windows looked
        up together (a trace has many host gaps, and a lookup per gap cost more than the
        lookups), at most ``_PIECES_AT_ONCE`` of them (the 0.86 GB benchmark trace's pieces
        all at once added ~30 MB to the peak)."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(len(a))]
        mids_of: list[np.ndarray] = []
        widths_of: list[np.ndarray] = []
        windows: list[int] = []
        held = 0
        for k, (h, x, y) in enumerate(zip(thread.tolist(), a.tolist(), b.tolist(), strict=True)):
            cuts = inside(self._threads.frame_edges(h), x, y)
            if len(cuts) > _MAX_CUTS:
                cuts = cuts[np.linspace(0, len(cuts) - 1, _MAX_CUTS).astype(np.int64)]
            edges = np.concatenate(([x], cuts, [y])).astype(np.int64)
            widths = np.diff(edges)
            mids_of.append(edges[:-1] + widths // 2)
            widths_of.append(widths)
            windows.append(k)
            held += len(widths)
            if held >= _PIECES_AT_ONCE or k == len(a) - 1:
                self._add_lines_over(out, thread, windows, mids_of, widths_of)
                mids_of, widths_of, windows, held = [], [], [], 0
        return out

    def _add_lines_over(
        self,
        out: list[list[tuple[int, int]]],
        thread: np.ndarray,
        windows: list[int],
        mids_of: list[np.ndarray],
        widths_of: list[np.ndarray],
    ) -> None:
        counts = [len(m) for m in mids_of]
        window = np.repeat(np.asarray(windows, dtype=np.int64), counts)
        mids = np.concatenate(mids_of)
        widths = np.concatenate(widths_of)
        threads = np.repeat(np.asarray(thread, dtype=np.int64)[windows], counts)
        local = self.user_frames.at_many(threads, mids)
        lines = np.full(len(mids), NONE, dtype=np.int64)
        user = np.flatnonzero(local != NONE)
        if len(user):
            lines[user] = self.lines_at(threads[user], mids[user], local[user])
        _add_by_window(out, window, lines, widths)

    def engine_lines_over(
        self, thread: np.ndarray, a: np.ndarray, b: np.ndarray, launch: np.ndarray
    ) -> list[list[tuple[int, int]]]:
        """For each window [a, b) of an autograd engine thread whose launch at ``launch`` ended a
        host gap: (line id, ns) behind it. While the engine runs a node: the node's forward line
        (the engine's own Python, a hook or a custom backward, keeps its line); between two
        nodes of the same ``backward()`` call, or in one that no forward op made
        (AccumulateGrad): the next node that one made; before that call began or after its last
        node: the statement the calling thread ran. [] for a launch in no such call. All
        windows are looked up together: a trace can have many."""
        index = self._backward_index()
        frames = self.trace.frames
        parts: list[tuple[int, np.ndarray, np.ndarray, int, int, int, int]] = []
        for k, (h, x, y, at) in enumerate(
            zip(thread.tolist(), a.tolist(), b.tolist(), launch.tolist(), strict=True)
        ):
            call = index.call_at(at)
            if call == NONE:
                continue
            caller = int(frames.thread[call])
            cuts = distinct(
                np.concatenate([inside(self._threads.frame_edges(t), x, y) for t in (h, caller)])
            )
            if len(cuts) > _MAX_CUTS:
                cuts = cuts[np.linspace(0, len(cuts) - 1, _MAX_CUTS).astype(np.int64)]
            edges = np.concatenate(([x], cuts, [y])).astype(np.int64)
            widths = np.diff(edges)
            began, ended = int(frames.start_ns[call]), int(frames.end_ns[call])
            parts.append((k, edges[:-1] + widths // 2, widths, h, caller, began, ended))
        out: list[list[tuple[int, int]]] = [[] for _ in range(len(a))]
        if not parts:
            return out

        def each(column: int) -> np.ndarray:
            return np.concatenate([np.full(len(p[1]), p[column], dtype=np.int64) for p in parts])

        mids = np.concatenate([p[1] for p in parts])
        widths = np.concatenate([p[2] for p in parts])
        window, engine, callers, c0, c1 = (each(c) for c in (0, 3, 4, 5, 6))
        in_call = (mids >= c0) & (mids < c1)
        points = mids.copy()
        # A node with no forward op of its own (AccumulateGrad) counts as a pause before the
        # next node that has one.
        at = self.backward_points(engine, mids)
        in_node = in_call & at.inside & (at.made | (at.thread == NONE))
        between = np.flatnonzero(in_call & ~in_node)
        upcoming = np.full(len(between), NONE, dtype=np.int64)
        for h in distinct(engine[between]).tolist():
            sel = np.flatnonzero(engine[between] == h)
            upcoming[sel] = index.next_node(int(h), mids[between[sel]])
        soon = (upcoming != NONE) & (upcoming < c1[between])
        points[between[soon]] = upcoming[soon]
        by_engine = in_node.copy()
        by_engine[between[soon]] = True
        lines = np.full(len(mids), NONE, dtype=np.int64)
        if by_engine.any():
            lines[by_engine] = self.work_lines(engine[by_engine], points[by_engine]).line
        by_caller = np.flatnonzero(~by_engine)
        if len(by_caller) and len(self.user_rows):
            local = self.user_frames.at_many(callers[by_caller], mids[by_caller])
            user = by_caller[local != NONE]
            lines[user] = self.lines_at(callers[user], mids[user], local[local != NONE])
        _add_by_window(out, window, lines, widths)
        return out

    def has_user_frames(self, thread: np.ndarray) -> np.ndarray:
        """Whether each thread ran any user Python frame in the trace."""
        threads = distinct(self.trace.frames.thread[self.user_rows])
        return member(thread, threads)

    def calls_between(self, thread: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether a Python call or an ATen op starts or ends on the thread inside (a, b): only
        then can the running statement change within the window (``lines_over``)."""
        out = np.zeros(len(a), dtype=bool)
        for h in distinct(thread).tolist():
            sel = np.flatnonzero(thread == h)
            cuts = self._threads.frame_edges(int(h))
            out[sel] = np.searchsorted(cuts, b[sel], side="left") > np.searchsorted(
                cuts, a[sel], side="right"
            )
        return out

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


_ROUNDING_NS = 3
_INNER_FRAMES = 12
_NO_LINE, _RECOVERED, _EXACT = 0, 1, 2  # precision codes in _recover
Out = np.ndarray | list[tuple[np.ndarray, np.ndarray]]
_PRECISION_OF = {_RECOVERED: Precision.RECOVERED, _EXACT: Precision.EXACT}
_RANK = {Precision.OP: -1, Precision.FUNCTION: 0, Precision.RECOVERED: 1, Precision.EXACT: 2}
# Annotations that mark steps or brrr's own line markers, not regions of the user's code.
_NOT_REGIONS = ("ProfilerStep#", LINE_ANNOTATION_PREFIX)


@dataclass(frozen=True)
class _Children:
    """Events directly inside a frame invocation, in order, and the line each one ran on."""

    starts: np.ndarray
    ends: np.ndarray
    exact: tuple[int | None, ...]  # the recorder's call-site line of child frames
    aligned: tuple[int | None, ...]  # lines recovered from the source
    exact_line: np.ndarray  # ``exact`` with NONE for None
    aligned_line: np.ndarray  # ``aligned`` with NONE for None


def _line_array(lines: Sequence[int | None]) -> np.ndarray:
    return np.array([NONE if x is None else x for x in lines], dtype=np.int64)


def _add_by_window(
    out: list[list[tuple[int, int]]], window: np.ndarray, lines: np.ndarray, ns: np.ndarray
) -> None:
    """Append to ``out[k]`` each line's ns over the pieces of window k (pieces of no width
    left out), lines in the order the window's pieces first meet them."""
    keep = np.flatnonzero(ns > 0)
    if not len(keep):
        return
    window, lines, ns = window[keep], lines[keep], ns[keep]
    by_key = np.lexsort((lines, window))  # stable: a key's first piece comes first
    new = np.ones(len(by_key), dtype=bool)
    new[1:] = (window[by_key][1:] != window[by_key][:-1]) | (
        lines[by_key][1:] != lines[by_key][:-1]
    )
    starts = np.flatnonzero(new)
    sums = np.add.reduceat(ns[by_key].astype(np.int64), starts)
    first = by_key[starts]
    for g in np.argsort(first, kind="stable").tolist():
        at = int(first[g])
        out[int(window[at])].append((int(lines[at]), int(sums[g])))


def outermost_ops(trace: Trace) -> np.ndarray:
    """Rows of the ATen ops that no other op on their thread contains."""
    cpu = trace.cpu_ops
    ops = ~cpu.annotation
    found = []
    # A thread at a time, its ends turned into their running maximum in place: the whole
    # table's rows, times and reach at once were ~40 MB for a moment (0.86 GB benchmark trace).
    for h in distinct(cpu.thread).tolist():
        rows = np.flatnonzero(ops & (cpu.thread == h))
        if not len(rows):
            continue
        reach = cpu.end_ns[rows]
        np.maximum.accumulate(reach, out=reach)
        outer = np.empty(len(rows), dtype=bool)
        outer[0] = True
        np.greater_equal(cpu.start_ns[rows[1:]], reach[:-1], out=outer[1:])
        found.append(rows[outer])
    return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def _top_level_ops(trace: Trace) -> tuple[np.ndarray, Innermost, Innermost, np.ndarray]:
    """ATen ops that no other op contains, and the user's record_function regions."""
    cpu, strings = trace.cpu_ops, trace.strings
    rows = outermost_ops(trace)
    index = Innermost(cpu.thread[rows], cpu.start_ns[rows], cpu.end_ns[rows])
    is_region = np.array([not s.startswith(_NOT_REGIONS) for s in strings], dtype=bool)
    mask = cpu.annotation & is_region[cpu.name] if len(cpu) else cpu.annotation
    region_rows = np.flatnonzero(mask)
    regions = Innermost(cpu.thread[mask], cpu.start_ns[mask], cpu.end_ns[mask])
    return rows, index, regions, region_rows


def _load_body(
    frame: FrameName, mapper: PathMapper, max_bytes: int, skipped: dict[str, str]
) -> Body | None:
    """The body of the frame's function, read only from a file the mapper admits; a file that
    cannot be read safely is noted in ``skipped`` (path -> why)."""
    if frame.function.startswith("<") and frame.function != "<module>":
        return None  # lambdas and comprehensions: the frame's own line is already the statement
    path = mapper.map(frame.file)
    if path is None:
        return None
    # Read the resolved file, checked again now: the link the mapper followed may have changed.
    real = os.path.realpath(path)
    if not mapper.may_read(real):
        skipped[path] = "is a link out of the source root to a file that is not Python"
        return None
    try:
        mtime = source_mtime(real, max_bytes)
        return find_body(real, mtime, frame.line, frame.function, max_bytes)
    except SourceSkipped as skip:
        skipped[path] = skip.reason
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class WorkLines:
    line: np.ndarray  # line id, NONE
    backward: np.ndarray  # the work is a backward node's
    frame: np.ndarray  # innermost user frame at the forward point (index into user_rows)
