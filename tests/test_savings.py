"""Estimated savings against reality: before/after pairs recorded on the H200.

Each pair is the same workload without and with the fix (tests/data/FIXTURES.md). The measured gain
is the unprofiled time difference: steady state (per-step time × the trace's steps, the loop a
user runs for hours; h200/small_pairs.json, set-up cancelled and the sides interleaved by
tests/data/time_small_pairs.py) and whole call (one call including set-up, e.g. starting
DataLoader workers; h200/measurements.json).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze

DATA = Path(__file__).resolve().parent / "data"
MEASURED = json.loads((DATA / "h200" / "measurements.json").read_text())
PAIRS = {(p["before"], p["after"]): p for p in MEASURED["pairs"]}
FIXTURES = MEASURED["fixtures"]
SMALL_PAIRS = json.loads((DATA / "h200" / "small_pairs.json").read_text())["pairs"]
PER_STEP_MS = {
    side: statistics.median(run["per_step_ms"] for run in runs)
    for pair in SMALL_PAIRS
    for side, runs in pair["runs"].items()
}

# (rule, before, after): the pairs tests/data/time_small_pairs.py timed.
CHECKS = [(pair["rule"], pair["before"], pair["after"]) for pair in SMALL_PAIRS]


def estimate_ms(rule: str, before: str) -> float:
    report = analyze(DATA / "h200" / f"{before}.json.gz", AnalysisOptions(source_root=str(DATA)))
    return sum(f.est_savings_ns for f in report.findings if f.rule == rule) / 1e6


def steady_gain_ms(before: str, after: str) -> float:
    return (PER_STEP_MS[before] - PER_STEP_MS[after]) * FIXTURES[before]["iterations"]


# 2.1x and 2.7x the gain, and 2.0x and 2.1x with the trace and the times from one host
# (README, "Estimated savings against reality"): removing item_in_loop's syncs makes the GPU run
# its matmul 8-12% slower (back to back), which the replay does not model; in
# optimizer_foreach_false the profiler costs the host 1.5-2x what the model takes out.
PROFILER_COST_UNDERESTIMATED = pytest.mark.xfail(
    strict=True,
    reason="a busier GPU's slower kernels (host-sync), the profiler's cost in a tight host loop "
    "(unfused-optimizer)",
)
FACTOR_OF_TWO = [
    pytest.param(*c, id=c[0], marks=PROFILER_COST_UNDERESTIMATED)
    if c[0] in ("host-sync", "unfused-optimizer")
    else pytest.param(*c, id=c[0])
    for c in CHECKS
]


@pytest.mark.parametrize(("rule", "before", "after"), FACTOR_OF_TWO)
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


WITHIN_A_QUARTER = [c for c in CHECKS if c[0] not in ("host-sync", "unfused-optimizer")]


@pytest.mark.parametrize(
    ("rule", "before", "after"), WITHIN_A_QUARTER, ids=[c[0] for c in WITHIN_A_QUARTER]
)
def test_replayed_estimate_is_within_a_quarter_of_the_steady_state_gain(
    rule: str, before: str, after: str
) -> None:
    estimate, measured = estimate_ms(rule, before), steady_gain_ms(before, after)
    assert 0.75 <= estimate / measured <= 1.25, (estimate, measured)


SESSION8 = DATA / "h200" / "session8"


def session8_gain_ms(before: str, after: str) -> float:
    """The steady-state gain timed on the host that recorded ``session8/before``."""
    pairs = [
        pair
        for name in ("small_pairs_s8a.json", "small_pairs_s8b.json")
        for pair in json.loads((SESSION8 / name).read_text())["pairs"]
    ]
    (pair,) = [p for p in pairs if p["before"] == before]
    per_step = {
        side: statistics.median(run["per_step_ms"] for run in runs)
        for side, runs in pair["runs"].items()
    }
    fixtures = json.loads((SESSION8 / "measurements.json").read_text())["fixtures"]
    return (per_step[before] - per_step[after]) * fixtures[before]["iterations"]


@pytest.mark.parametrize(
    ("rule", "before", "after"),
    [
        ("fp32-matmul", "fp32_matmul", "fp32_matmul_tf32"),
        ("unfused-elementwise", "elementwise_chain", "elementwise_chain_compiled"),
        ("dataloader-stall", "dataloader_slow", "dataloader_workers"),
        pytest.param(
            "host-sync", "item_in_loop", "item_in_loop_fixed", marks=PROFILER_COST_UNDERESTIMATED
        ),
        pytest.param(
            "unfused-optimizer",
            "optimizer_foreach_false",
            "optimizer_fused",
            marks=PROFILER_COST_UNDERESTIMATED,
        ),
    ],
)
def test_estimate_within_a_quarter_of_the_gain_on_the_host_that_recorded_it(
    rule: str, before: str, after: str
) -> None:
    report = analyze(SESSION8 / f"{before}.json.gz", AnalysisOptions(source_root=str(DATA)))
    estimate = sum(f.est_savings_ns for f in report.findings if f.rule == rule) / 1e6
    gain = session8_gain_ms(before, after)
    assert 0.75 <= estimate / gain <= 1.25, (estimate, gain)


SESSION11 = DATA / "h200" / "session11"
SESSION11B = DATA / "h200" / "session11b"


def per_step_gain_ms(folder: Path, before: str, after: str) -> float:
    """The steady-state gain a step, timed on the host that recorded the folder's traces."""
    (pair,) = [
        p
        for p in json.loads((folder / "small_pairs.json").read_text())["pairs"]
        if p["before"] == before
    ]
    per_step = {
        side: statistics.median(run["per_step_ms"] for run in runs)
        for side, runs in pair["runs"].items()
    }
    return per_step[before] - per_step[after]


