"""Savings by replay: removing a sync saves what the GPU then no longer waits for, which is the
idle after it only where the GPU, not the host, sets the pace. Golden traces, one screen each."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import IdleCause
from tests.tracebuilder import frame, kernel, launch, op, runtime, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"


def loop_with_sync(kernel_us: float, host_us: float, steps: int = 5) -> list[dict]:
    """Each step: launch a kernel, wait for it (.item()), then host_us of Python."""
    events, t = [], 0.0
    for step in range(steps):
        events += [
            launch(t, corr=step + 1),
            kernel(GEMM, t + 5.0, kernel_us, corr=step + 1),
            runtime("cudaStreamSynchronize", t + 3.0, kernel_us + 2.0),  # returns at the end
        ]
        t += 5.0 + kernel_us + host_us
    return [frame("train.py(1): loop", 0.0, t), *events]


def host_sync(report):
    return next((f for f in report.findings if f.rule == "host-sync"), None)


def test_a_gpu_bound_loop_gains_the_idle_after_each_sync(tmp_path: Path) -> None:
    # Kernels of 100 µs, 20 µs of host work after each wait: 4 gaps of 25 µs (20 + the launch
    # latency). Without the waits the host runs ahead and the kernels run back to back.
    report = analyze(write(tmp_path / "t.json", loop_with_sync(kernel_us=100.0, host_us=20.0)))
    assert report.summary.idle_by_cause_ns[IdleCause.SYNC] == 100_000
    finding = host_sync(report)
    assert finding is not None and finding.est_savings_ns == 100_000


def test_a_host_bound_loop_gains_only_the_waiting(tmp_path: Path) -> None:
    # Kernels of 5 µs and 300 µs of Python after each: the idle after the syncs (1.2 ms) is the
    # host's own time; taking the syncs away saves only the few µs each one waited.
    report = analyze(write(tmp_path / "t.json", loop_with_sync(kernel_us=5.0, host_us=300.0)))
    assert report.summary.idle_by_cause_ns[IdleCause.SYNC] >= 1_200_000
    assert host_sync(report) is None  # below the 50 µs worth reporting


FP32_GEMM = "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma"


def steps_launching_at_their_end(host_us: float, kernel_us: float) -> list[dict]:
    """Three ProfilerSteps: host_us of Python, then one FP32 GEMM launched as the step ends;
    after the last one the profiler synchronizes the device as it stops."""
    events, t = [], 0.0
    for k in range(3):
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, host_us + 10.0), "cat": "user_annotation"},
            launch(t + host_us, corr=k + 1),
            kernel(FP32_GEMM, t + host_us + 5.0, kernel_us, corr=k + 1),
        ]
        t += host_us + 10.0
    events.append(runtime("cudaDeviceSynchronize", t + 1.0, kernel_us))
    return [frame("train.py(1): loop", 0.0, t + kernel_us + 5.0), *events]


def test_a_host_bound_loop_gains_nothing_from_faster_kernels(tmp_path: Path) -> None:
    # 410 µs of host a step, 300 µs of GPU: the last step's kernel outlasts the window, but in
    # the loop it runs beside the next step's Python. (Ended at the window's end, the replay
    # would have called TF32 worth 260 µs.)
    report = analyze(write(tmp_path / "t.json", steps_launching_at_their_end(400.0, 300.0)))
    assert [f.rule for f in report.findings if f.rule == "fp32-matmul"] == []


def test_a_gpu_bound_loop_gains_down_to_the_hosts_pace(tmp_path: Path) -> None:
    # 300 µs of GPU a step: a pass of the loop takes 900 µs. With TF32 (the kernels at
    # 67/494.7 of their time: 40.6 µs) the host sets the pace: 98.5 µs before the first launch
    # (the frame's 1.5 µs of profiler cost out) and the 8 from the last launch's return to the
    # end of its step, which a loop runs back to back; 108 before each other launch, 0.5 a
    # launch (its floor). The profiler's final sync comes after the last step: no part of a
    # pass. 324 µs a pass.
    report = analyze(write(tmp_path / "t.json", steps_launching_at_their_end(100.0, 300.0)))
    (finding,) = [f for f in report.findings if f.rule == "fp32-matmul"]
    assert finding.est_savings_ns == 900_000 - 324_000
    assert finding.est_savings_per_step_ns == (900_000 - 324_000) // 3


NO_PROFILER_COST = AnalysisOptions(
    profiler_cost_per_frame_ns=0,
    profiler_cost_per_op_ns=0,
    profiler_cost_per_engine_op_ns=0,
    profiler_cost_per_call_ns=0,
    profiler_cost_per_launch_ns=0,
)


def loop_loading_in_the_host(load_us: float, steps: int = 8) -> list[dict]:
    """Each 810 µs step: the DataLoader's __next__ for load_us from the step's start, a launch
    at 805 (2 µs), its 5 µs kernel at 809."""
    events, t = [], 0.0
    for k in range(steps):
        events += [
            frame("torch/utils/data/dataloader.py(700): __next__", t, load_us),
            launch(t + 805.0, corr=k + 1),
            kernel(GEMM, t + 809.0, 5.0, corr=k + 1),
        ]
        t += 810.0
    return [frame("train.py(1): loop", 0.0, t), *events]


def test_four_workers_make_batches_at_most_four_times_as_fast(tmp_path: Path) -> None:
    # Baseline: the last kernel ends at 7 * 810 + 809 + 5 = 6484 µs. With 4 workers, each batch
    # taking 800 µs: batches 0-3 are ready at 800 and batches 4-7 at 1600; the host needs 8 µs
    # between launches and 2 per launch, so launch 7 comes at 1600 + 3 * 10 = 1630, and its
    # kernel ends at 1630 + 4 + 5 = 1639. Saved: 4845 µs, not the 6400 of loading taken away.
    path = write(tmp_path / "t.json", loop_loading_in_the_host(load_us=800.0))
    report = analyze(path, NO_PROFILER_COST)
    [finding] = [f for f in report.findings if f.rule == "dataloader-stall"]
    assert finding.est_savings_ns == 4_845_000
    assert finding.evidence["loading_us"] == 6400.0
    assert finding.evidence["replayed"] == "batches made by 4 worker processes"


def test_workers_hide_loading_shorter_than_the_rest_of_the_step(tmp_path: Path) -> None:
    # 100 µs of loading in an 810 µs step: each batch is ready long before the host asks for
    # it (worker w's first at 100 µs), so all 8 x 100 µs are saved: the last kernel ends at
    # 705 + 7 * 710 + 4 + 5 = 5684 µs instead of 6484.
    path = write(tmp_path / "t.json", loop_loading_in_the_host(load_us=100.0))
    report = analyze(path, NO_PROFILER_COST)
    [finding] = [f for f in report.findings if f.rule == "dataloader-stall"]
    assert finding.est_savings_ns == 800_000
