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


def test_a_recorded_unprofiled_step_calibrates_the_profilers_cost(tmp_path: Path) -> None:
    # As above, plus 60 short Python calls after each launch: the cost model takes 1.5 µs per
    # frame out, so the host work after a launch is 198 - 90 = 108 µs and the replay 108.5 µs a
    # step. The recorder timed the steps unprofiled at 60 µs in its later half (the first two
    # still warm up), so the cost is scaled until 0.5 + 198 - 90 * s = 60: s = 1.539.
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(GEMM, t + 5.0, 10.0, corr=k + 1)]
        events += [frame("train.py(9): f", t + 10.0 + 3 * i, 2.0) for i in range(60)]
    timed = [900_000, 500_000, 60_000, 60_000]
    trace = write(tmp_path / "t.json", events, brrr_record={"unprofiled_step_ns": timed})
    steps = analyze(trace).steps
    assert steps is not None
    assert steps.recorded_unprofiled_ns == 60_000
    assert abs(steps.replayed_ns - 60_000) <= 100  # bisection to 4/2^14 of the scale
    assert abs(steps.profiler_cost_scale - 1.539) <= 0.001


def test_a_window_timed_between_syncs_is_the_recorded_step(tmp_path: Path) -> None:
    # The same trace; the steps' own times say 40 µs (the host running ahead of the GPU), the
    # window between two device syncs says 120 µs over 2 steps: 60 µs a step, as above.
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(GEMM, t + 5.0, 10.0, corr=k + 1)]
        events += [frame("train.py(9): f", t + 10.0 + 3 * i, 2.0) for i in range(60)]
    record = {
        "unprofiled_step_ns": [900_000, 500_000, 40_000, 40_000],
        "unprofiled_window": {"steps": 2, "ns": 120_000},
    }
    steps = analyze(write(tmp_path / "t.json", events, brrr_record=record)).steps
    assert steps is not None and steps.recorded_unprofiled_ns == 60_000
    assert abs(steps.profiler_cost_scale - 1.539) <= 0.001


def test_a_gpu_bound_step_keeps_the_models_cost_when_it_replays_the_timed_step(
    tmp_path: Path,
) -> None:
    # As above, but the kernel takes 190 µs: without the profiler's cost the host needs 108.5 µs
    # a step, so the GPU sets the pace, 190 µs a step (each kernel waits for the one before).
    # Timed at 193 µs, within 3% of that: the model's cost stays (scale 1). Matching 193 µs
    # exactly would mean a host just short of the GPU's pace, 0.5 + 198 - 90 * s = 193: s = 0.061.
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(GEMM, t + 5.0, 190.0, corr=k + 1)]
        events += [frame("train.py(9): f", t + 10.0 + 3 * i, 2.0) for i in range(60)]
    record = {"unprofiled_window": {"steps": 2, "ns": 386_000}}
    steps = analyze(write(tmp_path / "t.json", events, brrr_record=record)).steps
    assert steps is not None and steps.recorded_unprofiled_ns == 193_000
    assert (steps.profiler_cost_scale, steps.replayed_ns) == (1.0, 190_000)


def steps_with_an_optimizer() -> list[dict]:
    """Two 1 ms steps: a launch (2 µs), then an optimizer step (``Optimizer.step#SGD.step``,
    240 µs) of four 10 µs launches, each after 50 µs of Python holding 10 frames, then Python
    (60 frames) until the next step."""
    events = [frame("train.py(1): loop", 0.0, 2000.0)]
    for k, t in enumerate((0.0, 1000.0)):
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, 1000.0), "cat": "user_annotation"},
            launch(t, corr=100 + k),
            kernel(GEMM, t + 5.0, 5.0, corr=100 + k),
            {**op("Optimizer.step#SGD.step", t + 2.0, 240.0), "cat": "user_annotation"},
        ]
        for j in range(4):
            returned = t + 2.0 + 60.0 * j
            events += [frame("optim/sgd.py(80): _single_tensor_sgd", returned + 1.0 + 4 * i, 2.0)
                       for i in range(10)]  # fmt: skip
            corr = 10 * (k + 1) + j
            events += [
                launch(returned + 50.0, corr, dur=10.0),
                kernel(GEMM, returned + 55.0, 5.0, corr),
            ]
        events += [frame("train.py(9): f", t + 300.0 + 3 * i, 2.0) for i in range(60)]
    return events


