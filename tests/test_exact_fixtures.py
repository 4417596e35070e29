"""Traces recorded with `brrr-trace record` on the H200 (tests/data/record_exact.py): every hot
line is placed from the trace alone, at `exact` precision, with no source file at hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import Precision, Regime

DATA = Path(__file__).resolve().parent / "data"
WORKLOADS = DATA / "workloads.py"
EXACT = sorted((DATA / "h200").glob("exact_*.json.gz"))
_EXPECT = re.compile(r"#\s*expect:\s*(compute|memory|overhead)")


def expectations() -> dict[int, Regime]:
    return {
        number: Regime(match.group(1))
        for number, text in enumerate(WORKLOADS.read_text().splitlines(), start=1)
        if (match := _EXPECT.search(text))
    }


@pytest.mark.parametrize("path", EXACT, ids=[p.name for p in EXACT])
def test_recorded_lines_are_exact_without_the_source(path: Path, tmp_path: Path) -> None:
    report = analyze(path, AnalysisOptions(source_root=str(tmp_path)))
    expected = expectations()
    hot = [line for line in report.lines if line.file == "workloads.py" and line.line in expected]
    assert hot, "no hot line of workloads.py reported"
    for line in hot:
        assert line.precision is Precision.EXACT, line
        assert line.regime is expected[line.line], (line.line, line.regime)
    # Everything with GPU time sits on a statement, not on a def line.
    assert all(line.precision is Precision.EXACT for line in report.lines if line.gpu_ns)


def test_there_are_exact_fixtures() -> None:
    assert len(EXACT) >= 5
