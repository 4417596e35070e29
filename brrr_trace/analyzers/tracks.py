"""The analysis as intervals on the trace's own clock, for a timeline viewer (Perfetto): which
line launched when, which line's work each GPU stream ran, and why each idle gap is idle.

Runs of consecutive intervals of one line on one thread (or stream) become one slice, so that a
loop of 500 launches from one line is one slice, not 500. Slices of one track never overlap: a
host thread's launch calls follow each other, and so do a stream's ops and a device's gaps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.analyzers.timeline import CAUSES, Timeline
from brrr_trace.arraysets import distinct
from brrr_trace.traces.model import Trace
from brrr_trace.vocabulary import IdleCause


@dataclass(frozen=True)
class LineRun:
    """Consecutive intervals of one line: ``count`` launches or GPU ops."""

    start_ns: int
    end_ns: int
    line_id: int  # NONE: no line
    count: int


@dataclass(frozen=True)
class Gap:
    start_ns: int
    end_ns: int
    cause: IdleCause
    next_line_id: int  # the line of the op that ended the gap, NONE


@dataclass(frozen=True)
class TimelineTracks:
    launches: dict[int, tuple[LineRun, ...]]  # by host thread (index into Trace.threads)
    gpu_work: dict[tuple[int, int], tuple[LineRun, ...]]  # by (device, stream)
    idle: dict[int, tuple[Gap, ...]]  # by device


def _runs(starts: np.ndarray, ends: np.ndarray, lines: np.ndarray) -> tuple[LineRun, ...]:
    """Intervals in start order merged while the line stays the same."""
    if len(starts) == 0:
        return ()
    breaks = np.flatnonzero(lines[1:] != lines[:-1]) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks, [len(starts)]))
    ends_max = np.maximum.accumulate(ends)
    return tuple(
        LineRun(int(starts[f]), int(ends_max[last - 1]), int(lines[f]), int(last - f))
        for f, last in zip(firsts.tolist(), lasts.tolist(), strict=True)
    )


def timeline_tracks(trace: Trace, ops: OpAttribution, timeline: Timeline) -> TimelineTracks:
    gpu, host = trace.gpu, trace.host_calls
    launches: dict[int, tuple[LineRun, ...]] = {}
    has = ops.launch != NONE
    if has.any():
        # Each launch call once, with the line of (the first of) the ops it launched.
        rows, first = np.unique(ops.launch[has], return_index=True)
        line_of_row = ops.line[has][first]
        order = np.lexsort((host.start_ns[rows], host.thread[rows]))
        rows, line_of_row = rows[order], line_of_row[order]
        threads = host.thread[rows]
        for thread in distinct(threads).tolist():
            pick = threads == thread
            picked = rows[pick]
            launches[int(thread)] = _runs(
                host.start_ns[picked], host.end_ns[picked], line_of_row[pick]
            )
    gpu_work: dict[tuple[int, int], tuple[LineRun, ...]] = {}
    if len(gpu):
        keys = np.stack((gpu.device, gpu.stream), axis=1)
        for device, stream in np.unique(keys, axis=0).tolist():
            pick = np.flatnonzero((gpu.device == device) & (gpu.stream == stream))
            pick = pick[np.argsort(gpu.start_ns[pick], kind="stable")]
            gpu_work[(int(device), int(stream))] = _runs(
                gpu.start_ns[pick], gpu.end_ns[pick], ops.line[pick]
            )
    idle: dict[int, tuple[Gap, ...]] = {}
    for dev in timeline.devices:
        nexts = dev.gap_next_op.tolist()
        idle[dev.device] = tuple(
            Gap(int(s), int(e), CAUSES[int(c)], int(ops.line[n]) if n != NONE else NONE)
            for s, e, c, n in zip(
                dev.gap_start.tolist(),
                dev.gap_end.tolist(),
                dev.gap_cause.tolist(),
                nexts,
                strict=True,
            )
        )
    return TimelineTracks(launches, gpu_work, idle)
