"""small-grid, exposed-communication, fp32-matmul, host-sync and unfused-optimizer on tiny
synthetic traces: each rule firing, with its whole finding, and quiet where its condition does
not hold. One screen per case."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from brrr_trace.pipeline import analyze
from brrr_trace.render.json import to_dict
from brrr_trace.report import Finding, RuleSaving
from tests.tracebuilder import frame, kernel, launch, memcpy, op, runtime, write

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def findings(path: Path, rule: str) -> list[Finding]:
    return [f for f in analyze(path).findings if f.rule == rule]


def on_step(rule: str, line: int, **fields: Any) -> Finding:
    """A warning on the line of train.py's ``step`` (no local train.py: ``path`` None)."""
    doc = f"docs/rules/{rule}.md"
    where: dict[str, Any] = {"file": "train.py", "path": None, "function": "step", "lines": (line,)}
    return Finding(rule=rule, severity="warning", line=line, doc=doc, **where, **fields)


def small_kernels(blocks: int) -> list[dict]:
    """Ten 100 µs kernels of `blocks` blocks each, back to back, from one line."""
    events = [frame("train.py(3): step", 0.0, 1200.0)]
    for corr in range(1, 11):
        t = 110.0 * corr
        events += [launch(t - 5.0, corr), kernel("void small", t, 100.0, corr, grid=[blocks, 1, 1])]
    return events


def test_small_grid_fires_on_kernels_with_fewer_blocks_than_sms(tmp_path: Path) -> None:
    # The H200 has 132 SMs; 33 blocks leave three quarters of it idle: 10 × 100 µs × 0.75.
    (finding,) = findings(write(tmp_path / "t.json", small_kernels(blocks=33)), "small-grid")
    assert finding == on_step(
        "small-grid",
        3,
        message="10 kernels launch as few as 33 blocks on a GPU with 132 SMs: most of the chip "
        "sits idle while they run",
        fix="Give the kernel more parallel work: a larger batch, fusing with neighbours "
        "(torch.compile), or a different split of the problem.",
        est_savings_ns=750_000,
        evidence={"kernels": 10, "min_blocks": 33, "sms": 132},
    )


def test_small_grid_is_quiet_when_the_grid_fills_the_gpu(tmp_path: Path) -> None:
    assert findings(write(tmp_path / "t.json", small_kernels(blocks=132)), "small-grid") == []


def all_reduce_after_compute(overlapped: bool) -> list[dict]:
    """A 100 µs add, then a 200 µs all-reduce: after it on one stream, or beside it on two."""
    nccl_at = 15.0 if overlapped else 115.0
    return [
        frame("train.py(7): step", 0.0, 400.0),
        launch(10.0, 1),
        kernel(ADD, 15.0, 100.0, 1),
        launch(12.0, 2),
        kernel(NCCL, nccl_at, 200.0, 2, stream=9 if overlapped else 7),
    ]


def test_exposed_communication_fires_on_a_collective_with_nothing_beside_it(
    tmp_path: Path,
) -> None:
    # 200 µs exposed, after the add on its stream: the replay without it ends 200 µs sooner.
    # (No host op of a collective in this trace: the kernel alone, on its launch's line.)
    trace = write(tmp_path / "t.json", all_reduce_after_compute(overlapped=False))
    (finding,) = findings(trace, "exposed-communication")
    assert finding == on_step(
        "exposed-communication",
        7,
        message="collective kernels run 0.20 ms with no computation beside them",
        fix="Overlap communication with compute: smaller DDP buckets (bucket_cap_mb) start their "
        "all-reduce sooner; during gradient accumulation, skip it under no_sync() until the last "
        "micro-batch; FSDP: forward/backward prefetch. If the ranks are imbalanced, the time is "
        "waiting for the slowest rank: compare the ranks' traces.",
        est_savings_ns=200_000,
        evidence={**EXPOSED, "exposed_us": 200.0, "kernel_exposed_us": 200.0},
        # The GPU's own time: the same whatever the profiler cost the host.
        est_savings_range_ns=(200_000, 200_000),
    )


EXPOSED = {"host_wait_us": 0.0, "calls": 0, "replayed": "the collectives' exposed time taken away"}


def test_exposed_communication_counts_only_what_compute_does_not_cover(tmp_path: Path) -> None:
    # Beside the add on another stream: 100 µs of the 200 exposed. Re-timed to its covered
    # 100 µs, the all-reduce ends 1.5 µs before the add in the replay, which then ends with the
    # add: 98.5 µs sooner.
    trace = write(tmp_path / "t.json", all_reduce_after_compute(overlapped=True))
    (finding,) = findings(trace, "exposed-communication")
    assert (finding.est_savings_ns, finding.evidence) == (
        98_500,
        {**EXPOSED, "exposed_us": 100.0, "kernel_exposed_us": 100.0},
    )


