"""Per-line cost, split into compute, memory and overhead time; the largest names the regime.

A line's cost is the GPU busy time of its kernels plus the GPU idle time charged to it
(DESIGN §6). Busy time is counted exclusively (``Timeline.exclusive_ns``), so lines add up to the
device's busy time even when streams overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.attribution import LineKey, Locator, OpAttribution
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.roofline import kernel_kind
from brrr_trace.analyzers.timeline import Timeline
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import GPU_MEMCPY, GPU_MEMSET, Trace
from brrr_trace.vocabulary import IdleCause, KernelKind, Regime

REGIMES: tuple[Regime, ...] = (Regime.COMPUTE, Regime.MEMORY, Regime.OVERHEAD)
_COMPUTE_KINDS = frozenset({KernelKind.GEMM, KernelKind.CONV, KernelKind.ATTENTION})


@dataclass(frozen=True)
class OpClasses:
    """Per GPU op: what it is and which regime its time counts toward."""

    kind: tuple[KernelKind, ...]  # per string id of kernel names (lazy table)
    op_kind: np.ndarray  # codes into tuple(KernelKind)
    regime: np.ndarray  # codes into REGIMES


@dataclass(frozen=True)
class LineCost:
    key: LineKey
    gpu_ns: int
    backward_gpu_ns: int
    kernels: int
    cpu_ns: int
    by_regime: dict[Regime, int]
    idle_by_cause: dict[IdleCause, int]
    top_kernels: tuple[tuple[int, int, int], ...]  # (name id, count, total ns)

    @property
    def idle_ns(self) -> int:
        return sum(self.idle_by_cause.values())

    @property
    def regime(self) -> Regime:
        return max(REGIMES, key=lambda r: (self.by_regime[r], -REGIMES.index(r)))


_KINDS = tuple(KernelKind)


def classify_ops(trace: Trace, options: AnalysisOptions) -> OpClasses:
    """A first regime per op from its kind; the roofline refines compute vs memory later."""
    gpu = trace.gpu
    kind_of_name = np.full(len(trace.strings), _KINDS.index(KernelKind.OTHER), dtype=np.int8)
    for sid in np.unique(gpu.name).tolist() if len(gpu) else ():
        kind_of_name[sid] = _KINDS.index(kernel_kind(trace.strings[sid]))
    op_kind = kind_of_name[gpu.name] if len(gpu) else np.zeros(0, dtype=np.int8)
    op_kind = np.where(gpu.kind == GPU_MEMCPY, _KINDS.index(KernelKind.MEMCPY), op_kind)
    op_kind = np.where(gpu.kind == GPU_MEMSET, _KINDS.index(KernelKind.MEMSET), op_kind)
    compute_codes = [_KINDS.index(k) for k in _COMPUTE_KINDS]
    regime = np.where(np.isin(op_kind, compute_codes), 0, 1).astype(np.int8)
    tiny = (gpu.end_ns - gpu.start_ns) < options.tiny_kernel_ns
    regime[tiny & (gpu.kind != GPU_MEMCPY)] = 2
    return OpClasses(kind=_KINDS, op_kind=op_kind, regime=regime)


def line_costs(
    trace: Trace,
    ops: OpAttribution,
    classes: OpClasses,
    timeline: Timeline,
    locator: Locator,
) -> list[LineCost]:
    cpu_time = _cpu_time(trace, locator)  # may place lines of its own: count lines after it
    n_lines = len(locator.lines)
    if n_lines == 0:
        return []
    cpu_ns = np.bincount(cpu_time[0], weights=cpu_time[1], minlength=n_lines)
    gpu = trace.gpu
    placed = ops.line != NONE
    line = ops.line[placed]
    excl = timeline.exclusive_ns[placed].astype(np.float64)
    gpu_ns = np.bincount(line, weights=excl, minlength=n_lines)
    bwd_ns = np.bincount(line, weights=excl * ops.backward[placed], minlength=n_lines)
    count = np.bincount(line, minlength=n_lines)
    by_regime = np.zeros((n_lines, 3))
    for code in range(3):
        sel = classes.regime[placed] == code
        by_regime[:, code] = np.bincount(line[sel], weights=excl[sel], minlength=n_lines)
    idle: dict[int, dict[IdleCause, int]] = {}
    for (line_id, cause), ns in timeline.idle_charges.items():
        if line_id != NONE:
            idle.setdefault(line_id, {c: 0 for c in IdleCause})[cause] += ns
    top = _top_kernels(gpu.name[placed], line, (gpu.end_ns - gpu.start_ns)[placed])
    out = []
    for k, key in enumerate(locator.lines):
        causes = idle.get(k, {c: 0 for c in IdleCause})
        if count[k] == 0 and not any(causes.values()):
            continue
        regimes = {
            Regime.COMPUTE: int(by_regime[k, 0]),
            Regime.MEMORY: int(by_regime[k, 1]),
            Regime.OVERHEAD: int(by_regime[k, 2]) + sum(causes.values()),
        }
        out.append(
            LineCost(
                key=key,
                gpu_ns=int(gpu_ns[k]),
                backward_gpu_ns=int(bwd_ns[k]),
                kernels=int(count[k]),
                cpu_ns=int(cpu_ns[k]),
                by_regime=regimes,
                idle_by_cause=causes,
                top_kernels=top.get(k, ()),
            )
        )
    return out


def _cpu_time(trace: Trace, locator: Locator) -> tuple[np.ndarray, np.ndarray]:
    """(line, ns) of the outermost ATen ops: the host time (dispatch + launch) each line ran."""
    cpu = trace.cpu_ops
    ops = np.flatnonzero(~cpu.annotation)
    if len(ops) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    outer = np.zeros(len(ops), dtype=bool)
    thread = cpu.thread[ops]
    for h in np.unique(thread).tolist():
        sel = np.flatnonzero(thread == h)
        starts, ends = cpu.start_ns[ops[sel]], cpu.end_ns[ops[sel]]
        reach = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]))
        outer[sel] = starts >= reach
    rows = ops[outer]
    lines = locator.lines_at(cpu.thread[rows], cpu.start_ns[rows])
    ok = lines != NONE
    return lines[ok], (cpu.end_ns[rows] - cpu.start_ns[rows])[ok].astype(np.float64)


def _top_kernels(
    names: np.ndarray, lines: np.ndarray, dur: np.ndarray, keep: int = 3
) -> dict[int, tuple[tuple[int, int, int], ...]]:
    if len(names) == 0:
        return {}
    pairs = np.stack([lines, names], axis=1)
    keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    totals = np.bincount(inverse, weights=dur.astype(np.float64))
    counts = np.bincount(inverse)
    out: dict[int, list[tuple[int, int, int]]] = {}
    rows = zip(keys.tolist(), totals.tolist(), counts.tolist(), strict=True)
    for (line_id, name), total, cnt in rows:
        out.setdefault(line_id, []).append((name, cnt, int(total)))
    return {k: tuple(sorted(v, key=lambda x: -x[2])[:keep]) for k, v in out.items()}
