"""launch-overhead: a host-bound line that launches many kernels.

Why it costs: the GPU finishes each kernel before the host has launched the next.
The saving: the replay without the host work before the line's launches (a CUDA graph).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.regimes import LineCost
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.vocabulary import IdleCause, Regime


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
            f"{duration_text(_host_idle(ctx, cost))} for the host to launch them",
            'Capture the loop in a CUDA graph (torch.compile(mode="reduce-overhead") or '
            "torch.cuda.graphs), or batch the small ops into fewer, larger ones.",
            {"kernels": cost.kernels, "median_kernel_us": round(median / 1e3, 2), **evidence},
        )


def _host_idle(ctx: RuleContext, cost: LineCost) -> int:
    return ctx.idle(cost, IdleCause.HOST, IdleCause.LAUNCH)
