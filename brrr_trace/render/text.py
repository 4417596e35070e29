"""The report for a terminal: utilization, idle by cause, and the lines that cost the most."""

from __future__ import annotations

import io

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from brrr_trace import units
from brrr_trace.analyzers.crossrank import CrossRank
from brrr_trace.diff import Diff
from brrr_trace.report import Finding, LineReport, Report, RuleSaving, StepsReport
from brrr_trace.safe_text import terminal_safe
from brrr_trace.vocabulary import IdleCause, Precision, Regime

_REGIME_STYLE = {
    Regime.COMPUTE: "green",
    Regime.MEMORY: "cyan",
    Regime.OVERHEAD: "magenta",
    Regime.COMMUNICATION: "yellow",
}


def _plain(text: str, style: str = "") -> Text:
    """Trace text as a rich Text: no markup is parsed, no control character reaches the screen."""
    return Text(terminal_safe(text), style=style)


def _markup(text: str) -> str:
    """Trace text to embed in a markup string: neutralised, and ``[`` escaped."""
    return escape(terminal_safe(text))


def _steps_line(steps: StepsReport) -> str:
    line = (
        f"Steps: {steps.count} ProfilerStep(s), median {units.duration(steps.median_ns)}"
        f" (spread {units.duration(steps.spread_ns)})"
    )
    if steps.recorded_unprofiled_ns is not None:
        recorded, replayed = steps.recorded_unprofiled_ns, steps.replayed_ns
        line += f" · without the profiler {units.duration(recorded)} a step"
        parts = [
            part
            for part, scale in (
                ("its optimizer steps", steps.optimizer_profiler_cost_scale),
                ("its backward", steps.backward_profiler_cost_scale),
            )
            if scale is not None
        ]
        timed = f"timed by record, {' and '.join(parts)} too" if parts else "timed by record"
        if replayed is None or abs(replayed - recorded) <= 0.01 * recorded:
            line += f" ({timed}; savings replayed to match it)"
        else:  # a GPU-bound step, or a cost the model's scale cannot reach
            line += f" ({timed}; the savings' replay: {units.duration(replayed)} a step)"
    elif steps.replayed_ns is not None:
        line += f" · without the profiler's own cost ~{units.duration(steps.replayed_ns)} a step"
    return line


