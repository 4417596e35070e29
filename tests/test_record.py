"""`brrr-trace record` and `brrr_trace.record`: real CPU traces from the installed torch, checked
for the exact-line contract the analyzer reads (`brrr call line`, `brrr.line N` annotations)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import brrr_trace  # noqa: E402
from brrr_trace.cli import main  # noqa: E402
from brrr_trace.recording import Recorder, call_lines, export, optimizer_steps, record  # noqa: E402
from brrr_trace.recording.runner import parse_program  # noqa: E402
from brrr_trace.traces.columns import exact_ns  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# Every statement of interest carries a marker; the tests find its line by the marker.
PROGRAM = """
import sys
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


def helper(x):
    y = x * 2 + 1  # @mul_add
    z = y.sin()  # @sin
    return z


def work(a, b, model, v):
    c = a @ b  # @matmul
    d = helper(c)  # @call_helper
    w = torch.relu(d)  # @relu
    w[:, 0] = v  # @setitem
    for i in range(2):
        w = w - 0.5  # @loop_sub
    return model(w)  # @call_module


def main():
    a, b, v = torch.randn(8, 8), torch.randn(8, 8), torch.randn(8)
    model = Tiny()
    for _ in range(2):
        work(a, b, model, v)  # @call_work


main()  # @call_main
"""

STEPS_PROGRAM = """
import sys
import torch

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(6):
    opt.zero_grad()
    loss = model(x).pow(2).mean()  # @forward
    loss.backward()  # @backward
    opt.step()
with open(sys.argv[1], "w") as f:
    f.write(repr(sys.argv))
