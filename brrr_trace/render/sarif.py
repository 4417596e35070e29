"""Findings (and a diff's regressions) as SARIF 2.1.0, for GitHub code scanning and other
SARIF viewers (README, "Sharing reports").

What GitHub's SARIF support asks for shapes this: ``tool.driver.name`` and a semantic version;
each rule with a short and a full description, a help text and a link; each result with its
``ruleId``, a plain-text message and a location relative to the repository (``uriBaseId``
SRCROOT, resolved by ``originalUriBaseIds``); at most 20 runs a file and 25,000 results a run.
``partialFingerprints`` keep an alert the same alert across runs of the same code: they hash the
rule id, the repository-relative path and the line's source text (whitespace collapsed), never
the line number alone or a timing, so an edit above the line or a faster run leaves them as
they were.

Messages are SARIF plain text, where ``[text](n)`` would be a link: trace strings have their
control characters escaped (``safe_text``) and ``\\``, ``[``, ``]`` backslash-escaped.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from brrr_trace import __version__, units
from brrr_trace.analyzers.rules import rule_docs
from brrr_trace.analyzers.safe_read import SourceSkipped, read_source
from brrr_trace.diff import Regression
from brrr_trace.errors import BrrrError
from brrr_trace.options import AnalysisOptions
from brrr_trace.report import PROJECT_URL, RULES_DOCS_URL, Finding, Report
from brrr_trace.safe_text import json_safe, terminal_safe

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SRCROOT = "SRCROOT"
FINGERPRINT_KEY = "brrrTraceFinding/v1"
# GitHub code scanning rejects a file with more (docs: "SARIF results exceed hard limit").
MAX_RUNS = 20
MAX_RESULTS = 25_000

_LEVEL = {"warning": "warning", "information": "note", "hint": "note"}

# The diff's rules: a CI gate's regressions (brrr-trace diff --fail-on-regression).
REGRESSION_RULES = {
    "line-regression": (
        "a source line takes more time after than before, by more than the gate's percentage.",
        "Compared by brrr-trace diff: the line's GPU time plus the idle charged to it, in the "
        "trace after against the trace before. Lines whose growth is below a small share of "
        "the span are not counted (noise).",
    ),
    "step-regression": (
        "the step (or the GPU span, without ProfilerStep ranges) takes more time after than "
        "before, by more than the gate's percentage.",
        "Compared by brrr-trace diff: the median ProfilerStep time when both traces have "
        "steps, else the GPU span. The result is shown on the line whose time grew the most.",
    ),
}


def plain_text(text: str) -> str:
    """Trace text as a SARIF plain-text message: no control character, no embedded link."""
    return terminal_safe(text).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _rules(rules: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for rule_id, (summary, details) in rules.items():
        url = RULES_DOCS_URL.format(rule=rule_id)
        summary = summary[:1].upper() + summary[1:]
        help_text = f"{summary} {details}\nDocumentation: {url}"
        out.append(
            {
                "id": rule_id,
                "name": "".join(part.capitalize() for part in rule_id.split("-")),
                "shortDescription": {"text": summary},
                "fullDescription": {"text": f"{summary} {details}"},
                "helpUri": url,
                "help": {
                    "text": help_text,
                    "markdown": f"{summary} {details}\n\n[Documentation]({url})",
                },
                "defaultConfiguration": {"level": "warning"},
                "properties": {"tags": ["performance", "gpu"]},
            }
        )
    return out


def _driver(rules: dict[str, tuple[str, str]]) -> dict[str, Any]:
    return {
        "name": "brrr-trace",
        "version": __version__,
        "semanticVersion": __version__,
        "informationUri": PROJECT_URL,
        "rules": _rules(rules),
    }


def _root_uri(source_root: str) -> str:
    uri = Path(os.path.abspath(source_root)).as_uri()
    return uri if uri.endswith("/") else uri + "/"


@dataclass(frozen=True)
class _Place:
    """Where a result points: a repository-relative path (under SRCROOT), else the trace's own
    path as written (another machine's file), with the local file to read the line from."""

    relative: str | None
    trace_file: str
    local: str | None
    line: int

    def location(self) -> dict[str, Any] | None:
        if self.line < 1:  # an op row (no Python frame): nothing in the code to point at
            return None
        if self.relative is not None:
            artifact: dict[str, Any] = {"uri": quote(self.relative), "uriBaseId": SRCROOT}
        elif self.trace_file and not self.trace_file.startswith("<"):
            path = self.trace_file.replace("\\", "/")
            artifact = {"uri": Path(path).as_uri() if path.startswith("/") else quote(path)}
        else:
            return None
        return {
            "physicalLocation": {"artifactLocation": artifact, "region": {"startLine": self.line}}
        }

    def source_text(self, max_bytes: int) -> str | None:
        if self.local is None or self.line < 1:
            return None
        try:
            lines = read_source(self.local, max_bytes).splitlines()
        except (OSError, SourceSkipped, UnicodeDecodeError):
            return None
        return " ".join(lines[self.line - 1].split()) if self.line <= len(lines) else None


class _Fingerprints:
    """Fingerprints of one run: the same hash twice (two equal lines) gets ``:2``, ``:3``."""

    def __init__(self, max_source_bytes: int) -> None:
        self._seen: dict[str, int] = {}
        self._max = max_source_bytes

    def of(self, rule: str, place: _Place, function: str) -> str:
        text = place.source_text(self._max)
        where = place.relative if place.relative is not None else place.trace_file
        # Without the source, the function stands in for the line's text.
        what = f"text:{text}" if text is not None else f"function:{function}"
        digest = hashlib.sha256("\0".join((rule, where, what)).encode()).hexdigest()[:32]
        count = self._seen[digest] = self._seen.get(digest, 0) + 1
        return digest if count == 1 else f"{digest}:{count}"


def _result(
    rule: str,
    index: int,
    level: str,
    message: str,
    place: _Place,
    fingerprint: str,
    properties: dict[str, Any],
) -> dict[str, Any] | None:
    location = place.location()
    if location is None:
        return None
    return {
        "ruleId": rule,
        "ruleIndex": index,
        "level": level,
        "message": {"text": message},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        "properties": properties,
    }


def _finding_result(
    finding: Finding, index: int, fingerprints: _Fingerprints
) -> dict[str, Any] | None:
    place = _Place(finding.relative_path, finding.file, finding.path, finding.line)
    per_step = finding.est_savings_per_step_ns
    bounds = units.saving_range(finding.est_savings_ns, finding.est_savings_range_ns)
    saving = (
        f"~{units.duration(finding.est_savings_ns)}"
        + (f" ({units.duration(per_step)} a step)" if per_step is not None else "")
        + (f", {bounds} with the profiler's own cost uncertain" if bounds else "")
    )
    said = finding.message[:1].upper() + finding.message[1:]
    message = (
        f"{plain_text(said.rstrip('.'))}. Fix: {plain_text(finding.fix.rstrip('.'))}. "
        f"Estimated saving {saving}."
    )
    return _result(
        finding.rule,
        index,
        _LEVEL.get(finding.severity, "note"),
        message,
        place,
        fingerprints.of(finding.rule, place, finding.function),
        {
            "severity": finding.severity,
            "est_savings_us": round(finding.est_savings_ns / 1000, 3),
            "est_savings_per_step_us": None if per_step is None else round(per_step / 1000, 3),
            "function": finding.function,
            "lines": list(finding.lines or (finding.line,)),
            "trace_file": finding.file,
            "evidence": finding.evidence,
        },
    )


def _notifications(texts: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"level": level, "message": {"text": plain_text(text)}} for level, text in texts]