def _collectives_line(report: Report) -> str:
    """``Collectives: 12 calls (allreduce ×6, broadcast ×6) in 1 group · 45.7 MB · GPU
    kernels 71.5 ms · host-side 0 ns · on train.py:82``, with trace text escaped."""
    calls = report.collectives
    names: dict[str, int] = {}
    for call in calls:
        names[call.name] = names.get(call.name, 0) + 1
    what = ", ".join(f"{_markup(name)} ×{n}" for name, n in sorted(names.items()))
    groups = len({call.group for call in calls})
    moved = sum(call.bytes for call in calls if call.bytes is not None)
    kernels = sum(
        call.kernel_end_ns - call.kernel_start_ns
        for call in calls
        if call.kernel_start_ns is not None and call.kernel_end_ns is not None
    )
    host = sum(
        call.host_end_ns - call.host_start_ns for call in calls if call.kernel_start_ns is None
    )
    where: dict[str, int] = {}
    for call in calls:
        if call.line is not None:
            where[call.line] = where.get(call.line, 0) + 1
    lines = sorted(where.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ", ".join(_markup(line) for line, _ in lines[:3]) + (" …" if len(lines) > 3 else "")
    parts = [
        f"Collectives: {len(calls)} call{'s' if len(calls) != 1 else ''} ({what}) in {groups} "
        f"group{'s' if groups != 1 else ''}",
        f"{units.data_size(moved)}" if moved else "",
        f"GPU kernels {units.duration(kernels)}" if kernels else "",
        f"host-side (no kernel) {units.duration(host)}" if host else "",
        f"on {shown}" if shown else "",
    ]
    return " · ".join(p for p in parts if p)


def _per_step(finding: Finding | RuleSaving) -> str:
    per_step = finding.est_savings_per_step_ns
    shown = f" ({units.duration(per_step)} a step)" if per_step is not None else ""
    bounds = units.saving_range(finding.est_savings_ns, finding.est_savings_range_ns)
    return shown + (f" [{bounds} with the profiler's own cost uncertain]" if bounds else "")


def _line_label(line: LineReport) -> str:
    if line.precision is Precision.OP:
        return "(no Python stack)" if line.file == "<ops>" else line.file
    return f"{line.file}:{line.line}"


# Columns of a table are two cells apart (rich's padding, no outer edge).
_GAP = 2
# The least a shortened line label keeps: enough for "…/file.py:123 fn…".
_MIN_LABEL = 16
# An evidence column narrower than this goes under the label instead.
_MIN_EVIDENCE = 10


def shorten(place: str, rest: str, limit: int) -> str:
    """``place`` (a path, perhaps ``path:line``) and ``rest`` (`` function``) in at most
    ``limit`` characters: leading folders go first (``…/b/c.py:12 fn``), then the end of the
    function name (``fn…``), last the start of the file name. A number is never cut."""
    text = place + rest
    if cell_len(text) <= limit:
        return text
    parts = place.split("/")
    for first in range(1, len(parts)):
        candidate = "…/" + "/".join(parts[first:]) + rest
        if cell_len(candidate) <= limit:
            return candidate
    short = "…/" + parts[-1] if len(parts) > 1 else place
    room = limit - cell_len(short) - 2  # the space before the function and the "…" after it
    if rest.strip() and room >= 3:
        return short + " " + _cut(rest.strip(), room) + "…"
    if cell_len(short) <= limit:
        return short
    return "…" + _cut(short[::-1], limit - 1)[::-1]


def _cut(text: str, cells: int) -> str:
    """The start of ``text`` that fits in ``cells`` terminal cells."""
    out, used = [], 0
    for char in text:
        used += cell_len(char)
        if used > cells:
            break
        out.append(char)
    return "".join(out)


def _fit_label(widths: list[int], longest_label: int, width: int) -> tuple[int, int | None]:
    """The label's width and the evidence column's (None: under the label) for a table of
    ``width`` cells whose other columns are ``widths`` wide."""
    columns = len(widths) + 2
    room = width - sum(widths) - _GAP * (columns - 1)
    label = max(_MIN_LABEL, min(longest_label, room - _MIN_EVIDENCE))
    if room - label >= _MIN_EVIDENCE:
        return label, room - label
    # No room for evidence beside the label: it goes on the label's second line.
    room += _GAP
    return max(_MIN_LABEL, min(longest_label, room)), None


def _cell_width(header: str, cells: list[str]) -> int:
    return max([cell_len(header)] + [cell_len(cell) for cell in cells])


def render(report: Report, top: int = 20, color: bool = True, width: int = 130) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False
    )
    t, s = report.trace, report.summary
    console.print(_plain(f"brrr-trace {report.tool_version} · {t.path}", "bold"))
    for device in t.devices:
        name = device.name or "unknown GPU"
        peak = "" if device.peak else " (peak unknown)"
        console.print(_plain(f"GPU {device.id}: {name}{peak}"))
    if s.gpu_utilization is None:
        console.print(
            "No GPU activity in this trace: CPU time by line only (no GPU regime is claimed)."
            if report.lines
            else "No GPU activity in this trace: nothing to attribute."
        )
    else:
        span = s.gpu_busy_ns + s.gpu_idle_ns
        console.print(
            f"Span {units.duration(span)} · busy {units.duration(s.gpu_busy_ns)} · "
            f"idle {units.duration(s.gpu_idle_ns)} · utilization "
            f"[bold]{units.percent(s.gpu_utilization, decimals=1)}[/bold] · {s.kernels} GPU ops"
        )
        causes = " · ".join(
            f"{cause} {units.duration(s.idle_by_cause_ns[cause])}"
            for cause in IdleCause
            if s.idle_by_cause_ns.get(cause)
        )
        if causes:
            console.print(f"Idle by cause: {causes}")
        if s.profiler_overhead_ns:
            console.print(
                f"  of which ~{units.duration(s.profiler_overhead_ns)} is the profiler's own cost "
                "(estimated; left out of savings)"
            )
        regimes = " · ".join(
            f"[{_REGIME_STYLE[r]}]{r}[/] {units.duration(ns)} ({units.share(ns, span)})"
            for r, ns in s.time_by_regime_ns.items()
            if ns or r is not Regime.COMMUNICATION
        )
        console.print(f"Time by regime: {regimes}")
        if report.steps is not None:
            console.print(_steps_line(report.steps))
        if report.collectives:
            console.print(_collectives_line(report))
        unplaced = s.unattributed_gpu_ns + s.unattributed_idle_ns
        if unplaced:
            console.print(
                f"Not on any source line: {units.duration(unplaced)} "
                f"({units.share(unplaced, span)} of the span)"
            )
    if report.lines and s.gpu_utilization is None:
        _cpu_lines_table(console, report, top)
    elif report.lines:
        _lines_table(console, report, top)
    if report.cross_rank is not None:
        _cross_rank(console, report.cross_rank, top)
    if report.findings:
        console.print(Text("Top fixes", style="bold"))
        for finding in report.findings[:top]:
            console.print(
                f"  {_markup(finding.file)}:{finding.line} [bold]{_markup(finding.rule)}[/] "
                f"saves ~{units.duration(finding.est_savings_ns)}{_per_step(finding)}: "
                f"{_markup(finding.message)}. "
                f"Fix: {_markup(finding.fix)}"
            )
        for together in report.rule_savings:
            console.print(
                f"  all {together.findings} [bold]{_markup(together.rule)}[/] findings fixed "
                f"together save ~{units.duration(together.est_savings_ns)}{_per_step(together)} "
                "(replayed as one fix, not summed)"
            )
    for problem in report.problems:
        console.print(
            f"[yellow]Problem[/] {_markup(problem.kind)} ({problem.count}): "
            f"{_markup(problem.detail)}"
        )
    for note in report.notes:
        console.print(f"[dim]Note: {_markup(note)}[/]")
    return buffer.getvalue()


