"""Findings: what to fix, on which line, and the time each fix would save (docs/architecture.md §7).

Every rule reads the evidence the other analyzers left (kernels per line, roofline numbers, idle
by cause, the profiler's estimated own cost) and estimates its saving from that evidence only.
Rule ids are a contract: they never change meaning. Thresholds live in ``AnalysisOptions``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import msgspec
import numpy as np

from brrr_trace.analyzers.attribution import Locator, OpAttribution
from brrr_trace.analyzers.frames import is_user_file, parse_frame
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.kernels import is_tf32_kernel, kernel_dtype
from brrr_trace.analyzers.regimes import LineCost, OpClasses
from brrr_trace.analyzers.replay import CALL_NS, Fix, StepGraph, build_graph
from brrr_trace.analyzers.timeline import Timeline
from brrr_trace.hardware.peaks import GpuPeak
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import GPU_MEMCPY, NO_ID, Trace
from brrr_trace.vocabulary import IdleCause, KernelKind, Regime


@dataclass(frozen=True)
class RawFinding:
    rule: str
    line_id: int
    est_savings_ns: int
    message: str
    fix: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    covers: tuple[int, ...] = ()  # every line id the finding spans; () means line_id alone


@dataclass
class RuleContext:
    trace: Trace
    ops: OpAttribution
    classes: OpClasses
    timeline: Timeline
    locator: Locator
    costs: list[LineCost]
    peak: GpuPeak | None
    options: AnalysisOptions
    span_ns: int
    sms: int | None
    _rows: dict[int, np.ndarray] = field(default_factory=dict)
    _graph: StepGraph | None = None

    def __post_init__(self) -> None:
        placed = np.flatnonzero(self.ops.line != NONE)
        order = placed[np.argsort(self.ops.line[placed], kind="stable")]
        lines = self.ops.line[order]
        cuts = np.flatnonzero(np.diff(lines)) + 1
        for chunk in np.split(order, cuts) if len(order) else ():
            self._rows[int(self.ops.line[chunk[0]])] = chunk
        self.by_id = {cost.line_id: cost for cost in self.costs}

    @property
    def graph(self) -> StepGraph:
        """The trace as a replayable graph, built on first use (docs/architecture.md §7)."""
        if self._graph is None:
            self._graph = build_graph(
                self.trace, self.ops, self.locator, self.timeline.blocking_rows, self.options
            )
        return self._graph

    def replayed(self, fix: Fix) -> tuple[int, dict[str, float | int | str]]:
        """The saving of a fix by replay, and the evidence that says which fix it was."""
        return self.graph.saving(fix), {"replayed": fix.what}

    def rows(self, line_id: int) -> np.ndarray:
        return self._rows.get(line_id, np.zeros(0, dtype=np.int64))

    def kind(self, row: int) -> KernelKind:
        return self.classes.kind[int(self.classes.op_kind[row])]

    def name(self, row: int) -> str:
        return self.trace.strings[int(self.trace.gpu.name[row])]

    def duration(self, rows: np.ndarray) -> np.ndarray:
        gpu = self.trace.gpu
        lengths: np.ndarray = gpu.end_ns[rows] - gpu.start_ns[rows]
        return lengths

    def idle(self, cost: LineCost, *causes: IdleCause) -> int:
        """Idle of these causes charged to the line, less the profiler's own estimated cost."""
        raw = sum(cost.idle_by_cause.get(c, 0) for c in causes)
        profiled = sum(self.timeline.profiler_charges.get((cost.line_id, c), 0) for c in causes)
        return max(0, raw - profiled)

    def worth_it(self, saving_ns: float) -> bool:
        return saving_ns >= max(
            self.options.min_savings_ns, self.options.min_savings_share * self.span_ns
        )


Rule = Callable[[RuleContext], Iterator[RawFinding]]


# A specific diagnosis explains a line's overhead better than the generic one; both would count
# the same idle time twice.
_SUPERSEDES = {
    "unfused-optimizer": frozenset({"launch-overhead"}),
    "cpu-to-device": frozenset({"host-sync", "pageable-memcpy"}),
}