def test_the_optimizers_timed_steps_calibrate_the_cost_inside_them(tmp_path: Path) -> None:
    # The recorder timed each optimizer step unprofiled at 88 µs. Its four launches: 50 µs of
    # host work less 15 µs of modelled cost (10 frames) each, and calls of 10 µs less 4 µs (the
    # launch's callbacks): 4 x (60 - 19 s) = 88 at s = 2. The rest of a step is its first
    # launch (the 0.5 µs floor) and the 758 µs after the optimizer less 90 µs (60 frames):
    # 0.5 + 88 + 758 - 90 s' = 711.5 µs timed at s' = 1.5. One scale for both would be
    # 998.5 - 166 s = 711.5: 1.729, and the optimizer would replay at 4 x (60 - 19 x 1.729) =
    # 108.6 µs, a fifth slower than timed.
    record = {
        "unprofiled_window": {"steps": 2, "ns": 1_423_000},
        "unprofiled_optimizer_step_ns": [88_000, 88_000, 88_000],
    }
    steps = analyze(write(tmp_path / "t.json", steps_with_an_optimizer(), brrr_record=record)).steps
    assert steps is not None and steps.optimizer_profiler_cost_scale is not None
    assert abs(steps.optimizer_profiler_cost_scale - 2.0) <= 0.001
    assert abs(steps.profiler_cost_scale - 1.5) <= 0.001
    assert abs(steps.replayed_ns - 711_500) <= 200

    del record["unprofiled_optimizer_step_ns"]
    steps = analyze(write(tmp_path / "t.json", steps_with_an_optimizer(), brrr_record=record)).steps
    assert steps is not None and steps.optimizer_profiler_cost_scale is None
    assert abs(steps.profiler_cost_scale - 1.729) <= 0.001


ENGINE = 2  # the autograd engine's thread


def steps_with_a_backward() -> list[dict]:
    """Two 1 ms steps. Main thread: a launch (2 µs), Python (60 frames, 500-689 µs into the
    step), a launch at 700 µs. The engine's thread: four ``evaluate_function`` ops at 200, 260,
    320 and 380 µs (50 µs each), each ending in a 10 µs launch."""
    events = [frame("train.py(1): loop", 0.0, 2000.0)]
    for k, t in enumerate((0.0, 1000.0)):
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, 1000.0), "cat": "user_annotation"},
            launch(t, corr=100 + k),
            kernel(GEMM, t + 5.0, 5.0, corr=100 + k),
        ]
        for j in range(4):
            began, corr = t + 200.0 + 60.0 * j, 10 * (k + 1) + j
            events += [
                op("autograd::engine::evaluate_function: MmBackward0", began, 50.0, tid=ENGINE),
                launch(began + 40.0, corr, dur=10.0, tid=ENGINE),
                kernel(GEMM, began + 45.0, 5.0, corr),
            ]
        events += [frame("train.py(9): f", t + 500.0 + 3 * i, 2.0) for i in range(60)]
        events += [launch(t + 700.0, corr=200 + k), kernel(GEMM, t + 705.0, 5.0, corr=200 + k)]
    return events


def test_the_timed_backward_calibrates_the_cost_in_the_engines_thread(tmp_path: Path) -> None:
    # The engine's part of a step: the host work before its first launch, since the main
    # thread's launch returned (238 µs, one engine op in it: 10 µs of modelled cost), then
    # three times 50 µs holding one engine op, and four 10 µs launches less 4 µs of callbacks:
    # 238 + 150 + 40 - (10 + 30 + 16) s = 428 - 56 s, timed at 316 µs: s = 2. The rest: the
    # main thread's launches (the 0.5 µs floor each), the 298 µs before the first and the
    # 270 µs before the second less 90 µs (60 frames): 569 - 90 s'. Timed at 750 µs a step,
    # 428 - 112 + 569 - 90 s' = 750 at s' = 1.5. One scale for both: 997 - 146 s = 750,
    # s = 1.692, and the backward would replay at 428 - 56 x 1.692 = 333 µs.
    record = {
        "unprofiled_window": {"steps": 2, "ns": 1_500_000},
        "unprofiled_backward_ns": [316_000, 316_000, 316_000],
    }
    steps = analyze(write(tmp_path / "t.json", steps_with_a_backward(), brrr_record=record)).steps
    assert steps is not None and steps.backward_profiler_cost_scale is not None
    assert abs(steps.backward_profiler_cost_scale - 2.0) <= 0.001
    assert abs(steps.profiler_cost_scale - 1.5) <= 0.001
    assert abs(steps.replayed_ns - 750_000) <= 200

    del record["unprofiled_backward_ns"]
    steps = analyze(write(tmp_path / "t.json", steps_with_a_backward(), brrr_record=record)).steps
    assert steps is not None and steps.backward_profiler_cost_scale is None
    assert abs(steps.profiler_cost_scale - 1.692) <= 0.001


SGEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4"