def test_exposed_communication_is_quiet_when_compute_covers_the_collective(
    tmp_path: Path,
) -> None:
    events = [
        frame("train.py(7): step", 0.0, 400.0),
        launch(10.0, 1),
        kernel(ADD, 15.0, 100.0, 1),
        launch(12.0, 2),
        kernel(NCCL, 40.0, 50.0, 2, stream=9),  # within the add's 15-115 µs
    ]
    assert findings(write(tmp_path / "t.json", events), "exposed-communication") == []


def test_findings_of_one_rule_are_replayed_together_with_their_range(tmp_path: Path) -> None:
    # GPU-bound: both lines launch at once and stream 7 runs add, all-reduce, add, all-reduce
    # back to back (15-615 µs). Either all-reduce alone taken away ends the stream 200 µs
    # sooner; both, 400. The GPU's own time: the same at either end of the profiler's cost.
    events = [
        frame("train.py(7): step", 0.0, 100.0),
        launch(10.0, 1),
        kernel(ADD, 15.0, 100.0, 1),
        launch(12.0, 2),
        kernel(NCCL, 115.0, 200.0, 2),
        frame("train.py(20): sync", 100.0, 100.0),
        launch(110.0, 3),
        kernel(ADD, 315.0, 100.0, 3),
        launch(112.0, 4),
        kernel(NCCL, 415.0, 200.0, 4),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert [(f.line, f.est_savings_ns) for f in report.findings] == [(7, 200_000), (20, 200_000)]
    assert report.rule_savings == (
        RuleSaving(
            rule="exposed-communication",
            findings=2,
            est_savings_ns=400_000,
            est_savings_range_ns=(400_000, 400_000),
        ),
    )
    assert to_dict(report)["rule_savings"] == [
        {
            "rule": "exposed-communication",
            "findings": 2,
            "est_savings_us": 400.0,
            "est_savings_per_step_us": None,
            "est_savings_range_us": [400.0, 400.0],
        }
    ]


GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16>"


def test_attention_on_one_line_is_found_among_that_lines_own_kernels(tmp_path: Path) -> None:
    # No model.py at hand: the trace names only forward's def line, so all three kernels sit
    # on line 10. GPU-bound, 15-315 µs back to back; with no shapes to count FLOPs, the fused
    # kernel is taken to need half their time: the stream ends 150 µs sooner.
    events = [frame("model.py(10): forward", 0.0, 30.0)]
    for corr, name in enumerate((GEMM, SOFTMAX, GEMM), start=1):
        events += [launch(float(corr), corr), kernel(name, 15.0 + 100.0 * (corr - 1), 100.0, corr)]
    (finding,) = findings(write(tmp_path / "t.json", events), "manual-attention")
    assert (finding.file, finding.line, finding.lines) == ("model.py", 10, (10,))
    assert finding.message == (
        "attention computed by hand (3 kernels of this line: matmul, softmax, matmul); the "
        "score matrix goes through HBM several times"
    )
    assert finding.est_savings_ns == 150_000
    assert finding.evidence == {
        "kernels": 3,
        "flops": 0,
        "replayed": "the matmuls and the softmax as one fused kernel",
    }


BF16_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
SGEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4"


def test_fp32_gemms_on_tensor_cores_take_their_flops_at_a_reachable_rate(tmp_path: Path) -> None:
    # Ten 50 µs FP32 GEMMs back to back on the GPU, five of them 1024³ (2.147 GFLOP, from their
    # op's shapes). On TF32 tensor cores those take 2.147e9 / (0.8 × 494.7 TFLOP/s) = 5.4 µs
    # plus 12 µs a kernel: 32.6 µs saved each. The five of unknown FLOPs keep the peak ratio
    # (67 / 494.7 = 0.135: 6.8 µs), 43.2 µs saved each. 5 × 32.6 + 5 × 43.2 = 379 µs; the peak
    # ratio for all ten said 432 µs.
    events = [frame("train.py(3): step", 0.0, 700.0)]
    for corr in range(1, 11):
        t = 10.0 * corr
        known = {"Input Dims": [[1024, 1024]] * 2, "Input type": ["float"] * 2}
        shapes = known if corr <= 5 else {}
        events += [
            op("aten::mm", t, 8.0, **shapes),
            launch(t + 2.0, corr),
            kernel(SGEMM, 100.0 + 50.0 * (corr - 1), 50.0, corr),
        ]
    (finding,) = findings(write(tmp_path / "t.json", events), "fp32-matmul")
    assert finding.est_savings_ns == 379_015
    assert finding.evidence == {
        "kernels": 10,
        "fp32_tflops": 67.0,
        "replayed": "the FP32 matrix kernels on TF32 tensor cores",
    }


def sync_reads(line: int, t: float, waits: float = 0.0) -> list[dict]:
    """What `brrr-trace record` writes around a `.item()` on ``line``: its line marker, the op
    and its device sync, 2 µs plus ``waits`` for the GPU."""
    marker = {**op(f"brrr.line {line}", t, 4.0 + waits), "cat": "user_annotation"}
    return [
        marker,
        op("aten::item", t + 0.5, 3.0 + waits),
        runtime("cudaDeviceSynchronize", t + 1.0, 2.0 + waits),
    ]


def steps_with_two_syncs(after_ms: float = 0.0) -> list[dict]:
    """The three steps of the test below; with ``after_ms``, that long of Python after them
    (outside the steps, a frame every 100 µs) and then a short kernel."""
    events = []
    for k in range(3):
        t = 1000.0 * k
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, 1000.0), "cat": "user_annotation"},
            frame("train.py(4): step", t, 990.0),
            launch(t + 1.0, corr=k + 1),
            kernel(BF16_GEMM, t + 6.0, 420.0, corr=k + 1),
            *(frame("train.py(20): helper", t + 10.0 + 2 * i, 1.0) for i in range(200)),
            *sync_reads(7, t + 412.0, waits=13.0),
            *sync_reads(8, t + 430.0),
        ]
    if after_ms:
        end = 3000.0 + after_ms * 1000.0
        events += [
            frame("train.py(30): log", 3000.0 + 100 * i, 1.0) for i in range(int(after_ms * 10))
        ]
        events += [launch(end, corr=99), kernel(ADD, end + 5.0, 5.0, corr=99)]
    return events


