"""Two reports side by side: per line, time and regime before and after, fixes resolved or new,
and whether time scales with the work (the essay's batch-size test).

Horace He's test for overhead: double the batch; if the time barely moves, the line was
overhead-bound. With shapes in both traces the work ratio of each line is measured (its FLOPs,
else its bytes), so the test needs no knowledge of what was changed. It applies only when the
work changed by size: the same kernels, FLOPs and bytes grown alike. A dtype change (fp32 ->
bf16 keeps the FLOPs, halves the bytes and swaps the kernels) says nothing about overhead, and
the change says so instead of giving a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from brrr_trace import units
from brrr_trace.analyzers.kernels import kernel_dtype
from brrr_trace.report import Finding, LineReport, Report
from brrr_trace.vocabulary import Regime

# log(time ratio) / log(work ratio): 1 means time grows with the work, 0 means it does not.
SCALES_ABOVE = 0.6
FLAT_BELOW = 0.3
MIN_WORK_RATIO = 1.5
# Within this factor, FLOPs or bytes count as unchanged.
SIZE_CHANGE_AGREEMENT = 1.25


@dataclass(frozen=True)
class LineChange:
    file: str
    line: int
    function: str
    before: LineReport | None
    after: LineReport | None
    work_ratio: float | None  # FLOPs (else bytes) after / before
    scaling: float | None  # exponent of time against work
    verdict: str | None  # "scales with work", "does not scale: overhead", "partly"
    why_no_verdict: str | None = None  # when the work changed but not by size

    @property
    def before_ns(self) -> int:
        return self.before.total_ns if self.before else 0

    @property
    def after_ns(self) -> int:
        return self.after.total_ns if self.after else 0

    @property
    def delta_ns(self) -> int:
        return self.after_ns - self.before_ns


@dataclass(frozen=True)
class Diff:
    before: Report
    after: Report
    lines: tuple[LineChange, ...]  # largest change first
    resolved: tuple[Finding, ...]  # findings of before that after no longer has
    new: tuple[Finding, ...]

    @property
    def span_before_ns(self) -> int:
        return self.before.summary.gpu_busy_ns + self.before.summary.gpu_idle_ns

    @property
    def span_after_ns(self) -> int:
        return self.after.summary.gpu_busy_ns + self.after.summary.gpu_idle_ns


def compare(before: Report, after: Report) -> Diff:
    old = {(line.file, line.line): line for line in before.lines}
    new = {(line.file, line.line): line for line in after.lines}
    changes = []
    for key in sorted(set(old) | set(new)):
        b, a = old.get(key), new.get(key)
        ratio = _work_ratio(b, a)
        why_not = _not_a_size_change(b, a) if ratio is not None else None
        scaling, verdict = (None, None) if why_not else _scaling(b, a, ratio)
        some = a or b
        assert some is not None
        changes.append(
            LineChange(key[0], key[1], some.function, b, a, ratio, scaling, verdict, why_not)
        )
    changes.sort(key=lambda c: -abs(c.delta_ns))

    def finding_key(f: Finding) -> tuple[str, str, str]:
        return (f.rule, f.file, f.function)

    before_keys = {finding_key(f) for f in before.findings}
    after_keys = {finding_key(f) for f in after.findings}
    return Diff(
        before=before,
        after=after,
        lines=tuple(changes),
        resolved=tuple(f for f in before.findings if finding_key(f) not in after_keys),
        new=tuple(f for f in after.findings if finding_key(f) not in before_keys),
    )


def _work_ratio(b: LineReport | None, a: LineReport | None) -> float | None:
    if b is None or a is None:
        return None
    if b.flops and a.flops:
        return a.flops / b.flops
    if b.bytes and a.bytes:
        return a.bytes / b.bytes
    return None


def _not_a_size_change(b: LineReport | None, a: LineReport | None) -> str | None:
    """Why the line's work changed otherwise than by size, or None when it may be a size change.

    A batch size grows the FLOPs (the bytes less: weights stay), and the kernels keep their
    dtype; a dtype change keeps the FLOPs and swaps the kernels' dtype.
    """
    if b is None or a is None:
        return None
    before, after = _dtype(b), _dtype(a)
    if before and after and before != after:
        return (
            f"the kernels compute in {before} before, {after} after: a dtype change, no "
            "batch-size verdict"
        )
    if b.flops and a.flops and b.bytes and a.bytes:
        grew_flops, grew_bytes = a.flops / b.flops, a.bytes / b.bytes
        same_flops = 1 / SIZE_CHANGE_AGREEMENT <= grew_flops <= SIZE_CHANGE_AGREEMENT
        if same_flops and not 1 / SIZE_CHANGE_AGREEMENT <= grew_bytes <= SIZE_CHANGE_AGREEMENT:
            return (
                f"the same FLOPs but bytes x{grew_bytes:.2f}: a dtype or layout change, no "
                "batch-size verdict"
            )
    return None


def _dtype(line: LineReport) -> str | None:
    """The dtype the line's longest kernel computes in, when its name says."""
    longest = max(line.top_kernels, key=lambda k: k.total_ns, default=None)
    return kernel_dtype(longest.name) if longest is not None else None