"""


def lines_of(source: str) -> dict[str, int]:
    return {
        line.split("# @")[1].strip(): number
        for number, line in enumerate(source.splitlines(), 1)
        if "# @" in line
    }


def load(path: Path) -> dict[str, Any]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def complete(doc: dict[str, Any], cat: str | None = None) -> list[dict[str, Any]]:
    return [
        e for e in doc["traceEvents"] if e.get("ph") == "X" and (cat is None or e.get("cat") == cat)
    ]


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "brrr_trace", "record", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def annotation_lines(doc: dict[str, Any], op: str) -> list[int]:
    """For every event named `op`: N of the innermost `brrr.line N` enclosing it (0: none)."""
    notes = [e for e in complete(doc, "user_annotation") if e["name"].startswith("brrr.line ")]
    found = []
    for event in complete(doc, "cpu_op"):
        if event["name"] != op:
            continue
        around = [
            n
            for n in notes
            if n["tid"] == event["tid"]
            and n["ts"] <= event["ts"]
            and event["ts"] + event["dur"] <= n["ts"] + n["dur"]
        ]
        innermost = min(around, key=lambda n: n["dur"], default=None)
        found.append(int(innermost["name"].split()[1]) if innermost else 0)
    return found


def python_events(doc: dict[str, Any], file: str, function: str) -> list[dict[str, Any]]:
    """The calls of `function` defined in `file` (a name like `prog.py(15): helper`)."""
    return [
        e
        for e in complete(doc, "python_function")
        if e["name"].split("(")[0].endswith(file) and e["name"].endswith(f"): {function}")
    ]


def check_exact_trace(
    doc: dict[str, Any], marks: dict[str, int], file: str, *, top_level: bool
) -> None:
    pys = complete(doc, "python_function")
    assert pys
    assert all(type(e["args"].get("brrr call line")) is int for e in pys)
    assert doc["brrr_record"]["call_lines"]["unmatched"] == 0
    # the caller's line, not the def line
    assert {e["args"]["brrr call line"] for e in python_events(doc, file, "work")} == {
        marks["call_work"]
    }
    assert {e["args"]["brrr call line"] for e in python_events(doc, file, "helper")} == {
        marks["call_helper"]
    }
    module_calls = [e for e in pys if e["name"].startswith("nn.Module: Tiny")]
    assert module_calls
    assert {e["args"]["brrr call line"] for e in module_calls} == {marks["call_module"]}
    assert {e["args"]["brrr call line"] for e in pys if "built-in method sin" in e["name"]} == {
        marks["sin"]
    }
    if top_level:
        assert {e["args"]["brrr call line"] for e in python_events(doc, file, "main")} == {
            marks["call_main"]
        }
    # operators without a Python call event: the brrr.line annotation around them
    assert set(annotation_lines(doc, "aten::matmul")) == {marks["matmul"]}
    assert set(annotation_lines(doc, "aten::mul")) == {marks["mul_add"]}
    assert set(annotation_lines(doc, "aten::add")) == {marks["mul_add"]}
    assert set(annotation_lines(doc, "aten::sin")) == {marks["sin"]}
    assert set(annotation_lines(doc, "aten::relu")) == {marks["relu"]}
    assert set(annotation_lines(doc, "aten::sub")) == {marks["loop_sub"]}
    assert len(annotation_lines(doc, "aten::sub")) == 4  # 2 calls x 2 iterations
    copies = annotation_lines(doc, "aten::copy_")
    assert marks["setitem"] in copies
    # torch's own calls are not annotated: the Linear inside Tiny runs under no brrr.line
    assert set(annotation_lines(doc, "aten::addmm")) == {0}
    # brrr-trace's machinery is hidden, and the Python tree stays consistent
    assert not [e for e in pys if e["name"].endswith(": __torch_function__")]
    ids = {e["args"]["Python id"] for e in pys}
    parents = {e["args"]["Python parent id"] for e in pys} - {None}
    assert parents <= ids


def test_cli_records_exact_call_lines_and_operator_lines(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    result = run_cli(tmp_path, "-o", "t.json.gz", "--", "prog.py")
    assert result.returncode == 0, result.stderr
    assert "brrr-trace analyze t.json.gz" in result.stderr
    doc = load(tmp_path / "t.json.gz")
    check_exact_trace(doc, lines_of(PROGRAM), "prog.py", top_level=True)
    assert doc["brrr_record"]["version"] == 1
    assert doc["brrr_record"]["exact_ops"] is True
    assert doc["brrr_record"]["torch_version"] == torch.__version__
    assert doc["torch_version"] == torch.__version__


def load_module(tmp_path: Path, name: str, source: str) -> Any:
    path = tmp_path / f"{name}.py"
    path.write_text(source.replace("\nmain()  # @call_main\n", "\n"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_context_manager_and_decorator(tmp_path: Path) -> None:
    user = load_module(tmp_path, "user_prog", PROGRAM)
    marks = lines_of(PROGRAM)
    with record(tmp_path / "cm.json") as rec:
        user.main()
    assert rec.written and rec.stats["call_lines_unmatched"] == 0
    check_exact_trace(load(tmp_path / "cm.json"), marks, "user_prog.py", top_level=False)

    @record(tmp_path / "deco.json.gz")
    def run() -> None:
        user.main()

    run()
    assert brrr_trace.record is record
    assert isinstance(brrr_trace.record(tmp_path / "x.json"), Recorder)
    with open(tmp_path / "deco.json.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    check_exact_trace(load(tmp_path / "deco.json.gz"), marks, "user_prog.py", top_level=False)
    # the mode is gone after the block
    from torch.overrides import _get_current_function_mode_stack

    assert not _get_current_function_mode_stack()


def test_without_exact_ops_there_are_no_line_annotations(tmp_path: Path) -> None:
    user = load_module(tmp_path, "user_prog2", PROGRAM)
    with record(tmp_path / "plain.json", exact_ops=False):
        user.main()
    doc = load(tmp_path / "plain.json")
    assert doc["brrr_record"]["exact_ops"] is False
    assert not [e for e in doc["traceEvents"] if e["name"].startswith("brrr.line")]
    calls = python_events(doc, "user_prog2.py", "helper")
    assert {e["args"]["brrr call line"] for e in calls} == {lines_of(PROGRAM)["call_helper"]}


def test_exit_codes_propagate(tmp_path: Path) -> None:
    (tmp_path / "three.py").write_text(
        "import sys\nimport torch\ntorch.ones(2).sum()\nsys.exit(3)\n"
    )
    result = run_cli(tmp_path, "-o", "three.json", "--", sys.executable, "three.py")
    assert result.returncode == 3
    assert (tmp_path / "three.json").exists()

    (tmp_path / "boom.py").write_text(
        "import torch\n\ndef f():\n    torch.ones(2).sum()\n    raise ValueError('boom')\n\nf()\n"
    )
    result = run_cli(tmp_path, "-o", "boom.json", "--", "python", "boom.py")
    assert result.returncode == 1
    err = result.stderr
    assert "Traceback (most recent call last)" in err and "ValueError: boom" in err
    assert 'boom.py", line 5, in f' in err
    assert "runpy" not in err and "brrr_trace" not in err.split("ValueError")[0]
    assert err.index("ValueError: boom") < err.index("brrr-trace analyze")
    assert (tmp_path / "boom.json").exists()


def test_steps_records_only_that_many_optimizer_steps(tmp_path: Path) -> None:
    (tmp_path / "steps_prog.py").write_text(STEPS_PROGRAM)
    result = run_cli(
        tmp_path, "-o", "s.json.gz", "--steps", "2", "--", "-m", "steps_prog", "argv.txt", "x"
    )
    assert result.returncode == 0, result.stderr
    assert "(2 steps)" in result.stderr
    assert "'argv.txt', 'x']" in (tmp_path / "argv.txt").read_text()
    doc = load(tmp_path / "s.json.gz")
    notes = complete(doc, "user_annotation")
    steps = [e for e in notes if e["name"].startswith("Optimizer.step#")]
    windows = [e for e in notes if e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 2 and len(windows) == 2
    # the step boundary is outside optimizer.step(): annotations nest, no partial overlaps
    for s in steps:
        for w in windows:
            s_end, w_end = s["ts"] + s["dur"], w["ts"] + w["dur"]
            assert s_end <= w["ts"] or w_end <= s["ts"] or w["ts"] <= s["ts"] <= s_end <= w_end
    marks = lines_of(STEPS_PROGRAM)
    assert set(annotation_lines(doc, "aten::mean")) == {marks["forward"]}
    assert set(annotation_lines(doc, "aten::pow")) == {marks["forward"], marks["backward"]}
    code = optimizer_steps._counted_step.__code__
    wrapper = f"optimizer_steps.py({code.co_firstlineno}): {code.co_name}"  # hidden
    assert not [e for e in complete(doc, "python_function") if e["name"].endswith(wrapper)]


def test_steps_without_enough_steps_says_so(tmp_path: Path) -> None:
    user = load_module(tmp_path, "user_prog3", PROGRAM)
    with record(tmp_path / "none.json", steps=3) as rec:
        user.main()  # no optimizer at all
    assert not rec.written and not (tmp_path / "none.json").exists()


def test_compiled_functions_work_and_do_not_recompile(tmp_path: Path) -> None:
    import torch._dynamo

    torch._dynamo.reset()
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile(backend="eager")
    def body(x: Any) -> Any:
        return torch.relu(model(x).sin() * 2).sum()

    x = torch.randn(2, 4)
    with (
        torch._dynamo.config.patch(error_on_recompile=True),
        record(tmp_path / "c.json", steps=2, wait=1) as rec,
    ):
        for _ in range(5):  # wait, warm-up, 2 recorded, 1 after: the mode toggles each time
            opt.zero_grad()
            loss = body(x)
            loss.backward()
            opt.step()
    assert rec.written and rec.steps_recorded == 2
    doc = load(tmp_path / "c.json")
    assert len([e for e in complete(doc) if e["name"].startswith("Optimizer.step#")]) == 2
    torch._dynamo.reset()


def test_bad_command_lines_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record"]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert main(["record", "--", "python", "-u", "x.py"]) == 2
    assert "-u" in capsys.readouterr().err
    assert main(["record", "--", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["record", "--wait", "2", "--", "x.py"]) == 2
    assert "--wait needs --steps" in capsys.readouterr().err


def test_hidden_frames_are_known_by_their_code_not_by_path_text() -> None:
    """torch reports a code object's file shortened by a sys.path prefix: a tail of the real
    path at a separator. The function's name and def line must be the code object's too."""
    from types import SimpleNamespace as State

    from brrr_trace.recording import recorder
    from brrr_trace.recording.hidden_frames import HiddenFrame, HiddenFrames
    from brrr_trace.recording.user_code import UserCode, is_own_file

    frame = HiddenFrame.passing_call(optimizer_steps._counted_step.__code__, keep_callee=True)
    tail = "brrr_trace/recording/optimizer_steps.py"
    assert frame.file.replace(os.sep, "/").endswith("/" + tail)
    ours = State(file_name=tail, function_name=frame.function, line_number=frame.def_line)
    assert frame.is_callee(ours) and frame.is_callee(
        State(**{**vars(ours), "file_name": frame.file})
    )
    assert not frame.is_callee(State(**{**vars(ours), "file_name": "my" + tail}))
    assert not frame.is_callee(State(**{**vars(ours), "line_number": frame.def_line + 1}))
    assert not frame.is_callee(State(**{**vars(ours), "function_name": "step"}))
    assert frame.call_line is not None
    assert frame.passes_on(State(**{**vars(ours), "line_number": frame.call_line}))
    hidden = HiddenFrames([frame])
    assert hidden.of_call(f"{tail}({frame.def_line}): {frame.function}", State(callsite=ours))
    assert hidden.of_call("user.py(3): f", State(callsite=ours)) is None
    # brrr-trace's own modules by their files; its example workloads are user code
    workloads = str(ROOT / "brrr_trace" / "data" / "workloads.py")
    assert is_own_file(recorder.__file__) and not is_own_file(workloads)
    user_code = UserCode(torch)
    assert not user_code.classify(recorder.Recorder.__enter__.__code__)
    assert user_code.classify(compile("pass", workloads, "exec"))
    assert not user_code.classify(torch.nn.Linear.forward.__code__)


def test_parse_program_forms(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    parse = parse_program
    assert parse(["--", "python3", str(script), "-a"]) == (
        "script",
        str(script),
        [str(script), "-a"],
    )
    assert parse([sys.executable, "-m", "pkg.mod", "x"]) == ("module", "pkg.mod", ["pkg.mod", "x"])
    assert parse(["-m", "pkg"]) == ("module", "pkg", ["pkg"])
    assert parse([str(script)]) == ("script", str(script), [str(script)])


def test_rewrite_splices_call_lines_into_kineto_text() -> None:
    text = textwrap.dedent(
        """\
        {
          "ph": "X", "cat": "python_function", "name": "a.py(3): f", "pid": 1, "tid": 1,
          "ts": 5124257818107.264, "dur": 1.5,
          "args": {
            "Python parent id": 4, "Python id": 7, "Ev Idx": 9
          }
        }"""
    )
    # the ts is read as its text: a float64 would lose its last digit
    assert exact_ns(export._PYTHON_EVENT.decode(text).ts) == 5124257818107264
    out = json.loads(export.with_call_line(text, 12))
    assert out["args"] == {"brrr call line": 12, "Python parent id": 4, "Python id": 7, "Ev Idx": 9}
    out = json.loads(export.with_call_line(text, 12, None))
    assert out["args"]["Python parent id"] is None and out["args"]["brrr call line"] == 12
    compact = '{"ph":"X","cat":"python_function","name":"args","ts":1,"dur":0,"args":{}}'
    out = json.loads(export.with_call_line(compact, 5, 3))
    assert out["args"] == {"brrr call line": 5, "Python parent id": 3}


def test_rewrite_matches_by_start_and_name_and_reparents(tmp_path: Path) -> None:
    """Kineto's file order need not put an ancestor first: a second pass fixes the parents."""

    def py(name: str, ts: str, pid: int, parent: int | None) -> str:
        parent_text = "null" if parent is None else str(parent)
        return (
            f'{{"ph": "X", "cat": "python_function", "name": "{name}", "pid": 1, "tid": 1, '
            f'"ts": {ts}, "dur": 1.0, "args": {{"Python parent id": {parent_text}, '
            f'"Python id": {pid}}}}}'
        )

    events = [
        py("user.py(9): inner", "1000.250", 3, 2),  # its parent (2) is brrr-trace's, dropped
        py("function_mode.py(1): __torch_function__", "1000.100", 2, 1),
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1000.3, "dur": 1, "args": {}}',
        py("user.py(3): outer", "1000.000", 1, None),
        py("user.py(20): stranger", "1001.000", 4, 1),
    ]
    src = tmp_path / "raw.json"
    src.write_text(
        '{"schemaVersion": 1, "baseTimeNanoseconds": 7000000000, "traceEvents": [\n'
        + ",\n".join(events)
        + '\n], "traceName": "raw.json"}'
    )
    call = call_lines.PythonCall
    outer, handler, inner = call(30, 1000), call(5, 1000), call(7, 1000)
    handler.drop = True
    inner.new_parent = outer
    base = 7_000_000_000
    index = call_lines.CallIndex()
    index.add(base + 1_000_250, "user.py(9): inner", inner)
    index.add(base + 1_000_100, "function_mode.py(1): __torch_function__", handler)
    index.add(base + 1_000_000, "user.py(3): outer", outer)
    dst = tmp_path / "out.json.gz"
    info = export.recording_info(exact_ops=True)
    with open(dst, "wb") as out:
        stats = export.rewrite(src, out, index, gz=True, trace_name=str(dst), info=info)
    assert stats == {
        "python_events": 4,
        "call_lines_matched": 2,
        "call_lines_unmatched": 1,
        "hidden": 1,
    }
    doc = load(dst)
    by_name = {
        e["name"]: e["args"] for e in doc["traceEvents"] if e.get("cat") == "python_function"
    }
    assert set(by_name) == {"user.py(9): inner", "user.py(3): outer", "user.py(20): stranger"}
    assert by_name["user.py(9): inner"] == {
        "brrr call line": 7,
        "Python parent id": 1,
        "Python id": 3,
    }
    assert by_name["user.py(3): outer"]["brrr call line"] == 30
    assert by_name["user.py(20): stranger"]["brrr call line"] == 0
    assert doc["traceName"] == str(dst)
    assert doc["brrr_record"]["call_lines"] == {"matched": 2, "unmatched": 1, "hidden_events": 1}
    assert any(e["name"] == "aten::mm" for e in doc["traceEvents"])


