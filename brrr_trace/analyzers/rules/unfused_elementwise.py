"""unfused-elementwise: memory-bound pointwise kernels one after another from one function.

Why it costs: each reads and writes its whole tensor, and each is a launch of its own. The
saving: the replay with each run as one kernel moving the bytes of its cheapest kernel, launched
once (the host work before the other kernels' launches taken away, as compiling the function
does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.regimes import REGIMES
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.arraysets import distinct
from brrr_trace.vocabulary import KernelKind, Regime

# Kernels that write without reading (random numbers, fills): nothing to save by fusing them.
_NOT_FUSABLE = re.compile(r"distribution|FillFunctor|random|normal_kernel|uniform")


def unfused_elementwise(ctx: RuleContext) -> Iterator[RawFinding]:
    """Runs of consecutive memory-bound pointwise kernels issued by one function."""
    gpu = ctx.trace.gpu
    strings = ctx.trace.strings
    fusable = np.zeros(len(strings), dtype=bool)
    for sid in distinct(gpu.name).tolist():
        text = strings[sid]
        fusable[sid] = not text.startswith("triton_") and not _NOT_FUSABLE.search(text)
    # An optimizer step's kernels are unfused-optimizer's: its fix is the fused step.
    in_step = np.zeros(len(gpu.start_ns), dtype=bool)
    for step in ctx.optimizer_steps:
        in_step[step.kernels] = True
    candidate = (
        (ctx.ops.line != NONE)
        & ~in_step
        & ctx.of_kind(KernelKind.ELEMENTWISE, KernelKind.REDUCTION, KernelKind.NORM)
        & (ctx.classes.regime == _REGIME_CODE[Regime.MEMORY])
        & fusable[gpu.name]
    ).tolist()
    lines = ctx.locator.lines
    function_of = {k: (key.file, key.function) for k, key in enumerate(lines)}
    invocation = _invocations(ctx).tolist()
    line_of = ctx.ops.line.tolist()
    order = np.argsort(gpu.start_ns, kind="stable")
    runs: list[list[int]] = []
    current: list[int] = []
    for row in order.tolist():
        fn = function_of.get(line_of[row]) if candidate[row] else None
        # A run is one call of the function: the next call starts from its inputs again.
        if (
            fn is not None
            and current
            and function_of[line_of[current[-1]]] == fn
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
        gone: list[int] = []
        for run, cut in found:
            # One fused kernel per run, at its first kernel's place in the queue.
            total = int(ctx.duration(np.asarray(run)).sum())
            durations.update({r: 0 for r in run[1:]})
            durations[run[0]] = max(1, total - int(cut))
            gone.extend(run[1:])
        # One launch per run as well: the host work before the other kernels' launches goes
        # (a compiled function runs no Python per op), unless such a launch also put a kept
        # kernel on the queue.
        kept_rows = {run[0] for run, _ in found}
        events = [
            e
            for e in ctx.graph.events_launching(np.asarray(gone, dtype=np.int64))
            if e and not kept_rows.intersection(ctx.graph.launched[e])
        ]
        fix = Fix(
            "each run fused into one kernel",
            host_saved={e: ctx.graph.work[e] for e in events},
            durations=durations,
            own={e: 0 for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        rows = np.asarray([r for run, _ in found for r in run])
        line_ids = distinct(ctx.ops.line[rows])
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


_REGIME_CODE = {regime: code for code, regime in enumerate(REGIMES)}
