"""Golden tests of kernel -> line: backward to the node's creator, library code, op rows,
inclusive time. Each: a few events, the call, the expected lines."""

from __future__ import annotations

import textwrap
from pathlib import Path

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import IdleCause, Precision
from tests.tracebuilder import AUTOGRAD, frame, kernel, launch, op, write

MM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
EVALUATE = "autograd::engine::evaluate_function: "


def gpu_by_line(report) -> dict[tuple[str, int], float]:
    return {(ln.file, ln.line): ln.gpu_ns / 1000 for ln in report.lines if ln.gpu_ns}


def test_backward_goes_to_the_op_that_created_the_node_not_the_first_with_its_number(
    tmp_path: Path,
) -> None:
    # Both forward ops read sequence number 5; only the second (mm) made node 5.
    events = [
        frame("train.py(20): make_view", 0.0, 10.0),
        op("aten::view", 1.0, 5.0, **{"Sequence number": 5}),
        frame("train.py(30): project", 20.0, 10.0),
        op("aten::mm", 21.0, 5.0, **{"Sequence number": 5}),
        op(EVALUATE + "MmBackward0", 100.0, 20.0, tid=AUTOGRAD, **{"Sequence number": 5}),
        launch(101.0, corr=1, tid=AUTOGRAD),
        kernel(MM, 105.0, 10.0, corr=1),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert gpu_by_line(report) == {("train.py", 30): 10.0}
    assert report.lines[0].backward_gpu_ns == 10_000


def test_a_node_with_hooks_keeps_its_number_on_its_own_op(tmp_path: Path) -> None:
    events = [
        frame("train.py(30): project", 0.0, 10.0),
        op("aten::mm", 1.0, 5.0, **{"Sequence number": 7}),
        op(EVALUATE + "MmBackward0", 100.0, 20.0, tid=AUTOGRAD),  # no number: a hook is on it
        op("MmBackward0", 102.0, 15.0, tid=AUTOGRAD, **{"Sequence number": 7}),
        launch(103.0, corr=1, tid=AUTOGRAD),
        kernel(MM, 105.0, 10.0, corr=1),
    ]
    assert gpu_by_line(analyze(write(tmp_path / "t.json", events))) == {("train.py", 30): 10.0}


def test_accumulate_grad_goes_to_the_line_that_called_backward(tmp_path: Path) -> None:
    events = [
        frame("train.py(10): step", 0.0, 300.0),
        frame("torch/_tensor.py(570): backward", 50.0, 200.0),
        op(EVALUATE + "torch::autograd::AccumulateGrad", 100.0, 20.0, tid=AUTOGRAD),
        launch(101.0, corr=1, tid=AUTOGRAD),
        kernel(ADD, 105.0, 10.0, corr=1),
    ]
    assert gpu_by_line(analyze(write(tmp_path / "t.json", events))) == {("train.py", 10): 10.0}


def test_library_code_lands_on_the_user_line_that_called_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            def step(model, x):
                y = x * 2
                out = model(y)
                return out
            """
        )
    )
    events = [
        frame("train.py(1): step", 0.0, 300.0),
        frame("nn.Module: TinyViT_0", 100.0, 150.0),
        # An installed package: the trace shortens its path, only the source root tells.
        frame("tinyvit/model.py(40): forward", 101.0, 140.0),
        op("aten::mm", 110.0, 20.0),
        launch(111.0, corr=1),
        kernel(MM, 115.0, 10.0, corr=1),
    ]
    options = AnalysisOptions(source_root=str(tmp_path))
    report = analyze(write(tmp_path / "t.json", events), options)
    assert gpu_by_line(report) == {("train.py", 3): 10.0}
    assert report.lines[0].precision is Precision.RECOVERED


def test_without_python_stacks_each_top_level_op_is_a_row(tmp_path: Path) -> None:
    events = [
        {**op("optimizer_step", 0.0, 100.0), "cat": "user_annotation"},
        op("aten::_foreach_add_", 10.0, 20.0),
        op("aten::add_", 11.0, 5.0),  # inside the foreach op: not top-level
        launch(12.0, corr=1),
        kernel(ADD, 15.0, 10.0, corr=1),
        op("aten::linear", 200.0, 20.0),
        launch(201.0, corr=2),
        kernel(MM, 205.0, 30.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    rows = {(ln.file, ln.function, ln.precision): ln.gpu_ns / 1000 for ln in report.lines}
    assert rows == {
        ("<ops>", "aten::linear", Precision.OP): 30.0,
        ("optimizer_step", "aten::_foreach_add_", Precision.OP): 10.0,
    }


def test_the_line_that_calls_a_function_carries_its_inclusive_time(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            def block(x):
                return x @ x

            def step(x):
                y = block(x)
                return y + 1
            """
        )
    )
    events = [
        frame("train.py(4): step", 0.0, 300.0),
        frame("train.py(1): block", 10.0, 100.0),
        op("aten::matmul", 20.0, 20.0),
        launch(21.0, corr=1),
        kernel(MM, 25.0, 40.0, corr=1),
        op("aten::add", 200.0, 20.0),
        launch(201.0, corr=2),
        kernel(ADD, 205.0, 5.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    lines = {
        ln.line: (ln.gpu_ns / 1000, ln.inclusive_gpu_ns / 1000)
        for ln in report.lines
        if ln.inclusive_gpu_ns
    }
    assert lines == {2: (40.0, 40.0), 5: (0.0, 40.0), 6: (5.0, 5.0)}


def test_installed_packages_and_the_standard_library_are_not_user_code_on_any_os() -> None:
    from brrr_trace.analyzers.frames import is_user_file

    options = AnalysisOptions()
    library = [
        "C:\\Users\\me\\venv\\Lib\\site-packages\\timm\\models\\vit.py",
        "C:\\Python311\\Lib\\threading.py",
        "/opt/conda/envs/x/lib/python3.11/site-packages/transformers/modeling_utils.py",
        "/usr/lib/python3/dist-packages/numpy/core/numeric.py",
        "/usr/lib/python3.12/threading.py",
        "torch/nn/modules/module.py",
        "threading.py",
    ]
    user = ["C:\\work\\proj\\train.py", "/home/me/proj/train.py", "models/gpt.py"]
    assert [f for f in library if is_user_file(f, options)] == []
    assert [f for f in user if not is_user_file(f, options)] == []
    # With the source at hand, a path that maps nowhere under it is library code.
    assert not is_user_file("tinyvit/model.py", options, local=lambda f: f == "train.py")


def test_findings_still_fire_on_a_trace_recorded_without_stacks(tmp_path: Path) -> None:
    """The H200 `.item()`-in-a-loop fixture with its Python frames taken out: the sync is
    charged to the `aten::item` row and host-sync fires there."""
    import gzip
    import json

    fixture = Path(__file__).parent / "data" / "h200" / "item_in_loop.json.gz"
    with gzip.open(fixture, "rt") as handle:
        doc = json.load(handle)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "python_function"]
    stripped = tmp_path / "no_stacks.json"
    stripped.write_text(json.dumps(doc))
    report = analyze(stripped)
    assert {(f.rule, f.function) for f in report.findings} >= {("host-sync", "aten::item")}
    item = next(ln for ln in report.lines if ln.function == "aten::item")
    assert item.precision is Precision.OP and item.idle_by_cause_ns["sync"] > 0


def test_idle_before_a_late_backward_launch_goes_to_the_forward_line(tmp_path: Path) -> None:
    events = [
        frame("train.py(30): project", 0.0, 20.0),
        op("aten::mm", 1.0, 5.0, **{"Sequence number": 5}),
        launch(2.0, corr=1),
        kernel(MM, 5.0, 10.0, corr=1),  # the forward kernel ends at 15
        op(EVALUATE + "MmBackward0", 100.0, 200.0, tid=AUTOGRAD, **{"Sequence number": 5}),
        launch(250.0, corr=2, tid=AUTOGRAD),  # the engine launches late
        kernel(MM, 255.0, 10.0, corr=2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    line = next(ln for ln in report.lines if (ln.file, ln.line) == ("train.py", 30))
    assert line.idle_by_cause_ns[IdleCause.HOST] == 240_000  # 15 -> 255
    assert report.summary.unattributed_idle_ns == 0


def test_kernels_launched_before_the_window_take_the_lines_of_the_same_tail(
    tmp_path: Path,
) -> None:
    """A GPU-bound step: the window opens while the last step's tail still runs. Its kernels
    have no launch in the trace; the recorded steps end with the same kernels in that order."""
    a, b, c = "kernel_a", "kernel_b", "kernel_c"
    events = [kernel(b, 0.0, 10.0, corr=90), kernel(c, 10.0, 10.0, corr=91)]  # launched earlier
    t, corr = 30.0, 1
    for _ in range(2):
        for name, line in ((a, 1), (b, 2), (c, 3)):
            events += [
                frame(f"train.py({line}): f{line}", t, 5.0),
                launch(t + 1.0, corr=corr),
                kernel(name, t + 2.0, 10.0, corr=corr),
            ]
            t, corr = t + 20.0, corr + 1
    report = analyze(write(tmp_path / "t.json", events))
    assert gpu_by_line(report) == {
        ("train.py", 1): 20.0,
        ("train.py", 2): 30.0,
        ("train.py", 3): 30.0,
    }
    assert report.summary.unattributed_gpu_ns == 0


def test_a_call_site_carries_the_gpu_and_idle_time_of_its_callees_by_regime(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            def block(x):
                a = x @ x
                return a + 1

            def step(x):
                y = block(x)
                return y * 2
            """
        )
    )
    events = [
        frame("train.py(5): step", 0.0, 400.0),
        frame("train.py(1): block", 10.0, 200.0),
        op("aten::matmul", 20.0, 20.0),
        launch(21.0, corr=1),
        kernel(MM, 25.0, 40.0, corr=1),  # 40 µs compute on line 2
        # The GPU idles 65-155 while the host is inside block: host idle on block's lines.
        op("aten::add", 150.0, 20.0),
        launch(151.0, corr=2),
        kernel(ADD, 155.0, 5.0, corr=2),  # 5 µs memory on line 3
        # Back in step: the GPU idles 160-305, then line 7's kernel.
        op("aten::mul", 300.0, 20.0),
        launch(301.0, corr=3),
        kernel(ADD, 305.0, 5.0, corr=3),
    ]
    report = analyze(write(tmp_path / "t.json", events), AnalysisOptions(source_root=str(tmp_path)))
    us = {  # line: (own GPU + idle, inclusive, inclusive by regime: compute / memory /
        #        overhead / communication)
        ln.line: (
            ln.total_ns / 1000,
            ln.inclusive_ns / 1000,
            tuple(v / 1000 for v in ln.inclusive_by_regime_ns.values()),
        )
        for ln in report.lines
    }
    # The host idle goes to the statement about to run: 65-155 in block to line 3, 160-305 in
    # step to line 7 (not to the def lines 1 and 5).
    assert us == {
        2: (40.0, 40.0, (40.0, 0.0, 0.0, 0.0)),
        3: (145.0, 145.0, (0.0, 5.0, 140.0, 0.0)),
        # y = block(x): nothing of its own; block's lines 2 + 3 = 40 + 145.
        6: (0.0, 185.0, (40.0, 5.0, 140.0, 0.0)),
        7: (100.0, 100.0, (0.0, 5.0, 95.0, 0.0)),
    }


def test_a_locator_answers_the_same_once_it_let_go_of_its_indexes() -> None:
    # The pipeline drops per-thread indexes when no later stage needs them (their memory is
    # the analysis's peak); a late question rebuilds them and gets the same answer.
    import numpy as np

    from brrr_trace.analyzers.attribution import Locator
    from brrr_trace.analyzers.paths import PathMapper
    from brrr_trace.traces import load

    realcode = Path(__file__).parent / "data" / "realcode"
    trace = load(realcode / "h200" / "gpt_small.json.gz").trace
    locator = Locator(trace, AnalysisOptions(), PathMapper(str(realcode)))
    host = trace.host_calls
    rows = np.arange(0, len(host), 7)
    threads, starts, ends = host.thread[rows], host.start_ns[rows], host.end_ns[rows]
    wide_end = starts + 200_000

    def answers() -> tuple[object, ...]:
        return (
            locator.lines_at(threads, starts).tolist(),
            locator.calls_between(threads, starts, wide_end).tolist(),
            locator.profiler_cost_between(threads, starts, ends).tolist(),
            [
                locator.lines_over(int(h), int(a), int(b))
                for h, a, b in zip(threads, starts, wide_end, strict=True)
            ],
        )

    before = answers()
    assert any(before[0]) and any(before[1]) and any(before[2])
    locator.let_go(cut_points=True, thread_events=True, traced=True)
    locator._children.clear()  # so that call sites are looked up from the events again
    assert answers() == before
