"""Findings: what to fix, on which line, and the time each fix would save (docs/architecture.md
§7). One module per rule id; this one runs them all.

Every rule reads the evidence the other analyzers left (kernels per line, roofline numbers, idle
by cause, the replayable graph) and estimates its saving from it. Rule ids are a contract: they
never change meaning. Thresholds live in ``AnalysisOptions``.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from brrr_trace.analyzers.packed_fix import pack, unpack
from brrr_trace.analyzers.replay import Fix, StepGraph
from brrr_trace.analyzers.rules.context import RawFinding, Rule, RuleContext
from brrr_trace.analyzers.rules.cpu_to_device import cpu_to_device
from brrr_trace.analyzers.rules.dataloader_stall import dataloader_stall
from brrr_trace.analyzers.rules.exposed_communication import exposed_communication
from brrr_trace.analyzers.rules.fp32_matmul import fp32_matmul
from brrr_trace.analyzers.rules.host_sync import host_sync
from brrr_trace.analyzers.rules.launch_overhead import launch_overhead
from brrr_trace.analyzers.rules.manual_attention import library_attention, manual_attention
from brrr_trace.analyzers.rules.misaligned_shape import misaligned_shape
from brrr_trace.analyzers.rules.pageable_memcpy import pageable_memcpy
from brrr_trace.analyzers.rules.small_grid import small_grid
from brrr_trace.analyzers.rules.unfused_elementwise import unfused_elementwise
from brrr_trace.analyzers.rules.unfused_optimizer import unfused_optimizer

__all__ = [
    "RULES",
    "RawFinding",
    "RuleContext",
    "find",
    "rule_docs",
    "savings_by_rule",
    "savings_ranges",
]

# A specific diagnosis explains a line's overhead better than the generic one; both would count
# the same idle time twice.
_SUPERSEDES = {
    "unfused-optimizer": frozenset({"launch-overhead"}),
    "cpu-to-device": frozenset({"host-sync", "pageable-memcpy"}),
}


def find(ctx: RuleContext) -> list[RawFinding]:
    """All findings, largest estimated saving first."""
    found = []
    for rule in RULES:
        for finding in rule(ctx):
            # A rule replays a finding's fix just before it yields the finding. The fix waits
            # for the savings ranges packed: the large ones are hundreds of thousands of edits.
            fix = finding.replayed or ctx.last_fix
            found.append(replace(finding, replayed=pack(fix) if isinstance(fix, Fix) else fix))
            ctx.last_fix = None
    specific = {
        (f.line_id, generic): f.est_savings_ns
        for f in found
        for generic in _SUPERSEDES.get(f.rule, frozenset())
    }
    # A generic finding over several lines (a CUDA graph of a whole step) stays where the
    # line's specific fix saves only a small part of it.
    found = [
        f
        for f in found
        if (f.line_id, f.rule) not in specific
        or (
            len(f.covers) > 1
            and specific[(f.line_id, f.rule)] < ctx.options.superseding_share * f.est_savings_ns
        )
    ]
    # Two ways to one diagnosis (attention inside the library a line calls, or by hand among
    # the line's own kernels): the line gets it once, from the rule that runs first.
    seen: set[tuple[int, str]] = set()
    unique = []
    for f in found:
        if (f.line_id, f.rule) not in seen:
            seen.add((f.line_id, f.rule))
            unique.append(f)
    unique.sort(key=lambda f: -f.est_savings_ns)
    return unique


def savings_by_rule(
    ctx: RuleContext, found: list[RawFinding]
) -> dict[str, tuple[int, tuple[int, int] | None]]:
    """Per rule with several replayed findings, the saving when all of them are fixed at once
    (one switch such as TF32 fixes every line): replayed together, not summed, since near the
    point where the host and the GPU take equally long the separate savings overlap. With it,
    the least and the most that saves at either end of the profiler's cost (as
    ``savings_ranges``)."""
    fixes: dict[str, list[Fix]] = {}
    for f in found:
        if f.replayed is not None and f.est_savings_ns > 0:
            fixes.setdefault(f.rule, []).append(unpack(f.replayed))
    bounds = ctx.cost_bound_graphs
    out: dict[str, tuple[int, tuple[int, int] | None]] = {}
    for rule, group in fixes.items():
        if len(group) < 2:
            continue
        saving = ctx.together(group)
        out[rule] = (saving, _range(bounds, saving, Fix.together("together", group)))
    return out


def savings_ranges(ctx: RuleContext, found: list[RawFinding]) -> list[tuple[int, int] | None]:
    """Per finding, the least and the most its fix saves with the profiler's estimated cost at
    either end of what real programs showed (``AnalysisOptions.profiler_cost_scale_low`` and
    ``_high``), or at either end of the calibration's band (``RuleContext.cost_bound_graphs``),
    its own saving included; None where there are no ends or the finding replayed no fix. A
    GPU fix in a GPU-bound loop saves the same at either end; one whose saving depends on the
    host's pace does not."""
    bounds = ctx.cost_bound_graphs
    return [
        _range(bounds, f.est_savings_ns, unpack(f.replayed), f.saving_cap_ns)
        if f.replayed is not None
        else None
        for f in found
    ]


def _range(
    bounds: tuple[StepGraph, StepGraph] | None, saving: int, fix: Fix, cap: int | None = None
) -> tuple[int, int] | None:
    """The least and the most a fix saves: its saving and its replays at either end of the
    profiler's cost, each at most ``cap``; None where there are no ends or nothing is saved."""
    if bounds is None or saving <= 0:
        return None
    ends = [saving, *(graph.saving(fix) for graph in bounds)]
    if cap is not None:
        ends = [min(end, cap) for end in ends]
    return min(ends), max(ends)


RULES: tuple[Rule, ...] = (
    launch_overhead,
    host_sync,
    dataloader_stall,
    pageable_memcpy,
    fp32_matmul,
    unfused_elementwise,
    library_attention,  # before manual_attention: its finding on a line is the more precise
    manual_attention,
    unfused_optimizer,
    misaligned_shape,
    small_grid,
    cpu_to_device,
    exposed_communication,
)


def rule_docs() -> dict[str, tuple[str, str]]:
    """Each rule id with what its module says of it: the summary (the module docstring's first
    paragraph, ``<id>: what it detects``) and the rest (why it costs, how the saving is
    estimated). For SARIF's rule metadata; the full page is docs/rules/<id>.md."""
    docs: dict[str, tuple[str, str]] = {}
    for rule in RULES:
        doc = (sys.modules[rule.__module__].__doc__ or "").strip()
        head, _, rest = doc.partition("\n\n")
        rule_id, _, summary = head.partition(":")
        docs.setdefault(rule_id, (" ".join(summary.split()), " ".join(rest.split())))
    return docs
