"""The report as one self-contained HTML page (docs/html-report.md), and its parts for reuse.

Nothing is fetched: the style and the two scripts are this package's (``render/assets/``), put
inline and allowed by their SHA-256 in a Content-Security-Policy that allows nothing else.
Every trace string (kernel, file, function and device names, paths, messages that quote them)
reaches the page one of three ways, each escaped: as HTML text or an attribute value
(``html.escape`` after ``terminal_safe``), or inside the timeline's data, a
``<script type="application/json">`` block whose ``<``, ``>``, ``&`` and line separators are
``\\u`` escapes, so it can never close its element. No event handler is written in the markup;
the scripts read trace strings from data attributes and write them with ``textContent``.

``timeline_fragment`` + ``TIMELINE_SCRIPT`` (and its message protocol, in the script's header)
are the timeline alone, for an editor webview (issue #16).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from brrr_trace import units
from brrr_trace.analyzers.safe_read import SourceSkipped, read_source
from brrr_trace.analyzers.timeline_data import timeline_data
from brrr_trace.analyzers.timeline_view import TimelineView
from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Finding, LineReport, Report
from brrr_trace.safe_text import terminal_safe
from brrr_trace.vocabulary import IdleCause, Precision, Regime

_CONTEXT_LINES = 3  # source lines shown above and below a hot line
_SNIPPET_LINES = 40  # hot lines that get their source shown
_OPEN_LINES = 3  # of them, shown open
_TABLE_ROWS = 300  # lines in the lines table; the JSON report has them all
_CAUSES = tuple(str(c) for c in IdleCause)


@cache
def _asset(name: str) -> str:
    text = (resources.files("brrr_trace.render") / "assets" / name).read_text(encoding="utf-8")
    # An inline script or style is cut short by its closing tag; ours must not hold one.
    assert "</script" not in text.lower() and "</style" not in text.lower(), name
    return text


def timeline_script() -> str:
    """The timeline's script (render/assets/timeline.js): draws every ``.brrr-timeline``."""
    return _asset("timeline.js")


def report_style() -> str:
    """The page's style, the timeline's ``.brrr-tl-*`` rules among it."""
    return _asset("report.css")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def content_security_policy(scripts: Sequence[str], styles: Sequence[str]) -> str:
    """Nothing may load; only these exact inline scripts and styles may run or apply."""
    script_src = " ".join(_sha256(s) for s in scripts) or "'none'"
    style_src = " ".join(_sha256(s) for s in styles) or "'none'"
    return (
        f"default-src 'none'; script-src {script_src}; style-src {style_src}; "
        "base-uri 'none'; form-action 'none'"
    )


def _t(value: object) -> str:
    """Trace text as HTML text or an attribute value."""
    return html.escape(terminal_safe(str(value)), quote=True)