def test_the_analyzer_places_every_operator_statement_exactly(tmp_path: Path) -> None:
    """The recorded CPU trace, read by the analyzer without the source: each operator statement
    of the program is found on its own line at `exact` precision."""
    from brrr_trace.analyzers.attribution import Locator
    from brrr_trace.analyzers.paths import PathMapper
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.traces import load as load_trace
    from brrr_trace.vocabulary import Precision

    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    assert run_cli(tmp_path, "-o", "t.json.gz", "--", "prog.py").returncode == 0
    trace = load_trace(tmp_path / "t.json.gz").trace
    locator = Locator(trace, AnalysisOptions(), PathMapper(str(tmp_path / "no-source")))
    marks = lines_of(PROGRAM)
    expected = {
        "aten::matmul": marks["matmul"],
        "aten::mul": marks["mul_add"],
        "aten::add": marks["mul_add"],
        "aten::sin": marks["sin"],
        "aten::relu": marks["relu"],
        "aten::sub": marks["loop_sub"],
    }
    cpu = trace.cpu_ops
    seen: dict[str, set[tuple[int, str]]] = {}
    for row in range(len(cpu)):
        name = trace.strings[cpu.name[row]]
        if name in expected:
            line_id = locator.line_at(int(cpu.thread[row]), int(cpu.start_ns[row]))
            key = locator.lines[line_id]
            seen.setdefault(name, set()).add((key.line, str(key.precision)))
    for name, line in expected.items():
        assert seen[name] == {(line, str(Precision.EXACT))}, (name, seen.get(name))


