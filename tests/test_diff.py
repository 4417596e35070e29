"""`brrr-trace diff`: per-line change, resolved findings, and the batch-size test."""

from __future__ import annotations

import json
from pathlib import Path

from brrr_trace.cli import main
from brrr_trace.diff import compare
from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze

DATA = Path(__file__).resolve().parent / "data"
H200 = DATA / "h200"


def diff_of(before: str, after: str):
    options = AnalysisOptions(source_root=str(DATA))
    return compare(
        analyze(H200 / f"{before}.json.gz", options), analyze(H200 / f"{after}.json.gz", options)
    )


def change_at(diff, line: int):
    return next(c for c in diff.lines if c.file == "workloads.py" and c.line == line)


def test_batch_size_test_tells_overhead_from_compute() -> None:
    tiny = change_at(diff_of("tiny_op_loop", "tiny_op_loop_bs4"), 90)
    assert tiny.work_ratio == 4.0 and tiny.scaling is not None and tiny.scaling < 0.3
    assert "overhead" in tiny.verdict
    matmul = change_at(diff_of("bf16_matmul", "bf16_matmul_bs4"), 32)
    assert matmul.work_ratio == 4.0 and matmul.scaling is not None and matmul.scaling > 0.9
    assert "compute" in matmul.verdict


def test_fix_shows_as_resolved_finding_and_time_gained() -> None:
    diff = diff_of("fp32_matmul", "fp32_matmul_tf32")
    assert [f.rule for f in diff.resolved] == ["fp32-matmul"]
    assert not diff.new
    assert diff.span_after_ns < 0.3 * diff.span_before_ns


def test_diff_cli_json(capsys) -> None:
    code = main(
        [
            "diff",
            str(H200 / "tiny_op_loop.json.gz"),
            str(H200 / "tiny_op_loop_bs4.json.gz"),
            "--format",
            "json",
        ]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "diff" and doc["lines"]
    assert any(line["verdict"] and "overhead" in line["verdict"] for line in doc["lines"])
