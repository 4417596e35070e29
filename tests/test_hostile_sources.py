"""A trace names the source files to read: only Python files under the source root are read,
never a link out of it, a FIFO, a device or an oversized file (README, Security notes)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from tests.tracebuilder import frame, kernel, launch, op, write


def one_frame_trace(path: Path, frame_name: str) -> Path:
    events = [
        frame(frame_name, 0.0, 100.0),
        op("aten::mm", 1.0, 10.0),
        launch(2.0, 1),
        kernel("void k", 5.0, 50.0, 1),
    ]
    return write(path, events)


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """Every file the analysis opens, through the audit hook of open()/os.open()."""
    seen: list[str] = []
    active = [True]

    def hook(event: str, args: tuple) -> None:
        if active[0] and event == "open" and isinstance(args[0], str):
            seen.append(os.path.realpath(args[0]))

    sys.addaudithook(hook)  # hooks cannot be removed: switch it off after the test
    yield seen
    active[0] = False


def report_of(trace: Path, root: Path, opened: list[str] | None = None, **options):
    if opened is not None:
        opened.clear()  # only what the analysis opens, not the test's own set-up
    return analyze(trace, AnalysisOptions(source_root=str(root), **options))


def problem_kinds(report) -> dict[str, str]:
    return {p.kind: p.detail for p in report.problems}


def test_an_absolute_file_outside_the_root_is_never_read(tmp_path, opened) -> None:
    trace = one_frame_trace(tmp_path / "t.json", "/etc/passwd(1): f")
    report_of(trace, tmp_path, opened)
    assert "/etc/passwd" not in opened


def test_a_non_python_file_inside_the_root_is_never_read(tmp_path, opened) -> None:
    secret = tmp_path / "etc" / "passwd"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0\n")
    trace = one_frame_trace(tmp_path / "t.json", f"{secret}(1): f")
    report = report_of(trace, tmp_path, opened)
    assert str(secret) not in opened
    assert report.lines[0].path is None


@pytest.mark.parametrize("target", ["id_rsa", "environ", "notes.txt"])
def test_a_link_out_of_the_root_to_anything_but_python_is_refused(tmp_path, opened, target):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / target).write_text("def f():\n    pass\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "evil.py").symlink_to(outside / target)
    trace = one_frame_trace(root / "t.json", "evil.py(1): f")
    report = report_of(trace, root, opened)
    assert str(outside / target) not in opened
    assert "link out of the source root" in problem_kinds(report)["source-skipped"]
    assert report.lines[0].path is None


def test_a_link_out_of_the_root_to_python_source_is_followed(tmp_path) -> None:
    """Shared modules and Bazel runfiles trees are links to .py files elsewhere (this project's
    own tests/data/workloads.py is one): their lines resolve."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "model.py").write_text("def f():\n    pass\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "model.py").symlink_to(tmp_path / "shared" / "model.py")
    trace = one_frame_trace(root / "t.json", "model.py(1): f")
    report = report_of(trace, root)
    assert "source-skipped" not in problem_kinds(report)
    assert report.lines[0].path == str(root / "model.py")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_a_source_file_does_not_block(tmp_path) -> None:
    os.mkfifo(tmp_path / "fifo.py")
    trace = one_frame_trace(tmp_path / "t.json", "fifo.py(1): f")
    report = report_of(trace, tmp_path)  # before the fix: blocked forever in open()
    assert "not a regular file" in problem_kinds(report)["source-skipped"]


def test_a_source_file_over_the_bound_is_skipped_with_a_problem(tmp_path, opened) -> None:
    big = tmp_path / "big.py"
    big.write_text("def f():\n    pass\n" + "#" * 5000)
    trace = one_frame_trace(tmp_path / "t.json", "big.py(1): f")
    report = report_of(trace, tmp_path, opened, max_source_bytes=4096)
    assert str(big) not in opened
    assert "too large" in problem_kinds(report)["source-skipped"]


def test_a_path_mapping_cannot_climb_out_of_its_target(tmp_path, opened) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text("def f():\n    pass\n")
    local = tmp_path / "local"
    local.mkdir()
    trace = one_frame_trace(tmp_path / "t.json", "/remote/../secret.py(1): f")
    report = report_of(trace, local, opened, path_mappings=(("/remote", str(local)),))
    assert str(secret) not in opened
    assert report.lines[0].path is None