def _where(file: str, line: int, function: str) -> str:
    """A line of another rank: file:line, or for an op-level line (no stack) the op's name."""
    return f"{file}:{line}" if line else f"{file} ({function})"


def _cross_rank(console: Console, cross: CrossRank, top: int) -> None:
    console.print(
        Text(
            f"Across {len(cross.ranks)} ranks ({cross.matched_calls} collectives matched"
            + (f", {cross.unmatched_calls} calls unmatched" if cross.unmatched_calls else "")
            + ")",
            style="bold",
        )
    )
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("rank", "compute", "waiting", "moving data", "came last"):
        table.add_column(column, justify="right")
    table.add_column("waiting by step", justify="left")
    for r in cross.ranks:
        steps = " ".join(units.duration(s.wait_ns) for s in r.steps[:6])
        table.add_row(
            str(r.rank),
            units.duration(r.compute_ns),
            units.duration(r.wait_ns),
            units.duration(r.transfer_ns),
            str(r.late_calls),
            steps + (" …" if len(r.steps) > 6 else ""),
        )
    console.print(table)
    for late in cross.stragglers[:3]:
        where = ", ".join(
            f"{_markup(_where(ln.file, ln.line, ln.function))} +{units.duration(ln.excess_ns)}"
            for ln in late.lines
        )
        console.print(
            f"  Straggler: rank {late.rank} came last to {late.calls} collectives, late by "
            f"{units.duration(late.per_step_late_ns)} a step (median; at least "
            f"{units.duration(late.steady_late_ns)} in every step); the others waited "
            f"{units.duration(late.late_ns)} for it"
            + (f"; its late lines: {where}" if where else "")
        )
    spread = [s for s in cross.line_spread if s.max_ns > 0][: min(top, 10)]
    if spread:
        console.print("  Line spread across ranks (p50 / max, rank of the max):")
        for s in spread:
            console.print(
                f"    {_markup(_where(s.file, s.line, s.function))}  {units.duration(s.p50_ns)} / "
                f"{units.duration(s.max_ns)} (rank {s.max_rank})"
            )


_MARKER = {
    Precision.EXACT: "",
    Precision.RECOVERED: "",
    Precision.FUNCTION: " (def)",
    Precision.OP: " (op)",
}


def _table(title: str, report: Report, top: int) -> Table:
    shown = min(top, len(report.lines))
    return Table(
        title=f"{title} ({shown} of {len(report.lines)})",
        title_justify="left",
        box=None,
        pad_edge=False,
        header_style="bold",
    )


