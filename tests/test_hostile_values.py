"""Values no profiler writes: times near int64, a repeated traceEvents key, huge names, more
events than anyone records. Each is reported in ``problems`` and bounded, never an internal
error, a silent wrap or a silent loss."""

from __future__ import annotations

import json

import pytest

from brrr_trace.traces import load
from tests.tracebuilder import kernel, launch


def pair(ts: float | int, corr: int, dur: float = 5.0) -> list[dict]:
    return [launch(ts, corr), kernel("k", ts + 1, dur, corr)]


def kinds(result) -> dict[str, int]:
    return {p.kind: p.count for p in result.problems}


def test_a_timestamp_past_int64_with_a_fraction_is_dropped_not_an_overflow(tmp_path) -> None:
    """Before: OverflowError (internal error, exit 1) from the exact-nanosecond path."""
    good = json.dumps(pair(1_700_000_000_000_000.25, 1))[1:-1]
    bad = json.dumps(pair(9_300_000_000_000_000, 2))[1:-1]
    bad = bad.replace("9300000000000000", "9300000000000000.5")  # a fraction: the exact path
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + good + ", " + bad + "]}")
    result = load(path)
    assert len(result.trace.gpu) == 1 and kinds(result)["bad-timestamp"] == 2


def test_integer_timestamps_past_int64_do_not_wrap(tmp_path) -> None:
    """Before: 9.3e15 µs wrapped to a negative time and the span came out as 1.08e16 µs."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": pair(1_000, 1) + pair(9_300_000_000_000_000, 2)}))
    result = load(path)
    assert len(result.trace.gpu) == 1 and kinds(result)["bad-timestamp"] == 2
    assert (result.trace.gpu.start_ns >= 0).all()


@pytest.mark.parametrize("dur", [9.2e15, 4.611686e15, "NaN", "1e999"])
def test_a_duration_past_the_range_becomes_zero_and_is_counted(tmp_path, dur) -> None:
    path = tmp_path / "t.json"
    late = 30_000_000_000  # 8 hours in: with the largest durations, the end passes 2**62 ns
    text = json.dumps({"traceEvents": pair(1_000, 1) + pair(late, 2, dur=12345.0)})
    path.write_text(text.replace("12345.0", str(dur)))
    result = load(path)
    assert kinds(result)["bad-duration"] == 1
    assert int((result.trace.gpu.end_ns - result.trace.gpu.start_ns).max()) == 5_000


@pytest.mark.parametrize("chunk", [16 << 20, 512])  # in one chunk, or streamed in many runs
def test_a_repeated_trace_events_key_keeps_both_lists_and_says_so(
    tmp_path, monkeypatch, chunk
) -> None:
    """Before: the last list won, silently (a JSON reader's rule)."""
    from brrr_trace.traces import reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", chunk)
    first = [e for i in range(10) for e in pair(100 * i, i + 1)]
    second = [e for i in range(10, 14) for e in pair(100 * i, i + 1)]
    path = tmp_path / "t.json"
    path.write_text(
        '{"traceEvents": '
        + json.dumps(first)
        + ', "between": {"a": [1, 2]}, "traceEvents": '
        + json.dumps(second)
        + ', "after": 3}'
    )
    result = load(path)
    assert len(result.trace.gpu) == 14
    assert kinds(result) == {"repeated-key": 1}
    assert result.trace.metadata["between"] == {"a": [1, 2]}
    assert result.trace.metadata["after"] == 3


def test_a_huge_name_is_cut_for_a_bounded_cost_and_reported(tmp_path) -> None:
    """Before: an 8 MB kernel name took 13-20 s (dozens of regex searches per unique name)."""
    path = tmp_path / "t.json"
    long_name = "void k<" + "x" * 100_000 + ">"
    path.write_text(json.dumps({"traceEvents": [launch(1.0, 1), kernel(long_name, 2.0, 5.0, 1)]}))
    result = load(path, max_name_chars=1000)
    names = [result.trace.strings[i] for i in result.trace.gpu.name]
    assert names == ["void k<" + "x" * 993 + "…"]
    assert kinds(result) == {"long-name": 1}


def test_the_event_count_is_capped_and_reported(tmp_path, monkeypatch) -> None:
    """Before: no bound; a 3.2 MB gzip of 10 M events took 81 s and 2.4 GB."""
    from brrr_trace.traces import reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", 2048)  # many runs: the cap stops the reading
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [e for i in range(500) for e in pair(10 * i, i)]}))
    result = load(path, max_events=101)
    assert len(result.trace.gpu) + len(result.trace.host_calls) == 101
    assert kinds(result)["event-cap"] == 101


@pytest.mark.parametrize("dur", ["1.797693134862316e+305", "1.7e308"])
def test_a_duration_that_overflows_in_nanoseconds_is_counted(tmp_path, dur) -> None:
    """Found by the property test: dur * 1000 is infinite, and round() of it raised."""
    path = tmp_path / "t.json"
    event = kernel("k", 1.0, 1.0, 1)
    text = json.dumps({"traceEvents": [event]}).replace('"ts": 1.0', '"ts": 1000000000000000.0')
    path.write_text(text.replace('"dur": 1.0', f'"dur": {dur}'))
    assert kinds(load(path))["bad-duration"] == 1


def test_a_gzip_that_inflates_to_more_events_than_a_profile_can_hold_is_cut(
    tmp_path, monkeypatch
) -> None:
    # 20,000 identical kernels compress to about 11 KB, 1.8 events per compressed byte, where a
    # real Kineto trace has one per 20-40 bytes: a quarter of an event per byte is read.
    import gzip

    import brrr_trace.traces.loader as traces

    monkeypatch.setattr(traces, "_GZIP_CAP_FLOOR", 1_000)
    events = [kernel("k", 0.0, 0.5, corr=1)] * 20_000
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    loaded = load(path)
    assert len(loaded.trace.gpu) == path.stat().st_size // 4 < 20_000
    assert "gzip-ratio" in [p.kind for p in loaded.problems]
