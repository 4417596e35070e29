"""The command line as a user meets it: exit codes, one-line errors, the JSON contract."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from brrr_trace.cli import main, sample_trace
from tests.tracebuilder import frame, kernel, launch, op, write

TRACE = [
    frame("train.py(3): step", 0.0, 100.0),
    launch(1.0, corr=1),
    kernel("k", 10.0, 5.0, corr=1),
]


def test_analyze_json_follows_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "t.json", TRACE)
    assert main(["analyze", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1
    assert set(doc) >= {"tool", "trace", "summary", "lines", "findings", "problems"}
    assert set(doc["summary"]) >= {
        "gpu_busy_us",
        "gpu_idle_us",
        "gpu_utilization",
        "idle_by_cause_us",
        "time_by_regime_us",
    }
    assert set(doc["summary"]["idle_by_cause_us"]) == {
        "sync",
        "dataloader",
        "host",
        "launch",
        "other",
        "collective",
    }
    assert set(doc["summary"]["time_by_regime_us"]) == {
        "compute",
        "memory",
        "overhead",
        "communication",
    }
    assert doc["collectives"] == []
    (line,) = doc["lines"]
    assert (line["file"], line["line"], line["precision"]) == ("train.py", 3, "function")
    assert line["gpu_us"] == 5.0


def test_output_file_and_text_format(tmp_path: Path) -> None:
    path = write(tmp_path / "t.json", TRACE)
    out = tmp_path / "report.txt"
    assert main(["analyze", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "utilization" in text and "train.py:3" in text


@pytest.mark.parametrize("content", [b"", b"not json", b'{"a": 1}'])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: bytes, capsys) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err and "Traceback" not in err


def test_missing_file_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_internal_error_exits_1_without_traceback(tmp_path: Path, monkeypatch, capsys) -> None:
    import brrr_trace.pipeline

    def boom(*_a, **_k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(brrr_trace.pipeline, "analyze", boom)
    assert main(["analyze", str(write(tmp_path / "t.json", TRACE))]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "kaboom" in err and "Traceback" not in err


def test_no_argument_uses_traces_here_else_the_sample(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "bundled sample" in captured.err
    assert json.loads(captured.out)["trace"]["path"] == str(sample_trace())
    write(tmp_path / "mine.pt.trace.json", TRACE)
    assert main(["analyze", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "bundled sample" not in captured.err
    assert json.loads(captured.out)["trace"]["path"].endswith("mine.pt.trace.json")


def test_include_and_exclude_globs_decide_what_is_the_users_code(tmp_path: Path) -> None:
    events = [
        frame("train.py(10): step", 0.0, 300.0),
        frame("vendored/attn.py(5): attention", 50.0, 200.0),
        op("aten::mm", 60.0, 20.0),
        launch(61.0, corr=1),
        kernel("gemm", 65.0, 10.0, corr=1),
    ]
    trace = write(tmp_path / "t.json", events)

    def lines(*flags: str) -> set[tuple[str, int]]:
        out = tmp_path / "r.json"
        assert main(["analyze", str(trace), "--format", "json", "-o", str(out), *flags]) == 0
        doc = json.loads(out.read_text())
        return {(ln["file"], ln["line"]) for ln in doc["lines"] if ln["gpu_us"]}

    assert lines() == {("vendored/attn.py", 5)}
    assert lines("--exclude", "vendored/*") == {("train.py", 10)}
    assert lines("--exclude", "vendored/*", "--include", "vendored/attn.py") == {
        ("vendored/attn.py", 5)
    }


def test_record_without_torch_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('never runs')\n")
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    assert main(["record", "-o", str(tmp_path / "t.json"), "--", "python", str(script)]) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        "brrr-trace record: PyTorch is not installed in this environment (pip install torch)\n"
    )
    assert "never runs" not in captured.out and not (tmp_path / "t.json").exists()
