"""Savings from a `brrr-trace record` trace against the gain timed afterwards in the same process.

Each pair of ``tests/data/realcode/h200/session12/`` and ``session12b/`` is one process
(``record_session12.sh``, ``12b``):
``time_ab.py --record`` recorded the unfixed program (20 wait steps, 10 recorded), then timed
the fix's two sides in alternating regions of that process. Between processes the host's pace
moved by more than these fixes gain (GPT small: 13.55-15.17 ms a step, ``session11c``), so the
estimate is checked against the gain of the process whose trace it reads: the median of the
paired differences (a region of the unfixed side minus the next region of the fixed side).
The README's "Estimated savings against reality" has the table and what each miss is.
"""

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
H200 = REAL / "h200"

RULES = {
    "gpt_tf32": ("fp32-matmul",),
    "cnn_item": ("host-sync",),
    "cnn_workers": ("dataloader-stall", "pageable-memcpy"),
}


def paired_gain_ms(name: str) -> float:
    """The median over rounds of (unfixed region - fixed region), ms a step."""
    line = (H200 / f"{name}.ab.txt").read_text()
    sides = list(json.loads(line.removeprefix("BENCH "))["seconds_per_step"].values())
    unfixed, fixed = sides
    return statistics.median(a - b for a, b in zip(unfixed, fixed, strict=True)) * 1e3


@cache
def report(name: str) -> Report:
    return analyze(H200 / f"{name}.record.json.gz", AnalysisOptions(source_root=str(REAL)))


def estimate_ms(name: str) -> float:
    """What the fix's rules save a step, replayed together where a rule's findings are one
    switch (``rule_savings``)."""
    rep = report(name)
    assert rep.steps is not None and rep.steps.recorded_unprofiled_ns is not None
    together = {r.rule: r.est_savings_ns for r in rep.rule_savings}
    total = sum(
        together.get(rule, sum(f.est_savings_ns for f in rep.findings if f.rule == rule))
        for rule in RULES[Path(name).name.split(".")[0]]
    )
    return total / rep.steps.count / 1e6


HOST_PACE = pytest.mark.xfail(
    strict=True,
    reason="GPT small's host and GPU take about as long (12.9 ms of kernels a step): TF32 gains "
    "0.1-0.4 ms; the replay's host at the scale that matches the timed step is faster than the "
    "program's, and the profiled steps' host time drifted 26-50 ms a step",
)
BACKWARD_TIMED_HOST_PACE = pytest.mark.xfail(
    strict=True,
    reason="with the backward timed, within 0.7 ms of a 0.5-2.0 ms gain in a 13.5 ms step, "
    "not within a quarter: the host's pace moved by that much between the recording and the "
    "timed regions",
)
SYNC_SLOWS_THE_BATCHES = pytest.mark.xfail(
    strict=True,
    reason="the CNN makes its batches slower after a sync each step (cnn_phases.py: 20.4 ms a "
    "batch with `.item()`, 15.3 without); the replay keeps the traced batch time",
)


@pytest.mark.parametrize(
    "name",
    [
        # Recorded before the recorder timed the backward (session 12).
        pytest.param("session12/gpt_tf32.p1", marks=HOST_PACE),  # 0.90 against 0.09
        pytest.param("session12/gpt_tf32.p2", marks=HOST_PACE),  # 4.54 against 0.39
        # Its backward timed (session 12b); without it: 3.76, 0.12 and 3.87.
        pytest.param("session12b/gpt_tf32.p1", marks=BACKWARD_TIMED_HOST_PACE),  # 1.14 vs 0.48
        pytest.param("session12b/gpt_tf32.p2", marks=BACKWARD_TIMED_HOST_PACE),  # 0 vs 0.47
        pytest.param("session12b/gpt_tf32.p3", marks=BACKWARD_TIMED_HOST_PACE),  # 1.38 vs 1.97
        pytest.param("session12/cnn_item.p1", marks=SYNC_SLOWS_THE_BATCHES),  # 1.02 against 7.78
        pytest.param("session12/cnn_item.p2", marks=SYNC_SLOWS_THE_BATCHES),  # 0.28 against 6.37
        pytest.param(
            "session12/cnn_workers.p1",  # 13.8 against 22.4
            marks=pytest.mark.xfail(
                strict=True,
                reason="its recorder timed 21.8 ms a step over steps 10-19; the same process's "
                "unfixed regions after step 74 took 27.4-32.1",
            ),
        ),
        "session12/cnn_workers.p2",  # 21.5 against 22.7
    ],
)
def test_a_saving_within_a_quarter_of_the_gain_timed_in_its_process(name: str) -> None:
    estimate, gain = estimate_ms(name), paired_gain_ms(name)
    assert 0.75 <= estimate / gain <= 1.25, (estimate, gain)


def range_ms(name: str) -> tuple[float, float]:
    rep = report(name)
    assert rep.steps is not None
    (together,) = [r for r in rep.rule_savings if r.rule == "fp32-matmul"]
    assert together.est_savings_range_ns is not None
    low, high = together.est_savings_range_ns
    return low / rep.steps.count / 1e6, high / rep.steps.count / 1e6


@pytest.mark.parametrize(
    "name",
    [
        "session12b/gpt_tf32.p1",  # 0.48 in 0.38-2.73
        pytest.param(
            "session12b/gpt_tf32.p2",  # 0.47 against a range of 0: no scale that replays its
            marks=pytest.mark.xfail(strict=True, reason="13.80 ms timed leaves TF32 nothing"),
        ),
        "session12b/gpt_tf32.p3",  # 1.97 in 0.90-3.82
    ],
)
def test_with_the_backward_timed_tf32s_gain_lies_in_the_range_shown(name: str) -> None:
    # The range: the saving at the least and the most profiler-cost scale that replay the
    # timed step within 3% (steps.calibration_band).
    low, high = range_ms(name)
    assert low <= paired_gain_ms(name) <= high, (low, high)


def test_gpt_smalls_timed_backward_scales_the_engine_threads_cost_below_the_model() -> None:
    # 4.0-5.1 ms a step unprofiled (session12b/gpt_tf32.p1), against 1.0-1.4 left in the
    # engine's thread by one scale for the step: the model's 10 us per engine op is too much.
    steps = report("session12b/gpt_tf32.p1").steps
    assert steps is not None and steps.backward_profiler_cost_scale is not None
    assert 0.5 <= steps.backward_profiler_cost_scale <= 0.8
