"""exposed-communication: collective kernels with no computation beside them.

Why it costs: the GPU computes nothing while they run. The saving: the exposed time, at most the
compute there is to overlap it with.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.vocabulary import KernelKind


def exposed_communication(ctx: RuleContext) -> Iterator[RawFinding]:
    gpu = ctx.trace.gpu
    comm = np.array([ctx.kind(r) is KernelKind.COMMUNICATION for r in range(len(gpu))], dtype=bool)
    if not comm.any():
        return
    other = np.flatnonzero(~comm)
    starts, ends = gpu.start_ns[other], gpu.end_ns[other]
    order = np.argsort(starts)
    starts, ends = starts[order], np.maximum.accumulate(ends[order]) if len(order) else ends
    per_line: dict[int, float] = {}
    for row in np.flatnonzero(comm).tolist():
        a, b = int(gpu.start_ns[row]), int(gpu.end_ns[row])
        covered = _covered(starts, ends, a, b)
        exposed: float = (b - a) - covered
        line = int(ctx.ops.line[row])
        if exposed > 0 and line != NONE:
            per_line[line] = per_line.get(line, 0.0) + exposed
    compute_busy = float((gpu.end_ns[other] - gpu.start_ns[other]).sum())
    for line_id, exposed in per_line.items():
        saving = min(exposed, compute_busy)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "exposed-communication",
            line_id,
            int(saving),
            f"collective kernels run {duration_text(exposed)} with no computation beside them",
            "Overlap communication with compute: DDP bucket_cap_mb, no_sync() during gradient "
            "accumulation, FSDP prefetching.",
            {"exposed_us": round(exposed / 1e3, 1)},
        )


def _covered(starts: np.ndarray, reach: np.ndarray, a: int, b: int) -> int:
    """How much of [a, b) the intervals (sorted starts, running max of ends) cover."""
    covered = 0
    cursor = a
    i = int(np.searchsorted(starts, b))
    j = max(0, int(np.searchsorted(reach, a, side="right")))
    for k in range(j, i):
        lo, hi = max(cursor, int(starts[k])), min(b, int(reach[k]))
        if hi > lo:
            covered += hi - lo
            cursor = hi
    return covered