def script_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script type="application/json">`` element."""
    encoded = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    # ensure_ascii already wrote U+2028/9 as escapes; the markup characters are all that remain.
    return encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def timeline_fragment(view: TimelineView, element_id: str = "timeline") -> str:
    """The timeline's element with its data; ``timeline_script()`` draws it. No script runs from
    the fragment itself, so a host page (or webview) decides what its policy allows."""
    return (
        f'<div class="brrr-timeline" id="{_t(element_id)}">'
        '<script type="application/json" class="brrr-timeline-data">'
        f"{script_json(timeline_data(view))}</script></div>"
    )


def _legend() -> str:
    items = [("busy", "GPU busy (kernels, copies)")] + [(c, f"idle: {c}") for c in _CAUSES]
    return (
        '<div class="brrr-legend">'
        + "".join(f'<span><i class="brrr-swatch-{k}"></i>{_t(label)}</span>' for k, label in items)
        + "<span>merged runs: busy share drawn from the bottom</span>"
        "<span>▬ under a segment: the line picked in the lines table</span></div>"
    )


def _d(ns: int) -> str:
    return _t(units.duration(int(ns)))


def _share(part: float, whole: float) -> str:
    return _t(units.share(part, whole))


def _line_label(file: str, line: int, precision: Precision | None = None) -> str:
    if precision is Precision.OP:
        return "(no Python stack)" if file == "<ops>" else file
    return f"{file}:{line}"


def _card(value: str, label: str) -> str:
    return f'<div class="brrr-card"><b>{value}</b><span>{label}</span></div>'


def _bar(part: int, whole: int, css: str) -> str:
    width = 0 if whole <= 0 else max(0.0, min(1.0, part / whole)) * 200
    return (
        f'<svg class="brrr-bar" width="200" height="9" role="img"><rect width="200" height="9" '
        f'fill="#eceef1"/><rect width="{width:.1f}" height="9" fill="{css}"/></svg>'
    )


_CAUSE_FILL = {
    "sync": "#d33f3f",
    "dataloader": "#e0861b",
    "host": "#c4a000",
    "launch": "#8d62cf",
    "other": "#9aa0a6",
}
_REGIME_FILL = {"compute": "#1f7a3a", "memory": "#a15c00", "overhead": "#b3261e"}


def _top_regime(report: Report) -> str:
    """The regime with the most time, "–" when no time is in any."""
    top = max(report.summary.time_by_regime_ns.items(), key=lambda kv: kv[1], default=None)
    return str(top[0]) if top and top[1] else "–"


def _summary(report: Report) -> str:
    t, s = report.trace, report.summary
    cards = [
        _card(_d(t.span_ns), "GPU span"),
        _card(_d(s.gpu_busy_ns), "GPU busy"),
        _card(_d(s.gpu_idle_ns), "GPU idle"),
        _card(
            _t(units.percent(s.gpu_utilization, decimals=1))
            if s.gpu_utilization is not None
            else "–",
            "utilization",
        ),
        _card(_t(f"{s.kernels:,}"), "GPU ops"),
        _card(_t(_top_regime(report)), "mostly bound by"),
    ]
    if report.steps is not None:
        cards.append(_card(_t(report.steps.count), "ProfilerSteps"))
    idle_rows = "".join(
        f"<tr><td>{_t(c)}</td><td class='num'>{_d(ns)}</td><td class='num'>"
        f"{_share(ns, s.gpu_idle_ns)}</td>"
        f"<td>{_bar(ns, s.gpu_idle_ns, _CAUSE_FILL.get(str(c), '#9aa0a6'))}</td></tr>"
        for c, ns in s.idle_by_cause_ns.items()
    )
    regime_rows = "".join(
        f"<tr><td class='brrr-regime-{_t(r)}'>{_t(r)}</td><td class='num'>{_d(ns)}</td>"
        f"<td class='num'>{_share(ns, t.span_ns)}</td><td>"
        f"{_bar(ns, t.span_ns, _REGIME_FILL.get(str(r), '#9aa0a6'))}</td></tr>"
        for r, ns in s.time_by_regime_ns.items()
    )
    devices = "".join(
        f"<li>GPU {_t(d.id)}: {_t(d.name or 'unknown GPU')}"
        + (f" (peaks: {_t(d.peak.get('name', ''))})" if d.peak and d.peak.get("name") else "")
        + "</li>"
        for d in t.devices
    )
    facts = [
        ("trace", _t(t.path)),
        ("torch", _t(t.torch_version or "not recorded")),
        ("Python stacks", "yes" if t.has_python_stacks else "no"),
        ("shapes", "yes" if t.has_shapes else "no"),
        ("unattributed GPU time", _d(s.unattributed_gpu_ns)),
        ("unattributed idle", _d(s.unattributed_idle_ns)),
        ("profiler's own cost (estimated, in idle)", _d(s.profiler_overhead_ns)),
    ]
    return (
        '<section id="summary" data-kernels="' + _t(s.kernels) + '"><h2>Summary</h2>'
        f'<div class="brrr-cards">{"".join(cards)}</div>'
        + '<div class="brrr-grid"><div><h3>Idle by cause</h3><table><thead><tr><th>cause</th>'
        "<th class='num'>time</th><th class='num'>of idle</th><th></th></tr></thead><tbody>"
        + idle_rows
        + "</tbody></table></div><div><h3>Time by regime</h3><table><thead><tr><th>regime</th>"
        "<th class='num'>time</th><th class='num'>of span</th><th></th></tr></thead><tbody>"
        + regime_rows
        + "</tbody></table></div></div>"
        + (f"<ul>{devices}</ul>" if devices else "")
        + "<dl class='brrr-facts'>"
        + "".join(f"<div><dt>{k}</dt><dd>{v}</dd></div>" for k, v in facts)
        + "</dl></section>"
    )


def _timeline_section(report: Report) -> str:
    view = report.timeline
    if view is None or not view.devices:
        return ('<section id="timeline-section"><h2>Timeline</h2><p>No GPU activity to draw.'
                "</p></section>")  # fmt: skip
    notes = []
    for d in view.devices:
        if d.merged:
            mixed = sum(1 for k in d.seg_kind if k == "mixed")
            notes.append(
                f"GPU {_t(d.device)}: {d.ops:,} kernel pieces and {d.gaps:,} gaps are more than "
                f"the {view.budget:,} segments drawn per device, so runs of short ones are "
                f"merged into {mixed:,} mixed segments (each keeps its busy time, counts and "
                "the line of its longest piece); every segment longer than the merge resolution "
                "is drawn whole."
            )
        else:
            notes.append(
                f"GPU {_t(d.device)}: {d.ops:,} kernel pieces and {d.gaps:,} gaps, all drawn."
            )
    return (
        '<section id="timeline-section"><h2>Timeline</h2>'
        "<p class='brrr-sub'>Per device: each kernel's exclusive share of the busy time (where "
        "streams overlap, the op that adds it) and each idle gap, coloured by its cause. Click "
        "a kernel or a gap to see its line; click a row of the lines table to mark its "
        "kernels and gaps.</p>"
        + _legend()
        + timeline_fragment(view)
        + "".join(f"<p class='brrr-sub'>{n}</p>" for n in notes)
        + "</section>"
    )


def _steps_section(report: Report) -> str:
    steps = report.steps
    if steps is None:
        return ""
    windows = report.timeline.steps if report.timeline is not None else ()
    rows = []
    for k, ns in enumerate(steps.durations_ns):
        w = windows[k] if k < len(windows) else None
        idle = "".join(
            f"<td class='num'>{_d(w.idle_by_cause_ns.get(c, 0)) if w else '–'}</td>"
            for c in _CAUSES
        )
        attrs = f' data-start="{w.start_ns}" data-end="{w.end_ns}"' if w else ""
        rows.append(
            f'<tr class="brrr-step"{attrs} data-duration-us="{round(ns / 1000, 3)}">'
            f"<td>{k + 1}</td><td class='num'>{_d(ns)}</td>"
            f"<td class='num'>{_d(w.busy_ns) if w else '–'}</td>"
            f"<td class='num'>{_share(w.busy_ns, ns) if w else '–'}</td>{idle}</tr>"
        )
    replayed = (
        f"; replayed without the profiler's own cost ~{_d(steps.replayed_ns)} a step"
        if steps.replayed_ns is not None
        else ""
    )
    return (
        f'<section id="steps" data-count="{steps.count}"><h2>Steps</h2>'
        f"<p class='brrr-sub'>{steps.count} ProfilerStep(s), median {_d(steps.median_ns)}, "
        f"spread {_d(steps.spread_ns)}{replayed}. Click a step to show it in the timeline.</p>"
        "<table><thead><tr><th>step</th><th class='num'>time</th><th class='num'>GPU busy</th>"
        "<th class='num'>busy share</th>"
        + "".join(f"<th class='num'>idle: {c}</th>" for c in _CAUSES)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


class _Sources:
    """Source files read once each, through safe_read, only where the mapper found them."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._text: dict[str, list[str] | None] = {}

    def lines(self, path: str | None) -> list[str] | None:
        if path is None:
            return None
        if path not in self._text:
            try:
                self._text[path] = read_source(path, self.max_bytes).splitlines()
            except (SourceSkipped, OSError, ValueError):
                self._text[path] = None
        return self._text[path]

    def snippet(self, path: str | None, line: int) -> str:
        text = self.lines(path)
        if not text or not 1 <= line <= len(text):
            return ""
        lo, hi = max(1, line - _CONTEXT_LINES), min(len(text), line + _CONTEXT_LINES)
        width = len(str(hi))
        out = []
        for n in range(lo, hi + 1):
            shown = _t(f"{n:>{width}}  {text[n - 1]}")
            out.append(f'<span class="brrr-hot">{shown}</span>' if n == line else shown)
        return '<pre class="brrr-source">' + "\n".join(out) + "</pre>"


