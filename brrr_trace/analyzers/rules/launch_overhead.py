"""launch-overhead: host-bound lines that launch many kernels.

Why it costs: the GPU finishes each kernel before the host has launched the next.
The saving: the replay without the host work before the lines' launches (a CUDA graph). The
host-bound lines of one function are replayed together, as capturing that function (a training
step, a module's forward) in one graph takes all of their host work away at once; a line that
waits for the GPU (a sync) cannot be captured and stays out.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.frames import parse_frame
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.regimes import LineCost
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext, duration_text
from brrr_trace.vocabulary import IdleCause, Regime


def launch_overhead(ctx: RuleContext) -> Iterator[RawFinding]:
    """Host-bound lines, whatever their kernels' length, grouped by the function they are in:
    the replay takes the host work before each of their launches away, as replaying them from
    one CUDA graph would."""
    groups: dict[tuple[str, str, int], list[LineCost]] = {}
    for c in ctx.costs:
        if (
            c.regime is Regime.OVERHEAD
            and c.kernels
            and _host_idle(ctx, c)
            and not c.idle_by_cause.get(IdleCause.SYNC)
        ):
            key = (c.key.file, c.key.function, _def_line(ctx, ctx.rows(c.line_id)))
            groups.setdefault(key, []).append(c)
    candidates = [
        sorted(g, key=lambda c: c.key.line)
        for g in groups.values()
        if sum(c.kernels for c in g) >= ctx.options.many_kernels
    ]
    candidates.sort(key=lambda g: -sum(_host_idle(ctx, c) for c in g))
    for group in candidates[: ctx.options.max_replayed_lines]:
        rows = np.concatenate([ctx.rows(c.line_id) for c in group])
        events = ctx.graph.events_launching(rows)
        fix = Fix(
            "the line's launches replayed from a CUDA graph"
            if len(group) == 1
            else "the lines' launches replayed from one CUDA graph",
            # The host work before the trace's first launch is start-up, no line's launches.
            host_saved={e: ctx.graph.work[e] for e in events if e},
            own={e: 0 for e in events},
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        kernels = sum(c.kernels for c in group)
        waits = duration_text(sum(_host_idle(ctx, c) for c in group))
        median = float(np.median(ctx.duration(rows)))
        top = max(group, key=lambda c: _host_idle(ctx, c))
        where = (
            ""
            if len(group) == 1
            else f"lines {group[0].key.line}-{group[-1].key.line} of {top.key.function}: "
        )
        yield RawFinding(
            "launch-overhead",
            top.line_id,
            saving,
            f"{where}{kernels} kernels with a median of {median / 1e3:.1f} µs: the GPU waits "
            f"{waits} for the host to launch them",
            'Capture the loop in a CUDA graph (torch.compile(mode="reduce-overhead") or '
            "torch.cuda.graphs), or batch the small ops into fewer, larger ones."
            if len(group) == 1
            else f"Capture {top.key.function} in one CUDA graph (torch.compile(mode="
            '"reduce-overhead") or torch.cuda.graphs), or batch the small ops into fewer, '
            "larger ones.",
            {"kernels": kernels, "median_kernel_us": round(median / 1e3, 2), **evidence},
            covers=tuple(c.line_id for c in group) if len(group) > 1 else (),
        )


def _def_line(ctx: RuleContext, rows: np.ndarray) -> int:
    """The ``def`` line of the function whose frame launched most of these GPU ops in the
    forward, so that two methods of one name in a file (each module's ``forward``) stay apart;
    0 where no Python frame launched them."""
    launch = ctx.ops.launch[rows]
    forward = rows[(launch != NONE) & ~ctx.ops.backward[rows].astype(bool)]
    if not len(forward):
        return 0
    host = ctx.trace.host_calls
    calls = ctx.ops.launch[forward]
    frames = ctx.locator.user_frames.at_many(host.thread[calls], host.start_ns[calls])
    frames = frames[frames != NONE]
    if not len(frames):
        return 0
    names, counts = np.unique(ctx.trace.frames.name[frames], return_counts=True)
    frame = parse_frame(ctx.trace.strings[int(names[int(np.argmax(counts))])])
    return frame.line if frame else 0


def _host_idle(ctx: RuleContext, cost: LineCost) -> int:
    return ctx.idle(cost, IdleCause.HOST, IdleCause.LAUNCH)