def test_a_cpu_recording_analyzes_to_exact_statement_lines_with_cpu_time(tmp_path: Path) -> None:
    """`brrr-trace record` on a machine without a GPU, then `brrr-trace analyze`: the report
    lists the program's operator statements at `exact` precision, with CPU time and no regime."""
    (tmp_path / "prog.py").write_text(PROGRAM)
    assert run_cli(tmp_path, "-o", "t.json.gz", "--", "prog.py").returncode == 0
    done = subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", "t.json.gz", "--format", "json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = {ln["line"]: ln for ln in json.loads(done.stdout)["lines"] if ln["file"] == "prog.py"}
    marks = lines_of(PROGRAM)
    for statement in ("matmul", "mul_add", "sin", "relu", "setitem", "loop_sub"):
        line = lines[marks[statement]]
        assert (line["precision"], line["regime"]) == ("exact", None), line
        assert line["cpu_us"] > 0 and line["gpu_us"] == 0
    text = subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", "t.json.gz"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "Lines by CPU time" in text and f"prog.py:{marks['matmul']} work" in text


def test_wait_steps_are_timed_without_the_line_mode(tmp_path: Path) -> None:
    from torch.overrides import _get_current_function_mode_stack

    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    modes_seen = []
    with record(tmp_path / "w.json", steps=1, wait=3) as rec:
        for _ in range(5):  # 3 wait steps, the warm-up, 1 recorded
            modes_seen.append(len(_get_current_function_mode_stack()))
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert rec.written
    assert modes_seen == [0, 0, 0, 1, 1]  # pushed when the warm-up step begins
    recorded = load(tmp_path / "w.json")["brrr_record"]
    timed = recorded["unprofiled_step_ns"]
    assert len(timed) == 2 and all(isinstance(ns, int) and ns > 0 for ns in timed)
    # the later half of the wait (the third step) timed between two device syncs
    assert recorded["unprofiled_window"] == {"steps": 1, "ns": timed[1]}


