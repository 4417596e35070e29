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


# In these two tight loops the profiler costs the host about 2.5x what the model takes out
# (README, "Estimated savings against reality"): the estimate is 2.1x and 3.1x the gain.
PROFILER_COST_UNDERESTIMATED = pytest.mark.xfail(
    strict=True, reason="the profiler's cost in a tight host loop is underestimated"
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
