"""Trace files that are not plain files, or are cut short: a clear line or every event that
was there, never a hang, a traceback or events silently lost."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brrr_trace.cli import main
from brrr_trace.errors import NotATraceError
from brrr_trace.traces import load
from tests.tracebuilder import frame, kernel, launch

fifo_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def events(kernels: int) -> list[dict]:
    out = [frame("train.py(1): main", 0.0, 10.0 * kernels + 10)]
    for i in range(kernels):
        out += [launch(10.0 * i + 1, i + 1), kernel(f"void k_{'x' * 40}", 10.0 * i + 3, 5.0, i + 1)]
    return out


def gzipped(kernels: int) -> bytes:
    return gzip.compress(json.dumps({"traceEvents": events(kernels)}).encode(), compresslevel=1)


@fifo_only
def test_a_fifo_as_the_trace_is_one_line_exit_2_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "trace.json")
    # Before: blocked in open() for as long as no one wrote to the FIFO.
    done = subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", str(tmp_path / "trace.json")],
        capture_output=True,
        text=True,
        timeout=120,  # only a hang fails here
    )
    assert done.returncode == 2
    assert "is a pipe" in done.stderr and done.stderr.count("\n") == 1


def test_a_pipe_as_the_trace_is_one_line_exit_2(tmp_path: Path) -> None:
    """`brrr-trace analyze /dev/stdin < ...` from a pipe: before, UnsupportedOperation, exit 1."""
    trace = json.dumps({"traceEvents": events(2)})
    done = subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", "/dev/stdin"],
        input=trace,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "save it to a file first" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_as_the_trace_is_refused(capsys) -> None:
    assert main(["analyze", "/dev/zero"]) == 2
    assert "is a device" in capsys.readouterr().err


@pytest.mark.parametrize("chunk", [16 << 20, 4096])  # the file in one chunk, or in many
def test_gzip_without_its_trailer_keeps_every_event(tmp_path: Path, monkeypatch, chunk) -> None:
    """Before: in one chunk 'the gzip data is corrupt'; in many, the last chunk's events lost."""
    from brrr_trace.traces import reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    kernels = 300
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzipped(kernels)[:-8])
    result = load(path)
    assert len(result.trace.gpu) == kernels
    assert [p.kind for p in result.problems if p.kind == "truncated"] == ["truncated"]


def test_gzip_cut_short_keeps_the_events_before_the_cut(tmp_path: Path) -> None:
    data = gzipped(3000)
    path = tmp_path / "t.json.gz"
    path.write_bytes(data[: len(data) // 2])
    result = load(path)
    assert 1000 < len(result.trace.gpu) < 3000
    truncated = next(p for p in result.problems if p.kind == "truncated")
    assert "gzip" in truncated.detail


def test_gzip_of_several_members_is_read_whole(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": events(50)}).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:1000]) + gzip.compress(text[1000:]) + b"\0" * 16)
    result = load(path)
    assert len(result.trace.gpu) == 50 and not result.problems


def test_gzip_that_decompresses_to_nothing_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzipped(10)[:12])
    with pytest.raises(NotATraceError, match="nothing could be decompressed"):
        load(path)
