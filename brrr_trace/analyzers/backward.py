"""Backward ops to the forward code that made them (docs/architecture.md §5).

The autograd engine runs a node's backward inside an ``autograd::engine::evaluate_function: X``
event. Its ``Sequence number`` is the node's: the value of the forward thread's counter when the
op that *created* the node ran. Every op reads that counter when it starts, but only a node's
creator bumps it, so several forward ops can show the same number: the creator is the last one
that shows it (those before it made no node). When Python hooks sit on a node, torch leaves the
number off the engine's event; the node's own op (named like the node) inside it still has it.

Where no forward op is found (AccumulateGrad, a node made outside the trace), the op belongs to
the line that called ``backward()``: the Python frame of ``backward`` spanning it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.arraysets import distinct
from brrr_trace.traces.model import NO_ID, Trace

EVALUATE_PREFIX = "autograd::engine::evaluate_function: "
# Frames that a ``loss.backward()`` / ``torch.autograd.backward(...)`` call runs under.
_BACKWARD_FRAMES = (
    "torch/_tensor.py(",
    "torch/autograd/__init__.py(",
)
_BACKWARD_FUNCTIONS = frozenset({"backward", "grad"})


def backward_call_rows(trace: Trace) -> np.ndarray:
    """Rows of the Python frames of ``loss.backward()`` / ``torch.autograd.backward(...)``."""
    frames, strings = trace.frames, trace.strings
    is_call = np.array(
        [
            s.startswith(_BACKWARD_FRAMES) and s.rsplit(": ", 1)[-1] in _BACKWARD_FUNCTIONS
            for s in strings
        ],
        dtype=bool,
    )
    mask = is_call[frames.name] if len(frames) else np.zeros(0, dtype=bool)
    rows: np.ndarray = np.flatnonzero(mask)
    return rows


def _key(thread: np.ndarray, seq: np.ndarray) -> np.ndarray:
    return (thread.astype(np.int64) << 40) + seq.astype(np.int64)


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Index of each wanted key in the sorted ``keys``, NONE where absent."""
    if not len(keys):
        return np.full(len(wanted), NONE, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, at, NONE)


@dataclass(frozen=True)
class BackwardPoints:
    """For query points: inside a backward node or not, and where its forward code ran."""

    inside: np.ndarray  # bool: the point lies in an engine node
    node_start: np.ndarray  # start of that node event, NONE
    thread: np.ndarray  # thread of the forward point, NONE when unknown
    t: np.ndarray  # time of the forward point
    made: np.ndarray  # bool: the forward op that created the node is known (else the point is
    # the backward() call's own, as for AccumulateGrad)