def _cpu_lines_table(console: Console, report: Report, top: int) -> None:
    """A trace without GPU activity: the host time of each line's top-level ops."""
    total = sum(line.cpu_ns for line in report.lines)
    shown = report.lines[:top]
    rows = [
        (
            str(rank),
            str(line.precision),
            units.duration(line.cpu_ns),
            units.share(line.cpu_ns, total),
        )
        for rank, line in enumerate(shown, start=1)
    ]
    headers = ("#", "precision", "CPU", "share")
    widths = [_cell_width(h, [row[i] for row in rows]) for i, h in enumerate(headers)]
    labels = [_line_parts(line) for line in shown]
    room = console.width - sum(widths) - _GAP * len(widths)
    longest = max([len("line")] + [cell_len(place + rest) for place, rest in labels])
    label_width = max(_MIN_LABEL, min(longest, room))
    table = _table("Lines by CPU time", report, top)
    table.add_column("#", justify="right", no_wrap=True, min_width=widths[0])
    table.add_column("line", no_wrap=True, overflow="fold")
    table.add_column("precision", no_wrap=True, min_width=widths[1])
    table.add_column("CPU", justify="right", no_wrap=True, min_width=widths[2])
    table.add_column("share", justify="right", no_wrap=True, min_width=widths[3])
    for row, (place, rest) in zip(rows, labels, strict=True):
        table.add_row(row[0], _plain(shorten(place, rest, label_width)), *row[1:])
    console.print(table)


def _line_parts(line: LineReport) -> tuple[str, str]:
    """A line's label as (place, `` function``), neutralised (as it is shown, escapes and all:
    that is the width it takes), for ``shorten``."""
    return terminal_safe(_line_label(line)), terminal_safe(
        f" {line.function}{_MARKER[line.precision]}"
    )


def _lines_table(console: Console, report: Report, top: int) -> None:
    span = report.summary.gpu_busy_ns + report.summary.gpu_idle_ns
    shown = report.lines[:top]
    rows = []
    for rank, line in enumerate(shown, start=1):
        rows.append(
            (
                str(rank),
                str(line.regime or Regime.OVERHEAD),  # a GPU trace's lines always have one
                units.duration(line.total_ns),
                units.share(line.total_ns, span),
                units.duration(line.gpu_ns),
                units.duration(line.idle_ns),
                str(line.kernels),
            )
        )
    headers = ["#", "regime", "total", "share", "GPU", "idle", "kernels"]
    widths = [_cell_width(h, [row[i] for row in rows]) for i, h in enumerate(headers)]
    labels = [_line_parts(line) for line in shown]
    longest = max([len("line")] + [cell_len(place + rest) for place, rest in labels])
    # Too narrow for every number: the split of the total goes before any number is cut.
    keep = list(range(len(headers)))
    for optional in (6, 3, 4, 5):  # kernels, share, GPU, idle
        if sum(widths[i] for i in keep) + _GAP * len(keep) + _MIN_LABEL <= console.width:
            break
        keep.remove(optional)
    label_width, evidence_width = _fit_label([widths[i] for i in keep], longest, console.width)
    table = _table("Lines by time", report, top)
    table.add_column("#", justify="right", no_wrap=True, min_width=widths[0])
    table.add_column("line", no_wrap=evidence_width is not None, overflow="fold")
    for i in keep[1:]:
        justify: JustifyMethod = "left" if headers[i] == "regime" else "right"
        table.add_column(headers[i], justify=justify, no_wrap=True, min_width=widths[i])
    if evidence_width is not None:
        table.add_column("evidence", overflow="fold", max_width=evidence_width)
    for line, row, (place, rest) in zip(shown, rows, labels, strict=True):
        regime = line.regime or Regime.OVERHEAD
        label = _plain(shorten(place, rest, label_width))
        evidence = _evidence(line)
        if evidence_width is None and evidence:
            label.append("\n" + evidence, style="dim")
        cells: list[Text | str] = [
            row[0],
            label,
            Text(row[1], style=_REGIME_STYLE[regime]),
            *(row[i] for i in keep[2:]),
        ]
        if evidence_width is not None:
            cells.append(Text(evidence))
        table.add_row(*cells)
    console.print(table)
    if any(line.precision is Precision.OP for line in report.lines[:top]):
        console.print(
            "[dim](op): no Python frame is known for this work; the row is its top-level op "
            "(and record_function region); record with with_stack=True or `brrr-trace record` "
            "for source lines[/]"
        )
    if any(line.precision is Precision.FUNCTION for line in report.lines[:top]):
        console.print(
            "[dim](def): only the function is known, shown on its def line; pass --source-root "
            "to place time on statements[/]"
        )


