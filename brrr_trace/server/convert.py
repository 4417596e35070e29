"""Report -> LSP types for a document: inlay hints, hovers, code lenses, diagnostics, fixes.

Pure functions of the snapshot, the document and the settings; with ``messages.py`` the only
modules of the server that word things for people (numbers through ``brrr_trace.units``).
Positions arrive as 1-based lines and code-point chars (see ``source.py``) and leave as LSP
positions: 0-based lines, and characters in the client's units (UTF-16 unless the client chose
UTF-8 or UTF-32), through pygls' codec.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from typing import Any

from lsprotocol import types as t

from brrr_trace import units
from brrr_trace.report import Finding, LineReport, Report, severity_of_saving
from brrr_trace.safe_text import markdown_code, markdown_text, terminal_safe
from brrr_trace.server import messages
from brrr_trace.server.actions import Edit, Fix, fix_for
from brrr_trace.server.names import CMD_SHOW_FIX, CMD_SHOW_FUNCTION
from brrr_trace.server.settings import Settings
from brrr_trace.server.snapshot import Snapshot
from brrr_trace.server.source import FunctionSpan, SourceIndex
from brrr_trace.vocabulary import IdleCause, Precision, Regime

SOURCE = "brrr-trace"

_PRECISION_NOTE = {
    Precision.EXACT: "exact: the trace records this call-site line",
    Precision.RECOVERED: (
        "recovered: the trace names only the function; the line was found by aligning its ops "
        "with the statements of the function body"
    ),
    Precision.FUNCTION: (
        "function: only the function is known, so its whole cost is shown on its first line"
    ),
    Precision.OP: "op: no Python frame is known; this is the top-level op that ran it",
}
_MAX_KERNEL_NAME = 72


# --- positions --------------------------------------------------------------------------------


class Positions:
    """Turns (1-based line, code-point char) into LSP positions in the client's units."""

    def __init__(self, index: SourceIndex, codec: Any) -> None:
        self.index = index
        self.codec = codec

    def at(self, line: int, char: int) -> t.Position:
        text = self.index.line_text(line) or ""
        return t.Position(line - 1, self.codec.client_num_units(text[:char]))

    def end_of_line(self, line: int) -> t.Position:
        return t.Position(line - 1, self.codec.client_num_units(self.index.line_text(line) or ""))

    def range(self, line: int, char: int, end_line: int, end_char: int) -> t.Range:
        return t.Range(self.at(line, char), self.at(end_line, end_char))


# --- kernel names and idle causes ------------------------------------------------------------


def short_kernel_name(name: str) -> str:
    """``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``at::native::reduce_kernel``."""
    text = name.strip()
    if "::" not in text and "<" not in text:
        return text if len(text) <= _MAX_KERNEL_NAME else text[: _MAX_KERNEL_NAME - 1] + "…"
    text = re.sub(r"^(void|__global__)\s+", "", text)
    cut = len(text)
    for mark in ("<", "("):
        at = text.find(mark)
        if 0 < at < cut:
            cut = at
    text = text[:cut].strip() or name
    return text if len(text) <= _MAX_KERNEL_NAME else text[: _MAX_KERNEL_NAME - 1] + "…"


def _dominant_idle(line: LineReport) -> tuple[IdleCause, int] | None:
    causes = [(ns, cause) for cause, ns in line.idle_by_cause_ns.items() if ns > 0]
    if not causes:
        return None
    ns, cause = max(causes, key=lambda item: (item[0], -list(IdleCause).index(item[1])))
    return cause, ns


# --- inlay hints ------------------------------------------------------------------------------


# VS Code cuts an inlay hint longer than this (``editor.inlayHints.maximumLength``'s default).
HINT_WIDTH = 43
# At most this many hints in one file: the rest are in the hover and the heat.
MAX_HINTS_PER_FILE = 40


def is_call_site(line: LineReport) -> bool:
    """Whether the line calls code of the user's (a model, a function) that took time."""
    return line.inclusive_ns > line.total_ns


def hint_time_ns(line: LineReport) -> int:
    """The time a line's hint shows: inclusive on a call site, else the line's own."""
    return line.inclusive_ns if is_call_site(line) else line.total_ns


def _mix(by_regime: dict[Regime, int]) -> list[tuple[Regime, int]]:
    """Regimes with time, largest first."""
    order = list(Regime)
    return sorted(
        ((r, ns) for r, ns in by_regime.items() if ns > 0),
        key=lambda item: (-item[1], order.index(item[0])),
    )