def find(ctx: RuleContext) -> list[RawFinding]:
    """All findings, largest estimated saving first."""
    found = [finding for rule in RULES for finding in rule(ctx)]
    hidden = {
        (f.line_id, generic) for f in found for generic in _SUPERSEDES.get(f.rule, frozenset())
    }
    found = [f for f in found if (f.line_id, f.rule) not in hidden]
    found.sort(key=lambda f: -f.est_savings_ns)
    return found


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms" if ns >= 100_000 else f"{ns / 1e3:.1f} µs"


# -- overhead ----------------------------------------------------------------------------------


def launch_overhead(ctx: RuleContext) -> Iterator[RawFinding]:
    """Host-bound lines, whatever their kernels' length: the replay takes the host work before
    each of the line's launches away, as replaying them from a CUDA graph would."""
    candidates = [
        c
        for c in ctx.costs
        if c.regime is Regime.OVERHEAD
        and c.kernels >= ctx.options.many_kernels
        and _host_idle(ctx, c)
    ]
    candidates.sort(key=lambda c: -_host_idle(ctx, c))
    for cost in candidates[: ctx.options.max_replayed_lines]:
        rows = ctx.rows(cost.line_id)
        events = ctx.graph.events_launching(rows)
        fix = Fix(
            "the line's launches replayed from a CUDA graph",
            # The host work before the trace's first launch is start-up, no line's launches.
            host_saved={e: ctx.graph.work[e] for e in events if e},
            own={e: 0 for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        median = float(np.median(ctx.duration(rows)))
        yield RawFinding(
            "launch-overhead",
            cost.line_id,
            saving,
            f"{cost.kernels} kernels with a median of {median / 1e3:.1f} µs: the GPU waits "
            f"{_ms(_host_idle(ctx, cost))} for the host to launch them",
            'Capture the loop in a CUDA graph (torch.compile(mode="reduce-overhead") or '
            "torch.cuda.graphs), or batch the small ops into fewer, larger ones.",
            {"kernels": cost.kernels, "median_kernel_us": round(median / 1e3, 2), **evidence},
        )


def _host_idle(ctx: RuleContext, cost: LineCost) -> int:
    return ctx.idle(cost, IdleCause.HOST, IdleCause.LAUNCH)


def host_sync(ctx: RuleContext) -> Iterator[RawFinding]:
    """The saving is a replay of the GPU's queue with the line's waits removed: the launches
    after each wait come that much earlier, and the streams run them as soon as they can."""
    by_line = {cost.line_id: cost for cost in ctx.costs}
    host = ctx.trace.host_calls
    blocking = ctx.timeline.blocking_rows
    # A line's fix removes every blocking call it makes (.item() copies, then synchronizes).
    line_of = ctx.locator.lines_at(host.thread[blocking], host.start_ns[blocking])
    # A replay per line: the lines whose syncs drained the queue for longest, a few at most.
    ranked = sorted(
        ctx.timeline.sync_waits.items(),
        key=lambda item: -ctx.timeline.sync_gaps.get(item[0], 0),
    )[: ctx.options.max_replayed_lines]
    for line_id, waits in ranked:
        cost = by_line.get(line_id)
        if cost is None:
            continue
        removed = set(blocking[line_of == line_id].tolist()) | set(waits)
        events = ctx.graph.events_of(np.asarray(sorted(removed), dtype=np.int64))
        saving, evidence = ctx.replayed(
            Fix("the line's waits removed", unblocked=frozenset(events))
        )
        # The GPU gains at most the idle the waits left it (the replay's clock model is coarser
        # than that measurement).
        saving = min(saving, ctx.timeline.sync_gaps.get(line_id, 0))
        if not ctx.worth_it(saving):
            continue
        blocked = int((host.end_ns[list(waits)] - host.start_ns[list(waits)]).sum())
        yield RawFinding(
            "host-sync",
            line_id,
            saving,
            f"the host waits for the GPU on this line (.item(), .cpu(), print, synchronize) "
            f"{len(waits)} time(s), {_ms(blocked)} in all; the queue drains and the GPU idles "
            f"{_ms(ctx.timeline.sync_gaps.get(line_id, 0))} until the host catches up",
            "Keep the value on the GPU (accumulate a tensor) and read it once per step or every "
            'N steps; torch.cuda.set_sync_debug_mode("warn") finds hidden syncs.',
            {
                "sync_idle_us": round(ctx.timeline.sync_gaps.get(line_id, 0) / 1e3, 1),
                "blocked_us": round(blocked / 1e3, 1),
                **evidence,
            },
        )


def dataloader_stall(ctx: RuleContext) -> Iterator[RawFinding]:
    """The replay takes away the host time spent inside the DataLoader's ``__next__`` (worker
    processes would load the batches meanwhile), per line that asks for the next batch."""
    frames = ctx.trace.frames
    rows = ctx.locator.dataloader_rows
    if not len(rows):
        return
    threads, starts, ends = frames.thread[rows], frames.start_ns[rows], frames.end_ns[rows]
    callers = ctx.locator.lines_at(threads, starts)
    for line_id in np.unique(callers[callers != NONE]).tolist():
        cost = ctx.by_id.get(line_id)
        mine = callers == line_id
        saved: dict[int, int] = {}
        for thread in np.unique(threads[mine]).tolist():
            sel = mine & (threads == thread)
            saved.update(ctx.graph.host_work_inside(thread, starts[sel], ends[sel]))
        saving, evidence = ctx.replayed(Fix("batches loaded by worker processes", saved))
        if not ctx.worth_it(saving):
            continue
        raw = cost.idle_by_cause.get(IdleCause.DATALOADER, 0) if cost else 0
        loading = sum(saved.values())
        yield RawFinding(
            "dataloader-stall",
            line_id,
            saving,
            f"the host spends {_ms(loading)} producing batches in the main process, launching "
            "nothing meanwhile" + (f"; the GPU idles {_ms(raw)} waiting for them" if raw else ""),
            "Load in the background: DataLoader(..., num_workers=4, pin_memory=True, "
            "persistent_workers=True, prefetch_factor=2).",
            {
                "dataloader_idle_us": round(raw / 1e3, 1),
                "loading_us": round(loading / 1e3, 1),
                **evidence,
            },
        )


def unfused_optimizer(ctx: RuleContext) -> Iterator[RawFinding]:
    cpu = ctx.trace.cpu_ops
    strings = ctx.trace.strings
    steps = [
        row
        for row in np.flatnonzero(cpu.annotation).tolist()
        if strings[cpu.name[row]].startswith("Optimizer.step#")
    ]
    if not steps:
        return
    host = ctx.trace.host_calls
    launched = ctx.ops.launch != NONE
    launch_t = np.where(launched, host.start_ns[np.maximum(ctx.ops.launch, 0)], -1)
    launch_thread = np.where(launched, host.thread[np.maximum(ctx.ops.launch, 0)], NONE)
    per_line: dict[int, list[int]] = {}
    steps_of_line: dict[int, list[int]] = {}
    foreach: dict[int, bool] = {}
    for row in steps:
        inside = (
            (launch_thread == cpu.thread[row])
            & (launch_t >= cpu.start_ns[row])
            & (launch_t <= cpu.end_ns[row])
        )
        kernels = np.flatnonzero(inside)
        form = _multi_tensor_form(ctx.trace, row)
        if len(kernels) < ctx.options.many_kernels or form == "fused":
            continue
        line = ctx.locator.line_at(int(cpu.thread[row]), int(cpu.start_ns[row]))
        if line != NONE:
            foreach.setdefault(line, form == "foreach")
            per_line.setdefault(line, []).extend(kernels.tolist())
            steps_of_line.setdefault(line, []).append(row)
    for line_id, line_kernels in per_line.items():
        cost = ctx.by_id.get(line_id)
        if cost is None:
            continue
        rows = np.asarray(line_kernels)
        nbytes = float(np.nansum(ctx.classes.nbytes[rows]))
        hbm = ctx.peak.hbm_gbps * 1e9 if ctx.peak and ctx.peak.hbm_gbps else None
        ideal = nbytes / (ctx.options.achievable_bandwidth * hbm) * 1e9 if hbm else 0.0
        spent_gpu = max(1, int(ctx.duration(rows).sum()))
        # A foreach step already runs few, large kernels; fused, it moves each parameter's
        # state once instead of once per op (an assumed share of its traffic, see options).
        scale = (
            ctx.options.fused_share_of_foreach_traffic
            if foreach[line_id]
            else min(1.0, ideal / spent_gpu)
        )
        saved: dict[int, int] = {}
        for row in steps_of_line[line_id]:
            saved.update(
                ctx.graph.host_work_inside(
                    int(cpu.thread[row]), cpu.start_ns[row : row + 1], cpu.end_ns[row : row + 1]
                )
            )
        # What the fused step still costs the host: its Python and a launch per parameter group.
        keep = ctx.options.fused_step_host_ns * len(steps_of_line[line_id])
        total = max(1, sum(saved.values()))
        saved = {e: ns - ns * min(keep, total) // total for e, ns in saved.items()}
        events = ctx.graph.events_launching(rows)
        fix = Fix(
            "the step's kernels fused into one pass over the parameters",
            host_saved=saved,
            durations={r: int(ctx.graph.duration[r] * scale) for r in rows.tolist()},
            own={e: 0 for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "unfused-optimizer",
            line_id,
            int(saving),
            (
                f"the optimizer step runs the foreach implementation: {len(rows)} kernels, a "
                "pass over the parameters per operation"
                if foreach[line_id]
                else f"the optimizer step launches {len(rows)} kernels, one small group per "
                "parameter"
            ),
            "Use the fused implementation: torch.optim.AdamW(params, lr=..., fused=True) "
            "(or foreach=True).",
            {"kernels": len(rows), "bytes": int(nbytes), **evidence},
        )


def _multi_tensor_form(trace: Trace, step: int) -> str | None:
    """ "fused" or "foreach" when the step already runs one kernel for many tensors."""
    cpu = trace.cpu_ops
    inside = np.flatnonzero(
        (cpu.thread == cpu.thread[step])
        & (cpu.start_ns >= cpu.start_ns[step])
        & (cpu.end_ns <= cpu.end_ns[step])
    )
    names = {trace.strings[cpu.name[r]] for r in inside.tolist()}
    if any(n.startswith("aten::_fused_") for n in names):
        return "fused"
    if any(n.startswith("aten::_foreach_") for n in names):
        return "foreach"
    return None


# -- memory ------------------------------------------------------------------------------------


def pageable_memcpy(ctx: RuleContext) -> Iterator[RawFinding]:
    link = (ctx.peak.link_gbps if ctx.peak and ctx.peak.link_gbps else None) or (
        ctx.options.default_link_gbps
    )
    pinned_rate = ctx.options.achievable_link * link * 1e9
    for cost in ctx.costs:
        rows = [r for r in ctx.rows(cost.line_id).tolist() if "Pageable" in ctx.name(r)]
        if not rows:
            continue
        gpu = ctx.trace.gpu
        arr = np.asarray(rows)
        spent = int(ctx.duration(arr).sum())
        nbytes = int(np.maximum(gpu.nbytes[arr], 0).sum())
        events = ctx.graph.events_launching(arr)
        # Pinned and non_blocking: the copy runs at the link's rate and the host goes on.
        fix = Fix(
            "copies from pinned memory, non_blocking",
            unblocked=frozenset(events),
            durations={
                r: int(max(0, int(gpu.nbytes[r])) / pinned_rate * 1e9) for r in arr.tolist()
            },
            own={e: CALL_NS for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        rate = nbytes / spent if spent else 0.0
        yield RawFinding(
            "pageable-memcpy",
            cost.line_id,
            int(saving),
            f"{len(rows)} copies from pageable memory move {nbytes / 1e6:.0f} MB at "
            f"{rate:.1f} GB/s; pinned memory would reach about {pinned_rate / 1e9:.0f} GB/s",
            "Pin the host tensor and copy asynchronously: x.pin_memory().to(device, "
            "non_blocking=True), or DataLoader(..., pin_memory=True).",
            {"copies": len(rows), "bytes": nbytes, "achieved_gbps": round(rate, 2), **evidence},
        )


# Kernels that write without reading (random numbers, fills): nothing to save by fusing them.
_NOT_FUSABLE = re.compile(r"distribution|FillFunctor|random|normal_kernel|uniform")


def unfused_elementwise(ctx: RuleContext) -> Iterator[RawFinding]:
    """Runs of consecutive memory-bound pointwise kernels issued by one function."""
    gpu = ctx.trace.gpu
    kinds = {KernelKind.ELEMENTWISE, KernelKind.REDUCTION, KernelKind.NORM}
    memory = Regime.MEMORY
    candidate = np.zeros(len(gpu), dtype=bool)
    for row in np.flatnonzero(ctx.ops.line != NONE).tolist():
        if (
            ctx.kind(row) in kinds
            and ctx.classes.regime[row] == _REGIME_CODE[memory]
            and not ctx.name(row).startswith("triton_")
            and not _NOT_FUSABLE.search(ctx.name(row))
        ):
            candidate[row] = True
    lines = ctx.locator.lines
    function_of = {k: (key.file, key.function) for k, key in enumerate(lines)}
    invocation = _invocations(ctx)
    order = np.argsort(gpu.start_ns, kind="stable")
    runs: list[list[int]] = []
    current: list[int] = []
    for row in order.tolist():
        fn = function_of.get(int(ctx.ops.line[row])) if candidate[row] else None
        # A run is one call of the function: the next call starts from its inputs again.
        if (
            fn is not None
            and current
            and function_of[int(ctx.ops.line[current[-1]])] == fn
            and invocation[row] == invocation[current[-1]]
        ):
            current.append(row)
            continue
        if len(current) >= 2:
            runs.append(current)
        current = [row] if fn is not None else []
    if len(current) >= 2:
        runs.append(current)
    per_function: dict[tuple[str, str], list[tuple[list[int], float]]] = {}
    for run in runs:
        rows = np.asarray(run)
        # Distinct ops, not kernels of one op: a run must come from two or more ATen ops.
        if len(set(ctx.ops.cpu_op[rows].tolist())) < 2:
            continue
        dur = ctx.duration(rows).astype(float)
        nbytes = ctx.classes.nbytes[rows]
        if np.isnan(nbytes).any() or nbytes.sum() <= 0:
            kept = 1.0 / len(run)
        else:
            kept = float(nbytes.min() / nbytes.sum())
        fn = function_of[int(ctx.ops.line[run[0]])]
        per_function.setdefault(fn, []).append((run, float(dur.sum()) * (1 - kept)))
    for fn, found in per_function.items():
        if not ctx.worth_it(sum(s for _, s in found)):
            continue
        durations: dict[int, int] = {}
        for run, cut in found:
            # One fused kernel per run, at its first kernel's place in the queue.
            total = int(ctx.duration(np.asarray(run)).sum())
            durations.update({r: 0 for r in run[1:]})
            durations[run[0]] = max(1, total - int(cut))
        saving, evidence = ctx.replayed(Fix("each run fused into one kernel", durations=durations))
        if not ctx.worth_it(saving):
            continue
        rows = np.asarray([r for run, _ in found for r in run])
        line_ids = np.unique(ctx.ops.line[rows])
        weights = [int(ctx.duration(rows[ctx.ops.line[rows] == k]).sum()) for k in line_ids]
        anchor = int(line_ids[int(np.argmax(weights))])
        numbers = sorted({lines[int(k)].line for k in line_ids})
        yield RawFinding(
            "unfused-elementwise",
            anchor,
            int(saving),
            f"{fn[1]} runs {len(rows)} memory-bound pointwise kernels one after another "
            f"(lines {', '.join(map(str, numbers))}); each reads and writes its whole tensor",
            f"Fuse them: decorate {fn[1]} with @torch.compile (or use in-place ops and "
            "fewer dtype casts).",
            {"kernels": len(rows), "runs": len(found), "lines": len(numbers), **evidence},
            covers=tuple(int(k) for k in line_ids),
        )


def _invocations(ctx: RuleContext) -> np.ndarray:
    """Per GPU op: the user-frame invocation (frame row) its launch happened in, or NONE."""
    host = ctx.trace.host_calls
    out = np.full(len(ctx.trace.gpu), NONE, dtype=np.int64)
    has = ctx.ops.launch != NONE
    if has.any():
        out[has] = ctx.locator.user_frames.at_many(
            host.thread[ctx.ops.launch[has]], host.start_ns[ctx.ops.launch[has]]
        )
    return out


def manual_attention(ctx: RuleContext) -> Iterator[RawFinding]:
    """matmul → softmax → matmul inside one function, with no fused attention kernel."""
    lines = ctx.locator.lines
    by_function: dict[tuple[str, str], list[LineCost]] = {}
    for cost in ctx.costs:
        by_function.setdefault((cost.key.file, cost.key.function), []).append(cost)
    for fn, costs in by_function.items():
        first: dict[int, int] = {}
        kinds: dict[int, set[KernelKind]] = {}
        for cost in costs:
            rows = ctx.rows(cost.line_id)
            if len(rows):
                first[cost.line_id] = int(ctx.trace.gpu.start_ns[rows].min())
                kinds[cost.line_id] = {ctx.kind(r) for r in rows.tolist()}
        if any(KernelKind.ATTENTION in k for k in kinds.values()):
            continue
        ordered = sorted(first, key=first.get)  # type: ignore[arg-type]
        gemm = [k for k in ordered if KernelKind.GEMM in kinds[k]]
        soft = [k for k in ordered if KernelKind.SOFTMAX in kinds[k]]
        if not gemm or not soft:
            continue
        s = soft[0]
        before = [g for g in gemm if first[g] < first[s]]
        after = [g for g in gemm if first[g] > first[s]]
        if not before or not after:
            continue
        span = [k for k in ordered if first[before[-1]] <= first[k] <= first[after[0]]]
        spent = sum(ctx.by_id[k].gpu_ns for k in span)
        flops = sum(ctx.by_id[k].flops or 0 for k in (before[-1], after[0]))
        peak = ctx.peak.tensor_tflops.bf16 if ctx.peak else None
        ideal = flops / (0.5 * peak * 1e12) * 1e9 if peak and flops else spent * 0.5
        if not ctx.worth_it(spent - ideal):
            continue
        rows = np.concatenate([ctx.rows(k) for k in span])
        scale = min(1.0, ideal / max(1, int(ctx.duration(rows).sum())))
        # One call instead of the span's statements: the host work of all but one goes.
        kept = 1 / len(span)
        events = ctx.graph.events_launching(rows)
        fix = Fix(
            "the span as one fused attention kernel",
            host_saved={e: int(ctx.graph.work[e] * (1 - kept)) for e in events},
            durations={r: int(ctx.graph.duration[r] * scale) for r in rows.tolist()},
            own={e: int(ctx.graph.own[e] * kept) for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        numbers = sorted(lines[k].line for k in span)
        yield RawFinding(
            "manual-attention",
            before[-1],
            int(saving),
            f"attention written by hand in {fn[1]} (lines {', '.join(map(str, numbers))}): the "
            "score matrix goes through HBM several times",
            "Use the fused kernel: torch.nn.functional.scaled_dot_product_attention(q, k, v, "
            "attn_mask=..., is_causal=...).",
            {"lines": len(span), "flops": int(flops), **evidence},
            covers=tuple(span),
        )


def library_attention(ctx: RuleContext) -> Iterator[RawFinding]:
    """The same pattern inside a library's function (a model class from site-packages): its
    kernels all land on the user's line that calls the model, so the pattern is looked for per
    call of the library function, forward and backward, and reported on that line."""
    frames = ctx.trace.frames
    strings = ctx.trace.strings
    names = np.unique(frames.name) if len(frames) else np.zeros(0, dtype=np.int64)
    library = [
        sid
        for sid in names.tolist()
        if (parsed := parse_frame(strings[sid])) is not None
        and not is_user_file(parsed.file, ctx.options, ctx.locator.is_local)
        and not any(fnmatchcase(parsed.file, p) for p in ctx.options.excluded_files)
    ]
    rows = np.flatnonzero(np.isin(frames.name, library)) if library else np.zeros(0, np.int64)
    if not len(rows):
        return
    inner = Innermost(frames.thread[rows], frames.start_ns[rows], frames.end_ns[rows])
    host = ctx.trace.host_calls
    has = np.flatnonzero(ctx.ops.launch != NONE)
    thread, t = host.thread[ctx.ops.launch[has]], host.start_ns[ctx.ops.launch[has]]
    back = ctx.locator.backward_points(thread, t)
    moved = back.thread != NONE
    thread, t = np.where(moved, back.thread, thread), np.where(moved, back.t, t)
    call = inner.at_many(thread, t)
    per_line: dict[int, list[int]] = {}
    order = np.argsort(ctx.trace.gpu.start_ns[has], kind="stable")
    del thread, t
    by_call: dict[int, list[int]] = {}
    for k in order.tolist():
        if call[k] != NONE:
            by_call.setdefault(int(call[k]), []).append(int(has[k]))
    for members in by_call.values():
        kinds = [ctx.kind(r) for r in members]
        if KernelKind.ATTENTION in kinds:
            continue
        for backward in (False, True):
            part = [r for r in members if bool(ctx.ops.backward[r]) == backward]
            span = _score_span(ctx, part, gemms_each_side=2 if backward else 1)
            line = int(ctx.ops.line[span[0]]) if span else NONE
            if line != NONE:
                per_line.setdefault(line, []).extend(span)
    peak = ctx.peak.tensor_tflops.bf16 if ctx.peak else None
    for line_id, members in per_line.items():
        kernels = np.asarray(members)
        spent = int(ctx.duration(kernels).sum())
        gemms = kernels[[ctx.kind(r) is KernelKind.GEMM for r in members]]
        flops = float(np.nansum(ctx.classes.flops[gemms]))
        ideal = flops / (0.5 * peak * 1e12) * 1e9 if peak and flops else spent * 0.5
        if not ctx.worth_it(spent - ideal):
            continue
        scale = min(1.0, ideal / max(1, spent))
        fix = Fix(
            "the library's attention as one fused kernel",
            durations={r: int(ctx.graph.duration[r] * scale) for r in members},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "manual-attention",
            line_id,
            saving,
            f"the code this line calls computes attention by hand ({len(members)} kernels: "
            "matmul, softmax, matmul, forward and backward); the score matrix goes through "
            "HBM several times",
            "Use the fused kernel: torch.nn.functional.scaled_dot_product_attention, or the "
            "library's own option for it (e.g. an attn_implementation or use_sdpa setting).",
            {"kernels": len(members), "flops": int(flops), **evidence},
        )


# -- compute -----------------------------------------------------------------------------------


def fp32_matmul(ctx: RuleContext) -> Iterator[RawFinding]:
    peak = ctx.peak
    if peak is None or not peak.tensor_tflops.tf32 or not peak.simt_tflops.fp32:
        return
    ratio = peak.simt_tflops.fp32 / peak.tensor_tflops.tf32
    if ratio >= 1:
        return
    for cost in ctx.costs:
        rows = [
            r
            for r in ctx.rows(cost.line_id).tolist()
            if ctx.kind(r) in (KernelKind.GEMM, KernelKind.CONV)
            and kernel_dtype(ctx.name(r)) == "fp32"
            and not is_tf32_kernel(ctx.name(r))
        ]
        if not rows:
            continue
        fix = Fix(
            "the FP32 matrix kernels on TF32 tensor cores",
            durations={r: int(ctx.graph.duration[r] * ratio) for r in rows},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "fp32-matmul",
            cost.line_id,
            int(saving),
            f"{len(rows)} FP32 matrix kernels run on CUDA cores ({peak.simt_tflops.fp32:.0f} "
            f"TFLOP/s peak) instead of TF32 tensor cores ({peak.tensor_tflops.tf32:.0f})",
            'Allow TF32: torch.set_float32_matmul_precision("high") at start-up, or run the '
            'region under torch.autocast("cuda", dtype=torch.bfloat16).',
            {"kernels": len(rows), "fp32_tflops": peak.simt_tflops.fp32, **evidence},
        )


def misaligned_shape(ctx: RuleContext) -> Iterator[RawFinding]:
    cpu = ctx.trace.cpu_ops
    strings = ctx.trace.strings
    peak = ctx.peak
    decoded: dict[int, Any] = {}

    def value(vid: int) -> Any:
        if vid == NO_ID:
            return None
        if vid not in decoded:
            try:
                decoded[vid] = msgspec.json.decode(ctx.trace.values[vid])
            except msgspec.DecodeError:
                decoded[vid] = None
        return decoded[vid]

    for cost in ctx.costs:
        bad: list[int] = []
        dims_seen: list[str] = []
        for row in ctx.rows(cost.line_id).tolist():
            op = int(ctx.ops.cpu_op[row])
            if ctx.kind(row) is not KernelKind.GEMM or op == NONE:
                continue
            dtype = kernel_dtype(ctx.name(row))
            if dtype not in ("bf16", "fp16"):
                continue
            mnk = _gemm_dims(strings[cpu.name[op]], value(int(cpu.input_dims[op])))
            if mnk and any(d % 8 for d in mnk):
                bad.append(row)
                dims_seen.append("×".join(map(str, mnk)))
        if not bad:
            continue
        rows = np.asarray(bad)
        spent = float(ctx.duration(rows).sum())
        flops = float(np.nansum(ctx.classes.flops[rows]))
        tensor = peak.tensor_tflops.bf16 if peak else None
        ideal = flops / (0.7 * tensor * 1e12) * 1e9 if tensor else spent
        saving = max(0.0, spent - ideal)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "misaligned-shape",
            cost.line_id,
            int(saving),
            f"half-precision GEMM with M×N×K = {dims_seen[0]}: a dimension that is not a multiple "
            "of 8 keeps it off the fastest tensor-core kernels",
            "Pad the odd dimension to a multiple of 8 (64 is better), e.g. a vocabulary of "
            "50257 → 50304.",
            {"kernels": len(bad), "shape": dims_seen[0]},
        )


def _gemm_dims(op: str, dims: Any) -> tuple[int, int, int] | None:
    try:
        if op in ("aten::mm", "aten::matmul"):
            (m, k), (_, n) = dims[0], dims[1]
        elif op == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
        elif op in ("aten::bmm", "aten::baddbmm"):
            a, b = (dims[0], dims[1]) if op == "aten::bmm" else (dims[1], dims[2])
            (_, m, k), (_, _, n) = a, b
        elif op == "aten::linear":
            *_, k = dims[0]
            m = int(np.prod(dims[0][:-1]))
            n = dims[1][0]
        else:
            return None
        return int(m), int(n), int(k)
    except (TypeError, ValueError, IndexError):
        return None


def small_grid(ctx: RuleContext) -> Iterator[RawFinding]:
    if not ctx.sms:
        return
    gpu = ctx.trace.gpu
    for cost in ctx.costs:
        rows = ctx.rows(cost.line_id)
        if not len(rows):
            continue
        blocks = np.prod(np.maximum(gpu.grid[rows], 1), axis=1)
        known = gpu.grid[rows][:, 0] > 0
        dur = ctx.duration(rows)
        small = known & (blocks < ctx.sms) & (dur >= ctx.options.small_grid_min_ns)
        small &= np.array([ctx.kind(r) is not KernelKind.MEMCPY for r in rows.tolist()])
        if not small.any():
            continue
        saving = float((dur[small] * (1 - blocks[small] / ctx.sms)).sum())
        if not ctx.worth_it(saving):
            continue
        fewest = int(blocks[small].min())
        yield RawFinding(
            "small-grid",
            cost.line_id,
            int(saving),
            f"{int(small.sum())} kernels launch as few as {fewest} blocks on a GPU with "
            f"{ctx.sms} SMs: most of the chip sits idle while they run",
            "Give the kernel more parallel work: a larger batch, fusing with neighbours "
            "(torch.compile), or a different split of the problem.",
            {"kernels": int(small.sum()), "min_blocks": fewest, "sms": ctx.sms},
        )


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
            k = int(np.searchsorted(cpu.start_ns[tops], t, side="right")) - 1
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
    for h in np.unique(cpu.thread[ops]).tolist():
        rows = ops[cpu.thread[ops] == h]  # already in start order, outer first
        reach = np.concatenate(
            ([np.iinfo(np.int64).min], np.maximum.accumulate(cpu.end_ns[rows])[:-1])
        )
        out[h] = rows[cpu.start_ns[rows] >= reach]
    return out


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
            f"collective kernels run {_ms(exposed)} with no computation beside them",
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


def _score_span(ctx: RuleContext, rows: list[int], gemms_each_side: int) -> list[int]:
    """The kernels from the matmuls before the first softmax to those after it (a backward
    pass has two matmuls on each side: the gradients of both operands)."""
    kinds = [ctx.kind(r) for r in rows]
    if KernelKind.SOFTMAX not in kinds:
        return []
    soft = kinds.index(KernelKind.SOFTMAX)
    before = [i for i in range(soft) if kinds[i] is KernelKind.GEMM]
    after = [i for i in range(soft + 1, len(rows)) if kinds[i] is KernelKind.GEMM]
    if not before or not after:
        return []
    first = before[-min(gemms_each_side, len(before))]
    last = after[min(gemms_each_side, len(after)) - 1]
    return rows[first : last + 1]


_REGIME_CODE = {Regime.COMPUTE: 0, Regime.MEMORY: 1, Regime.OVERHEAD: 2}

RULES: tuple[Rule, ...] = (
    launch_overhead,
    host_sync,
    dataloader_stall,
    pageable_memcpy,
    fp32_matmul,
    unfused_elementwise,
    manual_attention,
    library_attention,
    unfused_optimizer,
    misaligned_shape,
    small_grid,
    cpu_to_device,
    exposed_communication,
)
