"""host-sync: the host waits for the GPU on this line (.item(), .cpu(), synchronize).

Why it costs: the queue drains while the host waits, and the GPU idles until the host catches
up. The saving: the replay with the line's waits removed, at most the host's waits in the
baseline replay and the idle the waits left the GPU in the trace. The sync lines of one
function (a loss and an accuracy read for logging) are also replayed together, since one
change (logging every N steps) removes them all and, removed one at a time, the next one
waits instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from brrr_trace.analyzers.attribution import LineKey
from brrr_trace.analyzers.frames import parse_frame
from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text

FIX_TEXT = (
    "Keep the value on the GPU (accumulate a tensor) and read it once per step or every "
    'N steps; torch.cuda.set_sync_debug_mode("warn") finds hidden syncs.'
)


@dataclass(frozen=True)
class _SyncLine:
    line_id: int
    key: LineKey
    calls: tuple[int, ...]  # the blocking host calls the line makes
    events: frozenset[int]  # their events in the replay
    gap_ns: int  # the idle its waits left the GPU in the trace
    replayed_wait_ns: int  # how long the host waited in them in the baseline replay
    saving_ns: int
    evidence: dict[str, float | int | str]
    fix: Fix


def host_sync(ctx: RuleContext) -> Iterator[RawFinding]:
    """The saving is a replay of the GPU's queue with the line's waits removed: the launches
    after each wait come that much earlier, and the streams run them as soon as they can."""
    groups: dict[tuple[str, str, int], list[_SyncLine]] = {}
    for sync in _sync_lines(ctx):
        groups.setdefault(_function_of(ctx, sync), []).append(sync)
    for group in groups.values():
        singles = [s for s in group if ctx.worth_it(s.saving_ns)]
        best = max((s.saving_ns for s in singles), default=0)
        if len(group) > 1:
            together = _together(ctx, group)
            if together is not None and together.est_savings_ns > best * 1.1:
                yield together
                continue
        for sync in singles:
            yield _finding(ctx, [sync], sync.saving_ns, sync.evidence, sync.fix)


def _sync_lines(ctx: RuleContext) -> list[_SyncLine]:
    """The lines whose syncs drained the GPU's queue for longest, in the trace or in the
    replay, a few at most, each replayed without its waits. A profiled host can be so slow that
    the GPU is done before it syncs, while without the profiler's cost it gets there first and
    waits (the CNN's `.item()`s: 0.07 ms a step in its record trace, 0.4 ms replayed)."""
    host = ctx.trace.host_calls
    blocking = ctx.timeline.blocking_rows
    # A line's fix removes every blocking call it makes (.item() copies, then synchronizes).
    line_of = ctx.locator.lines_at(host.thread[blocking], host.start_ns[blocking])
    waits = ctx.graph.waits()
    calls: dict[int, set[int]] = {}
    for line_id, waited in ctx.timeline.sync_waits.items():
        if line_id != NONE:
            calls.setdefault(line_id, set()).update(waited)
    # Also the lines whose syncs the GPU's queue did not run dry after in the trace, behind
    # the others: removed alone, the sync before them (a function's loss read before its
    # accuracy read) leaves them the wait, so they count in their function's group.
    for row, line_id in zip(blocking.tolist(), line_of.tolist(), strict=True):
        if line_id != NONE:
            calls.setdefault(line_id, set()).add(row)
    # A GradScaler's waits for found_inf go with a fused optimizer step (unfused-optimizer).
    scaler_reads = {r for step in ctx.optimizer_steps for r in step.reads_a_fused_step_removes}
    candidates = []
    for line_id, all_rows in calls.items():
        rows = all_rows - scaler_reads
        if not rows:
            continue
        events = frozenset(ctx.graph.events_of(np.asarray(sorted(rows), dtype=np.int64)))
        replayed = int(waits[sorted(events)].sum()) if events else 0
        gap = ctx.timeline.sync_gaps.get(line_id, 0)
        candidates.append((max(gap, replayed), line_id, tuple(sorted(rows)), events, gap, replayed))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    found = []
    for _, line_id, rows_of_line, events, gap, replayed in candidates[
        : ctx.options.max_replayed_lines
    ]:
        fix = Fix("the line's waits removed", unblocked=events)
        saving, evidence = ctx.replayed(fix)
        saving = _at_most_the_idle(saving, gap)
        found.append(
            _SyncLine(
                line_id,
                ctx.locator.lines[line_id],
                rows_of_line,
                events,
                gap,
                replayed,
                saving,
                evidence,
                fix,
            )
        )
    ctx.last_fix = None  # each finding names its own fix
    return found


def _together(ctx: RuleContext, group: list[_SyncLine]) -> RawFinding | None:
    """One finding for the sync lines of one function, their waits removed at once."""
    group = sorted(group, key=lambda s: s.key.line)
    fix = Fix(
        f"the waits of lines {', '.join(str(s.key.line) for s in group)} removed",
        unblocked=frozenset().union(*(s.events for s in group)),
    )
    saving, evidence = ctx.replayed(fix)
    saving = _at_most_the_idle(saving, sum(s.gap_ns for s in group))
    if not ctx.worth_it(saving):
        return None
    return _finding(ctx, group, saving, evidence, fix)


def _at_most_the_idle(saving: int, gap: int) -> int:
    """At most the idle the waits left the GPU in the trace. In a loop the GPU paces, the
    replayed saving is the host's lead on the GPU that a sync throws away, and with a replayed
    host barely faster than the GPU that lead is never rebuilt: the ViT's logging `.item()`
    replays at 1.04 ms a step against 0.19 measured (tests/data/record_session9.sh), while its
    trace's idle after the sync, 0.07, is the bound (a profiled host is slower to refill the
    queue). A trace of one call ends in a harness's `synchronize()`, whose replayed wait is no
    fix either. Where the host paces the loop the idle after the syncs is large (the GPU waits
    through the next batch) and the host's wait is what the replay gives."""
    return min(saving, gap)


def _finding(
    ctx: RuleContext,
    group: list[_SyncLine],
    saving: int,
    evidence: dict[str, float | int | str],
    fix: Fix,
) -> RawFinding:
    host = ctx.trace.host_calls
    calls = [c for s in group for c in s.calls]
    blocked = int((host.end_ns[calls] - host.start_ns[calls]).sum())
    reads = _reads(ctx, calls)
    gap = sum(s.gap_ns for s in group)
    replayed = sum(s.replayed_wait_ns for s in group)
    where = (
        "on this line"
        if len(group) == 1
        else f"on lines {', '.join(str(s.key.line) for s in group)} of {group[0].key.function}"
    )
    unprofiled = (
        f"; without the profiler's cost the host would wait {duration_text(replayed)} there"
        if replayed > max(blocked, gap) * 1.1
        else ""
    )
    # The idle after a sync lasts until the host's next launch, and most of it can be the
    # host's own work after the wait (the CNN's batches: 867 ms after its `.item()`s, of which
    # the fix saves 4), which removing the wait does not shorten.
    kept = "; most of that is the host's work after them, which stays" if saving * 2 < gap else ""
    drains = (
        f"; the queue drains, and the GPU then idles {duration_text(gap)} until the host's next "
        f"launch{kept}"
        if gap
        else ""
    )
    top = max(group, key=lambda s: (s.gap_ns, s.replayed_wait_ns))
    return RawFinding(
        "host-sync",
        top.line_id,
        saving,
        f"the host waits for the GPU {where} (.item(), .cpu(), print, synchronize) "
        f"{reads} {'time' if reads == 1 else 'times'}, {duration_text(blocked)} in all{drains}"
        f"{unprofiled}",
        FIX_TEXT,
        {
            "sync_idle_us": round(gap / 1e3, 1),
            "blocked_us": round(blocked / 1e3, 1),
            "replayed_wait_us": round(replayed / 1e3, 1),
            **evidence,
        },
        covers=tuple(s.line_id for s in group) if len(group) > 1 else (),
        replayed=fix,
        saving_cap_ns=gap,
    )


def _reads(ctx: RuleContext, calls: list[int]) -> int:
    """How many times the host read or waited: the blocking calls made inside one ATen op are
    one read (``.item()`` copies, then synchronizes: two calls); a call inside none counts alone."""
    host, cpu = ctx.trace.host_calls, ctx.trace.cpu_ops
    rows = np.asarray(calls, dtype=np.int64)
    if not len(rows) or not len(cpu):
        return len(rows)
    thread, start = host.thread[rows], host.start_ns[rows]
    # Only the ops that hold one of these calls (on any thread; the index keeps threads apart):
    # the first call at or after an op's start lies inside it.
    starts = np.sort(start)
    k = np.searchsorted(starts, cpu.start_ns)
    near = (k < len(starts)) & ~cpu.annotation
    near[near] &= starts[k[near]] <= cpu.end_ns[near]
    if not near.any():
        return len(rows)
    kept = np.flatnonzero(near)
    inner = Innermost(cpu.thread[kept], cpu.start_ns[kept], cpu.end_ns[kept]).at_many(thread, start)
    alone = int(np.count_nonzero(inner == NONE))
    return alone + len(np.unique(inner[inner != NONE]))


def _function_of(ctx: RuleContext, sync: _SyncLine) -> tuple[str, str, int]:
    """The file, function and ``def`` line of the frame the line's waits ran in, so that two
    functions of one name in a file stay apart (0 where no frame is known)."""
    key = sync.key
    host = ctx.trace.host_calls
    calls = np.asarray(sync.calls, dtype=np.int64)
    frames = ctx.locator.user_frames.at_many(host.thread[calls], host.start_ns[calls])
    frames = frames[frames != NONE]
    if not len(frames):
        return key.file, key.function, 0
    frame = parse_frame(ctx.trace.strings[int(ctx.trace.frames.name[frames[0]])])
    return key.file, key.function, frame.line if frame else 0
