"""`analyze --format perfetto`: the original trace plus the analysis as extra tracks. It must be
Chrome-trace JSON that brrr-trace reads back to the same report and that HTA reads to the same
numbers."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brrr_trace.cli import main
from brrr_trace.render import perfetto
from tests.conftest import FIXTURES, PUBLIC
from tests.test_golden_output import step
from tests.tracebuilder import write

DATA = FIXTURES.parent


def export(trace: Path, out: Path, *extra: str) -> dict:
    code = main(["analyze", str(trace), "--format", "perfetto", "-o", str(out), *extra])
    assert code == 0
    return json.loads(out.read_text())


def report_json(trace: Path, capsys, *extra: str) -> dict:
    assert main(["analyze", str(trace), "--format", "json", *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc["trace"]["path"] = "<trace>"
    return doc


def added(doc: dict) -> list[dict]:
    pids = (e.get("pid") for e in doc["traceEvents"])
    return [
        e
        for e, pid in zip(doc["traceEvents"], pids, strict=True)
        if isinstance(pid, int) and pid >= perfetto.FIRST_PID
    ]


def test_the_golden_step_gets_its_tracks(tmp_path: Path) -> None:
    trace = write(tmp_path / "t.json", step(waits=True))
    doc = export(trace, tmp_path / "p.json")
    ours = added(doc)
    names = {
        (e["pid"], e["name"]): e["args"]["name"]
        for e in ours
        if e["ph"] == "M" and e["name"] in ("process_name",)
    }
    assert sorted(names.values()) == [
        "brrr-trace: GPU 0 idle by cause",
        "brrr-trace: GPU 0 work by line",
        "brrr-trace: launches by line (host)",
    ]
    slices = [(e["name"], e["ts"], e["dur"]) for e in ours if e["ph"] == "X"]
    assert sorted(slices) == sorted(
        [
            # launches by line on the host: three launches, three lines
            ("train.py:10 forward", 5.0, 2.0),
            ("train.py:20 update", 35.0, 2.0),
            ("train.py:30 log", 390.0, 2.0),
            # the GPU's work by line on stream 7
            ("train.py:10 forward", 10.0, 200.0),
            ("train.py:20 update", 210.0, 50.0),
            ("train.py:30 log", 395.0, 20.0),
            # the idle gap, by cause
            ("idle: sync", 260.0, 135.0),
        ]
    )
    gap = next(e for e in ours if e["name"] == "idle: sync")
    assert gap["args"] == {"cause": "sync", "next_op_line": "train.py:30 log"}
    log = next(e for e in ours if e["name"] == "train.py:30 log" and "gpu_ops" in e["args"])
    assert log["args"]["regime"] == "overhead" and log["cat"] == "brrr_trace"
    # Every original event is there, unchanged, after the added ones.
    assert doc["traceEvents"][len(ours) :] == json.loads(trace.read_text())["traceEvents"]


def test_a_fixture_reads_back_to_the_same_report(tmp_path: Path, capsys) -> None:
    trace = FIXTURES / "item_in_loop.json.gz"
    doc = export(trace, tmp_path / "p.json", "--source-root", str(DATA))
    original = json.loads(gzip.decompress(trace.read_bytes()))
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }
    ours = added(doc)
    assert doc["traceEvents"][len(ours) :] == original["traceEvents"]
    assert_tracks_are_well_formed(ours)
    before = report_json(trace, capsys, "--source-root", str(DATA))
    after = report_json(tmp_path / "p.json", capsys, "--source-root", str(DATA))
    assert after == before


def assert_tracks_are_well_formed(ours: list[dict]) -> None:
    """Every pid has a process name, every thread with slices a thread name, and no two
    slices of one thread overlap (Perfetto nests slices of one thread)."""
    processes = {e["pid"] for e in ours if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in ours if e["ph"] == "M" and e["name"] == "thread_name"}
    by_thread: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in ours:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    assert by_thread and set(by_thread) <= threads and {p for p, _ in threads} <= processes
    for spans in by_thread.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-3


def test_a_legacy_array_trace_stays_an_array(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(step(waits=True)))
    out = tmp_path / "p.json"
    assert main(["analyze", str(trace), "--format", "perfetto", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert isinstance(doc, list) and doc[len(added({"traceEvents": doc})) :] == step(waits=True)


def test_a_cut_trace_is_one_clear_line_and_no_file(tmp_path: Path, capsys) -> None:
    text = json.dumps({"traceEvents": step(waits=True)})
    trace = tmp_path / "t.json"
    trace.write_text(text[: len(text) - 40])
    out = tmp_path / "p.json"
    assert main(["analyze", str(trace), "--format", "perfetto", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cut short" in err
    assert not out.exists() and os.listdir(tmp_path) == ["t.json"]


def test_several_traces_are_refused(tmp_path: Path, capsys) -> None:
    write(tmp_path / "t.json", step(waits=True))
    write(tmp_path / "u.json", step(waits=False))
    code = main(["analyze", str(tmp_path / "t.json"), str(tmp_path / "u.json"), "-o",
                 str(tmp_path / "p.json"), "--format", "perfetto"])  # fmt: skip
    assert code == 2 and "one trace" in capsys.readouterr().err


def _public(name: str) -> Path:
    found = sorted(PUBLIC.rglob(name))
    if not found:
        pytest.skip(f"{name} not among the public traces")
    return found[0]


PUBLIC_CASES = {
    "amd-resnet": "*resnet_act_checkpoint.json.gz",
    "hta-ns-resolution": "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto-resnet50": "resnet50_num_workers_0__worker0.*.pt.trace.json.gz",
}


@pytest.mark.parametrize("name", PUBLIC_CASES.values(), ids=PUBLIC_CASES.keys())
def test_public_traces_read_back_to_the_same_report(
    name: str, tmp_path: Path, capsys, public_traces: Path
) -> None:
    trace = _public(name)
    doc = export(trace, tmp_path / "p.json")
    assert_tracks_are_well_formed(added(doc))
    assert report_json(tmp_path / "p.json", capsys) == report_json(trace, capsys)


def _hta_python() -> str:
    for candidate in (
        os.environ.get("BRRR_HTA_PYTHON", ""),
        "/tmp/htavenv/bin/python",
        "/tmp/htavenv-share/bin/python",
    ):
        if candidate and Path(candidate).is_file():
            probe = subprocess.run([candidate, "-c", "import hta"], capture_output=True)
            if probe.returncode == 0:
                return candidate
    pytest.skip("HTA 0.5.0 is not installed (benchmarks/README.md says how)")


@pytest.mark.parametrize("name", ["item_in_loop.json.gz", PUBLIC_CASES["hta-ns-resolution"]])
def test_hta_reads_the_export_to_the_same_numbers(name: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.compare_hta import _HTA_CHILD

    python = _hta_python()
    trace = FIXTURES / name if (FIXTURES / name).is_file() else _public(name)
    plain = tmp_path / "original.json"
    plain.write_bytes(gzip.decompress(trace.read_bytes()))
    export(trace, tmp_path / "p.json")
    results = []
    for path in (plain, tmp_path / "p.json"):
        run = subprocess.run(
            [python, "-c", _HTA_CHILD, str(path), "1"], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr[-2000:]
        results.append(json.loads(run.stdout.strip().splitlines()[-1]))
    assert "load_error" not in results[1] and "idle_us" in results[1]
    assert results[1] == results[0]