def hint_label(line: LineReport, span_ns: int) -> str:
    """``⏱ 17.9 ms · compute · 74%`` (the line's time, regime and share of the GPU span), or on a
    call site ``⏱ 17.1 ms incl. · overhead 71%`` (with what it calls, and the mix's largest
    part); at most ``HINT_WIDTH`` characters."""
    if line.regime is None:  # a trace without GPU activity
        return fit(f"⏱ {units.duration(line.cpu_ns)} CPU")
    if is_call_site(line):
        mix = _mix(line.inclusive_by_regime_ns)
        top = f" · {mix[0][0]} {units.percent(mix[0][1], line.inclusive_ns)}" if mix else ""
        return fit(f"⏱ {units.duration(line.inclusive_ns)} incl.{top}")
    share = f" · {units.percent(line.total_ns, span_ns)}" if span_ns > 0 else ""
    return fit(f"⏱ {units.duration(line.total_ns)} · {line.regime}{share}")


def fit(text: str, width: int = HINT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip(" ·") + "…"


def long_label(line: LineReport) -> str:
    """``16.3 ms · compute-bound · 808 TFLOP/s (82%)``: time, regime, and its best evidence."""
    if line.regime is None:
        return f"{units.duration(line.cpu_ns)} CPU"
    parts = [units.duration(line.total_ns), f"{line.regime}-bound"]
    peak = f" ({units.percent(line.peak_fraction)})" if line.peak_fraction is not None else ""
    if line.regime == Regime.COMPUTE and line.achieved_tflops is not None:
        parts.append(units.tflops(line.achieved_tflops) + peak)
    elif line.regime == Regime.MEMORY and line.achieved_gbps is not None:
        parts.append(units.bandwidth(line.achieved_gbps) + peak)
    elif line.regime == Regime.OVERHEAD and (idle := _dominant_idle(line)) is not None:
        parts.append(f"{idle[0]} idle {units.duration(idle[1])}")
    return " · ".join(parts)


def _bound(line: LineReport) -> str:
    return f"{line.regime}-bound" if line.regime is not None else "CPU only (no GPU activity)"


def hint_tooltip(line: LineReport, span_ns: int) -> str:
    """The whole text behind a short hint."""
    own = (
        f"This line: {long_label(line)}; {units.share(line.total_ns, span_ns)} of the profiled "
        f"GPU span: GPU {units.duration(line.gpu_ns)} in "
        f"{line.kernels} kernel{'s' if line.kernels != 1 else ''}, idle charged here "
        f"{units.duration(line.idle_ns)} ({line.precision} line)."
    )
    if not is_call_site(line):
        return own + " Hover for the evidence."
    mix = " · ".join(
        f"{r} {units.percent(ns, line.inclusive_ns)}" for r, ns in _mix(line.inclusive_by_regime_ns)
    )
    return (
        f"With the code it calls (forward and backward): {units.duration(line.inclusive_ns)}, "
        f"{units.share(line.inclusive_ns, span_ns)} of the profiled GPU span ({mix}). "
        + own
        + " Hover for the evidence."
    )


def hinted_lines(
    lines: Sequence[LineReport], span_ns: int, threshold: float, share: float
) -> list[LineReport]:
    """The lines of one file that matter there: at least ``share`` of the file's hottest line
    (by its own time), at least ``threshold`` of the span, ``MAX_HINTS_PER_FILE`` at most."""
    if span_ns <= 0 or not lines:
        return []
    hottest = max(line.total_ns for line in lines)
    cut = max(share * hottest, threshold * span_ns)
    kept = [ln for ln in lines if hint_time_ns(ln) > 0 and hint_time_ns(ln) >= cut]
    kept.sort(key=lambda ln: -hint_time_ns(ln))
    return sorted(kept[:MAX_HINTS_PER_FILE], key=lambda ln: ln.line)


def inlay_hints(
    lines: Sequence[LineReport],
    span_ns: int,
    threshold: float,
    positions: Positions,
    share: float = 0.0,
) -> list[t.InlayHint]:
    """One short hint at the end of each line that matters in this file, the whole text in its
    tooltip."""
    hints = []
    for line in hinted_lines(lines, span_ns, threshold, share):
        if positions.index.line_text(line.line) is None:
            continue  # the document is shorter than the trace says: edited since recording
        hints.append(
            t.InlayHint(
                position=positions.end_of_line(line.line),
                label=hint_label(line, span_ns),
                tooltip=hint_tooltip(line, span_ns),
                padding_left=True,
            )
        )
    return hints


# --- heat -------------------------------------------------------------------------------------


def heat(lines: Sequence[LineReport], positions: Positions) -> list[dict[str, Any]]:
    """Per line with time: its own time over that of the file's hottest line (0..1], and its
    regime, for the editor's line backgrounds (0-based lines)."""
    measured = [ln for ln in lines if ln.total_ns > 0 and positions.index.line_text(ln.line)]
    if not measured:
        return []
    hottest = max(ln.total_ns for ln in measured)
    return [
        {
            "line": ln.line - 1,
            "weight": round(ln.total_ns / hottest, 4),
            "regime": str(ln.regime) if ln.regime is not None else None,
            "ns": ln.total_ns,
        }
        for ln in measured
    ]


def hints_in_range(hints: list[t.InlayHint], first: int, last: int) -> list[t.InlayHint]:
    """The hints (in line order) on 0-based lines ``first..last``."""
    lo = bisect.bisect_left(hints, first, key=lambda h: h.position.line)
    hi = bisect.bisect_right(hints, last, key=lambda h: h.position.line)
    return hints[lo:hi]


# --- hover ------------------------------------------------------------------------------------


def _device_line(report: Report) -> tuple[str, dict[str, Any] | None]:
    device = report.trace.devices[0] if report.trace.devices else None
    if device is None:
        return "unknown GPU", None
    return markdown_text(device.name) if device.name else "unknown GPU", device.peak


def hover_markdown(
    line: LineReport, report: Report, span_ns: int, findings: Sequence[Finding], trace_name: str
) -> str:
    out = [
        f"**brrr-trace** · {markdown_code(line.function)} line {line.line} · **{_bound(line)}** · "
        f"**{units.duration(line.total_ns)}** "
        f"({units.share(line.total_ns, span_ns)} of the GPU span)",
        *_inclusive_text(line, span_ns),
        "",
        "| regime | time | share of the line |",
        "| :-- | --: | --: |",
    ]
    for regime in Regime:
        ns = line.time_by_regime_ns.get(regime, 0)
        if regime is Regime.COMMUNICATION and not ns:
            continue  # a line with no collective: the three regimes of a single GPU
        out.append(f"| {regime} | {units.duration(ns)} | {units.share(ns, line.total_ns)} |")
    out.append("")
    idle = [(c, ns) for c, ns in line.idle_by_cause_ns.items() if ns > 0]
    idle_text = ", ".join(f"{cause} {units.duration(ns)}" for cause, ns in idle)
    out.append(
        f"GPU busy {units.duration(line.gpu_ns)} in {line.kernels} kernel"
        f"{'s' if line.kernels != 1 else ''} · GPU idle charged here {units.duration(line.idle_ns)}"
        + (f" ({idle_text})" if idle_text else "")
        + (
            f", of which about {units.duration(line.profiler_overhead_ns)} "
            "is the profiler's own cost"
            if line.profiler_overhead_ns
            else ""
        )
        + f" · CPU {units.duration(line.cpu_ns)}"
        + (f" · backward {units.duration(line.backward_gpu_ns)}" if line.backward_gpu_ns else "")
    )
    if line.top_kernels:
        out += ["", "**Kernels**", ""]
        for kernel in line.top_kernels:
            out.append(
                f"- {markdown_code(short_kernel_name(kernel.name))} ({kernel.kind}) "
                f"×{kernel.count} — "
                f"{units.duration(kernel.total_ns)}"
            )
    out += ["", _roofline_text(line, report)]
    spread = _spread_text(line, report)
    if spread:
        out += ["", spread]
    if findings:
        out += ["", "**Findings**", ""]
        for finding in findings:
            out.append(
                f"- {markdown_code(finding.rule)} "
                f"(saves ~{units.duration(finding.est_savings_ns)}"
                f"{_range_note(finding)}): "
                f"{markdown_text(finding.message)} *Fix:* {markdown_text(finding.fix)}"
            )
    out += ["", f"*Line {_PRECISION_NOTE.get(line.precision, str(line.precision))}.*"]
    out.append(f"*Trace:* {markdown_code(trace_name)}")
    return "\n".join(out)


def _inclusive_text(line: LineReport, span_ns: int) -> list[str]:
    """On a call site: the time with the code it calls, and that time's regime mix."""
    if not is_call_site(line):
        return []
    mix = " · ".join(
        f"{r} {units.percent(ns, line.inclusive_ns)}" for r, ns in _mix(line.inclusive_by_regime_ns)
    )
    return [
        "",
        f"With the code it calls (forward and backward): **{units.duration(line.inclusive_ns)}** "
        f"({units.share(line.inclusive_ns, span_ns)} of the GPU span; {mix})",
    ]


def _spread_text(line: LineReport, report: Report) -> str | None:
    """The line across the run's ranks: its median and slowest rank (a folder of ranks)."""
    cross = report.cross_rank
    if cross is None:
        return None
    for s in cross.line_spread:
        if (s.file, s.line, s.function) == (line.file, line.line, line.function):
            return (
                f"**Across {len(cross.ranks)} ranks:** p50 {units.duration(s.p50_ns)} · max "
                f"{units.duration(s.max_ns)} (rank {s.max_rank}) · on {s.ranks} of "
                f"{len(cross.ranks)} ranks"
            )
    return None


def _roofline_text(line: LineReport, report: Report) -> str:
    device, peak = _device_line(report)
    rates = []
    if line.achieved_tflops is not None:
        rates.append(f"{units.tflops(line.achieved_tflops)} achieved")
    if line.achieved_gbps is not None:
        hbm = peak.get("hbm_gbps") if peak else None
        of_hbm = f" (HBM peak {units.bandwidth(hbm)})" if isinstance(hbm, (int, float)) else ""
        rates.append(f"{units.bandwidth(line.achieved_gbps)} achieved{of_hbm}")
    if line.peak_fraction is not None:
        rates.append(f"{units.percent(line.peak_fraction)} of the roofline")
    if line.intensity is not None:
        ridge = f" (ridge {line.ridge:.0f})" if line.ridge is not None else ""
        rates.append(f"intensity {line.intensity:.1f} FLOP/byte{ridge}")
    if not rates:
        return (
            f"**Roofline** ({device}): no FLOP or byte counts for this line's kernels, "
            "so achieved rates are not known."
        )
    return f"**Roofline** ({device}): " + " · ".join(rates)


def function_total_ns(lines: Iterable[LineReport]) -> int:
    """A function's time with what it calls: its lines' own time, inclusive on call sites."""
    return sum(hint_time_ns(line) for line in lines)


def function_markdown(
    function: FunctionSpan, lines: Sequence[LineReport], span_ns: int, trace_name: str
) -> str:
    total = function_total_ns(lines)
    own = sum(line.total_ns for line in lines)
    out = [
        f"**brrr-trace** · {markdown_code(function.qualname)} · **{units.duration(total)}** "
        f"({units.share(total, span_ns)} of the GPU span) · {regime_mix(lines)}",
        "",
        f"Its own lines {units.duration(own)}; with the code they call {units.duration(total)}.",
        "",
        "| line | regime | time | with callees |",
        "| --: | :-- | --: | --: |",
    ]
    for line in sorted(lines, key=lambda r: -hint_time_ns(r)):
        out.append(
            f"| {line.line} | {line.regime or 'CPU only'} | {units.duration(line.total_ns)} | "
            f"{units.duration(hint_time_ns(line))} |"
        )
    out += ["", f"*Trace:* {markdown_code(trace_name)}"]
    return "\n".join(out)


def hover(snapshot: Snapshot, path: str, positions: Positions, line: int) -> t.Hover | None:
    """The evidence of a 1-based line; on a ``def`` line without its own, the function's lines."""
    name = messages.trace_name(snapshot.trace.path)
    report_line = snapshot.line_at(path, line)
    if report_line is not None:
        findings = [f for f in snapshot.findings(path) if f.line == line]
        markdown = hover_markdown(report_line, snapshot.report, snapshot.span_ns, findings, name)
        return _hover(markdown, positions, line)
    function = positions.index.function_defined_on(line)
    lines = snapshot.function_lines(path, function) if function else ()
    if function is None or not lines:
        return None
    return _hover(function_markdown(function, lines, snapshot.span_ns, name), positions, line)


def function_text(snapshot: Snapshot, path: str, index: SourceIndex, def_line: Any) -> str | None:
    """What ``brrr-trace.showFunction`` shows for the function defined on a 1-based line."""
    function = index.function_defined_on(def_line)
    if function is None:
        return None
    lines = snapshot.function_lines(path, function)
    name = messages.trace_name(snapshot.trace.path)
    return function_markdown(function, lines, snapshot.span_ns, name)


def _hover(markdown: str, positions: Positions, line: int) -> t.Hover:
    start, end = positions.index.code_span(line)
    return t.Hover(
        contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=markdown),
        range=positions.range(line, start, line, end),
    )


