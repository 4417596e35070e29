"""unfused-optimizer: an optimizer step that runs per-parameter or foreach kernels.

Why it costs: many launches and a pass over the parameters per op; under a GradScaler, a wait
for the GPU before every step to read found_inf (a fused step takes it on the GPU). The saving:
the replay with the step's kernels at one pass's bytes, its host work down to a fused step's
and the GradScaler's waits removed.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.optimizer_steps import WITH_FUSED, ops_inside
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.traces.model import Trace


def unfused_optimizer(ctx: RuleContext) -> Iterator[RawFinding]:
    cpu = ctx.trace.cpu_ops
    per_line: dict[int, list[int]] = {}
    steps_of_line: dict[int, list[int]] = {}
    reads_of_line: dict[int, list[int]] = {}
    init_of_line: dict[int, int] = {}
    foreach: dict[int, bool] = {}
    for step in ctx.optimizer_steps:
        row = step.row
        form = _multi_tensor_form(ctx.trace, row)
        # A foreach step and a GradScaler's wait are fixed by a fused step, which only some
        # optimizers have (a foreach Shampoo has none); a per-parameter one by foreach=True.
        if form == "fused" or (form == "foreach" and step.optimizer not in WITH_FUSED):
            continue
        # A per-parameter step is worth fusing when it launches many kernels; a foreach step
        # runs few by design and still passes over the parameters once per op, and a
        # GradScaler's wait before either is the fused step's to remove.
        if (
            form is None
            and len(step.kernels) < ctx.options.many_kernels
            and not step.reads_a_fused_step_removes
        ):
            continue
        line = ctx.locator.line_at(int(cpu.thread[row]), int(cpu.start_ns[row]))
        if line == NONE and len(step.kernels):
            # No Python frames: the line its kernels are on (the step's own op row).
            placed = ctx.ops.line[step.kernels]
            placed = placed[placed != NONE]
            if len(placed):
                line = int(np.bincount(placed).argmax())
        if line != NONE:
            foreach.setdefault(line, form == "foreach")
            per_line.setdefault(line, []).extend(step.kernels.tolist())
            steps_of_line.setdefault(line, []).append(row)
            reads_of_line.setdefault(line, []).extend(step.reads_a_fused_step_removes)
            init_of_line[line] = init_of_line.get(line, 0) + step.state_init_ns
    for line_id, line_kernels in per_line.items():
        cost = ctx.by_id.get(line_id)
        if cost is None:
            continue
        rows = np.asarray(sorted(set(line_kernels)), dtype=np.int64)
        nbytes = float(np.nansum(ctx.classes.nbytes[rows])) if len(rows) else 0.0
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
        # What the fused step still costs the host: its Python and a launch per parameter
        # group; a foreach step's Python gathers the same lists the fused one does. Making the
        # optimizer's state (its first step) stays as it is.
        total = max(1, sum(saved.values()))
        init = min(init_of_line[line_id], total)
        keep = init + (
            int((total - init) * ctx.options.fused_share_of_foreach_host)
            if foreach[line_id]
            else ctx.options.fused_step_host_ns * len(steps_of_line[line_id])
        )
        saved = {e: ns - ns * min(keep, total) // total for e, ns in saved.items()}
        events = ctx.graph.events_launching(rows)
        reads = reads_of_line[line_id]
        unblocked = frozenset(ctx.graph.events_of(np.asarray(sorted(reads), dtype=np.int64)))
        fix = Fix(
            "the step's kernels fused into one pass over the parameters"
            + (", the GradScaler's waits for found_inf removed" if unblocked else ""),
            host_saved=saved,
            durations={r: int(ctx.graph.duration[r] * scale) for r in rows.tolist()},
            own={e: 0 for e in events},
            unblocked=unblocked,
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        host = ctx.trace.host_calls
        waited = int((host.end_ns[reads] - host.start_ns[reads]).sum()) if reads else 0
        n_steps = len(steps_of_line[line_id])
        kernels = f"{len(rows)} kernels" + (f" in {n_steps} steps" if n_steps > 1 else "")
        form_text = (
            f"the optimizer step runs the foreach implementation: {kernels}, a pass over the "
            "parameters per operation"
            if foreach[line_id]
            else f"the optimizer step launches {kernels}, one small group per parameter"
        )
        scaler_text = (
            f"; before each step the GradScaler waits for the GPU to read found_inf "
            f"({len(reads)} blocking calls, {duration_text(waited)} in all), which a fused step "
            "reads on the GPU"
            if reads
            else ""
        )
        yield RawFinding(
            "unfused-optimizer",
            line_id,
            int(saving),
            form_text + scaler_text,
            "Use the fused implementation: torch.optim.AdamW(params, lr=..., fused=True)"
            # foreach=True is what a foreach step already runs
            + ("." if foreach[line_id] else " (or foreach=True).")
            + (
                " A GradScaler then hands found_inf to the fused kernel instead of waiting for it."
                if reads
                else ""
            ),
            {
                "kernels": len(rows),
                "bytes": int(nbytes),
                **({"found_inf_reads": len(reads)} if reads else {}),
                **evidence,
            },
        )


def _multi_tensor_form(trace: Trace, step: int) -> str | None:
    """ "fused" or "foreach" when the step already runs one kernel for many tensors."""
    cpu = trace.cpu_ops
    names = {trace.strings[cpu.name[r]] for r in ops_inside(trace, step).tolist()}
    if any(n.startswith("aten::_fused_") for n in names):
        return "fused"
    if any(n.startswith("aten::_foreach_") for n in names):
        return "foreach"
    return None