def test_a_functions_sync_lines_are_replayed_together(tmp_path: Path) -> None:
    # Three 1 ms steps: a launch of a 420 µs GEMM, 400 µs of Python (200 frames), then a loss
    # read on line 7, which waits 13 µs for the GEMM, and an accuracy read on line 8; the GPU
    # then idles until the next step (580 µs, twice). Without the profiler's cost (1.5 µs a
    # frame, 1 µs the op, 19 µs the line marker: 320 of the 410 µs) the host reaches line 7
    # 90.5 µs after the launch and waits until the GEMM ends at 425 µs: 425 - 90.5 - 2 (the
    # call) = 332.5 µs a step. Removed alone, line 7's wait moves to line 8 (2 µs saved);
    # removed together, the host saves 332.5 µs a step, within the 1160 µs of idle after them.
    (finding,) = findings(write(tmp_path / "t.json", steps_with_two_syncs()), "host-sync")
    expected = on_step(
        "host-sync",
        7,
        message="the host waits for the GPU on lines 7, 8 of step (.item(), .cpu(), print, "
        "synchronize) 6 times, 51.0 µs in all; the queue drains, and the GPU then idles 1.16 "
        "ms until the host's next launch",
        fix=host_sync_fix(),
        est_savings_ns=997_500,
        est_savings_per_step_ns=332_500,
        # The profiler's cost at 0.75x: 170 µs of work, 252.5 µs waited; at 3x none, 422.5 (3 x
        # 422.5 = 1 267.5 µs), held, as the estimate is, to the 1 160 µs of idle after them.
        est_savings_range_ns=(757_500, 1_160_000),
        evidence={
            "sync_idle_us": 1160.0,
            "blocked_us": 51.0,
            "replayed_wait_us": 997.5,
            "replayed": "the waits of lines 7, 8 removed",
        },
    )
    assert finding == replace(expected, lines=(7, 8))


def item_reads(steps: int) -> list[dict]:
    """Steps of a 300 µs GEMM and a ``.item()`` of its result on line 5: aten::item runs
    _local_scalar_dense, which copies the value (cudaMemcpyAsync, a device-to-host copy) and
    then synchronizes: two blocking calls, one read."""
    events = []
    for k in range(steps):
        t = 1000.0 * k
        copy = 100 + k
        events += [
            frame("train.py(4): step", t, 990.0),
            launch(t + 1.0, corr=k + 1),
            kernel(BF16_GEMM, t + 6.0, 300.0, corr=k + 1),
            op("aten::item", t + 10.0, 305.0),
            op("aten::_local_scalar_dense", t + 11.0, 303.0),
            runtime("cudaMemcpyAsync", t + 12.0, 296.0, corr=copy),
            memcpy("Memcpy DtoH (Device -> Pageable)", t + 306.0, 1.0, corr=copy, nbytes=4),
            runtime("cudaStreamSynchronize", t + 309.0, 3.0),
        ]
    return events