# --- code lenses ------------------------------------------------------------------------------


def regime_mix(lines: Iterable[LineReport]) -> str:
    """The regimes of the lines' time, inclusive on call sites."""
    totals = dict.fromkeys(Regime, 0)
    for line in lines:
        own = line.inclusive_by_regime_ns if is_call_site(line) else line.time_by_regime_ns
        for regime, ns in own.items():
            totals[regime] += ns
    whole = sum(totals.values())
    if not whole:
        return "no GPU time"
    return " · ".join(f"{r} {units.percent(ns, whole)}" for r, ns in totals.items() if ns > 0)


def code_lens(
    function: FunctionSpan, lines: Sequence[LineReport], uri: str, positions: Positions
) -> t.CodeLens:
    total = function_total_ns(lines)
    title = f"⏱ {units.duration(total)} in {function.name} · {regime_mix(lines)}"
    return t.CodeLens(
        range=positions.range(
            function.def_line, function.def_char, function.def_line, function.def_char
        ),
        command=t.Command(
            title=title, command=CMD_SHOW_FUNCTION, arguments=[uri, function.def_line]
        ),
    )


def code_lenses(snapshot: Snapshot, path: str, positions: Positions, uri: str) -> list[t.CodeLens]:
    """A lens on the ``def`` line of each function whose own lines took time."""
    if not snapshot.lines(path):
        return []  # nothing measured here: no need to parse the document for its functions
    lenses = []
    for function in positions.index.functions:
        lines = snapshot.function_lines(path, function)
        if lines and function_total_ns(lines) > 0:
            lenses.append(code_lens(function, lines, uri, positions))
    return lenses


