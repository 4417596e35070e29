"""The report for a terminal: utilization, idle by cause, and the lines that cost the most."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from brrr_trace.report import LineReport, Report
from brrr_trace.vocabulary import IdleCause, Regime

_REGIME_STYLE = {Regime.COMPUTE: "green", Regime.MEMORY: "cyan", Regime.OVERHEAD: "magenta"}


def fmt_time(ns: int) -> str:
    """A duration the way a person reads it: 812 ns, 35.2 µs, 16.3 ms, 2.41 s."""
    if ns < 1_000:
        return f"{ns} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def _line_label(line: LineReport) -> str:
    return f"{line.file}:{line.line}"


def render(report: Report, top: int = 20, color: bool = True, width: int = 120) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False
    )
    t, s = report.trace, report.summary
    console.print(Text(f"brrr-trace {report.tool_version} · {t.path}", style="bold"))
    for device in t.devices:
        name = device.name or "unknown GPU"
        peak = "" if device.peak else " (peak unknown)"
        console.print(f"GPU {device.id}: {name}{peak}")
    if s.gpu_utilization is None:
        console.print("No GPU activity in this trace: nothing to attribute.")
    else:
        span = s.gpu_busy_ns + s.gpu_idle_ns
        console.print(
            f"Span {fmt_time(span)} · busy {fmt_time(s.gpu_busy_ns)} · "
            f"idle {fmt_time(s.gpu_idle_ns)} · utilization "
            f"[bold]{100 * s.gpu_utilization:.1f}%[/bold] · {s.kernels} GPU ops"
        )
        causes = " · ".join(
            f"{cause} {fmt_time(s.idle_by_cause_ns[cause])}"
            for cause in IdleCause
            if s.idle_by_cause_ns.get(cause)
        )
        if causes:
            console.print(f"Idle by cause: {causes}")
        regimes = " · ".join(
            f"[{_REGIME_STYLE[r]}]{r}[/] {fmt_time(ns)} ({_pct(ns, span)})"
            for r, ns in s.time_by_regime_ns.items()
        )
        console.print(f"Time by regime: {regimes}")
        unplaced = s.unattributed_gpu_ns + s.unattributed_idle_ns
        if unplaced:
            console.print(
                f"Not on any source line: {fmt_time(unplaced)} ({_pct(unplaced, span)} of the span)"
            )
    if report.lines:
        _lines_table(console, report, top)
    if report.findings:
        console.print(Text("Top fixes", style="bold"))
        for finding in report.findings[:top]:
            console.print(
                f"  {finding.file}:{finding.line} [{finding.rule}] saves ~"
                f"{fmt_time(finding.est_savings_ns)}: {finding.fix}"
            )
    for problem in report.problems:
        console.print(f"[yellow]Problem[/] {problem.kind} ({problem.count}): {problem.detail}")
    for note in report.notes:
        console.print(f"[dim]Note: {note}[/]")
    return buffer.getvalue()


def _lines_table(console: Console, report: Report, top: int) -> None:
    span = report.summary.gpu_busy_ns + report.summary.gpu_idle_ns
    table = Table(title=f"Lines by time (top {min(top, len(report.lines))} of {len(report.lines)})")
    table.add_column("#", justify="right")
    table.add_column("line")
    table.add_column("function")
    table.add_column("regime")
    table.add_column("total", justify="right")
    table.add_column("share", justify="right")
    table.add_column("GPU", justify="right")
    table.add_column("idle", justify="right")
    table.add_column("kernels", justify="right")
    table.add_column("evidence")
    table.add_column("precision")
    for rank, line in enumerate(report.lines[:top], start=1):
        table.add_row(
            str(rank),
            _line_label(line),
            line.function,
            Text(str(line.regime), style=_REGIME_STYLE[line.regime]),
            fmt_time(line.total_ns),
            _pct(line.total_ns, span),
            fmt_time(line.gpu_ns),
            fmt_time(line.idle_ns),
            str(line.kernels),
            _evidence(line),
            str(line.precision),
        )
    console.print(table)


def _evidence(line: LineReport) -> str:
    parts = []
    if line.achieved_tflops is not None:
        parts.append(f"{line.achieved_tflops:.0f} TFLOP/s")
    if line.achieved_gbps is not None:
        parts.append(f"{line.achieved_gbps:.0f} GB/s")
    if line.peak_fraction is not None:
        parts.append(f"{100 * line.peak_fraction:.0f}% of peak")
    idle = [f"{c} {fmt_time(ns)}" for c, ns in line.idle_by_cause_ns.items() if ns]
    if idle:
        parts.append("idle: " + ", ".join(idle))
    if line.backward_gpu_ns:
        parts.append(f"backward {fmt_time(line.backward_gpu_ns)}")
    return "; ".join(parts)
