"""Savings by replay: removing a sync saves what the GPU then no longer waits for, which is the
idle after it only where the GPU, not the host, sets the pace. Golden traces, one screen each."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import IdleCause
from tests.tracebuilder import frame, kernel, launch, runtime, write

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
