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


def test_a_dtype_change_gets_no_batch_size_verdict_and_says_why() -> None:
    from brrr_trace.diff import _not_a_size_change
    from brrr_trace.report import KernelStat, LineReport
    from brrr_trace.vocabulary import Precision, Regime

    def line(flops: int, nbytes: int, kernel: str, total_ns: int) -> LineReport:
        return LineReport(
            "t.py", None, 5, "f", Precision.RECOVERED, Regime.COMPUTE, total_ns, 0, 0, 1, 0,
            {}, {}, flops=flops, bytes=nbytes,
            top_kernels=(KernelStat(kernel, "gemm", 1, total_ns),),
        )  # fmt: skip

    fp32 = line(2 * 10**12, 48 * 10**6, "ampere_sgemm_128x64_nn", 10_000_000)
    bf16 = line(2 * 10**12, 24 * 10**6, "sm90_xmma_gemm_bf16bf16", 1_000_000)
    assert "dtype change" in (_not_a_size_change(fp32, bf16) or "")
    bigger = line(8 * 10**12, 192 * 10**6, "ampere_sgemm_128x64_nn", 40_000_000)
    assert _not_a_size_change(fp32, bigger) is None
    # The fixtures' batch-size pairs are size changes and keep their verdicts (above).
    assert change_at(diff_of("bf16_matmul", "bf16_matmul_bs4"), 32).why_no_verdict is None