def _run(
    report: Report,
    source_root: str,
    category: str | None,
    options: AnalysisOptions,
) -> dict[str, Any]:
    rules = rule_docs()
    index = {rule_id: i for i, rule_id in enumerate(rules)}
    fingerprints = _Fingerprints(options.max_source_bytes)
    results: list[dict[str, Any]] = []
    placeless = 0
    for finding in report.findings:
        result = _finding_result(finding, index.get(finding.rule, -1), fingerprints)
        if result is None:
            placeless += 1
        elif len(results) < MAX_RESULTS:
            results.append(result)
    notes = [("warning", f"{p.kind} ({p.count}): {p.detail}") for p in report.problems]
    notes += [("note", note) for note in report.notes]
    if placeless:
        notes.append(
            (
                "note",
                f"{placeless} finding(s) have no Python source line (the trace has no stack "
                "for them) and are left out; the JSON report has them.",
            )
        )
    return _assemble(rules, results, source_root, category, notes, report.trace.path)


def _assemble(
    rules: dict[str, tuple[str, str]],
    results: list[dict[str, Any]],
    source_root: str,
    category: str | None,
    notes: list[tuple[str, str]],
    trace_path: str,
) -> dict[str, Any]:
    run: dict[str, Any] = {
        "tool": {"driver": _driver(rules)},
        "originalUriBaseIds": {SRCROOT: {"uri": _root_uri(source_root)}},
        "invocations": [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": _notifications(notes),
            }
        ],
        "results": results,
        "properties": {"trace": trace_path},
    }
    if category is not None:
        run["automationDetails"] = {"id": category}
    return run


