"""Each GPU op's launch, CPU op and source line: the correlation link from a kernel to the host
call that launched it, and the line the ``Locator`` finds at that call (docs/architecture.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.arraysets import distinct
from brrr_trace.traces.model import NO_ID, GpuOps, Trace

# Ops that ran before the window's first launch: later starts of their run tried at most.
_TAIL_STARTS = 64


@dataclass(frozen=True)
class OpAttribution:
    """Per GPU op (rows of ``trace.gpu``): its launch, CPU op and line."""

    launch: np.ndarray  # host call row, NONE
    cpu_op: np.ndarray  # innermost CPU op row around the launch, NONE
    line: np.ndarray  # line id, NONE
    backward: np.ndarray  # True when launched by the autograd engine for a backward op
    frame: np.ndarray  # the user frame (index into Locator.user_rows) the line lies in, NONE


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
    del ops  # its segments (tens of MB on a long trace) are not needed for the lines

    line = np.full(n, NONE, dtype=np.int64)
    backward = np.zeros(n, dtype=bool)
    frame = np.full(n, NONE, dtype=np.int64)
    found = locator.work_lines(thread[has], t[has])
    line[has], backward[has], frame[has] = found.line, found.backward, found.frame
    for source, target in _launched_before_the_window(gpu, has):
        line[target], backward[target], frame[target] = (
            line[source],
            backward[source],
            frame[source],
        )
    return OpAttribution(launch=launch, cpu_op=cpu_op, line=line, backward=backward, frame=frame)


def _launched_before_the_window(gpu: GpuOps, has: np.ndarray) -> list[tuple[int, int]]:
    """(launched op, op without a launch) pairs for the ops that ran at the start of the window
    but were launched before it: the tail of the step before. Steps repeat, so that tail is the
    tail of the recorded steps too; the same kernels in the same order give its lines."""
    pairs: list[tuple[int, int]] = []
    for device in distinct(gpu.device).tolist():
        on = gpu.device == device
        orphans = np.flatnonzero(on & ~has)
        launched = np.flatnonzero(on & has)
        if not len(orphans) or not len(launched):
            continue
        first_launched = int(gpu.start_ns[launched].min())
        orphans = orphans[gpu.start_ns[orphans] < first_launched]
        orphans = orphans[np.argsort(gpu.start_ns[orphans], kind="stable")]
        launched = launched[np.argsort(gpu.correlation[launched], kind="stable")]
        names, tail = gpu.name[launched], gpu.name[orphans]
        # The window may open inside the first kernel's run: try a few later starts.
        for skip in range(min(len(tail), _TAIL_STARTS)):
            want = tail[skip:]
            at = _last_run_of(names, want)
            if at is not None:
                pairs += zip(
                    launched[at : at + len(want)].tolist(), orphans[skip:].tolist(), strict=True
                )
                break
    return pairs


def _last_run_of(names: np.ndarray, want: np.ndarray) -> int | None:
    """Start of the last run of ``want`` near the end of ``names`` (the recorded steps end with
    the tail the window opened in; a few ops may follow it)."""
    width = len(want)
    if not width or width > len(names):
        return None
    lo = max(0, len(names) - 2 * width - _TAIL_STARTS)
    starts = lo + np.flatnonzero(names[lo : len(names) - width + 1] == want[0])
    for at in starts[::-1].tolist():
        if np.array_equal(names[at : at + width], want):
            return int(at)
    return None


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