def _scaling(
    b: LineReport | None, a: LineReport | None, ratio: float | None
) -> tuple[float | None, str | None]:
    if b is None or a is None or ratio is None or ratio < MIN_WORK_RATIO:
        return None, None
    if b.total_ns <= 0 or a.total_ns <= 0:
        return None, None
    exponent = math.log(a.total_ns / b.total_ns) / math.log(ratio)
    if exponent >= SCALES_ABOVE:
        regime = b.regime if b.regime is not Regime.OVERHEAD else a.regime
        return exponent, f"scales with the work ({regime}-bound)"
    if exponent <= FLAT_BELOW:
        return exponent, "does not scale with the work: overhead-bound"
    return exponent, "partly scales: mixed"


@dataclass(frozen=True)
class Regression:
    """What a CI gate fails on: the step, or one line, grew by more than the allowed share."""

    rule: str  # "step-regression" or "line-regression" (docs/rules/<rule>.md)
    summary: str  # one sentence, with the numbers
    before_ns: int
    after_ns: int
    percent: float  # growth, in percent of before
    line: LineReport | None  # the line after (for a step: the line that grew the most)


def step_times(diff: Diff) -> tuple[int, int, str]:
    """The step time before and after, and what it is: the median ProfilerStep when both
    traces have steps, else the GPU span."""
    b, a = diff.before.steps, diff.after.steps
    if b is not None and a is not None:
        return b.median_ns, a.median_ns, "median step"
    return diff.span_before_ns, diff.span_after_ns, "GPU span"


def regressions(diff: Diff, percent: float, min_share: float) -> list[Regression]:
    """The step and the lines (present before and after) that grew by more than ``percent``.

    A line counts only when it grew by at least ``min_share`` of the span before as well: a
    line of 2 µs that takes 4 µs is a 100 % change and nothing to stop a merge for."""
    found = []
    grew = [c for c in diff.lines if c.before is not None and c.after is not None]
    worst = max(grew, key=lambda c: c.delta_ns, default=None)
    before, after, what = step_times(diff)
    if before > 0 and after > before * (1 + percent / 100):
        change = (after - before) / before * 100
        found.append(
            Regression(
                "step-regression",
                f"The {what} grew by {change:.1f}% (more than {percent:g}%): "
                f"{units.duration(before)} before, {units.duration(after)} after",
                before,
                after,
                change,
                worst.after if worst is not None and worst.delta_ns > 0 else None,
            )
        )
    floor = min_share * diff.span_before_ns
    for c in grew:
        if c.delta_ns <= 0 or c.delta_ns < floor or c.before_ns <= 0:
            continue
        change = c.delta_ns / c.before_ns * 100
        if change > percent:
            found.append(
                Regression(
                    "line-regression",
                    f"{c.file}:{c.line} {c.function} grew by {change:.1f}% (more than "
                    f"{percent:g}%): {units.duration(c.before_ns)} before, "
                    f"{units.duration(c.after_ns)} after",
                    c.before_ns,
                    c.after_ns,
                    change,
                    c.after,
                )
            )
    return found
