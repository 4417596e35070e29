"""Per-line cost, split into compute, memory and overhead time; the largest names the regime.

A line's cost is the GPU busy time of its kernels plus the GPU idle time charged to it
(docs/architecture.md §6). Busy time is counted exclusively (``Timeline.exclusive_ns``), so
lines add up to the device's busy time even when streams overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from brrr_trace.analyzers.attribution import LineKey, Locator, outermost_ops
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.kernels import is_host_copy, is_tf32_kernel, kernel_dtype, kernel_kind
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.analyzers.opcost import op_cost
from brrr_trace.analyzers.opcost.activity import kernel_cost_from_launch, memcpy_cost
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost
from brrr_trace.analyzers.roofline import ceilings, classify, roofline_seconds
from brrr_trace.analyzers.timeline import Timeline
from brrr_trace.arraysets import distinct, distinct_rows
from brrr_trace.hardware.peaks import GpuPeak
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import GPU_MEMCPY, GPU_MEMSET, Trace
from brrr_trace.vocabulary import IdleCause, KernelKind, Regime

REGIMES: tuple[Regime, ...] = (
    Regime.COMPUTE,
    Regime.MEMORY,
    Regime.OVERHEAD,
    Regime.COMMUNICATION,
)


@dataclass(frozen=True)
class OpClasses:
    """Per GPU op: what it is, its roofline numbers, and which regime its time counts toward."""

    kind: tuple[KernelKind, ...]  # the vocabulary that ``op_kind`` codes index
    op_kind: np.ndarray  # codes into ``kind``
    regime: np.ndarray  # codes into REGIMES
    flops: np.ndarray  # float, NaN when unknown; an op's cost sits on its longest kernel
    nbytes: np.ndarray
    roof_s: np.ndarray  # roofline lower bound on the op's time, NaN when unknown
    ridge: np.ndarray  # FLOP/byte ridge of the ceiling the verdict used, NaN when unknown
    # Time the cost was spent in: on the kernel carrying an op's cost, all the op's kernels.
    cost_ns: np.ndarray
    # Ops that ran faster than their roofline bound allows (data in cache, a byte count the
    # model overestimates): their FLOPs and bytes are left out. (count, GPU ns)
    unexplained: tuple[int, int] = (0, 0)


_KINDS = tuple(KernelKind)


def classify_ops(
    trace: Trace,
    ops: OpAttribution,
    peak: GpuPeak | None,
    options: AnalysisOptions,
    communication: np.ndarray | None = None,
) -> OpClasses:
    """Roofline verdict per GPU op from the shapes of the ATen op that launched it.

    An op's FLOPs and bytes come from ``Input Dims``/``Input type`` of the innermost CPU op
    around the launch (leaf ops only, so nothing is counted twice), else from the kernel's launch
    configuration or the copy's byte count; they are put on the op's longest kernel. Kernels too
    short to be anything but launch-latency bound count as overhead.
    """
    gpu, cpu = trace.gpu, trace.cpu_ops
    n = len(gpu)
    strings = trace.strings
    # Per row as Python lists, not numpy scalars (an index or a store each: half of this
    # function's time on the 79 MB benchmark trace's 18 k GPU ops).
    names = gpu.name.tolist()
    code_of_name = {
        sid: _KINDS.index(kernel_kind(strings[sid]))
        for sid in (distinct(gpu.name).tolist() if n else ())
    }
    memcpy, memset = _KINDS.index(KernelKind.MEMCPY), _KINDS.index(KernelKind.MEMSET)
    kinds = [
        memcpy if code == GPU_MEMCPY else memset if code == GPU_MEMSET else code_of_name[sid]
        for sid, code in zip(names, gpu.kind.tolist(), strict=True)
    ]
    op_kind = np.array(kinds, dtype=np.int8)

    duration = gpu.end_ns - gpu.start_ns
    # The longest kernel of each launching op carries the op's cost.
    carrier = np.zeros(n, dtype=bool)
    has_op = ops.cpu_op != NONE
    if has_op.any():
        rows = np.flatnonzero(has_op)
        order = rows[np.lexsort((-duration[rows], ops.cpu_op[rows]))]
        first = np.concatenate(([True], ops.cpu_op[order][1:] != ops.cpu_op[order][:-1]))
        carrier[order[first]] = True
    values = _ValueCache(trace)
    costs: dict[tuple[int, int, int, int, str | None], OpCost] = {}
    # Kernels repeat: the verdict depends only on the name, the op's inputs and the byte count.
    verdicts: dict[tuple[Any, ...], tuple[int, float, float, float, float]] = {}
    nan = float("nan")
    carried = np.flatnonzero(carrier)
    op_of = np.full(n, NONE, dtype=np.int64)
    op_of[carried] = ops.cpu_op[carried]
    # The carrier's op's name and inputs, the key of its cost (rows without one: unread).
    op_keys = np.zeros((n, 4), dtype=np.int64)
    for column, ids in enumerate((cpu.name, cpu.input_dims, cpu.input_types, cpu.concrete_inputs)):
        op_keys[carried, column] = ids[op_of[carried]]
    found: list[tuple[int, float, float, float, float]] = []
    for row, (name_id, code, op) in enumerate(zip(names, kinds, op_of.tolist(), strict=True)):
        kind = _KINDS[code]
        if kind == KernelKind.MEMCPY:
            key: tuple[Any, ...] = (name_id, int(gpu.nbytes[row]))
        elif op != NONE:
            key = (name_id, *op_keys[row].tolist())
        elif kind == KernelKind.ELEMENTWISE:
            key = (name_id, *gpu.grid[row].tolist(), *gpu.block[row].tolist())
        else:
            key = (name_id,)
        verdict = verdicts.get(key)
        if verdict is None:
            name = strings[name_id]
            cost = UNKNOWN_COST
            if kind == KernelKind.MEMCPY:
                nb = int(gpu.nbytes[row])
                cost = memcpy_cost(name, nb if nb >= 0 else None)
            elif op != NONE:
                dtype_hint = kernel_dtype(name)
                op_key = (key[1], key[2], key[3], key[4], dtype_hint)
                cost = costs.get(op_key) or costs.setdefault(
                    op_key,
                    op_cost(
                        strings[key[1]],
                        values.get(key[2]),
                        values.get(key[3]),
                        values.get(key[4]),
                        list_dtype=dtype_hint,
                    ),
                )
            if cost.flops is None and cost.bytes is None and kind == KernelKind.ELEMENTWISE:
                cost = kernel_cost_from_launch(
                    name, gpu.grid[row].tolist(), gpu.block[row].tolist()
                )
            dtype = cost.dtype or kernel_dtype(name)
            fps = bps = None
            if peak is not None:
                fps, bps = ceilings(
                    peak, kind, dtype, is_tf32_kernel(name), host_link=is_host_copy(name)
                )
            regime_of, used_ridge = classify(cost.flops, cost.bytes, fps, bps, kind)
            bound = roofline_seconds(cost.flops, cost.bytes, fps, bps)
            verdict = verdicts[key] = (
                REGIMES.index(regime_of),
                nan if cost.flops is None else float(cost.flops),
                nan if cost.bytes is None else float(cost.bytes),
                nan if bound is None else bound,
                nan if used_ridge is None else used_ridge,
            )
        found.append(verdict)
    # Each of (regime, flops, bytes, bound, ridge) as a column: no n x 5 table at once.
    regime = np.fromiter((v[0] for v in found), dtype=np.int8, count=n)
    flops, nbytes, roof, ridge = (
        np.fromiter((v[k] for v in found), dtype=np.float64, count=n) for k in range(1, 5)
    )
    tiny = (duration < options.tiny_kernel_ns) & (gpu.kind != GPU_MEMCPY)
    regime[tiny] = REGIMES.index(Regime.OVERHEAD)
    # A collective kernel's time is communication, much of it waiting for the other ranks,
    # however short it is and whatever bytes it moves: never compute or memory.
    regime[op_kind == _KINDS.index(KernelKind.COMMUNICATION)] = REGIMES.index(Regime.COMMUNICATION)
    if communication is not None and len(communication):
        regime[communication] = REGIMES.index(Regime.COMMUNICATION)
    cost_ns = duration.astype(np.float64)
    if has_op.any():
        # An op's FLOPs and bytes were spent over all its kernels, not only its longest.
        per_op = np.bincount(ops.cpu_op[has_op], weights=duration[has_op].astype(np.float64))
        on = np.flatnonzero(carrier)
        cost_ns[on] = per_op[ops.cpu_op[on]]
    # No rate above the device's peak: the model cannot explain an op faster than its bound.
    too_fast = roof * 1e9 > cost_ns * (1 + options.roofline_slack)
    unexplained = (int(too_fast.sum()), int(cost_ns[too_fast].sum()))
    flops[too_fast] = nbytes[too_fast] = roof[too_fast] = np.nan
    return OpClasses(_KINDS, op_kind, regime, flops, nbytes, roof, ridge, cost_ns, unexplained)


class _ValueCache:
    """Decoded ``Input Dims``/``Input type``/``Concrete Inputs`` values, each decoded once."""

    def __init__(self, trace: Trace) -> None:
        self._raw = trace.values
        self._decoded: dict[int, Any] = {}

    def get(self, value_id: int) -> Any:
        if value_id == NONE:
            return None
        if value_id not in self._decoded:
            try:
                self._decoded[value_id] = msgspec.json.decode(self._raw[value_id])
            except (msgspec.DecodeError, RecursionError):
                self._decoded[value_id] = None
        return self._decoded[value_id]


@dataclass(frozen=True)
class LineCost:
    line_id: int
    key: LineKey
    gpu_ns: int
    backward_gpu_ns: int
    kernels: int
    cpu_ns: int
    by_regime: dict[Regime, int]
    idle_by_cause: dict[IdleCause, int]
    top_kernels: tuple[tuple[int, int, int], ...]  # (name id, count, total ns)
    flops: float | None = None
    nbytes: float | None = None
    flops_ns: int = 0  # time of the kernels whose FLOPs are known
    bytes_ns: int = 0
    roof_fraction: float | None = None  # roofline time / measured time over costed kernels
    ridge: float | None = None
    profiler_ns: int = 0  # the profiler's own estimated cost inside the idle charged here
    # GPU time of the line and of everything it calls (user functions, a model; forward and
    # backward): its own gpu_ns plus that of the lines in the callees.
    inclusive_gpu_ns: int = 0
    called_regime: Regime | None = None  # for a line with no time of its own: its callees'
    # GPU and idle time of the line and of everything it calls, by regime (idle is overhead):
    # the line's own ``by_regime`` plus that of the lines in its callees.
    inclusive_by_regime: dict[Regime, int] = field(default_factory=dict)

    @property
    def inclusive_ns(self) -> int:
        return sum(self.inclusive_by_regime.values())

    @property
    def idle_ns(self) -> int:
        return sum(self.idle_by_cause.values())

    @property
    def regime(self) -> Regime:
        if self.called_regime is not None and not any(self.by_regime.values()):
            return self.called_regime
        return max(REGIMES, key=lambda r: (self.by_regime[r], -REGIMES.index(r)))

    @property
    def achieved_flops_per_s(self) -> float | None:
        return self.flops / (self.flops_ns * 1e-9) if self.flops and self.flops_ns else None

    @property
    def achieved_bytes_per_s(self) -> float | None:
        return self.nbytes / (self.bytes_ns * 1e-9) if self.nbytes and self.bytes_ns else None


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
    by_regime = np.zeros((n_lines, len(REGIMES)))
    for code in range(len(REGIMES)):
        sel = classes.regime[placed] == code
        by_regime[:, code] = np.bincount(line[sel], weights=excl[sel], minlength=n_lines)
    idle: dict[int, dict[IdleCause, int]] = {}
    for (line_id, cause), ns in timeline.idle_charges.items():
        if line_id != NONE:
            idle.setdefault(line_id, {c: 0 for c in IdleCause})[cause] += ns
    dur = (gpu.end_ns - gpu.start_ns)[placed].astype(np.float64)
    top = _top_kernels(gpu.name[placed], line, dur)
    cost_ns = classes.cost_ns[placed]
    profiled: dict[int, int] = {}
    for (line_id, _), ns in timeline.profiler_charges.items():
        profiled[line_id] = profiled.get(line_id, 0) + ns
    flops = classes.flops[placed]
    nbytes = classes.nbytes[placed]
    roof = classes.roof_s[placed]
    has_f, has_b, has_r = ~np.isnan(flops), ~np.isnan(nbytes), ~np.isnan(roof)
    flops_sum = np.bincount(line[has_f], weights=flops[has_f], minlength=n_lines)
    flops_ns = np.bincount(line[has_f], weights=cost_ns[has_f], minlength=n_lines)
    flops_n = np.bincount(line[has_f], minlength=n_lines)
    bytes_sum = np.bincount(line[has_b], weights=nbytes[has_b], minlength=n_lines)
    bytes_ns = np.bincount(line[has_b], weights=cost_ns[has_b], minlength=n_lines)
    bytes_n = np.bincount(line[has_b], minlength=n_lines)
    roof_sum = np.bincount(line[has_r], weights=roof[has_r] * 1e9, minlength=n_lines)
    roof_ns = np.bincount(line[has_r], weights=cost_ns[has_r], minlength=n_lines)
    ridge_of = _dominant_ridge(line, classes.ridge[placed], excl, n_lines)
    inclusive, called = _inclusive(
        locator, ops.frame[placed], line, classes.regime[placed], excl, gpu_ns
    )
    charged_idle = {k: sum(causes.values()) for k, causes in idle.items()}
    called_all = _called_time(
        locator, ops.frame[placed], line, classes.regime[placed], excl, charged_idle
    )
    out = []
    for k, key in enumerate(locator.lines):  # finding callers may have placed lines of their own
        causes = idle.get(k, {c: 0 for c in IdleCause})
        cpu_only = not len(gpu) and k < len(cpu_ns) and cpu_ns[k] > 0  # a trace without GPU
        if not cpu_only and (k >= len(count) or (count[k] == 0 and not any(causes.values()))):
            if inclusive.get(k, 0) or k in called_all:
                out.append(
                    _caller_only(
                        k, key, inclusive.get(k, 0), called.get(k), called_all.get(k, np.zeros(3))
                    )
                )
            continue
        waited = causes[IdleCause.COLLECTIVE]
        regimes = {
            Regime.COMPUTE: int(by_regime[k, 0]),
            Regime.MEMORY: int(by_regime[k, 1]),
            Regime.OVERHEAD: int(by_regime[k, 2]) + sum(causes.values()) - waited,
            Regime.COMMUNICATION: int(by_regime[k, 3]) + waited,
        }
        out.append(
            LineCost(
                line_id=k,
                key=key,
                gpu_ns=int(gpu_ns[k]),
                backward_gpu_ns=int(bwd_ns[k]),
                kernels=int(count[k]),
                cpu_ns=int(cpu_ns[k]),
                by_regime=regimes,
                idle_by_cause=causes,
                top_kernels=top.get(k, ()),
                flops=float(flops_sum[k]) if flops_n[k] else None,
                nbytes=float(bytes_sum[k]) if bytes_n[k] else None,
                flops_ns=int(flops_ns[k]),
                bytes_ns=int(bytes_ns[k]),
                roof_fraction=float(roof_sum[k] / roof_ns[k]) if roof_ns[k] > 0 else None,
                ridge=ridge_of.get(k),
                profiler_ns=profiled.get(k, 0),
                inclusive_gpu_ns=int(inclusive.get(k, gpu_ns[k])),
                inclusive_by_regime=_plus(regimes, called_all.get(k)),
            )
        )
    return out


def _plus(own: dict[Regime, int], called: np.ndarray | None) -> dict[Regime, int]:
    if called is None:
        return dict(own)
    return {r: own[r] + round(float(called[i])) for i, r in enumerate(REGIMES)}


def _mix_of(mixes: dict[int, np.ndarray], line: int) -> np.ndarray:
    """A line's regime mix, zeros the first time (``setdefault`` made an array every call:
    ~50 k on the 79 MB benchmark trace)."""
    found = mixes.get(line)
    if found is None:
        found = mixes[line] = np.zeros(len(REGIMES))
    return found


def _called_time(
    locator: Locator,
    frame: np.ndarray,
    line: np.ndarray,
    regime: np.ndarray,
    excl: np.ndarray,
    idle: dict[int, int],
) -> dict[int, np.ndarray]:
    """Per caller line: the GPU time (by regime) and the idle (as overhead) of the lines inside
    the user functions it called, forward and backward (backward ops already sit on their
    forward line, so on its frame).

    GPU time follows each op's own frame. Idle was charged to a line, not to a call: it follows
    the frames the line's ops ran in, in proportion to their count; a line with idle and no
    ops (a ``def`` line, a statement that only waited) follows every call of its function
    alike. A caller is counted once per op even when it appears twice up the stack (recursion).
    """
    out: dict[int, np.ndarray] = {}

    def add(callers: tuple[int, ...], own_line: int, code: int, ns: float) -> None:
        for caller in dict.fromkeys(callers):
            if caller != own_line and caller != NONE:
                _mix_of(out, caller)[code] += ns

    known = frame != NONE
    frames_of_line: dict[int, dict[int, int]] = {}
    if known.any():
        keys = np.stack([frame[known], line[known], regime[known]], axis=1)
        groups, inverse = distinct_rows(keys)
        totals = np.bincount(inverse.reshape(-1), weights=excl[known])
        counts = np.bincount(inverse.reshape(-1))
        locator.prefetch_callers(groups[:, 0].tolist())  # all their callers at once
        for (f, own_line, code), ns, n in zip(
            groups.tolist(), totals.tolist(), counts.tolist(), strict=True
        ):
            add(locator.callers(int(f)), own_line, code, ns)
            seen = frames_of_line.setdefault(own_line, {})
            seen[f] = seen.get(f, 0) + n
    overhead = REGIMES.index(Regime.OVERHEAD)
    calls_of: dict[tuple[str, str], list[int]] | None = None
    for k, ns in idle.items():
        if ns <= 0 or k == NONE:
            continue
        weights = frames_of_line.get(k)
        if weights is None:
            if calls_of is None:
                calls_of = _calls_by_function(locator)
            key = locator.lines[k]
            weights = dict.fromkeys(calls_of.get((key.file, key.function), ()), 1)
        whole = sum(weights.values())
        for f, w in weights.items():
            add(locator.callers(int(f)), k, overhead, ns * w / whole)
    return out


def _calls_by_function(locator: Locator) -> dict[tuple[str, str], list[int]]:
    """The user frame invocations (indices into ``user_rows``) of each (file, function)."""
    out: dict[tuple[str, str], list[int]] = {}
    for local, row in enumerate(locator.user_rows.tolist()):
        line_id = locator.frame_line(row)
        if line_id != NONE:
            key = locator.lines[line_id]
            out.setdefault((key.file, key.function), []).append(local)
    return out


def _inclusive(
    locator: Locator,
    frame: np.ndarray,
    line: np.ndarray,
    regime: np.ndarray,
    excl: np.ndarray,
    own: np.ndarray,
) -> tuple[dict[int, int], dict[int, np.ndarray]]:
    """Own GPU time plus the time of the ops each line called (a line counted once per op), and
    the regime mix (compute, memory, overhead ns) of what it called."""
    out = {k: float(v) for k, v in enumerate(own.tolist()) if v}
    called: dict[int, np.ndarray] = {}
    known = frame != NONE
    if not known.any():
        return {k: int(v) for k, v in out.items()}, called
    keys = np.stack([frame[known], line[known], regime[known]], axis=1)
    groups, inverse = distinct_rows(keys)
    totals = np.bincount(inverse.reshape(-1), weights=excl[known])
    locator.prefetch_callers(groups[:, 0].tolist())  # all their callers at once
    for (f, own_line, code), ns in zip(groups.tolist(), totals.tolist(), strict=True):
        for caller in dict.fromkeys(locator.callers(int(f))):
            if caller != own_line and caller != NONE:
                out[caller] = out.get(caller, 0.0) + ns
                _mix_of(called, caller)[code] += ns
    return {k: int(v) for k, v in out.items()}, called


def _caller_only(
    k: int,
    key: LineKey,
    inclusive_ns: int,
    called: np.ndarray | None,
    called_all: np.ndarray,
) -> LineCost:
    """A line with no GPU time of its own that calls code with some (``loss = model(x)``): its
    regime is that of what it called."""
    mix = called if called is not None and called.any() else called_all
    return LineCost(
        line_id=k,
        key=key,
        gpu_ns=0,
        backward_gpu_ns=0,
        kernels=0,
        cpu_ns=0,
        by_regime={r: 0 for r in REGIMES},
        idle_by_cause={c: 0 for c in IdleCause},
        top_kernels=(),
        inclusive_gpu_ns=inclusive_ns,
        called_regime=REGIMES[int(np.argmax(mix))],
        inclusive_by_regime=_plus({r: 0 for r in REGIMES}, called_all),
    )


def _dominant_ridge(
    line: np.ndarray, ridge: np.ndarray, weight: np.ndarray, n_lines: int
) -> dict[int, float]:
    """The ridge of the ceiling under which each line spends most of its kernel time."""
    known = ~np.isnan(ridge)
    out: dict[int, tuple[float, float]] = {}
    for k, r, w in zip(
        line[known].tolist(), ridge[known].tolist(), weight[known].tolist(), strict=True
    ):
        best = out.get(k)
        if best is None or w > best[1]:
            out[k] = (r, w)
    return {k: v[0] for k, v in out.items()}


def _cpu_time(trace: Trace, locator: Locator) -> tuple[np.ndarray, np.ndarray]:
    """(line, ns) of the outermost ATen ops: the host time (dispatch + launch) each line ran."""
    cpu = trace.cpu_ops
    rows = outermost_ops(trace)
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    # Backward ops on the forward lines that made them, as for their kernels.
    lines = locator.work_lines(cpu.thread[rows], cpu.start_ns[rows]).line
    ok = lines != NONE
    return lines[ok], (cpu.end_ns[rows] - cpu.start_ns[rows])[ok].astype(np.float64)


def _top_kernels(
    names: np.ndarray, lines: np.ndarray, dur: np.ndarray, keep: int = 3
) -> dict[int, tuple[tuple[int, int, int], ...]]:
    if len(names) == 0:
        return {}
    pairs = np.stack([lines, names], axis=1)
    keys, inverse = distinct_rows(pairs)
    inverse = inverse.reshape(-1)
    totals = np.bincount(inverse, weights=dur.astype(np.float64))
    counts = np.bincount(inverse)
    out: dict[int, list[tuple[int, int, int]]] = {}
    rows = zip(keys.tolist(), totals.tolist(), counts.tolist(), strict=True)
    for (line_id, name), total, cnt in rows:
        out.setdefault(line_id, []).append((name, cnt, int(total)))
    return {k: tuple(sorted(v, key=lambda x: -x[2])[:keep]) for k, v in out.items()}