def test_a_calibrated_saving_ranges_over_the_scales_that_replay_the_timed_step(
    tmp_path: Path,
) -> None:
    # The GPU-bound trace above with an FP32 GEMM of 150 µs (FLOPs unknown: in TF32 it takes
    # 150 x 67/494.7 = 20.3 µs), timed at 152 µs: scale 1 stays (150 µs replayed), and TF32
    # saves 150 - 108.5 (the host's pace then) = 41.5 µs a step, 83 µs in all. Every scale from
    # the one where the host takes 152 x 1.03 = 156.6 µs (0.5 + 198 - 90 s: s = 0.466) up to the
    # bound, 4, replays the step within 3% of the timed one, and the saving over them runs from
    # 0 (a host as slow as the GPU) to 2 x (150 - 20.3) = 259.4 µs (a host with no cost left).
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(SGEMM, t + 5.0, 150.0, corr=k + 1)]
        events += [frame("train.py(9): f", t + 10.0 + 3 * i, 2.0) for i in range(60)]
    record = {"unprofiled_window": {"steps": 2, "ns": 304_000}}
    report = analyze(write(tmp_path / "t.json", events, brrr_record=record))
    assert report.steps is not None and report.steps.profiler_cost_scale == 1.0
    (finding,) = report.findings
    assert (finding.rule, finding.est_savings_ns) == ("fp32-matmul", 83_000)
    assert finding.est_savings_range_ns == (0, 259_370)
    (note,) = [n for n in report.notes if "saving given as a range" in n]
    assert "calibrated on the steps `brrr-trace record` timed unprofiled" in note
    assert "within 3%" in note


def test_too_few_or_bad_recorded_steps_calibrate_nothing(tmp_path: Path) -> None:
    events = [frame("train.py(1): loop", 0.0, 400.0)]
    for k, t in enumerate((0.0, 200.0)):
        events += [step(k + 1, t), launch(t, corr=k + 1), kernel(GEMM, t + 5.0, 10.0, corr=k + 1)]
    for timed in ([100_000], ["100000", -5], "x", None):
        trace = write(tmp_path / "t.json", events, brrr_record={"unprofiled_step_ns": timed})
        steps = analyze(trace).steps
        assert steps is not None
        assert (steps.recorded_unprofiled_ns, steps.replayed_ns) == (None, 198_500)
        assert steps.profiler_cost_scale == 1.0


TIMED = Path(__file__).parent / "data" / "realcode" / "h200" / "record-timed"


def test_record_traces_of_real_programs_replay_to_their_timed_step() -> None:
    import gzip
    import json
    import statistics

    from brrr_trace.options import AnalysisOptions

    for trace in sorted(TIMED.glob("*.json.gz")):
        with gzip.open(trace) as handle:
            record = json.load(handle)["brrr_record"]
        window = record.get("unprofiled_window")
        later = record["unprofiled_step_ns"][len(record["unprofiled_step_ns"]) // 2 :]
        expected = window["ns"] // window["steps"] if window else int(statistics.median(later))
        steps = analyze(trace, AnalysisOptions(source_root=str(TIMED.parent.parent))).steps
        assert steps is not None and steps.recorded_unprofiled_ns == expected, trace.name
        if steps.profiler_cost_scale == 1.0:  # the model's own cost replays it closely enough
            assert abs(steps.replayed_ns - expected) / expected <= 0.03, trace.name
        elif 0 < steps.profiler_cost_scale < 4.0:
            assert abs(steps.replayed_ns - expected) / expected < 0.01, trace.name
        elif steps.profiler_cost_scale == 4.0:
            # the GPU alone takes longer than the host was timed (a queue still filling)
            assert steps.replayed_ns > expected, trace.name
        else:  # even with no cost taken out, the replay is faster than the program was timed
            assert steps.profiler_cost_scale == 0.0 and steps.replayed_ns <= expected, trace.name


def test_steps_with_no_host_event_in_them_replay_nothing(tmp_path: Path) -> None:
    # The one launch comes after the only step: there is no pass of the loop to replay.
    events = [frame("train.py(1): loop", 0.0, 400.0), step(1, 0.0)]
    events += [launch(300.0, corr=1), kernel(GEMM, 305.0, 10.0, corr=1)]
    steps = analyze(write(tmp_path / "t.json", events)).steps
    assert steps is not None
    assert (steps.durations_ns, steps.replayed_ns) == ((200_000,), None)


def test_the_steps_line_says_where_the_replay_does_not_match_the_timed_step() -> None:
    from brrr_trace.render.text import _steps_line
    from brrr_trace.report import StepsReport

    def line(replayed_ns: int) -> str:
        steps = StepsReport((35_000_000,) * 2, 35_000_000, 0, replayed_ns, 28_600_000, 1.0)
        return _steps_line(steps)

    head = "Steps: 2 ProfilerStep(s), median 35.0 ms (spread 0 ns) · without the profiler 28.6 ms a"
    assert line(28_590_000) == head + " step (timed by record; savings replayed to match it)"
    assert line(28_060_000) == head + " step (timed by record; the savings' replay: 28.1 ms a step)"


def test_bad_optimizer_times_calibrate_nothing_apart(tmp_path: Path) -> None:
    for timed in ("88000", [True, -5, "88000", 10**14], None, {"ns": 88_000}):
        record = {"unprofiled_window": {"steps": 2, "ns": 1_423_000}}
        record["unprofiled_optimizer_step_ns"] = timed  # type: ignore[assignment]
        trace = write(tmp_path / "t.json", steps_with_an_optimizer(), brrr_record=record)
        steps = analyze(trace).steps
        assert steps is not None and steps.optimizer_profiler_cost_scale is None
        assert abs(steps.profiler_cost_scale - 1.729) <= 0.001
