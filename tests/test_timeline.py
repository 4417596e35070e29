"""Golden tests: a few events, the call, the expected numbers — one screen each."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import IdleCause, Precision, Regime
from tests.tracebuilder import AUTOGRAD, frame, kernel, launch, memcpy, op, runtime, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
MM = GEMM
EVALUATE = "autograd::engine::evaluate_function: "


def by_line(report):
    return {(line.file, line.line): line for line in report.lines}


def test_busy_idle_and_utilization_from_the_union_of_gpu_ops(tmp_path: Path) -> None:
    events = [
        kernel(GEMM, 100.0, 50.0, corr=1),
        kernel(ADD, 120.0, 60.0, corr=2, stream=20),  # overlaps the first on another stream
        memcpy("Memcpy HtoD (Pinned -> Device)", 300.0, 100.0, corr=3),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    s = report.summary
    assert (s.gpu_busy_ns, s.gpu_idle_ns) == (80_000 + 100_000, 120_000)
    assert s.gpu_utilization == 180 / 300
    assert report.trace.span_ns == 300_000


def test_host_gap_is_charged_to_the_line_the_host_was_running(tmp_path: Path) -> None:
    events = [
        frame("train.py(10): step", 0.0, 400.0),
        frame("train.py(30): slow_python", 60.0, 200.0),
        launch(10.0, corr=1),
        kernel(ADD, 20.0, 30.0, corr=1),  # ends at 50
        launch(300.0, corr=2),
        kernel(ADD, 310.0, 30.0, corr=2),  # gap 50 -> 310 while Python ran
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert report.summary.idle_by_cause_ns[IdleCause.HOST] == 260_000
    lines = by_line(report)
    # 200 µs inside slow_python, the rest (10 + 50) in step itself.
    assert lines[("train.py", 30)].idle_by_cause_ns[IdleCause.HOST] == 200_000
    assert lines[("train.py", 10)].idle_by_cause_ns[IdleCause.HOST] == 60_000
    assert lines[("train.py", 10)].gpu_ns == 60_000
    assert lines[("train.py", 10)].precision is Precision.FUNCTION


def test_sync_gap_goes_to_the_line_that_blocked_while_it_blocked(tmp_path: Path) -> None:
    # The queue runs dry at 110 µs; the sync returns at 112, and the host's Python runs until
    # the next launch at 400: 2 µs blocked and 128 more in log_loss (until 240) to its line,
    # the 165 µs after it to step's: the lines the host ran, all of it caused by the sync.
    events = [
        frame("train.py(10): step", 0.0, 500.0),
        frame("train.py(20): log_loss", 40.0, 200.0),
        launch(5.0, corr=1),
        kernel(GEMM, 10.0, 100.0, corr=1),  # ends at 110
        op("aten::item", 45.0, 100.0),
        runtime("cudaStreamSynchronize", 50.0, 62.0),  # blocked until 112
        launch(400.0, corr=2),
        kernel(ADD, 405.0, 10.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert report.summary.idle_by_cause_ns[IdleCause.SYNC] == 295_000
    assert by_line(report)[("train.py", 20)].idle_by_cause_ns[IdleCause.SYNC] == 130_000
    assert by_line(report)[("train.py", 10)].idle_by_cause_ns[IdleCause.SYNC] == 165_000


def test_short_gap_with_work_already_launched_is_launch_latency(tmp_path: Path) -> None:
    events = [
        frame("train.py(10): step", 0.0, 100.0),
        launch(1.0, corr=1),
        launch(4.0, corr=2),
        kernel(ADD, 10.0, 3.0, corr=1),
        kernel(ADD, 18.0, 3.0, corr=2),  # 5 µs gap, launched at 4 µs
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert report.summary.idle_by_cause_ns[IdleCause.LAUNCH] == 5_000
    line = by_line(report)[("train.py", 10)]
    assert line.idle_by_cause_ns[IdleCause.LAUNCH] == 5_000
    assert line.regime is Regime.OVERHEAD  # 3 µs kernels and idle: nothing but overhead


def test_dataloader_wait_is_charged_to_the_for_loop_function(tmp_path: Path) -> None:
    events = [
        frame("train.py(5): train", 0.0, 1000.0),
        launch(10.0, corr=1),
        kernel(ADD, 20.0, 30.0, corr=1),
        frame("torch/utils/data/dataloader.py(700): __next__", 60.0, 800.0),
        launch(870.0, corr=2),
        kernel(ADD, 880.0, 30.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert report.summary.idle_by_cause_ns[IdleCause.DATALOADER] == 830_000
    assert by_line(report)[("train.py", 5)].idle_by_cause_ns[IdleCause.DATALOADER] == 830_000


def test_backward_kernels_land_on_the_forward_line(tmp_path: Path) -> None:
    events = [
        frame("model.py(3): forward", 0.0, 50.0),
        op("aten::mm", 10.0, 20.0, **{"Sequence number": 7, "Fwd thread id": 0}),
        launch(15.0, corr=1),
        kernel(GEMM, 20.0, 40.0, corr=1),
        op(
            "autograd::engine::evaluate_function: MmBackward0",
            100.0,
            50.0,
            tid=AUTOGRAD,
            **{"Sequence number": 7, "Fwd thread id": 1},
        ),
        op("aten::mm", 105.0, 20.0, tid=AUTOGRAD, **{"Sequence number": 99}),
        launch(110.0, corr=2, tid=AUTOGRAD),
        kernel(GEMM, 115.0, 80.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    line = by_line(report)[("model.py", 3)]
    assert (line.gpu_ns, line.backward_gpu_ns, line.kernels) == (120_000, 80_000, 2)


def test_legacy_call_stack_gives_exact_lines(tmp_path: Path) -> None:
    stack = "/home/me/train.py(42): step;/home/me/train.py(99): <module>"
    events = [
        op("aten::add", 0.0, 30.0, **{"Call stack": stack}),
        launch(5.0, corr=1),
        kernel(ADD, 10.0, 20.0, corr=1),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    (line,) = report.lines
    assert (line.file, line.line, line.function, line.precision) == (
        "/home/me/train.py",
        42,
        "step",
        Precision.EXACT,
    )


def test_lines_add_up_to_busy_plus_idle_minus_unattributed(tmp_path: Path) -> None:
    events = [
        frame("train.py(10): step", 0.0, 400.0),
        launch(10.0, corr=1),
        kernel(ADD, 20.0, 30.0, corr=1),
        kernel(ADD, 60.0, 30.0, corr=77),  # no launch in the trace: busy, but on no line
        launch(300.0, corr=2),
        kernel(GEMM, 310.0, 30.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    s = report.summary
    total_lines = sum(line.gpu_ns + line.idle_ns for line in report.lines)
    assert s.unattributed_gpu_ns == 30_000
    assert (
        total_lines + s.unattributed_gpu_ns + s.unattributed_idle_ns
        == s.gpu_busy_ns + s.gpu_idle_ns
    )
    for line in report.lines:
        assert sum(line.time_by_regime_ns.values()) == line.gpu_ns + line.idle_ns


def test_device_option_selects_one_gpu(tmp_path: Path) -> None:
    events = [kernel(ADD, 0.0, 10.0, corr=1, device=0), kernel(ADD, 0.0, 50.0, corr=2, device=1)]
    path = write(tmp_path / "t.json", events)
    assert analyze(path).summary.gpu_busy_ns == 50_000  # busiest by default
    assert analyze(path, AnalysisOptions(device=0)).summary.gpu_busy_ns == 10_000


def test_recorder_call_lines_and_line_markers_give_exact_lines(tmp_path: Path) -> None:
    # What `brrr-trace record` writes: the caller line on each Python call, and a
    # `brrr.line N` annotation around each torch call made from user code.
    sin = frame("<built-in method sin of Tensor object at 0x7f>", 10.0, 20.0)
    sin["args"]["brrr call line"] = 7
    marker = op("brrr.line 6", 40.0, 30.0)
    marker["cat"] = "user_annotation"
    events = [
        frame("train.py(4): step", 0.0, 200.0),
        sin,
        op("aten::sin", 12.0, 15.0),
        launch(14.0, corr=1),
        kernel(ADD, 20.0, 10.0, corr=1),
        marker,
        op("aten::mul", 42.0, 20.0),
        launch(45.0, corr=2),
        kernel(ADD, 50.0, 10.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    lines = {(line.line, line.precision) for line in report.lines}
    assert lines == {(7, Precision.EXACT), (6, Precision.EXACT)}


def idle_by_line(report) -> dict[int, float]:
    return {ln.line: ln.idle_ns / 1000 for ln in report.lines if ln.idle_ns}


def test_a_host_gap_in_one_frame_goes_to_each_statement_it_spans(tmp_path: Path) -> None:
    # The GPU runs dry at 25 µs, during line 2's op; the host runs line 3's slow CPU op
    # (100-250, no kernel), then launches line 4's at 305. No Python call starts or ends in
    # the gap, but ops do: operators run theirs with no call around them.
    source = "def step(x):\n    a = x + 1\n    b = a * 2\n    return b - 3\n"
    (tmp_path / "train.py").write_text(source)
    events = [
        frame("train.py(1): step", 0.0, 400.0),
        op("aten::add", 10.0, 20.0),
        launch(12.0, corr=1),
        kernel(ADD, 15.0, 10.0, corr=1),  # ends at 25
        op("aten::mul", 100.0, 150.0),
        op("aten::sub", 300.0, 20.0),
        launch(305.0, corr=2),
        kernel(ADD, 310.0, 5.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    # 25-30 the rest of line 2's op; 30-250 line 3 (about to run, then its op); 250-310 line 4.
    assert idle_by_line(report) == {2: 5.0, 3: 220.0, 4: 60.0}


def test_a_host_gap_across_a_library_call_splits_at_the_call(tmp_path: Path) -> None:
    # The GPU runs dry at 30 µs while line 2's library call still runs (until 200); line 3's
    # op starts at 250 and launches: the same user frame at both ends, two statements.
    (tmp_path / "train.py").write_text("def step(x):\n    y = slow(x)\n    return y * 2\n")
    events = [
        frame("train.py(1): step", 0.0, 400.0),
        frame("torch/foo.py(5): slow", 10.0, 190.0),
        op("aten::add", 11.0, 5.0),
        launch(12.0, corr=1),
        kernel(ADD, 15.0, 15.0, corr=1),  # ends at 30
        op("aten::mul", 250.0, 20.0),
        launch(260.0, corr=2),
        kernel(ADD, 265.0, 10.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    assert idle_by_line(report) == {2: 170.0, 3: 65.0}  # 30-200 | 200-265


def test_a_late_backward_goes_node_by_node_and_the_call_before_it_to_its_line(
    tmp_path: Path,
) -> None:
    # Forward: line 2's mm (node 5), line 3's relu (node 6); the GPU is idle from 45 µs.
    # The host reaches line 4's backward() at 100; the engine starts ReluBackward at 200 and
    # launches at 290, runs AccumulateGrad (no forward op) and MmBackward, which launches at 490.
    (tmp_path / "train.py").write_text(
        "def step(x, w):\n    a = x @ w\n    b = a.relu()\n    b.backward()\n"
    )
    events = [
        frame("train.py(1): step", 0.0, 1000.0),
        op("aten::mm", 10.0, 10.0, **{"Sequence number": 5}),
        launch(12.0, corr=1),
        kernel(MM, 15.0, 10.0, corr=1),
        op("aten::relu", 30.0, 10.0, **{"Sequence number": 6}),
        launch(32.0, corr=2),
        kernel(ADD, 35.0, 10.0, corr=2),  # ends at 45
        frame("torch/_tensor.py(570): backward", 100.0, 800.0),
        op(EVALUATE + "ReluBackward0", 200.0, 100.0, tid=AUTOGRAD, **{"Sequence number": 6}),
        launch(290.0, corr=3, tid=AUTOGRAD),
        kernel(ADD, 300.0, 10.0, corr=3),  # ends at 310
        op(EVALUATE + "torch::autograd::AccumulateGrad", 320.0, 30.0, tid=AUTOGRAD),
        op(EVALUATE + "MmBackward0", 400.0, 100.0, tid=AUTOGRAD, **{"Sequence number": 5}),
        launch(490.0, corr=4, tid=AUTOGRAD),
        kernel(MM, 500.0, 10.0, corr=4),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    # 45-100 the host ran toward line 4; 100-300 the engine was about to run, then ran, relu's
    # node (and 25-35 waited for relu's forward kernel); 310-500 AccumulateGrad and the wait
    # went to the next node a forward op made, mm's.
    assert idle_by_line(report) == {4: 55.0, 3: 10.0 + 200.0, 2: 190.0}


def test_without_python_frames_a_host_gap_stays_with_the_line_at_its_start(
    tmp_path: Path,
) -> None:
    # A legacy trace: lines only from each op's "Call stack", no frames to cut a gap by. The GPU
    # runs dry inside line 42's op (the loader); ops of the loader run in the gap, then line 44's.
    def stacked(name: str, ts: float, dur: float, line: int) -> dict:
        return op(name, ts, dur, **{"Call stack": f"/home/me/train.py({line}): <module>"})

    events = [
        stacked("aten::copy_", 0.0, 30.0, 42),
        launch(5.0, corr=1),
        kernel(ADD, 10.0, 10.0, corr=1),  # ends at 20
        stacked("aten::stack", 100.0, 50.0, 42),
        stacked("aten::to", 300.0, 20.0, 44),
        launch(305.0, corr=2),
        kernel(ADD, 310.0, 10.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert idle_by_line(report) == {42: 290.0}