def _evidence(line: LineReport) -> str:
    """The numbers behind the regime: achieved rate vs the roof, or where the idle time went."""
    parts = []
    if line.regime is Regime.COMPUTE and line.achieved_tflops is not None:
        parts.append(units.tflops(line.achieved_tflops, whole=True))
    elif line.regime is Regime.MEMORY and line.achieved_gbps is not None:
        parts.append(units.bandwidth(line.achieved_gbps, whole_gb=True))
    if line.regime in (Regime.COMPUTE, Regime.MEMORY) and line.peak_fraction is not None:
        parts.append(f"{units.percent(line.peak_fraction)} of roofline")
    idle = sorted(((ns, cause) for cause, ns in line.idle_by_cause_ns.items() if ns), reverse=True)
    if line.regime is Regime.COMMUNICATION:
        busy = line.time_by_regime_ns[Regime.COMMUNICATION] - line.idle_by_cause_ns.get(
            IdleCause.COLLECTIVE, 0
        )
        if busy > 0:
            parts.append(f"collectives on the GPU {units.duration(busy)}")
        if idle:
            parts.append("idle " + ", ".join(f"{c} {units.duration(ns)}" for ns, c in idle[:2]))
    if line.regime is Regime.OVERHEAD:
        if idle:
            parts.append("idle " + ", ".join(f"{c} {units.duration(ns)}" for ns, c in idle[:2]))
        if line.kernels and line.time_by_regime_ns[Regime.OVERHEAD] > line.idle_ns:
            parts.append(f"{line.kernels} short kernels")
    if line.backward_gpu_ns:
        parts.append(f"backward {units.duration(line.backward_gpu_ns)}")
    return " · ".join(parts)


def render_diff(diff: Diff, top: int = 20, color: bool = True, width: int = 130) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False
    )
    b, a = diff.span_before_ns, diff.span_after_ns
    console.print(
        _plain(f"brrr-trace diff · {diff.before.trace.path} → {diff.after.trace.path}", "bold")
    )
    change = units.percent(a - b, b, decimals=1, signed=True) if b else "–"
    console.print(f"Span {units.duration(b)} → {units.duration(a)} ({change})")
    table = Table(
        box=None,
        pad_edge=False,
        header_style="bold",
        title_justify="left",
        title=f"Lines by change ({min(top, len(diff.lines))} of {len(diff.lines)})",
    )
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("line", "left"),
        ("before", "right"),
        ("after", "right"),
        ("change", "right"),
        ("regime", "left"),
        ("work ×", "right"),
        ("batch-size test", "left"),
    )
    shown = diff.lines[:top]
    rows = [
        (
            units.duration(c.before_ns) if c.before else "–",
            units.duration(c.after_ns) if c.after else "–",
            ("+" if c.delta_ns > 0 else "−" if c.delta_ns < 0 else "")
            + units.duration(abs(c.delta_ns)),
            " → ".join(str(r.regime) for r in (c.before, c.after) if r is not None),
            f"{c.work_ratio:.1f}" if c.work_ratio else "",
        )
        for c in shown
    ]
    widths = [
        _cell_width(name, [row[i] for row in rows]) for i, (name, _) in enumerate(columns[1:-1])
    ]
    longest = max(
        [len("line")] + [cell_len(terminal_safe(f"{c.file}:{c.line} {c.function}")) for c in shown]
    )
    label_width, verdict_width = _fit_label(widths, longest, console.width)
    table.add_column("line", no_wrap=True, overflow="fold")
    for (name, justify), width in zip(columns[1:-1], widths, strict=True):
        table.add_column(name, justify=justify, no_wrap=True, min_width=width)
    if verdict_width is not None:
        table.add_column("batch-size test", overflow="fold", max_width=verdict_width)
    for c, row in zip(shown, rows, strict=True):
        place, rest = terminal_safe(f"{c.file}:{c.line}"), terminal_safe(f" {c.function}")
        label = _plain(shorten(place, rest, label_width))
        verdict = c.verdict or c.why_no_verdict or ""
        if verdict_width is None and verdict:
            label.append("\n" + terminal_safe(verdict), style="dim")
            verdict = ""
        table.add_row(label, *row, *([_plain(verdict)] if verdict_width is not None else []))
    console.print(table)
    for finding in diff.resolved:
        console.print(
            f"[green]Resolved[/] {_markup(finding.rule)} at {_markup(finding.file)}:{finding.line} "
            f"(estimated {units.duration(finding.est_savings_ns)})"
        )
    for finding in diff.new:
        console.print(
            f"[yellow]New[/] {_markup(finding.rule)} at {_markup(finding.file)}:{finding.line}: "
            f"{_markup(finding.message)}"
        )
    return buffer.getvalue()
