"""unfused-optimizer: an optimizer step that runs per-parameter or foreach kernels.

Why it costs: many launches and a pass over the parameters per op. The saving: the replay with
the step's kernels at one pass's bytes and its host work down to a fused step's.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.traces.model import Trace


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
    # Kernels by launch time, so that each step finds its own by binary search.
    by_launch = np.argsort(launch_t, kind="stable")
    launch_sorted = launch_t[by_launch]
    for row in steps:
        lo = int(np.searchsorted(launch_sorted, cpu.start_ns[row], side="left"))
        hi = int(np.searchsorted(launch_sorted, cpu.end_ns[row], side="right"))
        near = by_launch[lo:hi]
        kernels = np.sort(near[launch_thread[near] == cpu.thread[row]])
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
    # Ops are sorted by start: only those starting within the step's span can be inside it
    # (a mask over every op per step made this quadratic in long traces).
    lo = int(np.searchsorted(cpu.start_ns, cpu.start_ns[step], side="left"))
    hi = int(np.searchsorted(cpu.start_ns, cpu.end_ns[step], side="right"))
    inside = lo + np.flatnonzero(
        (cpu.thread[lo:hi] == cpu.thread[step]) & (cpu.end_ns[lo:hi] <= cpu.end_ns[step])
    )
    names = {trace.strings[cpu.name[r]] for r in inside.tolist()}
    if any(n.startswith("aten::_fused_") for n in names):
        return "fused"
    if any(n.startswith("aten::_foreach_") for n in names):
        return "foreach"
    return None
