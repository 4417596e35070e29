"""The analyzed active trace, indexed by local file for the request handlers.

A ``Snapshot`` is built once per load and never changed; the session swaps the whole object, so a
handler sees either the old one or the new one.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Finding, LineReport, Report
from brrr_trace.server.discovery import TraceFile, norm_path
from brrr_trace.server.source import FunctionSpan


@dataclass(frozen=True)
class Snapshot:
    """One analyzed trace, indexed for the handlers. Never mutated after ``build_snapshot``."""

    trace: TraceFile
    options: AnalysisOptions
    report: Report
    # The GPU span the shares are taken of (busy + idle of the reported device).
    span_ns: int
    # Local file (``norm_path``) -> its line reports, sorted by line.
    lines_by_path: Mapping[str, tuple[LineReport, ...]]
    findings_by_path: Mapping[str, tuple[Finding, ...]]
    # Files named in the trace that map onto no local file.
    unmapped_files: tuple[str, ...] = ()
    loaded_at: float = field(default_factory=time.time)

    def lines(self, path: str) -> tuple[LineReport, ...]:
        return self.lines_by_path.get(path, ())

    def findings(self, path: str) -> tuple[Finding, ...]:
        return self.findings_by_path.get(path, ())

    def line_at(self, path: str, line: int) -> LineReport | None:
        """The report of a 1-based line (the costliest one if two trace files map here)."""
        lines = self.lines_by_path.get(path, ())
        i = bisect.bisect_left(lines, line, key=lambda r: r.line)
        return lines[i] if i < len(lines) and lines[i].line == line else None

    def lines_between(self, path: str, first: int, last: int) -> tuple[LineReport, ...]:
        """The reports of 1-based lines ``first..last``, in line order."""
        lines = self.lines_by_path.get(path, ())
        lo = bisect.bisect_left(lines, first, key=lambda r: r.line)
        hi = bisect.bisect_right(lines, last, key=lambda r: r.line)
        return lines[lo:hi]

    def function_lines(self, path: str, function: FunctionSpan) -> tuple[LineReport, ...]:
        """The reports of a function's own lines (not those of functions defined inside it)."""
        lines = self.lines_between(path, function.first_line, function.last_line)
        return tuple(line for line in lines if function.owns(line.line))


def build_snapshot(trace: TraceFile, options: AnalysisOptions, report: Report) -> Snapshot:
    by_path: dict[str, list[LineReport]] = {}
    local_of_file: dict[str, str] = {}
    unmapped: set[str] = set(report.unmapped_files)
    for line in report.lines:
        if line.path is None:
            continue
        key = norm_path(line.path)
        local_of_file.setdefault(line.file, key)
        by_path.setdefault(key, []).append(line)
    lines_by_path = {}
    for key, lines in by_path.items():
        # Costliest first within a line, so that line_at finds it first.
        lines.sort(key=lambda r: (r.line, -r.total_ns))
        deduped = [r for i, r in enumerate(lines) if i == 0 or lines[i - 1].line != r.line]
        lines_by_path[key] = tuple(deduped)
    findings: dict[str, list[Finding]] = {}
    for finding in report.findings:
        local = norm_path(finding.path) if finding.path else local_of_file.get(finding.file)
        if local is None:
            unmapped.add(finding.file)
            continue
        findings.setdefault(local, []).append(finding)
    summary = report.summary
    return Snapshot(
        trace=trace,
        options=options,
        report=report,
        span_ns=summary.gpu_busy_ns + summary.gpu_idle_ns,
        lines_by_path=MappingProxyType(lines_by_path),
        findings_by_path=MappingProxyType(
            {
                k: tuple(sorted(v, key=lambda f: (f.line, -f.est_savings_ns, f.rule)))
                for k, v in findings.items()
            }
        ),
        unmapped_files=tuple(sorted(unmapped)),
    )
