"""Each rule fires on a real trace that has the problem and stays quiet on one that does not."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.report import Report
from tests.conftest import PUBLIC

DATA = Path(__file__).resolve().parent / "data"


@cache
def report(name: str) -> Report:
    path = DATA / "h200" / f"{name}.json.gz" if "/" not in name else PUBLIC / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    return analyze(path, AnalysisOptions(source_root=str(DATA)))


def rules_on(name: str) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    for finding in report(name).findings:
        found.setdefault(finding.rule, set()).add(finding.line)
    return found


# (rule, trace with the problem, line it must be on or None, trace without it)
# A fixed workload can keep a trace of the problem elsewhere (one .item() after the loop, the
# DataLoader workers' start-up): those pairs are checked in test_the_fix_removes_the_finding.
CASES = [
    ("launch-overhead", "tiny_op_loop", 90, "bf16_matmul"),
    ("launch-overhead", "small_matmul_loop", 98, "sdpa_attention"),
    ("host-sync", "item_in_loop", 109, "bf16_matmul"),
    ("dataloader-stall", "dataloader_slow", 158, "bf16_matmul"),
    ("pageable-memcpy", "pageable_copy", 127, "pinned_copy"),
    ("fp32-matmul", "fp32_matmul", 43, "fp32_matmul_tf32"),
    ("fp32-matmul", "fp32_matmul", 43, "bf16_matmul"),
    ("unfused-elementwise", "elementwise_chain", 62, "elementwise_chain_compiled"),
    ("manual-attention", "manual_attention", 240, "sdpa_attention"),
    ("unfused-optimizer", "optimizer_foreach_false", 187, "optimizer_fused"),
    ("cpu-to-device", "cpu_tensor_each_step", 336, "device_tensor_each_step"),
    ("misaligned-shape", "misaligned_matmul", 357, "bf16_matmul"),
    (
        "misaligned-shape",
        "AMD-AGI-TraceLens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        364,
        "bf16_matmul",
    ),
    # (b200's small grids were its 73 all-reduce kernels: collectives are not SM-bound.)
    (
        "small-grid",
        "AMD-AGI-TraceLens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        150,
        "bf16_matmul",
    ),
    # DDP rank 0 of 8 (MI300X): its bucket all-reduces run with nothing beside them. (b200's
    # 2.1 ms of exposed all-reduces save nothing in its replay: that trace is host-bound.)
    (
        "exposed-communication",
        "AMD-AGI-TraceLens/mi300__resnet_act_checkpoint.json.gz",
        82,
        "transformer_step",
    ),
]


@pytest.mark.parametrize(
    ("rule", "bad", "line", "good"),
    CASES,
    ids=[f"{c[0]}-{c[1].split('/')[-1][:20]}" for c in CASES],
)
def test_rule_fires_on_the_problem_and_not_without_it(
    rule: str, bad: str, line: int | None, good: str
) -> None:
    fired = rules_on(bad)
    assert rule in fired, f"{rule} did not fire on {bad}: {fired}"
    if line is not None:
        assert line in fired[rule]
    assert rule not in rules_on(good)


def test_the_fix_removes_the_finding_from_the_fixed_loop() -> None:
    # item_in_loop_fixed keeps one .item() after the loop (line 120), none in it (118-119).
    assert not {118, 119} & rules_on("item_in_loop_fixed").get("host-sync", set())
    before = sum(
        f.est_savings_ns for f in report("dataloader_slow").findings if f.rule == "dataloader-stall"
    )
    after = sum(
        f.est_savings_ns
        for f in report("dataloader_workers").findings
        if f.rule == "dataloader-stall"
    )
    assert after < 0.3 * before  # what is left is the workers' start-up before the first batch


def test_large_matmul_lines_get_no_overhead_findings() -> None:
    for name in ("bf16_matmul", "bf16_matmul_bs4", "fp32_matmul_tf32"):
        for finding in report(name).findings:
            assert finding.rule not in ("launch-overhead", "host-sync"), finding


def test_findings_are_ranked_and_carry_evidence_and_docs() -> None:
    findings = report("optimizer_foreach_false").findings
    savings = [f.est_savings_ns for f in findings]
    assert savings == sorted(savings, reverse=True)
    top = findings[0]
    assert top.rule == "unfused-optimizer" and top.evidence["kernels"] > 100
    assert (Path(__file__).resolve().parent.parent / top.doc).is_file()
    # The optimizer line is explained once, not also as generic launch overhead.
    assert not any(f.rule == "launch-overhead" and f.line == top.line for f in findings)


def test_a_finding_over_several_lines_names_them_all_and_each_line_lists_it() -> None:
    found = report("manual_attention")
    (finding,) = [f for f in found.findings if f.rule == "manual-attention"]
    assert len(finding.lines) >= 3 and finding.line in finding.lines
    marked = {ln.line for ln in found.lines if "manual-attention" in ln.findings}
    assert marked == set(finding.lines)