# --- diagnostics ------------------------------------------------------------------------------


_SEVERITY = {
    "error": t.DiagnosticSeverity.Error,
    "warning": t.DiagnosticSeverity.Warning,
    "information": t.DiagnosticSeverity.Information,
    "info": t.DiagnosticSeverity.Information,
    "hint": t.DiagnosticSeverity.Hint,
}


def severity(finding: Finding, span_ns: int, settings: Settings) -> t.DiagnosticSeverity:
    """By the share of the span the fix would save: the report's words, or the user's cut-offs."""
    own = _SEVERITY.get(finding.severity.lower())
    if own is not None and settings.warning_share is None and settings.information_share is None:
        return own
    return _SEVERITY[
        severity_of_saving(finding.est_savings_ns, span_ns, *settings.severity_shares())
    ]


def _range_note(finding: Finding) -> str:
    bounds = units.saving_range(finding.est_savings_ns, finding.est_savings_range_ns)
    return f"; {bounds} with the profiler's own cost uncertain" if bounds else ""


def diagnostic_message(finding: Finding, span_ns: int) -> str:
    saving = f"est. saving {units.duration(finding.est_savings_ns)}"
    if span_ns > 0:
        saving += f", {units.share(finding.est_savings_ns, span_ns)} of the profiled GPU span"
    saving += _range_note(finding)
    return f"{terminal_safe(finding.message.rstrip())} ({saving})"


