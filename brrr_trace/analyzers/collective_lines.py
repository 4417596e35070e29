"""The source line each collective call is charged to (docs/architecture.md §12).

A collective issued by user code (``dist.all_reduce(...)``, an FSDP pre-forward hook inside the
module call) belongs to the user line running when it was issued, as any launch does. One that
DDP's reducer issues during backward (from an autograd hook, usually on the engine's thread)
has no user frame of its own: it belongs to the lines whose work filled the bucket, the forward
lines of the backward ops launched on that thread since its previous collective (the backward
attribution's autograd sequence numbers give those lines), the line with the most GPU time
first. With no such op (a bucket of parameters whose gradients came from elsewhere), the line
that called ``backward()`` takes it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.backward import EVALUATE_PREFIX, backward_call_rows
from brrr_trace.analyzers.collectives import Collectives
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.kernels import communication_names
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.arraysets import distinct, member
from brrr_trace.traces.model import Trace
from brrr_trace.vocabulary import Precision


def place_collectives(
    found: Collectives, trace: Trace, ops: OpAttribution, locator: Locator
) -> tuple[Collectives, OpAttribution]:
    """The calls with their lines (``CollectiveCall.line`` too), and the attribution with the
    GPU ops each call launched moved onto its line."""
    if not found.calls:
        return found, ops
    gpu, host = trace.gpu, trace.host_calls
    threads = np.asarray(found.thread, dtype=np.int64)
    issued = np.array([c.host_start_ns for c in found.calls], dtype=np.int64)
    here = locator.lines_at(threads, issued)
    callers = _backward_callers(trace, locator, issued)
    # Inside an engine node (a gradient hook), or on a thread that runs them while backward()
    # is being called (DDP's end-of-backward callback): not on the main thread after it.
    within_call = np.array([line_start[1] != NONE for line_start in callers], dtype=bool)
    in_backward = locator.backward_points(threads, issued).inside | (
        within_call & member(threads, _engine_threads(trace))
    )
    # Backward ops by launch, per thread: the candidates to have filled each bucket.
    is_comm = communication_names(trace.strings, gpu.name)
    work = np.flatnonzero(
        ops.backward & (ops.line != NONE) & (ops.launch != NONE) & ~is_comm[gpu.name]
    )
    # Per thread, by launch time: binary searches find each bucket's ops.
    order = np.lexsort((host.start_ns[ops.launch[work]], host.thread[ops.launch[work]]))
    work = work[order]
    work_thread = host.thread[ops.launch[work]]
    work_t = host.start_ns[ops.launch[work]]
    work_ns = (gpu.end_ns - gpu.start_ns)[work]
    thread_of_work, first_of_thread = np.unique(work_thread, return_index=True)
    end_of_thread = np.append(first_of_thread[1:], len(work))[: len(first_of_thread)]
    span_of = {
        int(h): (int(a), int(b))
        for h, a, b in zip(thread_of_work, first_of_thread, end_of_thread, strict=True)
    }
    line = ops.line.copy()
    line_ids: list[int] = []
    charged: list[tuple[int, ...]] = []
    previous: dict[int, int] = {}
    for k in range(len(found.calls)):
        thread, t0 = int(threads[k]), int(issued[k])
        if not in_backward[k]:
            owner = int(here[k])
            bucket: tuple[int, ...] = (owner,) if owner != NONE else ()
        else:
            since = previous.get(thread, np.iinfo(np.int64).min)
            if callers[k][1] != NONE:
                since = max(since, callers[k][1])
            a, b = span_of.get(thread, (0, 0))
            lo = a + int(np.searchsorted(work_t[a:b], since, side="right"))
            hi = a + int(np.searchsorted(work_t[a:b], t0, side="left"))
            sel = slice(lo, max(lo, hi))
            bucket = _by_time(ops.line[work[sel]], work_ns[sel], drop=int(callers[k][0]))
            fallback = int(callers[k][0]) if callers[k][0] != NONE else int(here[k])
            owner = bucket[0] if bucket else fallback
            bucket = bucket or ((owner,) if owner != NONE else ())
            previous[thread] = t0
        line_ids.append(owner)
        charged.append(bucket)
        if owner != NONE and found.launched[k]:
            line[list(found.launched[k])] = owner
    calls = tuple(
        dataclasses.replace(call, line=_line_text(locator, owner))
        for call, owner in zip(found.calls, line_ids, strict=True)
    )
    placed = dataclasses.replace(found, calls=calls, line_id=tuple(line_ids), lines=tuple(charged))
    return placed, dataclasses.replace(ops, line=line)


def _by_time(lines: np.ndarray, ns: np.ndarray, drop: int) -> tuple[int, ...]:
    """Distinct lines by their GPU time, most first; ``drop`` (the backward() line, where the
    engine's own ops land) only when it is the only one."""
    if not len(lines):
        return ()
    keys, inverse = np.unique(lines, return_inverse=True)
    totals = np.bincount(inverse.reshape(-1), weights=ns.astype(np.float64))
    order = np.lexsort((keys, -totals))
    ranked = [int(keys[i]) for i in order.tolist()]
    kept = [x for x in ranked if x != drop]
    return tuple(kept or ranked)


def _engine_threads(trace: Trace) -> np.ndarray:
    """Threads that ran autograd engine nodes: what they issue, they issue during backward."""
    cpu, strings = trace.cpu_ops, trace.strings
    is_node = np.array([s.startswith(EVALUATE_PREFIX) for s in strings], dtype=bool)
    if not len(cpu):
        return np.zeros(0, dtype=np.int64)
    return distinct(cpu.thread[is_node[cpu.name]])


def _backward_callers(trace: Trace, locator: Locator, t: np.ndarray) -> list[tuple[int, int]]:
    """Per time: (the line that called ``backward()``, when that call began) around it, or
    (NONE, NONE)."""
    frames = trace.frames
    rows = backward_call_rows(trace)
    out = [(NONE, NONE)] * len(t)
    if not len(rows):
        return out
    # One timeline for every thread: the engine's threads run while the caller waits in it.
    index = Innermost(
        np.zeros(len(rows), dtype=np.int64), frames.start_ns[rows], frames.end_ns[rows]
    )
    around = index.at_many(np.zeros(len(t), dtype=np.int64), t)
    found = np.flatnonzero(around != NONE)
    if not len(found):
        return out
    call = rows[around[found]]
    lines = locator.lines_at(frames.thread[call], frames.start_ns[call])
    for k, line, start in zip(
        found.tolist(), lines.tolist(), frames.start_ns[call].tolist(), strict=True
    ):
        out[k] = (int(line), int(start))
    return out


def _line_text(locator: Locator, line_id: int) -> str | None:
    """``path.py:LINE`` as the report names the line; None for no line or an op-only row."""
    if line_id == NONE:
        return None
    key = locator.lines[line_id]
    if key.precision is Precision.OP:
        return None
    return f"{key.file}:{key.line}"
