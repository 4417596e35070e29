"""Estimated savings against reality: before/after pairs recorded on the H200.

Each pair is the same workload without and with the fix (tests/data/FIXTURES.md). The measured gain
is the unprofiled time difference: steady state (per-step time × steps, the loop a user runs for
hours) and whole call (one call including set-up, e.g. starting DataLoader workers).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze

DATA = Path(__file__).resolve().parent / "data"
MEASURED = json.loads((DATA / "h200" / "measurements.json").read_text())
PAIRS = {(p["before"], p["after"]): p for p in MEASURED["pairs"]}
FIXTURES = MEASURED["fixtures"]

# (rule, before, after)
CHECKS = [
    ("fp32-matmul", "fp32_matmul", "fp32_matmul_tf32"),
    ("unfused-elementwise", "elementwise_chain", "elementwise_chain_compiled"),
    ("host-sync", "item_in_loop", "item_in_loop_fixed"),
    ("pageable-memcpy", "pageable_copy", "pinned_copy"),
    ("dataloader-stall", "dataloader_slow", "dataloader_workers"),
    ("unfused-optimizer", "optimizer_foreach_false", "optimizer_fused"),
    ("manual-attention", "manual_attention", "sdpa_attention"),
    ("cpu-to-device", "cpu_tensor_each_step", "device_tensor_each_step"),
    ("misaligned-shape", "misaligned_matmul", "bf16_matmul"),
]


def estimate_ms(rule: str, before: str) -> float:
    report = analyze(DATA / "h200" / f"{before}.json.gz", AnalysisOptions(source_root=str(DATA)))
    return sum(f.est_savings_ns for f in report.findings if f.rule == rule) / 1e6


def steady_gain_ms(before: str, after: str) -> float:
    b, a = FIXTURES[before], FIXTURES[after]
    return (b["per_step_ms"] - a["per_step_ms"]) * b["iterations"]


@pytest.mark.parametrize(("rule", "before", "after"), CHECKS, ids=[c[0] for c in CHECKS])
def test_estimate_is_within_a_factor_of_two_of_the_steady_state_gain(
    rule: str, before: str, after: str
) -> None:
    estimate, measured = estimate_ms(rule, before), steady_gain_ms(before, after)
    assert measured > 0
    assert 0.5 <= estimate / measured <= 2.0, (estimate, measured)


def test_most_estimates_are_within_a_factor_of_two_of_the_whole_call_gain() -> None:
    ratios = {
        rule: estimate_ms(rule, before) / PAIRS[(before, after)]["saved_ms"]
        for rule, before, after in CHECKS
    }
    within = [rule for rule, ratio in ratios.items() if 0.5 <= ratio <= 2.0]
    assert len(within) >= 5, ratios


WITHIN_A_QUARTER = [
    c for c in CHECKS if c[0] not in ("host-sync", "pageable-memcpy", "dataloader-stall")
]


@pytest.mark.parametrize(
    ("rule", "before", "after"), WITHIN_A_QUARTER, ids=[c[0] for c in WITHIN_A_QUARTER]
)
def test_replayed_estimate_is_within_a_quarter_of_the_steady_state_gain(
    rule: str, before: str, after: str
) -> None:
    # host-sync (1.6x), pageable-memcpy (0.76x) and dataloader-stall (1.28x) are not yet: README.
    estimate, measured = estimate_ms(rule, before), steady_gain_ms(before, after)
    assert 0.75 <= estimate / measured <= 1.25, (estimate, measured)
