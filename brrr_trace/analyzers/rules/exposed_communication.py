"""exposed-communication: collectives with no computation beside them.

What it detects: the part of each collective kernel's time that no other GPU op covers, and
the GPU idle while the host sat in a collective of its own (gloo), charged to the line the
call belongs to (a DDP bucket's forward lines, the line of an explicit ``dist.all_reduce``:
docs/architecture.md §12).

Why it costs: the GPU computes nothing meanwhile. Where ranks are imbalanced, much of that
time is this rank waiting for the slowest one.

The saving: the replay with the exposed part of each collective taken away (its kernels
shortened by what nothing covered, the host's time in the blocking collective removed), never
more than the exposed time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.vocabulary import IdleCause, KernelKind

_FIX = (
    "Overlap communication with compute: smaller DDP buckets (bucket_cap_mb) start their "
    "all-reduce sooner; during gradient accumulation, skip it under no_sync() until the last "
    "micro-batch; FSDP: forward/backward prefetch. If the ranks are imbalanced, the time is "
    "waiting for the slowest rank: compare the ranks' traces."
)


_BROADCAST = (
    " DDP broadcasts the module's buffers before every forward: broadcast_buffers=False skips "
    "that when they do not change (a constant mask)."
)


@dataclass
class _Exposed:
    kernel_ns: int = 0  # collective kernel time nothing else covered
    calls: int = 0
    names: dict[str, int] = field(default_factory=dict)
    durations: dict[int, int] = field(default_factory=dict)  # GPU row -> re-timed duration
    windows: list[tuple[int, int, int]] = field(default_factory=list)  # host collectives
    covers: dict[int, None] = field(default_factory=dict)


def exposed_communication(ctx: RuleContext) -> Iterator[RawFinding]:
    gpu = ctx.trace.gpu
    found = ctx.collectives
    comm = ctx.of_kind(KernelKind.COMMUNICATION)
    comm[found.launched_rows()] = True  # what the calls launched is theirs (staging copies)
    if not comm.any() and not found.calls:
        return
    other = np.flatnonzero(~comm)
    order = other[np.argsort(gpu.start_ns[other], kind="stable")]
    starts = gpu.start_ns[order]
    reach = np.maximum.accumulate(gpu.end_ns[order]) if len(order) else starts

    def exposed_of(row: int) -> int:
        a, b = int(gpu.start_ns[row]), int(gpu.end_ns[row])
        return (b - a) - _covered(starts, reach, a, b)

    per_line: dict[int, _Exposed] = {}
    in_a_call: set[int] = set()
    for k, call in enumerate(found.calls):
        line = found.line_id[k]
        in_a_call.update(found.launched[k])
        if line == NONE:
            continue
        entry = per_line.setdefault(line, _Exposed())
        entry.calls += 1
        entry.names[call.name] = entry.names.get(call.name, 0) + 1
        entry.covers.update(dict.fromkeys(found.lines[k]))
        if not found.kernels[k]:
            # The host waited in the call, or in its run on gloo's thread when it has one.
            ran = found.windows[k]
            entry.windows.extend(ran[1:] or ran[:1])
        for row in found.launched[k]:
            ns = exposed_of(row)
            entry.kernel_ns += ns
            if ns > 0:
                entry.durations[row] = int(gpu.end_ns[row] - gpu.start_ns[row]) - ns
    # Collective kernels no recognised host op issued (a library's own all-reduce).
    for row in np.flatnonzero(comm).tolist():
        line = int(ctx.ops.line[row])
        if row in in_a_call or line == NONE:
            continue
        entry = per_line.setdefault(line, _Exposed())
        ns = exposed_of(row)
        entry.kernel_ns += ns
        if ns > 0:
            entry.durations[row] = int(gpu.end_ns[row] - gpu.start_ns[row]) - ns
    for line_id, entry in per_line.items():
        cost = ctx.by_id.get(line_id)
        waited = ctx.idle(cost, IdleCause.COLLECTIVE) if cost is not None else 0
        exposed = entry.kernel_ns + waited
        if not ctx.worth_it(exposed):
            continue
        fix = Fix(
            "the collectives' exposed time taken away",
            host_saved=_host_waits(ctx, entry.windows, waited),
            durations=entry.durations,
        )
        saving, evidence = ctx.replayed(fix)
        saving = min(saving, exposed)
        if not ctx.worth_it(saving):
            continue
        what = ", ".join(f"{name} ×{n}" for name, n in sorted(entry.names.items()))
        calls = (
            f"{entry.calls} collective call(s) ({what})" if entry.calls else "collective kernels"
        )
        host = (
            f", {duration_text(waited)} of it the GPU idle, waiting for a collective the host "
            "carries out (gloo)"
            if waited
            else ""
        )
        yield RawFinding(
            "exposed-communication",
            line_id,
            int(saving),
            f"{calls} run {duration_text(exposed)} with no computation beside them{host}",
            _FIX + (_BROADCAST if "broadcast" in entry.names else ""),
            {
                "exposed_us": round(exposed / 1e3, 1),
                "kernel_exposed_us": round(entry.kernel_ns / 1e3, 1),
                "host_wait_us": round(waited / 1e3, 1),
                "calls": entry.calls,
                **evidence,
            },
            covers=tuple(dict.fromkeys((line_id, *entry.covers))),
        )


def _host_waits(
    ctx: RuleContext, windows: list[tuple[int, int, int]], waited: int
) -> dict[int, int]:
    """Per replay event: the host time inside these host collectives, cut to ``waited`` in
    all (what the GPU idled for them)."""
    if not windows or waited <= 0:
        return {}
    saved: dict[int, int] = {}
    for thread in sorted({w[0] for w in windows}):
        mine = [(a, b) for h, a, b in windows if h == thread]
        inside = ctx.graph.host_work_inside(
            thread,
            np.array([a for a, _ in mine], dtype=np.int64),
            np.array([b for _, b in mine], dtype=np.int64),
        )
        for event, ns in inside.items():
            saved[event] = saved.get(event, 0) + ns
    total = sum(saved.values())
    if total > waited:
        saved = {event: ns * waited // total for event, ns in saved.items()}
    return {event: ns for event, ns in saved.items() if ns > 0}


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
