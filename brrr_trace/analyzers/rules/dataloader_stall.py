"""dataloader-stall: batches produced in the main process, between the GPU's work.

Why it costs: the host launches nothing while it loads. The saving: the replay with the host
time inside the DataLoader's ``__next__`` handed to worker processes, the host waiting for a
batch only when the workers have not made it yet: fixing a loop whose loading takes more than
the rest of the step saves less than the loading (four workers make batches at most four times
as fast).
"""

from __future__ import annotations

from collections.abc import Iterator

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.replay import BatchQueue, Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.arraysets import distinct
from brrr_trace.vocabulary import IdleCause


def dataloader_stall(ctx: RuleContext) -> Iterator[RawFinding]:
    """Per line that asks for the next batch: the replay hands the host time spent inside the
    DataLoader's ``__next__`` to worker processes."""
    frames = ctx.trace.frames
    rows = ctx.locator.dataloader_rows
    if not len(rows):
        return
    threads, starts, ends = frames.thread[rows], frames.start_ns[rows], frames.end_ns[rows]
    callers = ctx.locator.lines_at(threads, starts)
    for line_id in distinct(callers[callers != NONE]).tolist():
        cost = ctx.by_id.get(line_id)
        mine = callers == line_id
        saved: dict[int, int] = {}
        for thread in distinct(threads[mine]).tolist():
            sel = mine & (threads == thread)
            saved.update(ctx.graph.host_work_inside(thread, starts[sel], ends[sel]))
        workers, prefetch = ctx.options.dataloader_workers, ctx.options.dataloader_prefetch
        queue = BatchQueue(saved, workers, prefetch)
        fix = Fix(f"batches made by {workers} worker processes", saved, batches=queue)
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        raw = cost.idle_by_cause.get(IdleCause.DATALOADER, 0) if cost else 0
        loading = sum(saved.values())
        yield RawFinding(
            "dataloader-stall",
            line_id,
            saving,
            f"the host spends {duration_text(loading)} producing batches in the main process, "
            "launching nothing meanwhile"
            + (f"; the GPU idles {duration_text(raw)} waiting for them" if raw else ""),
            f"Load in the background: DataLoader(..., num_workers={workers}, pin_memory=True, "
            f"persistent_workers=True, prefetch_factor={prefetch}).",
            {
                "dataloader_idle_us": round(raw / 1e3, 1),
                "loading_us": round(loading / 1e3, 1),
                **evidence,
            },
        )
