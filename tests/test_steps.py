"""ProfilerStep ranges: each step's time, and the replay's time without the profiler's cost.
Golden traces, one screen each."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.pipeline import analyze
from tests.tracebuilder import frame, kernel, launch, op, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"


def step(number: int, t: float) -> dict:
    return {**op(f"ProfilerStep#{number}", t, 200.0), "cat": "user_annotation"}


def test_two_host_bound_steps(tmp_path: Path) -> None:
    # Each step: one launch (2 µs, of which the profiler's callbacks are taken to be 4 µs, so
    # the call costs the 0.5 µs floor), a 10 µs kernel, then Python until the step ends.
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(GEMM, t + 5.0, 10.0, corr=k + 1)]
    report = analyze(write(tmp_path / "t.json", events))
    steps = report.steps
    assert steps is not None
    assert steps.durations_ns == (200_000, 200_000)
    assert (steps.median_ns, steps.spread_ns) == (200_000, 0)
    # 0.5 + 198 (host work after the first launch) + 0.5 + 198 (the rest of step 2) µs, over 2
    assert steps.replayed_ns == 198_500


def test_no_profiler_steps_no_step_report(tmp_path: Path) -> None:
    events = [frame("train.py(1): loop", 0.0, 100.0), launch(0.0, 1), kernel(GEMM, 5.0, 10.0, 1)]
    assert analyze(write(tmp_path / "t.json", events)).steps is None
