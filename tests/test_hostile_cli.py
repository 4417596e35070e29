"""User errors meet one line and exit 2, checked before the analysis where they can be; the
report file is replaced atomically; no quiet wrong answer (a trace not found, a rank ignored)."""

from __future__ import annotations

import errno
import gzip
import json
import os
from pathlib import Path

import pytest

import brrr_trace.output
import brrr_trace.pipeline
from brrr_trace.cli import main
from tests.tracebuilder import frame, kernel, launch, write

TRACE = [frame("train.py(3): step", 0.0, 100.0), launch(1.0, corr=1), kernel("k", 10.0, 5.0, 1)]


def one_line(capsys, *words: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "internal error" not in err, err
    for word in words:
        assert word in err, err


@pytest.fixture
def never_analyzed(monkeypatch) -> None:
    """The error must come before the analysis starts (a 10-minute load is not wasted)."""

    def refuse(*_a, **_k):
        raise AssertionError("the analysis started")

    monkeypatch.setattr(brrr_trace.pipeline, "analyze", refuse)


# -- -o ------------------------------------------------------------------------------------


def test_output_into_a_missing_folder(tmp_path, capsys, never_analyzed) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    assert main(["analyze", str(trace), "-o", str(tmp_path / "no" / "r.txt")]) == 2
    one_line(capsys, "does not exist")


def test_output_onto_a_folder(tmp_path, capsys, never_analyzed) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    assert main(["analyze", str(trace), "-o", str(tmp_path)]) == 2
    one_line(capsys, "is a folder")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_output_onto_a_device_is_refused_not_replaced(tmp_path, capsys, never_analyzed) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    assert main(["analyze", str(trace), "-o", "/dev/full"]) == 2
    one_line(capsys, "not a regular file")


def test_a_full_disk_leaves_the_old_report_and_no_temporary(tmp_path, capsys, monkeypatch) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    report = tmp_path / "r.txt"
    report.write_text("the old report")

    def full(_fd, _data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(brrr_trace.output.os, "write", full)
    assert main(["analyze", str(trace), "-o", str(report)]) == 2
    one_line(capsys, "No space left on device", "unchanged")
    assert report.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.txt", "t.json"]


def test_a_failed_analysis_leaves_the_old_report(tmp_path, monkeypatch) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    report = tmp_path / "r.txt"
    report.write_text("the old report")

    def killed(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(brrr_trace.pipeline, "analyze", killed)
    assert main(["analyze", str(trace), "-o", str(report)]) == 130
    assert report.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.txt", "t.json"]


def test_the_report_replaces_the_file_and_keeps_its_mode(tmp_path) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    report = tmp_path / "r.json"
    report.write_text("old")
    report.chmod(0o600)
    assert main(["analyze", str(trace), "-o", str(report), "--format", "json"]) == 0
    assert json.loads(report.read_text())["schema_version"] == 1
    assert report.stat().st_mode & 0o777 == 0o600


def test_a_link_planted_at_the_temporary_name_is_not_followed(tmp_path, monkeypatch) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / ".r.txt.aaaa.tmp").symlink_to(victim)
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(brrr_trace.output, "_temp_suffix", lambda: next(names))
    assert main(["analyze", str(trace), "-o", str(tmp_path / "r.txt")]) == 0
    assert victim.read_text() == "keep me"
    assert "Lines by time" in (tmp_path / "r.txt").read_text()


# -- unreadable input ------------------------------------------------------------------------


def test_an_unreadable_trace_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    """Before: 'internal error (PermissionError ...)', exit 1. Root reads everything, so the
    refusal is simulated at the open the loader does."""
    import brrr_trace.traces.files as files

    trace = write(tmp_path / "t.json", TRACE)

    def denied(path, *_a, **_k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(files.os, "open", denied)
    assert main(["analyze", str(trace)]) == 2
    one_line(capsys, "t.json", "cannot be read", "Permission denied")


def test_an_unreadable_folder_is_one_line(tmp_path, capsys, monkeypatch) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    write(folder / "a_trace.json", TRACE)
    write(folder / "b_trace.json", TRACE)

    def denied(self, *_a, **_k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))

    monkeypatch.setattr(Path, "rglob", denied)
    assert main(["analyze", str(folder)]) == 2
    one_line(capsys, "runs", "cannot be read")


# -- quiet wrong answers -----------------------------------------------------------------------


def test_discovery_finds_a_trace_not_named_trace(tmp_path, capsys, monkeypatch) -> None:
    """Before: profile.json.gz was passed over and the bundled sample reported, exit 0."""
    monkeypatch.chdir(tmp_path)
    text = json.dumps({"traceEvents": TRACE}).encode()
    (tmp_path / "profile.json.gz").write_bytes(gzip.compress(text))
    (tmp_path / "package.json").write_text('{"name": "not a trace"}')
    assert main(["analyze", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "bundled sample" not in captured.err
    assert json.loads(captured.out)["trace"]["path"].endswith("profile.json.gz")


def test_no_trace_here_says_so_when_it_falls_back_to_the_sample(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "package.json").write_text('{"name": "not a trace"}')
    assert main(["analyze", "--format", "json"]) == 0
    assert "no trace in the current folder" in capsys.readouterr().err


def test_a_folder_finds_a_trace_not_named_trace(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    write(tmp_path / "run" / "step_10.json", TRACE)
    assert main(["analyze", str(tmp_path / "run")]) == 0


def test_a_rank_not_in_a_single_file_is_an_error_naming_its_rank(tmp_path, capsys) -> None:
    """Before: --rank 3 on a single-rank file was silently ignored."""
    trace = write(tmp_path / "t.json", TRACE, distributedInfo={"rank": 1, "world_size": 2})
    assert main(["analyze", str(trace), "--rank", "3"]) == 2
    one_line(capsys, "rank 1", "rank 3")
    assert main(["analyze", str(trace), "--rank", "1"]) == 0


def test_a_rank_not_in_a_folder_names_the_ranks_present(tmp_path, capsys) -> None:
    for rank in (0, 1):
        write(tmp_path / f"r{rank}.pt.trace.json", TRACE, distributedInfo={"rank": rank})
    assert main(["analyze", str(tmp_path), "--rank", "5"]) == 2
    one_line(capsys, "ranks present: [0, 1]")


@pytest.mark.parametrize("flag", [["--top", "-1"], ["--top", "0"], ["--rank", "-2"]])
def test_counts_are_validated(tmp_path, capsys, flag) -> None:
    trace = write(tmp_path / "t.json", TRACE)
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", str(trace), *flag])
    assert exit_.value.code == 2
    assert "must be at least" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("model.json", b"PK\x03\x04\x14\x00\x00\x00", ["zip archive", "export_chrome_trace"]),
        ("run.nsys-rep", b"\x00\x01binary", ["Nsight Systems report", "torch.profiler"]),
        ("run.qdrep", b"\x00\x01binary", ["Nsight Systems report"]),
        ("run.sqlite", b"SQLite format 3\x00....", ["SQLite", "Nsight"]),
        ("t.json.zst", b"\x28\xb5\x2f\xfd....", ["zstd", "decompress it first"]),
    ],
)
def test_files_people_pass_by_mistake_are_named(tmp_path, capsys, name, content, words) -> None:
    """Before: "not JSON (starts with 'PK…')"."""
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["analyze", str(path)]) == 2
    one_line(capsys, name, *words)
