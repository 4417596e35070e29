"""pageable-memcpy: host-device copies from or to pageable memory.

Why it costs: staged through a bounce buffer at a fraction of the link's rate, and they hold
the host. The saving: the replay with the copies at the pinned rate, not blocking.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.replay_runs import CALL_NS
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext


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
