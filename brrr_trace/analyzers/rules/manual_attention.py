"""manual-attention: matmul, softmax, matmul written by hand (in the user's code or inside a
library's model).

Why it costs: the score matrix goes through HBM several times. The saving: the replay with the
span as one fused kernel at half the peak of the matmuls' precision (tensor cores for 16-bit
and TF32, CUDA cores for FP32).
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

import numpy as np

from brrr_trace.analyzers.frames import is_user_file, parse_frame
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.kernels import is_tf32_kernel, kernel_dtype
from brrr_trace.analyzers.regimes import LineCost
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.arraysets import distinct, member
from brrr_trace.vocabulary import KernelKind, Precision


def manual_attention(ctx: RuleContext) -> Iterator[RawFinding]:
    """matmul → softmax → matmul inside one function, with no fused attention kernel."""
    lines = ctx.locator.lines
    # A line known only by its function is that function's ``def`` line: with it in the key, a
    # file's several ``forward``s stay apart even without the source.
    by_function: dict[tuple[str, str, int], list[LineCost]] = {}
    for cost in ctx.costs:
        defined = cost.key.line if cost.key.precision is Precision.FUNCTION else -1
        by_function.setdefault((cost.key.file, cost.key.function, defined), []).append(cost)
    for fn, costs in by_function.items():
        first: dict[int, int] = {}
        kinds: dict[int, set[KernelKind]] = {}
        for cost in costs:
            rows = ctx.rows(cost.line_id)
            if len(rows):
                first[cost.line_id] = int(ctx.trace.gpu.start_ns[rows].min())
                # The kinds of its distinct codes: a line has thousands of kernels, a few kinds.
                codes = distinct(ctx.classes.op_kind[rows]).tolist()
                kinds[cost.line_id] = {ctx.classes.kind[code] for code in codes}
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
            # The matmuls and the softmax share a line: one statement, or a trace read without
            # its source, where a function's kernels all sit on its ``def`` line.
            for cost in costs:
                if {KernelKind.GEMM, KernelKind.SOFTMAX} <= kinds.get(cost.line_id, set()):
                    yield from _one_line(ctx, cost.line_id)
            continue
        span = [k for k in ordered if first[before[-1]] <= first[k] <= first[after[0]]]
        spent = sum(ctx.by_id[k].gpu_ns for k in span)
        flops = sum(ctx.by_id[k].flops or 0 for k in (before[-1], after[0]))
        peak = _fused_peak(ctx, [*ctx.rows(before[-1]).tolist(), *ctx.rows(after[0]).tolist()])
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
    names = distinct(frames.name) if len(frames) else np.zeros(0, dtype=np.int64)
    library = [
        sid
        for sid in names.tolist()
        if (parsed := parse_frame(strings[sid])) is not None
        and not is_user_file(parsed.file, ctx.options, ctx.locator.is_local)
        and not any(fnmatchcase(parsed.file, p) for p in ctx.options.excluded_files)
    ]
    rows = np.flatnonzero(member(frames.name, library)) if library else np.zeros(0, np.int64)
    if not len(rows):
        return
    per_line = _spans_by_call(ctx, rows, every_softmax=False)
    for line_id, members in per_line.items():
        kernels = np.asarray(members)
        found = _fused_finding(ctx, kernels, "the library's attention as one fused kernel")
        if found is None:
            continue
        saving, flops, evidence = found
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


def _spans_by_call(
    ctx: RuleContext, frame_rows: np.ndarray, every_softmax: bool
) -> dict[int, list[int]]:
    """Per line, the kernels from the matmuls before a softmax to those after it, looked for
    within each call of these frames (the innermost one around the launch), forward and
    backward: the first softmax of each call, or every one."""
    frames = ctx.trace.frames
    inner = Innermost(
        frames.thread[frame_rows], frames.start_ns[frame_rows], frames.end_ns[frame_rows]
    )
    host = ctx.trace.host_calls
    has = np.flatnonzero(ctx.ops.launch != NONE)
    thread, t = host.thread[ctx.ops.launch[has]], host.start_ns[ctx.ops.launch[has]]
    # A backward kernel belongs to the call of the function whose forward made it.
    back = ctx.locator.backward_points(thread, t)
    moved = back.thread != NONE
    call = inner.at_many(np.where(moved, back.thread, thread), np.where(moved, back.t, t))
    per_line: dict[int, list[int]] = {}
    order = np.argsort(ctx.trace.gpu.start_ns[has], kind="stable")
    by_call: dict[int, list[int]] = {}
    for k in order.tolist():
        if call[k] != NONE:
            by_call.setdefault(int(call[k]), []).append(int(has[k]))
    spans = _score_spans if every_softmax else _score_span
    for members in by_call.values():
        kinds = [ctx.kind(r) for r in members]
        if KernelKind.ATTENTION in kinds:
            continue
        for backward in (False, True):
            part = [r for r in members if bool(ctx.ops.backward[r]) == backward]
            span = spans(ctx, part, gemms_each_side=2 if backward else 1)
            line = int(ctx.ops.line[span[0]]) if span else NONE
            if line != NONE:
                per_line.setdefault(line, []).extend(span)
    return per_line


def _one_line(ctx: RuleContext, line_id: int) -> Iterator[RawFinding]:
    """matmul, softmax, matmul among one line's own kernels, within each call of its function:
    every softmax with the matmuls just before and after it (two each side in the backward
    pass)."""
    key = ctx.locator.lines[line_id]
    frames, strings = ctx.trace.frames, ctx.trace.strings
    names = distinct(frames.name) if len(frames) else np.zeros(0, dtype=np.int64)
    own = [
        sid
        for sid in names.tolist()
        if (parsed := parse_frame(strings[sid])) is not None
        and (parsed.file, parsed.function) == (key.file, key.function)
        and (key.precision is not Precision.FUNCTION or parsed.line == key.line)
    ]
    if not own:
        return
    calls_of = np.flatnonzero(member(frames.name, own))
    members = [
        r
        for r in _spans_by_call(ctx, calls_of, every_softmax=True).get(line_id, [])
        if int(ctx.ops.line[r]) == line_id
    ]
    if not members:
        return
    kernels = np.asarray(sorted(set(members)))
    # Each span becomes one call of the fused kernel: its other launches, and the host work
    # before them, go.
    calls = sum(ctx.kind(r) is KernelKind.SOFTMAX for r in kernels.tolist())
    kept = min(1.0, calls / len(kernels))
    events = ctx.graph.events_launching(kernels)
    found = _fused_finding(
        ctx,
        kernels,
        "the matmuls and the softmax as one fused kernel",
        host_saved={e: int(ctx.graph.work[e] * (1 - kept)) for e in events},
        own={e: int(ctx.graph.own[e] * kept) for e in events},
    )
    if found is None:
        return
    saving, flops, evidence = found
    yield RawFinding(
        "manual-attention",
        line_id,
        saving,
        f"attention computed by hand ({len(kernels)} kernels of this line: matmul, softmax, "
        "matmul); the score matrix goes through HBM several times",
        "Use the fused kernel: torch.nn.functional.scaled_dot_product_attention(q, k, v, "
        "attn_mask=..., is_causal=...).",
        {"kernels": len(kernels), "flops": int(flops), **evidence},
    )


def _fused_finding(
    ctx: RuleContext,
    kernels: np.ndarray,
    what: str,
    host_saved: dict[int, int] | None = None,
    own: dict[int, int] | None = None,
) -> tuple[int, float, dict[str, float | int | str]] | None:
    """The saving of running these kernels as one fused attention kernel at half the peak of
    their matmuls' precision, replayed; None where it is not worth a finding."""
    spent = int(ctx.duration(kernels).sum())
    gemms = kernels[[ctx.kind(r) is KernelKind.GEMM for r in kernels.tolist()]]
    peak = _fused_peak(ctx, gemms.tolist())
    flops = float(np.nansum(ctx.classes.flops[gemms]))
    ideal = flops / (0.5 * peak * 1e12) * 1e9 if peak and flops else spent * 0.5
    if not ctx.worth_it(spent - ideal):
        return None
    scale = min(1.0, ideal / max(1, spent))
    durations = {r: int(ctx.graph.duration[r] * scale) for r in kernels.tolist()}
    fix = Fix(what, host_saved=host_saved or {}, durations=durations, own=own or {})
    saving, evidence = ctx.replayed(fix)
    if not ctx.worth_it(saving):
        return None
    return int(saving), flops, evidence