def test_a_read_that_copies_then_synchronizes_is_one_wait(tmp_path: Path) -> None:
    # Each step's .item() makes two blocking calls inside one ATen op: 3 reads, not 6.
    (finding,) = findings(write(tmp_path / "t.json", item_reads(3)), "host-sync")
    assert finding.message.startswith(
        "the host waits for the GPU on this line (.item(), .cpu(), print, synchronize) 3 times, "
    ), finding.message
    assert finding.evidence["blocked_us"] == 3 * (296.0 + 3.0)


def host_sync_fix() -> str:
    return (
        "Keep the value on the GPU (accumulate a tensor) and read it once per step or every N "
        'steps; torch.cuda.set_sync_debug_mode("warn") finds hidden syncs.'
    )


def test_a_saving_is_worth_reporting_by_its_share_of_the_run_without_the_profiler(
    tmp_path: Path,
) -> None:
    # The same steps, then 250 ms of Python and a kernel outside them: the GPU's span is 253
    # ms, and 0.5% of it, 1.27 ms, more than the 1 ms the syncs save. The savings are a share
    # of a pass of the steps replayed without the profiler (2 ms): reported.
    trace = write(tmp_path / "t.json", steps_with_two_syncs(after_ms=250.0))
    (finding,) = findings(trace, "host-sync")
    assert (finding.lines, finding.est_savings_ns) == ((7, 8), 997_500)


def test_a_trace_whose_host_launches_and_waits_for_nothing_has_no_sync_finding(
    tmp_path: Path,
) -> None:
    # Only a kernel launched before the profiler started: the replay has no event at all.
    events = [frame("train.py(4): step", 0.0, 100.0), kernel(ADD, 0.0, 5.0, corr=99)]
    assert findings(write(tmp_path / "t.json", events), "host-sync") == []


FOREACH_MUL = (
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlpha"
    "Functor<float, 2, 2, 0>, std::multiplies<float>, float>(T1, T2, T3, T4)"
)


def steps_of_an_amp_optimizer(scaler_frames: bool = True, optimizer: str = "AdamW") -> list[dict]:
    """Three 1 ms steps: a 700 µs GEMM (the backward), then ``scaler.step(optimizer)``: a
    GradScaler reading found_inf (an ``.item()`` that waits for the GEMM) and a foreach
    AdamW step launching one 20 µs kernel."""
    events = []
    for k in range(3):
        t = 1000.0 * k
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, 1000.0), "cat": "user_annotation"},
            frame("train.py(4): step", t, 990.0),
            launch(t + 1.0, corr=10 * k + 1),
            kernel(BF16_GEMM, t + 6.0, 700.0, corr=10 * k + 1),
            *(
                [frame("torch/amp/grad_scaler.py(363): _maybe_opt_step", t + 10.0, 760.0)]
                if scaler_frames
                else []
            ),
            op("aten::item", t + 11.0, 697.0),
            runtime("cudaStreamSynchronize", t + 12.0, 695.0),
            {**op(f"Optimizer.step#{optimizer}.step", t + 710.0, 50.0), "cat": "user_annotation"},
            op("aten::_foreach_mul_", t + 712.0, 10.0),
            launch(t + 714.0, corr=10 * k + 2),
            kernel(FOREACH_MUL, t + 720.0, 20.0, corr=10 * k + 2),
        ]
    return events


def test_a_grad_scalers_wait_is_the_fused_optimizers_to_remove(tmp_path: Path) -> None:
    # A GradScaler reads found_inf on the host before a foreach step, and a fused step reads
    # it on the GPU: one finding, the fused step, with the waits removed. Replayed without
    # them the host needs ~300 µs a step and the GPU paces the loop: the GEMM and the fused
    # kernel, 700 + 0.34 x 20 = 706.8 µs, against 995.166 µs a step replayed with the waits
    # (the report's steps: the trace's 1000 µs less the profiler's cost after the syncs).
    # 288.366 µs a step, three steps.
    report = analyze(write(tmp_path / "t.json", steps_of_an_amp_optimizer()))
    assert report.steps is not None and report.steps.replayed_ns == 995_166
    assert [f.rule for f in report.findings] == ["unfused-optimizer"]
    expected = on_step(
        "unfused-optimizer",
        4,
        message="the optimizer step runs the foreach implementation: 3 kernels in 3 steps, a "
        "pass over the parameters per operation; before each step the GradScaler waits for "
        "the GPU to read found_inf (3 blocking calls, 2.08 ms in all), which a fused step "
        "reads on the GPU",
        fix="Use the fused implementation: torch.optim.AdamW(params, lr=..., fused=True). A "
        "GradScaler then hands found_inf to the fused kernel instead of waiting for it.",
        est_savings_ns=865_100,
        est_savings_per_step_ns=288_366,
        est_savings_range_ns=(851_100, 866_850),
        evidence={
            "kernels": 3,
            "bytes": 0,
            "found_inf_reads": 3,
            "replayed": "the step's kernels fused into one pass over the parameters, the "
            "GradScaler's waits for found_inf removed",
        },
    )
    assert report.findings[0] == expected