def _evidence(line: LineReport) -> str:
    parts = []
    if line.intensity is not None:
        ridge = f" (ridge {line.ridge:.1f})" if line.ridge is not None else ""
        parts.append(f"intensity {line.intensity:.1f} FLOP/B{ridge}")
    if line.achieved_tflops is not None:
        parts.append(units.tflops(line.achieved_tflops))
    if line.achieved_gbps is not None:
        parts.append(units.bandwidth(line.achieved_gbps))
    if line.peak_fraction is not None:
        parts.append(f"{units.percent(line.peak_fraction)} of its roofline")
    idle = [f"{c} {units.duration(ns)}" for c, ns in line.idle_by_cause_ns.items() if ns]
    if idle:
        parts.append("idle: " + ", ".join(idle))
    if line.kernels:
        parts.append(
            f"{line.kernels:,} kernels, mean {units.duration(line.gpu_ns // line.kernels)}"
        )
    return _t(" · ".join(parts))


def _lines_section(report: Report, sources: _Sources) -> str:
    rows = []
    for rank, line in enumerate(report.lines[:_TABLE_ROWS], start=1):
        more = []
        if rank <= _SNIPPET_LINES and line.precision is not Precision.OP:
            more.append(sources.snippet(line.path, line.line))
        if line.top_kernels:
            more.append(
                "<table><thead><tr><th>kernel</th><th>kind</th><th class='num'>count</th>"
                "<th class='num'>time</th></tr></thead><tbody>"
                + "".join(
                    f"<tr><td class='brrr-mono'>{_t(k.name)}</td><td>{_t(k.kind)}</td>"
                    f"<td class='num'>{k.count:,}</td><td class='num'>{_d(k.total_ns)}</td></tr>"
                    for k in line.top_kernels
                )
                + "</tbody></table>"
            )
        evidence = _evidence(line)
        if evidence:
            more.append(f"<p>{evidence}</p>")
        opened = " open" if rank <= _OPEN_LINES else ""
        details = (
            f"<details{opened}><summary>source, kernels, evidence</summary>{''.join(more)}"
            "</details>"
            if any(more)
            else ""
        )
        regime = str(line.regime) if line.regime is not None else "–"
        path_attr = f' data-path="{_t(line.path)}"' if line.path else ""
        label = _t(_line_label(line.file, line.line, line.precision))
        rows.append(
            f'<tr class="brrr-line" id="line-{rank}" data-file="{_t(line.file)}" '
            f'data-line="{line.line}"{path_attr} data-total-us="{round(line.total_ns / 1000, 3)}">'
            f"<td class='num'>{rank}</td>"
            f"<td><span class='brrr-mono brrr-key'>{label}</span>"
            f"<br><span class='brrr-sub'>{_t(line.function)} · {_t(line.precision)}</span></td>"
            f"<td class='brrr-regime-{_t(regime)}'>{_t(regime)}</td>"
            f"<td class='num'>{_d(line.gpu_ns)}</td><td class='num'>{_d(line.idle_ns)}</td>"
            f"<td class='num'>{_share(line.total_ns, report.trace.span_ns)}</td>"
            f"<td class='num'>{line.kernels:,}</td>"
            f"<td>{_t(', '.join(line.findings))}</td></tr>"
        )
        if details:
            # Its own full-width row, so that long kernel names do not squeeze the columns.
            rows.append(f'<tr class="brrr-more"><td></td><td colspan="7">{details}</td></tr>')
    hidden = len(report.lines) - _TABLE_ROWS
    tail = (
        f"<p class='brrr-sub'>{hidden:,} more lines are in the JSON report (--format json).</p>"
        if hidden > 0
        else ""
    )
    return (
        f'<section id="lines" data-count="{len(report.lines)}"><h2>Lines</h2>'
        "<p class='brrr-sub'>By GPU time plus the idle charged to the line. The source around "
        f"the {_SNIPPET_LINES} hottest lines is shown when the file is found under the source "
        "root.</p><table><thead><tr><th class='num'>#</th><th>line</th><th>regime</th>"
        "<th class='num'>GPU</th><th class='num'>idle</th><th class='num'>of span</th>"
        "<th class='num'>kernels</th><th>findings</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + tail
        + "</section>"
    )


