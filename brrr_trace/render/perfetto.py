"""The trace itself plus brrr-trace's analysis as extra tracks, for the Perfetto UI (and any
Chrome-trace viewer): ``--format perfetto``.

The original events are copied as they are, run by run from the reader (never the whole file
in memory, never re-encoded), with the analysis's tracks put first in ``traceEvents``: launches
by line per host thread, GPU work by line per stream, idle gaps by cause per device (the line's
regime among each slice's args). Each group is a process of its own, named by ``process_name``
and ``thread_name`` metadata, with a pid above any real one (Linux's pid_max is at most 2**22),
and every slice has category ``brrr_trace``, which brrr-trace's loader and HTA pass over.

Times are written as exact decimal microseconds (``ns // 1000 . ns % 1000``): a float would
lose the last nanoseconds of epoch timestamps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

import msgspec

from brrr_trace.errors import BrrrError
from brrr_trace.report import Report, Track
from brrr_trace.safe_text import json_safe
from brrr_trace.traces.reader import ReadState, iter_event_runs

CATEGORY = "brrr_trace"
FIRST_PID = 1 << 30
_ENCODER = msgspec.json.Encoder()


def _us(ns: int) -> msgspec.Raw:
    sign = "-" if ns < 0 else ""
    whole, part = divmod(abs(ns), 1000)
    return msgspec.Raw(f"{sign}{whole}.{part:03d}".encode())


def _encode(event: dict[str, Any]) -> bytes:
    # Trace strings (file and function names) are in the names and args: C1 and bidi controls
    # as \u escapes, the same value for a JSON reader.
    return json_safe(_ENCODER.encode(event).decode()).encode()


def track_events(tracks: tuple[Track, ...]) -> Iterator[bytes]:
    """The tracks as Chrome-trace events: metadata for each process and thread, then slices."""
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    for track in tracks:
        if track.group not in pids:
            pid = pids[track.group] = FIRST_PID + len(pids)
            yield _encode(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": track.group},
                }
            )
            yield _encode(
                {
                    "ph": "M",
                    "name": "process_sort_index",
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": -1000 + len(pids)},
                }
            )
        pid = pids[track.group]
        tid = tids.setdefault((track.group, track.name), len(tids) + 1)
        yield _encode(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track.name}}
        )
        for piece in track.slices:
            yield _encode(
                {
                    "ph": "X",
                    "cat": CATEGORY,
                    "name": piece.name,
                    "pid": pid,
                    "tid": tid,
                    "ts": _us(piece.start_ns),
                    "dur": _us(max(0, piece.end_ns - piece.start_ns)),
                    "args": piece.args,
                }
            )


def _key(name: str, text: bytes) -> bytes:
    return _ENCODER.encode(name) + b": " + text


def write(report: Report, out: BinaryIO) -> None:
    """The trace of ``report`` (read again from its file) with the report's tracks added."""
    state = ReadState()
    runs = iter_event_runs(report.trace.path, state)
    first = next(runs, None)  # reading the first run reads the header too
    if state.truncated:
        raise BrrrError(
            f"{report.trace.path}: the trace is cut short, so it cannot be copied as whole "
            "JSON; --format json still reports on what it holds."
        )
    if state.legacy_array:
        out.write(b"[\n")
    else:
        keys = [_key(k, v) for k, v in state.text_before_events.items()]
        out.write(b"{" + b",\n".join([*keys, b'"traceEvents": [\n']))
    wrote = False
    for event in track_events(report.tracks):
        out.write((b",\n" if wrote else b"") + event)
        wrote = True
    for run in _whole_runs(first, runs):
        out.write((b",\n" if wrote else b"") + run)
        wrote = True
    if state.truncated:  # cut short after the first run: what was written is not whole JSON
        raise BrrrError(
            f"{report.trace.path}: the trace is cut short, so it cannot be copied as whole JSON."
        )
    if state.legacy_array:
        out.write(b"\n]\n")
        return
    out.write(b"\n]")
    for name, text in state.text_after_events.items():
        out.write(b",\n" + _key(name, text))
    out.write(b"\n}\n")


def _whole_runs(first: bytes | None, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first is None:
        return
    yield _utf8(first)
    for run in rest:
        yield _utf8(run)


def _utf8(run: bytes) -> bytes:
    try:
        run.decode("utf-8")
    except UnicodeDecodeError:  # torch can write undecodable names; the copy is valid UTF-8
        return run.decode("utf-8", errors="replace").encode("utf-8")
    return run