def test_a_wait_outside_a_grad_scaler_is_not_the_optimizers(tmp_path: Path) -> None:
    # The same steps with no GradScaler frame around the `.item()`: the wait is the line's
    # own, and fusing the step saves what it shortens after the wait: the kernel's 13.2 µs a
    # step and at most 0.55 of the step's 50 µs of host time. The wait itself is host-sync's,
    # held to the 14 µs of idle it left the GPU a step: too little to report.
    report = analyze(write(tmp_path / "t.json", steps_of_an_amp_optimizer(scaler_frames=False)))
    (finding,) = report.findings
    assert finding.rule == "unfused-optimizer" and "found_inf_reads" not in finding.evidence
    assert finding.message.endswith("a pass over the parameters per operation")
    assert 3 * 13_200 < finding.est_savings_ns < 3 * (13_200 + 0.55 * 50_000)


def test_an_optimizer_with_no_fused_step_is_not_told_to_fuse(tmp_path: Path) -> None:
    # The same steps by a foreach optimizer torch has no fused version of: neither its passes
    # nor the GradScaler's wait can go by fused=True, and the wait is the line's own again.
    trace = write(tmp_path / "t.json", steps_of_an_amp_optimizer(optimizer="Shampoo"))
    assert [f.rule for f in analyze(trace).findings if f.rule == "unfused-optimizer"] == []


TINY = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def adam_steps(first_makes_state: bool) -> list[dict]:
    """Two 1 ms steps of a per-parameter Adam: a forward launch, then ``Optimizer.step`` with
    25 launches of 1 µs kernels, each after 18 µs of host work; in the first step, with
    ``first_makes_state``, 200 µs of ``zeros_like`` (the state) before them."""
    events = []
    for k in range(2):
        t = 1000.0 * k
        init = 200.0 if first_makes_state and k == 0 else 0.0
        events += [
            {**op(f"ProfilerStep#{k + 1}", t, 1000.0), "cat": "user_annotation"},
            frame("train.py(4): step", t, 990.0),
            launch(t + 1.0, corr=100 + k),
            kernel(ADD, t + 5.0, 5.0, corr=100 + k),
            {**op("Optimizer.step#Adam.step", t + 10.0, init + 500.0), "cat": "user_annotation"},
        ]
        if init:
            events.append(op("aten::zeros_like", t + 10.0, init))
        for j in range(25):
            corr = 1000 * (k + 1) + j
            at = t + 10.0 + init + 18.0 + 20.0 * j
            events += [launch(at, corr), kernel(TINY, at + 4.0, 1.0, corr)]
    return events


def test_a_fused_step_still_makes_the_optimizers_state(tmp_path: Path) -> None:
    # Both steps are host-bound: fusing removes the optimizer's host work but 100 µs a step
    # (fused_step_host_ns), and its launches. Without state: 2 x 25 x 18 = 900 µs of host work
    # in the steps, 200 of it kept, and 50 launches of 0.5 µs (the floor once the profiler's 4
    # µs of callbacks are out of their 2 µs): 725 µs. With the first step's 200 µs of
    # zeros_like, that time stays too: the first step took 200 µs longer than the second, and
    # a fused Adam makes the same state. The zeros_like op is one profiler event (1 µs) in the
    # 225 µs host gap before the first step's first launch, 218 µs of which lie in the step:
    # 218 x 224 / 225 = 217.043 µs of it is the step's, not 218, so 724.043 µs (924.043 if the
    # state were taken to go with the fused step).
    plain = findings(write(tmp_path / "a.json", adam_steps(False)), "unfused-optimizer")
    made = findings(write(tmp_path / "b.json", adam_steps(True)), "unfused-optimizer")
    assert [f.est_savings_ns for f in plain] == [725_000]
    assert [f.est_savings_ns for f in made] == [724_043]