@pytest.mark.parametrize(
    ("rule", "before", "after"),
    [
        # 2.69 ms against 0.217 x 100 = 2.17 (1.24): where this host's GPU ran the fixed loop's
        # matmuls back to back about as fast as with a rest between them.
        ("host-sync", "item_in_loop", "item_in_loop_fixed"),
        pytest.param(
            "unfused-optimizer",
            "optimizer_foreach_false",
            "optimizer_fused",
            marks=PROFILER_COST_UNDERESTIMATED,  # 34.7 ms against 8.37 x 3 = 25.1 (1.38)
        ),
    ],
)
def test_plain_traces_of_session_11_against_their_hosts_gain(
    rule: str, before: str, after: str
) -> None:
    report = analyze(
        SESSION11 / "plain" / f"{before}.json.gz", AnalysisOptions(source_root=str(DATA))
    )
    estimate = sum(f.est_savings_ns for f in report.findings if f.rule == rule) / 1e6
    fixtures = json.loads((SESSION11 / "plain" / "measurements.json").read_text())["fixtures"]
    gain = per_step_gain_ms(SESSION11, before, after) * fixtures[before]["iterations"]
    assert 0.75 <= estimate / gain <= 1.25, (estimate, gain)


def test_a_recorded_optimizer_steps_time_calibrates_the_fused_steps_saving() -> None:
    # `brrr-trace record --wait 20 --steps 10` of the per-parameter Adam (record_small.py), the
    # pair timed on the same host (record_session11b.sh): 18.19 -> 8.12 ms a step. The recorder
    # timed its optimizer.step() at 11.2 ms unprofiled, against 27.0 profiled (15.8 of cost;
    # the rest of the step 8.9), where the model puts 8.2 ms of cost there and 12.3 outside.
    # One scale for the whole step (1.52) gave 15.0 ms a step (1.49x); calibrated apart, the
    # rest of the step keeps its own pace.
    report = analyze(
        SESSION11B / "optimizer_foreach_false.record.json.gz",
        AnalysisOptions(source_root=str(DATA)),
    )
    assert report.steps is not None and report.steps.optimizer_profiler_cost_scale is not None
    (finding,) = [f for f in report.findings if f.rule == "unfused-optimizer"]
    assert finding.est_savings_per_step_ns is not None
    gain = per_step_gain_ms(SESSION11B, "optimizer_foreach_false", "optimizer_fused")
    assert 0.75 <= finding.est_savings_per_step_ns / 1e6 / gain <= 1.25, (finding, gain)
