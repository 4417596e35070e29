"""Savings and the profiler's cost on the real-code programs (tests/data/realcode), against the
unprofiled per-step times measured on the H200 (measurements.json, median of the timed regions).
The numbers of every pair, including those not yet within a quarter, are in the README
(benchmarks/savings_real.py prints them)."""

from __future__ import annotations

import json
import statistics
from functools import cache
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.report import Report

REAL = Path(__file__).resolve().parent / "data" / "realcode"
MEASURED = json.loads((REAL / "h200" / "measurements.json").read_text())


def per_step_ns(bench: dict) -> float:  # type: ignore[type-arg]
    return statistics.median(bench["seconds"]) / bench["steps"] * 1e9


@cache
def report(name: str) -> Report:
    return analyze(REAL / "h200" / f"{name}.json.gz", AnalysisOptions(source_root=str(REAL)))


def unprofiled_ns(program: str) -> float:
    times = [per_step_ns(p["before_bench"]) for p in MEASURED["pairs"] if p["program"] == program]
    times += [per_step_ns(u["bench"]) for u in MEASURED["unprofiled"] if u["program"] == program]
    return statistics.mean(times)


# tiny_mlp (replayed 1.43x the measured step) and cnn (0.46x: its .item() per step costs far
# more unprofiled than the trace shows) are the two the cost model does not yet fit.
@pytest.mark.parametrize(
    "program", ["gpt_small", "use_library", "gpt_medium", "rnn", "amp_transformer", "hooks"]
)
def test_the_replay_without_the_profiler_gives_the_unprofiled_step(program: str) -> None:
    # The profiled steps of the host-bound ones are up to twice as long (gpt_small 29.6 ms
    # against 14.3): the replay takes the profiler's estimated cost out.
    steps = report(program).steps
    assert steps is not None and steps.replayed_ns is not None
    assert 0.9 <= steps.replayed_ns / unprofiled_ns(program) <= 1.1


@pytest.mark.parametrize(
    ("program", "fix", "rule"),
    [
        ("use_library", "sdpa-in-library", "manual-attention"),
        ("tiny_mlp", "cuda-graphs", "launch-overhead"),
    ],
)
def test_savings_per_step_within_a_quarter_of_the_measured_gain(
    program: str, fix: str, rule: str
) -> None:
    pair = next(p for p in MEASURED["pairs"] if p["program"] == program and p["fix"] == fix)
    gain = per_step_ns(pair["before_bench"]) - per_step_ns(pair["after_bench"])
    found = [f for f in report(program).findings if f.rule == rule]
    estimate = sum(f.est_savings_per_step_ns or 0 for f in found)
    assert 0.75 <= estimate / gain <= 1.25, (estimate, gain)


def test_attention_inside_a_library_model_is_found_on_the_line_that_calls_it() -> None:
    found = [f for f in report("use_library").findings if f.rule == "manual-attention"]
    assert [(f.file, f.line) for f in found] == [("use_library.py", 57)]
    assert found[0].evidence["replayed"] == "the library's attention as one fused kernel"


def test_a_dataloader_in_the_main_process_is_found_with_its_loading_time() -> None:
    found = [f for f in report("cnn").findings if f.rule == "dataloader-stall"]
    assert len(found) == 1
    # the batches take most of the step in the main process
    assert found[0].est_savings_per_step_ns > 0.5 * report("cnn").steps.replayed_ns