def _regimes_section(report: Report) -> str:
    span = report.trace.span_ns
    parts = []
    for regime in Regime:
        timed = [(ln.time_by_regime_ns.get(regime, 0), ln) for ln in report.lines]
        mine = [ln for ns, ln in sorted(timed, key=lambda t: -t[0]) if ln.regime is regime][:10]
        total = report.summary.time_by_regime_ns.get(regime, 0)
        why = {
            Regime.COMPUTE: "arithmetic intensity at or above the ridge of the ceilings that "
            "bind the kernels",
            Regime.MEMORY: "below the ridge, or host↔device copies bound by the link",
            Regime.OVERHEAD: "idle charged to the line, and kernels too short to be anything "
            "but launch-bound",
            Regime.COMMUNICATION: "collective kernels, the copies a collective launched, and the "
            "idle while the host sat in a collective",
        }[regime]
        rows = "".join(
            f"<tr><td class='brrr-mono'>{_t(_line_label(ln.file, ln.line, ln.precision))}</td>"
            f"<td class='num'>{_d(ln.time_by_regime_ns.get(regime, 0))}</td>"
            f"<td>{_evidence(ln)}</td></tr>"
            for ln in mine
        )
        parts.append(
            f"<h3 class='brrr-regime-{regime}'>{_t(regime)}: {_d(total)} "
            f"({_share(total, span)} of the span)</h3><p class='brrr-sub'>{_t(why)}</p>"
            + (
                "<table><thead><tr><th>line</th><th class='num'>time in regime</th>"
                f"<th>evidence</th></tr></thead><tbody>{rows}</tbody></table>"
                if rows
                else ""
            )
        )
    return '<section id="regimes"><h2>Regimes</h2>' + "".join(parts) + "</section>"


