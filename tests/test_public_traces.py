"""Every public trace: a report (exit 0), or for a file that is not a trace one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brrr_trace.cli import main
from tests.conftest import PUBLIC
from tests.report_checks import assert_no_rate_above_the_peak, assert_valid_report

FILES = (
    sorted(p for p in PUBLIC.rglob("*") if p.name.endswith((".json", ".json.gz")))
    if PUBLIC.is_dir()
    else []
)
NOT_TRACES = {"benchmark_simple_add_et.json.gz"}  # a PyTorch execution trace, not Kineto
# The loader's bounds against hostile input (AnalysisOptions) are set so that no real trace
# meets them.
BOUNDS_MET = {"long-name", "event-cap", "source-skipped"}


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PUBLIC)) for p in FILES])
def test_public_trace_gives_a_report_or_one_clear_line(path: Path, capsys, public_traces) -> None:
    code = main(["analyze", str(path), "--format", "json"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if path.name in NOT_TRACES:
        assert code == 2 and captured.err.count("\n") == 1
    else:
        assert code == 0, captured.err
        assert captured.out.startswith("{")
        doc = json.loads(captured.out)
        assert_no_rate_above_the_peak(doc)
        assert_valid_report(doc)
        assert not BOUNDS_MET & {p["kind"] for p in doc["problems"]}


def test_public_folder_exists_or_skips(public_traces: Path) -> None:
    assert FILES, "the public trace folder is present but holds no traces"


def test_a_folder_of_rank_traces_reports_the_chosen_rank(public_traces: Path) -> None:
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.pipeline import analyze

    folder = public_traces / "facebookresearch-param" / "dlrm_kineto_8ranks"
    report = analyze(folder, AnalysisOptions(rank=3))
    assert report.trace.ranks == tuple(range(8))
    assert "worker3_" in report.trace.path
    assert any("rank 3" in note for note in report.notes)