def test_the_optimizers_steps_in_the_later_wait_steps_are_timed(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    slept = []
    real_step = opt.step

    def slow_step(*args: object, **kwargs: object) -> object:
        time.sleep(0.02)  # the optimizer's host time: at least 20 ms each
        slept.append(1)
        return real_step(*args, **kwargs)

    opt.step = slow_step  # type: ignore[method-assign]
    with record(tmp_path / "o.json", steps=1, wait=6) as rec:
        for _ in range(8):  # 6 wait steps, the warm-up, 1 recorded
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert rec.written and len(slept) == 8
    recorded = load(tmp_path / "o.json")["brrr_record"]
    assert recorded["unprofiled_window"]["steps"] == 2  # the wait's later half: steps 5 and 6
    timed = recorded["unprofiled_optimizer_step_ns"]
    assert len(timed) == 2 and all(20_000_000 <= ns < 2_000_000_000 for ns in timed), timed


def test_the_backward_passes_of_the_later_wait_steps_are_timed(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.weight.register_hook(lambda grad: time.sleep(0.02))  # 20 ms inside each backward
    original = torch.autograd.backward
    timed_while_recording = []
    with record(tmp_path / "b.json", steps=1, wait=6) as rec:
        for _ in range(8):  # 6 wait steps, the warm-up, 1 recorded
            timed_while_recording.append(torch.autograd.backward is not original)
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
    assert rec.written
    # Wrapped during the wait steps only: the profiled steps call torch's own function.
    assert timed_while_recording == [True] * 6 + [False] * 2
    assert torch.autograd.backward is original
    timed = load(tmp_path / "b.json")["brrr_record"]["unprofiled_backward_ns"]
    assert len(timed) == 2 and all(20_000_000 <= ns < 2_000_000_000 for ns in timed), timed


def test_an_lr_scheduler_sees_no_overridden_step(tmp_path: Path) -> None:
    # The recorder wraps optimizer.step at its first step, after the scheduler wrapped it.
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    with (
        warnings.catch_warnings(record=True) as seen,
        record(tmp_path / "s.json", steps=1, wait=1) as rec,
    ):
        warnings.simplefilter("always")
        for _ in range(4):
            opt.zero_grad()
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            scheduler.step()
    assert rec.written
    assert not [w for w in seen if "overridden after learning rate" in str(w.message)]