def _finding(f: Finding, index: int) -> str:
    evidence = "".join(
        f"<tr><th>{_t(k)}</th><td>{_t(f'{v:,}' if isinstance(v, int) else v)}</td></tr>"
        for k, v in sorted(f.evidence.items())
    )
    per_step = (
        f", {_d(f.est_savings_per_step_ns)} a step" if f.est_savings_per_step_ns is not None else ""
    )
    bounds = units.saving_range(f.est_savings_ns, f.est_savings_range_ns)
    if bounds:
        per_step += f" ({_t(bounds)} with the profiler's own cost uncertain)"
    where = _line_label(f.file, f.line)
    covers = ", ".join(str(n) for n in f.lines) if len(f.lines) > 1 else ""
    return (
        f'<div class="brrr-finding" id="finding-{index}" data-rule="{_t(f.rule)}" '
        f'data-file="{_t(f.file)}" data-line="{f.line}" '
        f'data-savings-us="{round(f.est_savings_ns / 1000, 3)}">'
        f"<p><span class='brrr-sev-{_t(f.severity)}'>{_t(f.severity)}</span> · "
        f"<b>{_t(f.rule)}</b> · <span class='brrr-mono'>{_t(where)}</span> "
        f"{_t(f.function)}{' (lines ' + _t(covers) + ')' if covers else ''}</p>"
        f"<p>{_t(f.message)}</p><p><b>Fix:</b> {_t(f.fix)}</p>"
        f"<p><b>Saves</b> about {_d(f.est_savings_ns)}{per_step}</p>"
        + (
            f"<details><summary>evidence</summary><table>{evidence}</table></details>"
            if evidence
            else ""
        )
        + f"<p class='brrr-sub'>{_t(f.doc)}</p></div>"
    )