def _categories(paths: list[str]) -> list[str | None]:
    """One trace: no category (the upload's own, if any). Several: one each, since GitHub
    takes one run per tool and category."""
    if len(paths) == 1:
        return [None]
    seen: dict[str, int] = {}
    out: list[str | None] = []
    for path in paths:
        name = os.path.basename(path) or path
        seen[name] = seen.get(name, 0) + 1
        out.append(f"brrr-trace/{name}/" if seen[name] == 1 else f"brrr-trace/{name}-{seen[name]}/")
    return out


def _dump(runs: list[dict[str, Any]]) -> str:
    doc = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": runs}
    return json_safe(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()) + "\n"


def render(reports: list[Report], source_root: str, options: AnalysisOptions | None = None) -> str:
    """A SARIF log of the reports' findings: one run per trace."""
    if len(reports) > MAX_RUNS:
        raise BrrrError(
            f"--format sarif: {len(reports)} traces, more than the {MAX_RUNS} runs GitHub code "
            "scanning takes in one SARIF file; analyze them in groups of at most 20."
        )
    options = options or AnalysisOptions()
    categories = _categories([r.trace.path for r in reports])
    return _dump(
        [
            _run(report, source_root, category, options)
            for report, category in zip(reports, categories, strict=True)
        ]
    )


def render_regressions(
    regressions: list[Regression],
    source_root: str,
    after_path: str,
    options: AnalysisOptions | None = None,
) -> str:
    """A SARIF log of a diff's regressions (the CI gate): one run, on the lines after."""
    options = options or AnalysisOptions()
    index = {rule_id: i for i, rule_id in enumerate(REGRESSION_RULES)}
    fingerprints = _Fingerprints(options.max_source_bytes)
    results: list[dict[str, Any]] = []
    notes: list[tuple[str, str]] = []
    for regression in regressions:
        line = regression.line
        if line is None:
            notes.append(("warning", regression.summary + " (no source line to show it on)"))
            continue
        place = _Place(line.relative_path, line.file, line.path, line.line)
        result = _result(
            regression.rule,
            index[regression.rule],
            "error",
            plain_text(regression.summary) + ".",
            place,
            fingerprints.of(regression.rule, place, line.function),
            {
                "before_us": round(regression.before_ns / 1000, 3),
                "after_us": round(regression.after_ns / 1000, 3),
                "change_percent": round(regression.percent, 2),
                "trace_file": line.file,
            },
        )
        if result is None:
            notes.append(("warning", regression.summary + " (no source file to show it on)"))
        else:
            results.append(result)
    return _dump([_assemble(REGRESSION_RULES, results, source_root, None, notes, after_path)])