def _score_spans(ctx: RuleContext, rows: list[int], gemms_each_side: int) -> list[int]:
    """``_score_span`` for every softmax of a sequence of kernels, not just the first."""
    kinds = [ctx.kind(r) for r in rows]
    out: list[int] = []
    start = 0
    while KernelKind.SOFTMAX in kinds[start:]:
        soft = kinds.index(KernelKind.SOFTMAX, start)
        after = [i for i in range(soft + 1, len(rows)) if kinds[i] is KernelKind.GEMM]
        window = rows[start : after[min(gemms_each_side, len(after)) - 1] + 1] if after else []
        out += _score_span(ctx, window, gemms_each_side) if window else []
        start = soft + 1
    return out


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


def _fused_peak(ctx: RuleContext, gemm_rows: list[int]) -> float | None:
    """The TFLOP/s a fused kernel of these matmuls' precision can reach: FP32 matmuls that run
    on CUDA cores stay there in the fused kernel (PyTorch's memory-efficient attention in
    FP32), TF32 ones use TF32 tensor cores, 16-bit ones the BF16/FP16 tensor cores."""
    if ctx.peak is None:
        return None
    names = [ctx.name(r) for r in gemm_rows if ctx.kind(r) is KernelKind.GEMM]
    if names and all(kernel_dtype(n) == "fp32" for n in names):
        if any(is_tf32_kernel(n) for n in names):
            return ctx.peak.tensor_tflops.tf32 or ctx.peak.tensor_tflops.bf16
        return ctx.peak.simt_tflops.fp32 or ctx.peak.tensor_tflops.bf16
    return ctx.peak.tensor_tflops.bf16