def diagnostics(
    finding: Finding, span_ns: int, settings: Settings, positions: Positions, uri: str
) -> list[t.Diagnostic]:
    """One diagnostic on the finding's line, and one on each other line it covers (a chain of
    ops, attention written over several lines), each pointing at the others."""
    lines = [n for n in (finding.lines or (finding.line,)) if positions.index.line_text(n)]
    out = []
    for number in lines:
        own = diagnostic(finding, span_ns, settings, positions, number)
        if own is None:
            continue
        if len(lines) > 1:
            own.related_information = [
                t.DiagnosticRelatedInformation(
                    location=t.Location(
                        uri=uri, range=positions.range(*positions.index.statement_range(other))
                    ),
                    message=f"{finding.rule}: line {other}",
                )
                for other in lines
                if other != number
            ]
        out.append(own)
    return out


def document_diagnostics(
    snapshot: Snapshot, path: str, settings: Settings, positions: Positions, uri: str
) -> list[t.Diagnostic]:
    """The diagnostics of every finding in one document."""
    return [
        d
        for f in snapshot.findings(path)
        for d in diagnostics(f, snapshot.span_ns, settings, positions, uri)
    ]


def diagnostic(
    finding: Finding,
    span_ns: int,
    settings: Settings,
    positions: Positions,
    line: int | None = None,
) -> t.Diagnostic | None:
    line = finding.line if line is None else line
    if positions.index.line_text(line) is None:
        return None
    return t.Diagnostic(
        range=positions.range(*positions.index.statement_range(line)),
        message=diagnostic_message(finding, span_ns),
        severity=severity(finding, span_ns, settings),
        code=finding.rule,
        code_description=t.CodeDescription(
            href=settings.rules_docs_url.replace("{rule}", finding.rule)
        ),
        source=SOURCE,
        data={"rule": finding.rule, "line": finding.line},
    )


