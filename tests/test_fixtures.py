"""The recorded H200 fixtures: every hot line comes out with the regime it was built to have.

``tests/data/workloads.py`` marks each hot line with ``# expect: compute|memory|overhead``; the
trace of each workload (``tests/data/h200/<fixture>.json.gz``) must report those lines, recovered
from the source, with those regimes.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.render import json as render_json
from brrr_trace.render import sarif as render_sarif
from brrr_trace.report import Report
from brrr_trace.vocabulary import Precision, Regime
from tests.report_checks import (
    assert_no_rate_above_the_peak,
    assert_valid_report,
    assert_valid_sarif,
)

DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200"
WORKLOADS = DATA / "workloads.py"
_EXPECT = re.compile(r"#\s*expect:\s*(compute|memory|overhead)")
MEASURED = json.loads((H200 / "measurements.json").read_text())["fixtures"]


@cache
def expectations() -> dict[int, Regime]:
    found = {}
    for number, text in enumerate(WORKLOADS.read_text().splitlines(), start=1):
        match = _EXPECT.search(text)
        if match:
            found[number] = Regime(match.group(1))
    return found


@cache
def function_ranges() -> dict[str, tuple[int, int]]:
    tree = ast.parse(WORKLOADS.read_text())
    return {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


@cache
def calls_to_workload_functions() -> set[int]:
    """Lines whose work runs inside another workload function: their time lands there."""
    tree = ast.parse(WORKLOADS.read_text())
    names = set(function_ranges()) | {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return {
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    }


@cache
def report_of(fixture: str) -> Report:
    return analyze(H200 / f"{fixture}.json.gz", AnalysisOptions(source_root=str(DATA)))


FIXTURES = sorted(name for name, m in MEASURED.items() if m.get("status") == "ok")


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_hot_line_has_its_regime(fixture: str) -> None:
    report = report_of(fixture)
    function = MEASURED[fixture]["function"]
    first, last = function_ranges()[function]
    expected = expectations()
    reported = {
        line.line: line
        for line in report.lines
        if line.file == "workloads.py" and line.line in expected
    }
    wrong = {
        number: (str(line.regime), str(expected[number]))
        for number, line in reported.items()
        if line.regime is not expected[number]
    }
    delegated = calls_to_workload_functions()
    missing = [
        n for n in expected if first <= n <= last and n not in reported and n not in delegated
    ]
    assert not wrong, f"lines with the wrong regime (got, expected): {wrong}"
    assert not missing, f"hot lines of {function} not reported: {missing}"
    for line in reported.values():
        assert line.precision is Precision.RECOVERED


def test_without_the_source_lines_fall_back_to_the_def_line(tmp_path: Path) -> None:
    report = analyze(H200 / "elementwise_chain.json.gz", AnalysisOptions(source_root=str(tmp_path)))
    defs = {line.line for line in report.lines if line.file == "workloads.py"}
    ranges = function_ranges()
    assert defs <= {ranges["chain_ops"][0], ranges["elementwise_chain"][0]}
    assert all(line.precision is Precision.FUNCTION for line in report.lines)


ALL_H200 = sorted(p for p in H200.glob("*.json.gz")) + sorted(
    p
    for p in (DATA / "realcode" / "h200").glob("*.json.gz")
    if not p.name.endswith("truth.json.gz")
)


@pytest.mark.parametrize("path", ALL_H200, ids=[p.name for p in ALL_H200])
def test_no_line_is_faster_than_the_roofline_allows(path: Path) -> None:
    """And the report is valid against the shipped JSON Schema, its findings against SARIF's."""
    report = analyze(path, AnalysisOptions(source_root=str(DATA)))
    doc = json.loads(render_json.render(report))
    assert_no_rate_above_the_peak(doc)
    assert_valid_report(doc)
    log = json.loads(render_sarif.render([report], str(DATA)))
    assert_valid_sarif(log)
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == [f["rule"] for f in doc["findings"]]
    assert all(
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "SRCROOT"
        for r in results
        if r["properties"]["trace_file"] == "workloads.py"
    )
