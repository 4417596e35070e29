"""cpu-to-device: a tensor built on the CPU and copied to the GPU by the same line, again and again.

Why it costs: the copy over the host link and the host's waiting. The saving: the copies' time
and the sync- and host-caused idle of the line.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.arraysets import distinct
from brrr_trace.traces.model import GPU_MEMCPY, Trace
from brrr_trace.vocabulary import IdleCause

_FACTORIES = frozenset(
    {
        "aten::tensor",
        "aten::scalar_tensor",
        "aten::randn",
        "aten::rand",
        "aten::randint",
        "aten::zeros",
        "aten::ones",
        "aten::full",
        "aten::arange",
        "aten::empty",
        "aten::from_numpy",
        "aten::lift_fresh",
    }
)


def cpu_to_device(ctx: RuleContext) -> Iterator[RawFinding]:
    """A tensor made on the CPU by the same statement that copies it to the GPU, each time."""
    cpu = ctx.trace.cpu_ops
    strings = ctx.trace.strings
    gpu = ctx.trace.gpu
    outer = _outermost_ops(ctx.trace)
    # Per thread once: indexed per copy, this was a pass over the thread's ops for each copy.
    outer_starts = {thread: cpu.start_ns[rows] for thread, rows in outer.items()}
    for cost in ctx.costs:
        copies = [
            r
            for r in ctx.rows(cost.line_id).tolist()
            if gpu.kind[r] == GPU_MEMCPY and "HtoD" in ctx.name(r)
        ]
        if len(copies) < 2:
            continue
        made_here = 0
        for row in copies:
            launch = int(ctx.ops.launch[row])
            if launch == NONE:
                continue
            thread = int(ctx.trace.host_calls.thread[launch])
            t = int(ctx.trace.host_calls.start_ns[launch])
            tops = outer.get(thread)
            if tops is None:
                continue
            # The top-level op that holds the copy (aten::to), and the one just before it.
            k = int(np.searchsorted(outer_starts[thread], t, side="right")) - 1
            if k < 1:
                continue
            prev = int(tops[k - 1])
            same_line = ctx.locator.line_at(thread, int(cpu.start_ns[prev])) == cost.line_id
            if strings[cpu.name[prev]] in _FACTORIES and same_line:
                made_here += 1
        if made_here < 2:
            continue
        arr = np.asarray(copies)
        saving = float(ctx.duration(arr).sum()) + ctx.idle(cost, IdleCause.SYNC, IdleCause.HOST)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "cpu-to-device",
            cost.line_id,
            int(saving),
            f"a tensor is built on the CPU and copied to the GPU {made_here} times",
            'Create it on the GPU directly (torch.randn(..., device="cuda")), or build it '
            "once outside the loop.",
            {"copies": made_here},
        )


def _outermost_ops(trace: Trace) -> dict[int, np.ndarray]:
    """Per thread: the rows of ATen ops not nested in another op, in start order."""
    cpu = trace.cpu_ops
    out: dict[int, np.ndarray] = {}
    ops = np.flatnonzero(~cpu.annotation)
    for h in distinct(cpu.thread[ops]).tolist():
        rows = ops[cpu.thread[ops] == h]  # already in start order, outer first
        reach = np.concatenate(
            ([np.iinfo(np.int64).min], np.maximum.accumulate(cpu.end_ns[rows])[:-1])
        )
        out[h] = rows[cpu.start_ns[rows] >= reach]
    return out