# --- code actions -----------------------------------------------------------------------------


def code_actions(
    snapshot: Snapshot,
    path: str,
    positions: Positions,
    settings: Settings,
    uri: str,
    lines: tuple[int, int],
    sent: Sequence[t.Diagnostic],
) -> list[t.CodeAction]:
    """A quick fix for each finding on 1-based lines ``lines``: the edit, or how to fix it.

    Each action names the diagnostics the client sent for its finding, else the server's own.
    """
    first, last = lines
    actions = []
    for finding in snapshot.findings(path):
        if not first <= finding.line <= last:
            continue
        mine = [
            d
            for d in sent
            if d.source == SOURCE
            and d.code == finding.rule
            and d.range.start.line == finding.line - 1
        ]
        own = diagnostic(finding, snapshot.span_ns, settings, positions)
        named = mine or ([own] if own else [])
        fix = fix_for(finding.rule, positions.index, finding.line)
        if fix is not None:
            actions.append(fix_action(fix, uri, named, positions))
        else:
            actions.append(explain_action(finding, uri, named))
    return actions


def _fix_title(fix: Fix) -> str:
    if fix.rule == "unfused-optimizer":
        return f"brrr-trace: use {fix.change} in {fix.target}(...)"
    if fix.rule == "pageable-memcpy":
        return "brrr-trace: copy from pinned memory with non_blocking=True"
    if fix.rule == "fp32-matmul":
        return f"brrr-trace: allow TF32 matmuls ({fix.target})"
    return f"brrr-trace: fix {fix.rule}"


def text_edit(edit: Edit, positions: Positions) -> t.TextEdit:
    return t.TextEdit(
        range=positions.range(edit.line, edit.char, edit.end_line, edit.end_char),
        new_text=edit.text,
    )


def fix_action(
    fix: Fix, uri: str, diagnostics: list[t.Diagnostic], positions: Positions
) -> t.CodeAction:
    return t.CodeAction(
        title=_fix_title(fix),
        kind=t.CodeActionKind.QuickFix,
        diagnostics=diagnostics or None,
        is_preferred=True,
        edit=t.WorkspaceEdit(changes={uri: [text_edit(e, positions) for e in fix.edits]}),
    )


def explain_action(finding: Finding, uri: str, diagnostics: list[t.Diagnostic]) -> t.CodeAction:
    title = f"brrr-trace: how to fix {finding.rule}"
    arguments = [
        {
            "uri": uri,
            "line": finding.line,
            "rule": finding.rule,
            "message": finding.message,
            "fix": finding.fix,
            "estSavingsNs": finding.est_savings_ns,
        }
    ]
    return t.CodeAction(
        title=title,
        kind=t.CodeActionKind.QuickFix,
        diagnostics=diagnostics or None,
        command=t.Command(title=title, command=CMD_SHOW_FIX, arguments=arguments),
    )


def fix_explanation(argument: Any) -> str:
    """The text ``brrr-trace.showFix`` shows, from the argument ``explain_action`` put in."""
    if not isinstance(argument, dict):
        return "brrr-trace: no fix to show."
    rule, fix = argument.get("rule", "?"), argument.get("fix", "")
    saving = argument.get("estSavingsNs")
    where = f" (line {argument['line']})" if isinstance(argument.get("line"), int) else ""
    text = terminal_safe(f"brrr-trace · {rule}{where}: {fix}")
    if isinstance(saving, int) and saving > 0:
        text += f" Estimated saving: {units.duration(saving)}."
    return text
