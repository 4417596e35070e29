"""Decoding in worker processes (traces/parallel.py) gives the same trace as one process."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from brrr_trace.traces import LoadResult, load, parallel, reader
from tests.tracebuilder import annotation, frame, kernel, launch, op

DATA = Path(__file__).parent / "data"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux only")


def _tables(result: LoadResult) -> dict[str, object]:
    trace = result.trace
    out: dict[str, object] = {
        "strings": trace.strings,
        "values": trace.values,
        "threads": trace.threads,
        "problems": result.problems,
    }
    for table in ("gpu", "host_calls", "cpu_ops", "frames", "gpu_annotations"):
        for f in dataclasses.fields(getattr(trace, table)):
            out[f"{table}.{f.name}"] = getattr(getattr(trace, table), f.name).tolist()
    return out


def _odd_trace(path: Path) -> Path:
    """Legacy call stacks, names longer than the cut, a name that is no string, events of the
    wrong types and of unknown categories, spread over many runs."""
    events: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 100, "args": {"name": "main"}}
    ]
    for i in range(400):
        t = i * 100.0
        events.append(frame(f"train.py({i % 7 + 1}): step_{i % 13}_" + "x" * (i % 40), t, 90))
        mm = op("aten::mm", t + 1, 50, **{"Input Dims": [[i % 5, 3], [3, 4]]})
        if i % 3 == 0:
            mm["args"]["Call stack"] = f"train.py({i % 11}): f;" + "y" * (i % 50)
        events.append(mm)
        events.append(launch(t + 2, corr=i))
        events.append(kernel(f"gemm_kernel_{i % 9}" + "z" * (i % 30), t + 10, 20, corr=i))
        if i % 20 == 0:
            events.append(annotation(f"ProfilerStep#{i}", t, 99))
        if i % 50 == 0:
            events.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": 17,
                    "pid": 1,
                    "tid": 100,
                    "ts": t + 3,
                    "dur": 1,
                }
            )
            events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1})
            events.append({"ph": "X", "cat": "Odd", "name": "odd", "ts": t, "dur": 1})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.fixture
def many_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CHUNK_BYTES", 16 << 10)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)


@pytest.mark.parametrize(
    "source",
    ["realcode/h200/gpt_small.json.gz", "h200/exact_sample.json.gz", "h200/sample.json.gz"],
)
def test_recorded_traces_decode_the_same_in_workers(source: str, many_runs: None) -> None:
    path = DATA / source
    one = _tables(load(path, workers=1))
    assert _tables(load(path, workers=2)) == one


def test_odd_events_and_cut_names_decode_the_same_in_workers(
    tmp_path: Path, many_runs: None
) -> None:
    path = _odd_trace(tmp_path / "odd.json")
    one = _tables(load(path, workers=1, max_name_chars=12))
    two = _tables(load(path, workers=3, max_name_chars=12))
    assert two == one
    assert any(text.endswith("…") for text in one["strings"])  # type: ignore[attr-defined]
    assert any(len(text) > 12 for text in one["strings"])  # type: ignore[attr-defined]
    kinds = {p.kind for p in one["problems"]}  # type: ignore[attr-defined]
    assert {"long-name", "bad-timestamp"} <= kinds


def test_the_event_cap_cuts_at_the_same_event_in_workers(tmp_path: Path, many_runs: None) -> None:
    path = _odd_trace(tmp_path / "odd.json")
    one = load(path, workers=1, max_events=777)
    two = load(path, workers=2, max_events=777)
    assert _tables(two) == _tables(one)
    assert "event-cap" in {p.kind for p in one.problems}


def test_a_gzip_trace_decodes_the_same_in_workers(tmp_path: Path, many_runs: None) -> None:
    plain = _odd_trace(tmp_path / "odd.json")
    packed = tmp_path / "odd.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert _tables(load(packed, workers=2)) == _tables(load(plain, workers=1))


def test_small_files_and_one_worker_decode_here() -> None:
    small = str(DATA / "h200" / "sample.json.gz")
    assert parallel.workers_for(small, 0) == 1
    assert parallel.workers_for(small, 1) == 1
    assert np.all(load(small, workers=0).trace.gpu.start_ns == load(small).trace.gpu.start_ns)


def _glued_trace(path: Path) -> Path:
    """A BOM, Kineto's spacing, blank lines between events and a second "traceEvents" list
    (files glued by hand): the runs cut around each of them."""
    events = [
        json.dumps(kernel(f"k{i}", i * 10.0, 5, corr=i), indent=1 if i % 3 else None)
        for i in range(600)
    ]
    first = ",\n\n  ".join(events[:300])
    second = " ,\n".join(events[300:])
    path.write_bytes(
        b"\xef\xbb\xbf"
        + f'{{"schemaVersion": 1, "traceEvents": [ {first} ], "x": 2, "traceEvents": [\n'
        f'{second}\n], "displayTimeUnit": "ns"}}\n'.encode()
    )
    return path


@pytest.mark.parametrize("build", [_odd_trace, _glued_trace])
def test_spans_hold_the_bytes_of_the_same_runs(
    tmp_path: Path, many_runs: None, build: object
) -> None:
    path = str(build(tmp_path / "t.json"))  # type: ignore[operator]
    state_runs, state_spans = reader.ReadState(), reader.ReadState()
    runs = list(reader.iter_event_runs(path, state_runs))
    fd = os.open(path, os.O_RDONLY)
    try:
        spans = list(reader.iter_event_spans(path, state_spans, None, same_as=fd))
        assert any(isinstance(run, reader.FileSpan) for run in spans)
        assert [parallel.run_text(run, fd) for run in spans] == runs
    finally:
        os.close(fd)
    assert state_spans == state_runs
    assert _tables(load(path, workers=2)) == _tables(load(path, workers=1))


def test_no_spans_from_a_file_put_in_the_traces_place(tmp_path: Path, many_runs: None) -> None:
    """A worker reads spans from the file it inherited: when another file took the trace's
    name since, every run is handed over as bytes."""
    path = _odd_trace(tmp_path / "t.json")
    old = tmp_path / "old.json"
    old.write_bytes(path.read_bytes())
    fd = os.open(old, os.O_RDONLY)
    try:
        runs = list(reader.iter_event_spans(str(path), reader.ReadState(), None, same_as=fd))
    finally:
        os.close(fd)
    assert runs == list(reader.iter_event_runs(str(path), reader.ReadState()))
