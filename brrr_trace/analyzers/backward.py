"""Backward ops to the forward code that made them (DESIGN §5).

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
from brrr_trace.traces.model import NO_ID, Trace

EVALUATE_PREFIX = "autograd::engine::evaluate_function: "
# Frames that a ``loss.backward()`` / ``torch.autograd.backward(...)`` call runs under.
_BACKWARD_FRAMES = (
    "torch/_tensor.py(",
    "torch/autograd/__init__.py(",
)
_BACKWARD_FUNCTIONS = frozenset({"backward", "grad"})


@dataclass(frozen=True)
class BackwardPoints:
    """For query points: inside a backward node or not, and where its forward code ran."""

    inside: np.ndarray  # bool: the point lies in an engine node
    node_start: np.ndarray  # start of that node event, NONE
    thread: np.ndarray  # thread of the forward point, NONE when unknown
    t: np.ndarray  # time of the forward point


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
        self._calls = self._backward_calls()

    def _node_sequences(self) -> np.ndarray:
        """Sequence number of each engine event; from the node's own op when hooks hid it."""
        cpu, strings = self.trace.cpu_ops, self.trace.strings
        seq = cpu.sequence[self.rows].copy()
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

    def _creators(self, mask: np.ndarray) -> dict[tuple[int, int], int]:
        """(forward thread, sequence number) -> the op that created the node: the last forward
        op, in start order, that shows the number. Ops run by the engine are left out (their
        numbers are the engine thread's own)."""
        cpu = self.trace.cpu_ops
        rows = np.flatnonzero((cpu.sequence != NO_ID) & ~mask & ~cpu.annotation)
        rows = rows[self.nodes.at_many(cpu.thread[rows], cpu.start_ns[rows]) == NONE]
        creator: dict[tuple[int, int], int] = {}
        for row, thread, seq in zip(
            rows.tolist(), cpu.thread[rows].tolist(), cpu.sequence[rows].tolist(), strict=True
        ):
            creator[(thread, seq)] = row  # rows are in start order: the last one stays
        return creator

    def _backward_calls(self) -> Innermost:
        frames, strings = self.trace.frames, self.trace.strings
        is_call = np.array(
            [
                s.startswith(_BACKWARD_FRAMES) and s.rsplit(": ", 1)[-1] in _BACKWARD_FUNCTIONS
                for s in strings
            ],
            dtype=bool,
        )
        mask = is_call[frames.name] if len(frames) else np.zeros(0, dtype=bool)
        self._call_rows = np.flatnonzero(mask)
        # One timeline for all threads: the engine's threads run while the caller waits.
        zeros = np.zeros(int(mask.sum()), dtype=np.int64)
        return Innermost(zeros, frames.start_ns[mask], frames.end_ns[mask])

    def points(self, thread: np.ndarray, t: np.ndarray) -> BackwardPoints:
        n = len(t)
        local = self.nodes.at_many(thread, t)
        inside = local != NONE
        node_start = np.full(n, NONE, dtype=np.int64)
        out_thread = np.full(n, NONE, dtype=np.int64)
        out_t = np.zeros(n, dtype=np.int64)
        if not inside.any():
            return BackwardPoints(inside, node_start, out_thread, out_t)
        cpu, frames = self.trace.cpu_ops, self.trace.frames
        where = np.flatnonzero(inside)
        rows = self.rows[local[where]]
        node_start[where] = cpu.start_ns[rows]
        seqs = self._sequence[local[where]]
        # "Fwd thread id" is the trace's own thread id; threads here are indices.
        index_of = {th.tid: k for k, th in enumerate(self.trace.threads)}
        fwd = [index_of.get(tid, NONE) for tid in cpu.fwd_thread[rows].tolist()]
        threads_with = sorted({h for h, _ in self._creator})
        for q, seq, fwd_thread in zip(where.tolist(), seqs.tolist(), fwd, strict=True):
            if seq == NO_ID:
                continue
            candidates = [fwd_thread] if fwd_thread in threads_with else threads_with
            for h in candidates:
                row = self._creator.get((h, seq))
                if row is not None:
                    out_thread[q] = cpu.thread[row]
                    out_t[q] = cpu.start_ns[row]
                    break
        lost = where[out_thread[where] == NONE]
        if len(lost) and len(self._call_rows):
            call = self._calls.at_many(np.zeros(len(lost), dtype=np.int64), t[lost])
            ok = call != NONE
            rows = self._call_rows[call[ok]]
            out_thread[lost[ok]] = frames.thread[rows]
            out_t[lost[ok]] = frames.start_ns[rows]
        return BackwardPoints(inside, node_start, out_thread, out_t)