def _findings_section(report: Report) -> str:
    if not report.findings:
        body = "<p>No finding saves enough to report.</p>"
    else:
        body = "".join(_finding(f, k) for k, f in enumerate(report.findings, start=1))
    return (
        f'<section id="findings" data-count="{len(report.findings)}"><h2>Findings</h2>'
        f"{body}</section>"
    )


# The Report fields this page shows by name; any other (added by a later change: cross-rank
# comparisons, say) is shown as a generic table, so that a newer report still renders whole.
_KNOWN_FIELDS = frozenset(
    {
        "tool_version",
        "trace",
        "summary",
        "lines",
        "findings",
        "problems",
        "notes",
        "unmapped_files",
        "steps",
        "schema_version",
        "timeline",
    }
)


def _generic(value: Any, depth: int = 0) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if depth > 3:
        return _t(value)
    if isinstance(value, dict):
        return (
            "<table><tbody>"
            + "".join(
                f"<tr><th>{_t(k)}</th><td>{_value(k, v, depth)}</td></tr>"
                for k, v in list(value.items())[:200]
            )
            + "</tbody></table>"
        )
    if isinstance(value, (list, tuple)):
        if not value:
            return "–"
        return "<ol>" + "".join(f"<li>{_generic(v, depth + 1)}</li>" for v in value[:200]) + "</ol>"
    return _t(value)


def _value(key: object, value: Any, depth: int) -> str:
    if isinstance(key, str) and key.endswith("_ns") and isinstance(value, int):
        return _d(value)
    return _generic(value, depth + 1)


def _ranks_section(report: Report) -> str:
    extra = [
        f.name
        for f in dataclasses.fields(report)
        if f.name not in _KNOWN_FIELDS and getattr(report, f.name) not in (None, (), [], {})
    ]
    ranks = report.trace.ranks
    if not extra and len(ranks) <= 1:
        return ""
    body = []
    if ranks:
        body.append(
            f"<p>Ranks of the traces: {_t(', '.join(map(str, ranks)))}. This page covers one "
            "of them (the notes say which; --rank chooses another).</p>"
        )
    for name in sorted(extra, key=lambda n: ("rank" not in n, n)):
        body.append(f"<h3>{_t(name)}</h3>{_generic(getattr(report, name))}")
    return '<section id="ranks"><h2>Ranks and more</h2>' + "".join(body) + "</section>"


def _notes_section(report: Report) -> str:
    parts = [f"<div class='brrr-note'>{_t(n)}</div>" for n in report.notes]
    if report.problems:
        parts.append(
            "<table><thead><tr><th>problem</th><th class='num'>count</th><th>detail</th></tr>"
            "</thead><tbody>"
            + "".join(
                f"<tr><td>{_t(p.kind)}</td><td class='num'>{p.count:,}</td>"
                f"<td>{_t(p.detail)}</td></tr>"
                for p in report.problems
            )
            + "</tbody></table>"
        )
    if report.unmapped_files:
        parts.append(
            "<p>Not found under the source root:</p><ul>"
            + "".join(f"<li class='brrr-mono'>{_t(f)}</li>" for f in report.unmapped_files[:100])
            + "</ul>"
        )
    if not parts:
        return ""
    return '<section id="notes"><h2>Notes and problems</h2>' + "".join(parts) + "</section>"


def _nav(sections: Iterable[tuple[str, str]]) -> str:
    return (
        '<nav class="brrr-toc">'
        + "".join(f'<a href="#{anchor}">{label}</a>' for anchor, label in sections)
        + "</nav>"
    )


