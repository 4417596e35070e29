"""A run decoded a piece at a time (events.typed_pieces) gives the trace the whole run gives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brrr_trace.traces import events, load, parallel, reader
from tests.test_parallel_load import _odd_trace, _tables
from tests.tracebuilder import frame, kernel, launch, op

DATA = Path(__file__).parent / "data"


def _whole_runs(run: bytes, exact: bool) -> Iterator[list[Any]]:
    """``typed_pieces`` that refuses every run: each takes ``decode_batch``, as before pieces."""
    raise events.PieceError
    yield []


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(events, "PIECE_BYTES", 700)


def _compared(path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> dict[str, object]:
    pieces = _tables(load(path, workers=1, **options))
    with monkeypatch.context() as patch:
        patch.setattr(parallel, "typed_pieces", _whole_runs)
        whole = _tables(load(path, workers=1, **options))
    assert pieces == whole
    return pieces


@pytest.mark.parametrize(
    "source",
    ["realcode/h200/gpt_small.json.gz", "h200/exact_sample.json.gz", "h200/sample.json.gz"],
)
def test_recorded_traces_decode_the_same_in_pieces(
    source: str, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _compared(DATA / source, monkeypatch)


def test_odd_events_decode_the_same_in_pieces(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = _compared(_odd_trace(tmp_path / "odd.json"), monkeypatch, max_name_chars=12)
    assert {"long-name", "bad-timestamp", "wrong-types"} <= {
        p.kind
        for p in tables["problems"]  # type: ignore[attr-defined]
    }


def test_a_cut_inside_a_name_falls_back_to_the_whole_run(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names that hold what a boundary looks like: a cut there fails, and the run is whole."""
    trace: list[dict[str, Any]] = []
    for i in range(300):
        t = i * 10.0
        trace.append(frame(f'train.py({i}): f}}, {{"x": {i}', t, 9))
        trace.append(op("aten::mm", t + 1, 5, **{"Input Dims": [[i % 3, 2]]}))
        trace.append(launch(t + 2, corr=i))
        trace.append(kernel("k}, {k" * (i % 5), t + 3, 2, corr=i))
    path = tmp_path / "names.json"
    path.write_text(json.dumps({"traceEvents": trace}, separators=(",", ":")))
    tables = _compared(path, monkeypatch)
    assert any("}, {" in text for text in tables["strings"])  # type: ignore[attr-defined]


def test_the_event_cap_cuts_at_the_same_event_in_pieces(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = _compared(_odd_trace(tmp_path / "odd.json"), monkeypatch, max_events=777)
    assert "event-cap" in {p.kind for p in tables["problems"]}  # type: ignore[attr-defined]


def test_pieces_are_cut_between_events() -> None:
    text = b",\n".join(b'{"ph":"X","name":"n%d","ts":%d}' % (i, i) for i in range(2000))
    decoded = [e for piece in events.typed_pieces(text, exact=False) for e in piece]
    assert [e.name for e in decoded] == [f"n{i}" for i in range(2000)]
    assert len(list(events.typed_pieces(text, exact=False))) > 1
