"""straggler: one rank arrives last at the collectives, and every other rank waits for it.

Why it costs: a collective ends when its last rank has joined, so the others sit in it for as
long as that rank is late; the whole job runs at the pace of its slowest rank. The saving: per
call it came last to, the longest wait it caused, summed (the wall time the others spend
waiting). Unlike the other rules it reads all ranks of a run (``analyzers.crossrank``), so the
pipeline runs it after the merge rather than through ``rules.find``.
"""

from __future__ import annotations

from dataclasses import dataclass

from brrr_trace.analyzers.crossrank import CrossRank, Straggler
from brrr_trace.analyzers.rules.context import duration_text
from brrr_trace.options import AnalysisOptions

RULE = "straggler"


@dataclass(frozen=True, slots=True)
class StragglerFinding:
    rank: int
    file: str
    path: str | None
    line: int
    function: str
    lines: tuple[int, ...]
    message: str
    fix: str
    est_savings_ns: int
    evidence: dict[str, float | int | str]


def straggler(cross: CrossRank, span_ns: int, options: AnalysisOptions) -> list[StragglerFinding]:
    found = []
    for late in cross.stragglers:
        saving = late.late_ns
        if saving < options.min_savings_ns or saving < options.min_savings_share * span_ns:
            continue
        file, path, line, function = _where(late)
        lines = tuple(sorted({ln.line for ln in late.lines if ln.file == file} | {line}))
        shown = ", ".join(
            f"{_label(ln.file, ln.line, ln.function)} (+{duration_text(ln.excess_ns)})"
            for ln in late.lines[:3]
        )
        others = len(cross.ranks) - 1
        steady = (
            f"late by at least {duration_text(late.steady_late_ns)} in every step "
            f"({duration_text(late.per_step_late_ns)} at the median)"
            if late.steady_late_ns
            else f"late by {duration_text(late.per_step_late_ns)} a step at the median"
        )
        message = (
            f"rank {late.rank} arrives last at {late.calls} of {cross.matched_calls} matched "
            f"collectives, {steady}: "
            + ("the other rank waits" if others == 1 else f"the other {others} ranks wait")
            + f" {duration_text(late.late_ns)} for it in all"
            + (
                f" ({duration_text(late.others_wait_ns)} of their time in all)"
                if others > 1
                else ""
            )
            + (
                f"; on rank {late.rank} these lines take longer than on the others: {shown}"
                if shown
                else "; no line of it takes longer than on the others (a slower GPU, host or "
                "link, or work outside the trace)"
            )
        )
        evidence: dict[str, float | int | str] = {
            "rank": late.rank,
            "late_us": round(late.late_ns / 1e3, 1),
            "others_wait_us": round(late.others_wait_ns / 1e3, 1),
            "per_call_late_us": round(late.per_call_late_ns / 1e3, 1),
            "per_step_late_us": round(late.per_step_late_ns / 1e3, 1),
            "steady_late_us": round(late.steady_late_ns / 1e3, 1),
            "calls": late.calls,
            "matched_calls": cross.matched_calls,
        }
        if late.agrees_with_clock is not None:
            evidence["started_last_by_clock"] = round(late.agrees_with_clock, 3)
        found.append(
            StragglerFinding(
                rank=late.rank,
                file=file,
                path=path,
                line=line,
                function=function,
                lines=lines,
                message=message,
                fix=(
                    f"Even out rank {late.rank}'s work before its collectives: the lines named "
                    "(uneven shards or batch sizes, data loading, logging or checkpointing on "
                    "one rank only, a slower device); the others' wait goes when it arrives "
                    "with them."
                ),
                est_savings_ns=saving,
                evidence=evidence,
            )
        )
    return found


def _label(file: str, line: int, function: str) -> str:
    """file:line; an op-level line (no Python stack) by its op instead of line 0."""
    return f"{file}:{line}" if line else f"{file} ({function})"


def _where(late: Straggler) -> tuple[str, str | None, int, str]:
    """The straggler's most-late line; else the line of a collective it came late to."""
    if late.lines:
        top = late.lines[0]
        return top.file, top.path, top.line, top.function
    for text in late.collective_lines:
        file, _, number = text.rpartition(":")
        if file and number.isdigit():
            return file, None, int(number), ""
    return "<ops>", None, 0, ""
