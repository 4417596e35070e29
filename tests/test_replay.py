"""Savings by replay: removing a sync saves what the GPU then no longer waits for, which is the
idle after it only where the GPU, not the host, sets the pace. Golden traces, one screen each."""

from __future__ import annotations

from pathlib import Path

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
    # (the frame's 1.5 µs of profiler cost out), 108 before each other, 9 before the final
    # sync, 0.5 a launch (its floor) and 2 for the sync, which outside the steps blocks nothing:
    # 327 µs a pass.
    report = analyze(write(tmp_path / "t.json", steps_launching_at_their_end(100.0, 300.0)))
    (finding,) = [f for f in report.findings if f.rule == "fp32-matmul"]
    assert finding.est_savings_ns == 900_000 - 327_000
    assert finding.est_savings_per_step_ns == (900_000 - 327_000) // 3