def render(report: Report, max_source_bytes: int | None = None) -> str:
    """The whole page. Source lines come from the files the report's lines map to (their
    ``path``, already admitted under the source root), read through ``safe_read``."""
    limit = max_source_bytes if max_source_bytes is not None else AnalysisOptions.max_source_bytes
    sources = _Sources(limit)
    style, script, glue = report_style(), timeline_script(), _asset("report.js")
    body = [
        ("summary", "Summary", _summary(report)),
        ("timeline-section", "Timeline", _timeline_section(report)),
        ("steps", "Steps", _steps_section(report)),
        ("lines", "Lines", _lines_section(report, sources)),
        ("regimes", "Regimes", _regimes_section(report)),
        ("findings", "Findings", _findings_section(report)),
        ("ranks", "Ranks", _ranks_section(report)),
        ("notes", "Notes", _notes_section(report)),
    ]
    shown = [(a, label, text) for a, label, text in body if text]
    page = (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="'
        f'{_t(content_security_policy([script, glue], [style]))}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>brrr-trace · {_t(report.trace.path)}</title>"
        f"<style>{style}</style></head><body>"
        f"<h1>brrr-trace report</h1><p class='brrr-sub'>{_t(report.trace.path)} · "
        f"brrr-trace {_t(report.tool_version)}</p>"
        + _nav((a, label) for a, label, _ in shown)
        + "".join(text for _, _, text in shown)
        + f"<script>{script}</script><script>{glue}</script></body></html>\n"
    )
    # A lone surrogate (a trace's "\ud800") cannot be written as UTF-8; it becomes U+FFFD.
    return page.encode("utf-8", "replace").decode("utf-8")


_NOTEBOOK_STYLE = (
    ".brrr-nb table{border-collapse:collapse;margin:4px 0}"
    ".brrr-nb th,.brrr-nb td{text-align:left;padding:2px 8px;border-bottom:1px solid #ddd}"
    ".brrr-nb td{vertical-align:top}.brrr-nb td.num{text-align:right;white-space:nowrap}"
    ".brrr-nb .brrr-mono{font-family:monospace;white-space:nowrap}"
)


def summary_html(report: Report, top: int = 10) -> str:
    """The summary, the top lines and the findings, with no script: for a notebook cell."""
    t, s = report.trace, report.summary
    util = units.percent(s.gpu_utilization, decimals=1) if s.gpu_utilization is not None else "–"
    lines = "".join(
        f"<tr><td class='brrr-mono'>{_t(_line_label(ln.file, ln.line, ln.precision))}</td>"
        f"<td>{_t(ln.function)}</td><td>{_t(ln.regime or '–')}</td>"
        f"<td class='num'>{_d(ln.gpu_ns)}</td><td class='num'>{_d(ln.idle_ns)}</td>"
        f"<td>{_t(', '.join(ln.findings))}</td></tr>"
        for ln in report.lines[:top]
    )
    findings = "".join(
        f"<tr><td>{_t(f.severity)}</td><td>{_t(f.rule)}</td>"
        f"<td class='brrr-mono'>{_t(_line_label(f.file, f.line))}</td>"
        f"<td class='num'>{_d(f.est_savings_ns)}</td><td>{_t(f.fix)}</td></tr>"
        for f in report.findings
    )
    idle = ", ".join(f"{c} {units.duration(ns)}" for c, ns in s.idle_by_cause_ns.items() if ns)
    steps = (
        f" · {report.steps.count} steps, median {units.duration(report.steps.median_ns)}"
        if report.steps is not None
        else ""
    )
    return (
        f'<div class="brrr-nb"><style>{_NOTEBOOK_STYLE}</style>'
        f"<p><b>brrr-trace</b> · <span class='brrr-mono'>{_t(t.path)}</span></p>"
        f"<p>span {_d(t.span_ns)} · busy {_d(s.gpu_busy_ns)} · idle {_d(s.gpu_idle_ns)} "
        f"({_t(idle or 'none')}) · utilization {_t(util)} · mostly "
        f"{_t(_top_regime(report))}-bound{_t(steps)}</p>"
        "<table><thead><tr><th>line</th><th>function</th><th>regime</th><th>GPU</th>"
        f"<th>idle</th><th>findings</th></tr></thead><tbody>{lines}</tbody></table>"
        + (
            "<table><thead><tr><th>severity</th><th>rule</th><th>line</th><th>saves</th>"
            f"<th>fix</th></tr></thead><tbody>{findings}</tbody></table>"
            if findings
            else "<p>No findings.</p>"
        )
        + f"<p>{len(report.lines)} lines, {len(report.findings)} findings · "
        "<code>report.to_html()</code> for the whole page with the timeline.</p></div>"
    )
