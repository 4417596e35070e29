"""host-sync: the host waits for the GPU on this line (.item(), .cpu(), synchronize).

Why it costs: the queue drains while the host waits, and the GPU idles until the host catches
up. The saving: the replay with the line's waits removed, at most the idle after them.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text


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
            f"{len(waits)} time(s), {duration_text(blocked)} in all; the queue drains and the GPU "
            f"idles {duration_text(ctx.timeline.sync_gaps.get(line_id, 0))} until the host catches "
            "up",
            "Keep the value on the GPU (accumulate a tensor) and read it once per step or every "
            'N steps; torch.cuda.set_sync_debug_mode("warn") finds hidden syncs.',
            {
                "sync_idle_us": round(ctx.timeline.sync_gaps.get(line_id, 0) / 1e3, 1),
                "blocked_us": round(blocked / 1e3, 1),
                **evidence,
            },
        )