class BackwardIndex:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        cpu, strings = trace.cpu_ops, trace.strings
        is_evaluate = np.array([s.startswith(EVALUATE_PREFIX) for s in strings], dtype=bool)
        mask = is_evaluate[cpu.name] if len(cpu) else np.zeros(0, dtype=bool)
        self.rows = np.flatnonzero(mask)
        self.nodes = Innermost(cpu.thread[mask], cpu.start_ns[mask], cpu.end_ns[mask])
        self._sequence = self._node_sequences()
        self._creator = self._creators(mask)
        creators = self._creator[1]
        self._threads_with = distinct(cpu.thread[creators]).tolist() if len(creators) else []
        self._calls = self._backward_calls()
        self._node_starts: dict[int, np.ndarray] = {}

    def _node_sequences(self) -> np.ndarray:
        """Sequence number of each engine event; from the node's own op when hooks hid it."""
        cpu, strings = self.trace.cpu_ops, self.trace.strings
        seq: np.ndarray = cpu.sequence[self.rows].copy()
        missing = np.flatnonzero(seq == NO_ID)
        if not len(missing):
            return seq
        own_name: dict[str, int] = {s: k for k, s in enumerate(strings)}
        for k in missing.tolist():
            row = int(self.rows[k])
            node = own_name.get(strings[int(cpu.name[row])][len(EVALUATE_PREFIX) :])
            if node is None:
                continue
            thread, s, e = cpu.thread[row], cpu.start_ns[row], cpu.end_ns[row]
            lo = int(np.searchsorted(cpu.start_ns, s, side="left"))
            hi = int(np.searchsorted(cpu.start_ns, e, side="right"))
            inner = lo + np.flatnonzero(
                (cpu.name[lo:hi] == node)
                & (cpu.thread[lo:hi] == thread)
                & (cpu.sequence[lo:hi] != NO_ID)
            )
            if len(inner):
                seq[k] = cpu.sequence[inner[0]]
        return seq

    def _creators(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(forward thread, sequence number) keys, sorted, and the op that created each node:
        the last forward op, in start order, that shows the number. Ops run by the engine are
        left out (their numbers are the engine thread's own)."""
        cpu = self.trace.cpu_ops
        rows = np.flatnonzero((cpu.sequence != NO_ID) & ~mask & ~cpu.annotation)
        rows = rows[self.nodes.at_many(cpu.thread[rows], cpu.start_ns[rows]) == NONE]
        keys = _key(cpu.thread[rows], cpu.sequence[rows])
        # Rows are in start order: the last row of each key is the creator.
        order = np.argsort(keys, kind="stable")
        keys, rows = keys[order], rows[order]
        last = np.concatenate((keys[1:] != keys[:-1], [True])) if len(keys) else keys.astype(bool)
        return keys[last], rows[last]

    def _backward_calls(self) -> Innermost:
        frames = self.trace.frames
        self._call_rows = backward_call_rows(self.trace)
        rows = self._call_rows
        # One timeline for all threads: the engine's threads run while the caller waits.
        zeros = np.zeros(len(rows), dtype=np.int64)
        return Innermost(zeros, frames.start_ns[rows], frames.end_ns[rows])

    def call_at(self, t: int) -> int:
        """Frame row of the innermost ``backward()`` call running at t (on any thread), NONE."""
        k = self._calls.at(0, t)
        return int(self._call_rows[k]) if k != NONE else NONE

    def next_node(self, thread: int, t: np.ndarray) -> np.ndarray:
        """Start of the first node the engine thread begins at or after each t whose forward op
        is known, NONE."""
        starts = self._node_starts.get(thread)
        if starts is None:
            cpu = self.trace.cpu_ops
            mine = self.rows[cpu.thread[self.rows] == thread]
            starts = np.sort(cpu.start_ns[mine])
            starts = starts[self.points(np.full(len(starts), thread), starts).made]
            self._node_starts[thread] = starts
        k = np.searchsorted(starts, t, side="left")
        out = np.full(len(t), NONE, dtype=np.int64)
        ok = k < len(starts)
        out[ok] = starts[k[ok]]
        return out

    def points(self, thread: np.ndarray, t: np.ndarray) -> BackwardPoints:
        n = len(t)
        local = self.nodes.at_many(thread, t)
        inside = local != NONE
        node_start = np.full(n, NONE, dtype=np.int64)
        out_thread = np.full(n, NONE, dtype=np.int64)
        out_t = np.zeros(n, dtype=np.int64)
        if not inside.any():
            return BackwardPoints(inside, node_start, out_thread, out_t, inside.copy())
        cpu, frames = self.trace.cpu_ops, self.trace.frames
        where = np.flatnonzero(inside)
        rows = self.rows[local[where]]
        node_start[where] = cpu.start_ns[rows]
        seqs = self._sequence[local[where]]
        # "Fwd thread id" is the trace's own thread id; threads here are indices.
        index_of = {th.tid: k for k, th in enumerate(self.trace.threads)}
        tids, inverse = np.unique(cpu.fwd_thread[rows], return_inverse=True)
        fwd = np.array([index_of.get(tid, NONE) for tid in tids.tolist()], dtype=np.int64)
        fwd = fwd[inverse.reshape(-1)]
        keys, creators = self._creator
        known = seqs != NO_ID
        for candidate in [fwd, *(np.full(len(fwd), h) for h in self._threads_with)]:
            if not (known & (out_thread[where] == NONE)).any():
                break
            todo = known & (out_thread[where] == NONE) & (candidate != NONE)
            if not todo.any():
                continue
            found = _lookup(keys, _key(candidate[todo], seqs[todo]))
            hit = found != NONE
            q = where[todo][hit]
            out_thread[q] = cpu.thread[creators[found[hit]]]
            out_t[q] = cpu.start_ns[creators[found[hit]]]
        made = out_thread != NONE
        lost = where[out_thread[where] == NONE]
        if len(lost) and len(self._call_rows):
            call = self._calls.at_many(np.zeros(len(lost), dtype=np.int64), t[lost])
            ok = call != NONE
            rows = self._call_rows[call[ok]]
            out_thread[lost[ok]] = frames.thread[rows]
            out_t[lost[ok]] = frames.start_ns[rows]
        return BackwardPoints(inside, node_start, out_thread, out_t, made)
