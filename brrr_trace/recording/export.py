"""Writing the recorded trace: Kineto's own JSON, plus brrr-trace's additions (``brrr_fields``).

torch exports the profile as it always does; the export then copies that file through the
project's one trace reader (``traces.reader``), event by event as Kineto wrote it, except that:

* every ``python_function`` event gets the caller's line (``call_lines``; 0 when unmatched) in
  its args, spliced into Kineto's text;
* the events of brrr-trace's hidden frames are left out, and the events under them point to
  their nearest kept ancestor as their ``Python parent id``;
* ``traceName`` names the final file, and ``brrr_record`` says what was recorded.

Two passes over torch's file: the first matches the events with the tree (an event may come
before the ancestor it is re-parented to, whose ``Python id`` is only known once matched), the
second writes. If anything goes wrong, the trace is written as torch wrote it.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from brrr_trace.errors import BrrrError
from brrr_trace.output import replaced_atomically
from brrr_trace.recording.call_lines import CallIndex, PythonCall, index_tree
from brrr_trace.recording.hidden_frames import HiddenFrames
from brrr_trace.recording.notices import warn
from brrr_trace.traces.brrr_fields import CALL_LINE_ARG, RECORD_FORMAT_VERSION, RECORD_KEY
from brrr_trace.traces.columns import exact_ns
from brrr_trace.traces.events import ExactNumber
from brrr_trace.traces.reader import ReadState, iter_event_runs


def recording_info(exact_ops: bool) -> dict[str, Any]:
    """What ``brrr_record`` says about the recording before the call-line counts."""
    import torch

    return {
        "version": RECORD_FORMAT_VERSION,
        "torch_version": torch.__version__,
        "exact_ops": exact_ops,
    }


def export(
    prof: Any, path: str | os.PathLike[str], *, exact_ops: bool, hidden: HiddenFrames
) -> dict[str, int]:
    """Export a stopped profile to ``path`` (gzipped when it ends in ``.gz``) with call lines
    added; returns the counts of matched, unmatched and hidden Python events.

    Nothing is written through a name someone else could have planted beside ``path``: torch's
    own file goes into a fresh private folder (``mkdtemp``: mode 0700, a new name), and the
    trace into a new file that replaces ``path`` whole (``output.replaced_atomically``)."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    calls: CallIndex | None
    try:
        calls = index_tree(prof.profiler.kineto_results.experimental_event_tree(), hidden)
    except Exception as error:  # an older or newer torch without the tree: lines become 0
        warn(f"no call lines ({type(error).__name__}: {error})")
        calls = None
    gz = final.name.endswith(".gz")
    with tempfile.TemporaryDirectory(prefix=f".{final.name}.", dir=final.parent) as private:
        raw = Path(private) / "kineto.json"
        prof.export_chrome_trace(str(raw))
        try:
            with replaced_atomically(str(final)) as out:
                return rewrite(
                    raw, out, calls, gz=gz, trace_name=str(final), info=recording_info(exact_ops)
                )
        except BrrrError:
            raise  # the target itself cannot be written: a copy could not be either
        except Exception as error:
            warn(
                f"could not add call lines ({type(error).__name__}: {error}); "
                "the trace is as torch wrote it"
            )
        with replaced_atomically(str(final)) as out:
            _copy(raw, out, gz)
    return {}


def _copy(src: Path, dst: BinaryIO, gz: bool) -> None:
    with open(src, "rb") as fin, _compressed(dst, gz) as fout:
        while chunk := fin.read(1 << 22):
            fout.write(chunk)


@contextlib.contextmanager
def _compressed(stream: BinaryIO, gz: bool) -> Iterator[BinaryIO]:
    """``stream``, through gzip when ``gz``; the stream itself stays open."""
    if not gz:
        yield stream
        return
    with gzip.GzipFile(fileobj=stream, mode="wb", compresslevel=6) as packed:
        yield packed  # type: ignore[misc]


class _Category(msgspec.Struct):
    cat: Any = None


class _PythonEvent(msgspec.Struct):
    name: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None


_EVENT_TEXTS = msgspec.json.Decoder(list[msgspec.Raw])
_CATEGORIES = msgspec.json.Decoder(list[_Category])
# ts as its text: a float64 can lose the last digit of the nanoseconds the tree is matched on.
_PYTHON_EVENT = msgspec.json.Decoder(_PythonEvent, float_hook=ExactNumber)
_PYTHON_CATEGORY = "python_function"


def _events(path: Path, state: ReadState) -> Iterator[tuple[list[msgspec.Raw], list[_Category]]]:
    """Runs of whole events from the reader: each event's text, and its category."""
    for run in iter_event_runs(str(path), state):
        try:
            run.decode("utf-8")
        except UnicodeDecodeError:  # torch can write undecodable names: the copy is UTF-8
            run = run.decode("utf-8", errors="replace").encode("utf-8")
        body = b"[" + run + b"]"
        yield _EVENT_TEXTS.decode(body), _CATEGORIES.decode(body)
    if state.legacy_array or state.truncated or state.header_unreadable:
        raise ValueError("torch's trace is not one whole JSON object")
    if state.after_events_unreadable:
        raise ValueError("the keys after traceEvents in torch's trace cannot be read")


def _match(
    src: Path, calls: CallIndex | None, stats: dict[str, int]
) -> tuple[list[PythonCall | None], ReadState]:
    """The first pass: the tree's call for each Python event of the file, in file order, and
    what the reader learned of the file's top-level keys."""
    matched: list[PythonCall | None] = []
    state = ReadState()
    base: int | None = None
    for texts, categories in _events(src, state):
        for text, category in zip(texts, categories, strict=True):
            if category.cat != _PYTHON_CATEGORY:
                continue
            stats["python_events"] += 1
            event = _PYTHON_EVENT.decode(text)
            if base is None:  # the header is read before the first event
                header_base = state.header.get("baseTimeNanoseconds")
                base = header_base if isinstance(header_base, int) else 0
            ts = exact_ns(event.ts)
            call = None
            if calls is not None and ts is not None:
                call = calls.take(ts + base, str(event.name), exact_ns(event.dur))
            matched.append(call)
            if call is None:
                stats["call_lines_unmatched"] += 1
                continue
            args = event.args if isinstance(event.args, dict) else {}
            call.python_id = args.get("Python id")
            if call.drop:
                stats["hidden"] += 1
            else:
                stats["call_lines_matched"] += 1
    return matched, state


def rewrite(
    src: Path,
    dst: BinaryIO,
    calls: CallIndex | None,
    *,
    gz: bool,
    trace_name: str,
    info: dict[str, Any],
) -> dict[str, int]:
    """Copy torch's trace ``src`` to the stream ``dst`` with brrr-trace's additions; ``info``
    starts the ``brrr_record`` (what the profile's own metadata says goes over it)."""
    stats = {"python_events": 0, "call_lines_matched": 0, "call_lines_unmatched": 0, "hidden": 0}
    matched, keys = _match(src, calls, stats)
    record = dict(info)
    with _compressed(dst, gz) as out:
        before = _keys(keys.text_before_events, trace_name, record)
        out.write(b"{" + b",\n".join([*before, b'"traceEvents": [\n']))
        python_events = iter(matched)
        first = True
        for texts, categories in _events(src, ReadState()):
            parts: list[bytes | msgspec.Raw] = []
            for text, category in zip(texts, categories, strict=True):
                if category.cat == _PYTHON_CATEGORY:
                    kept = _python_event(bytes(text), next(python_events))
                    if kept is not None:
                        parts.append(kept)
                else:
                    parts.append(text)
            if parts:
                out.write((b"" if first else b",\n") + b",\n".join(parts))
                first = False
        out.write(b"\n]")
        for key in _keys(keys.text_after_events, trace_name, record):
            out.write(b",\n" + key)
        record["call_lines"] = {
            "matched": stats["call_lines_matched"],
            "unmatched": stats["call_lines_unmatched"],
            "hidden_events": stats["hidden"],
        }
        out.write(b',\n"' + RECORD_KEY.encode() + b'": ' + json.dumps(record).encode())
        out.write(b"\n}\n")
    return stats


def _keys(texts: dict[str, bytes], trace_name: str, record: dict[str, Any]) -> list[bytes]:
    """Top-level keys as ``"key": value`` texts; a ``brrr_record`` (the profile's metadata)
    is taken into ``record`` instead, and ``traceName`` names the final file."""
    found = []
    for key, text in texts.items():
        if key == RECORD_KEY:
            value = msgspec.json.decode(text)
            if isinstance(value, dict):
                record.update(value)
                continue
        if key == "traceName":
            text = json.dumps(trace_name).encode()
        found.append(json.dumps(key).encode() + b": " + text)
    return found


def _python_event(text: bytes, call: PythonCall | None) -> bytes | None:
    """The event's text with its call line (and new parent), or None to leave it out."""
    if call is None:
        return with_call_line(text.decode("utf-8"), 0).encode("utf-8")
    if call.drop:
        return None
    parent = call.new_parent
    if parent is False:
        spliced = with_call_line(text.decode("utf-8"), call.caller_line)
    else:
        parent_id = parent.python_id if isinstance(parent, PythonCall) else None
        spliced = with_call_line(text.decode("utf-8"), call.caller_line, parent_id)
    return spliced.encode("utf-8")


_ARGS_KEY = re.compile(r'[{,]\s*"args"\s*:\s*\{')
_PARENT_ID = re.compile(r'("Python parent id"\s*:\s*)(null|-?\d+)')
_ENCODE = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
_KEEP_PARENT = object()


def with_call_line(text: str, line: int, parent: Any = _KEEP_PARENT) -> str:
    """A Python event's text with the call line (and a new ``Python parent id``) in its args:
    spliced into Kineto's text when its layout is the usual one, else re-encoded."""
    at = text.rfind('"args"')
    start = max(text.rfind(",", 0, at), text.rfind("{", 0, at)) if at > 0 else -1
    match = _ARGS_KEY.match(text, start) if start >= 0 else None
    if match is not None:
        body = text[match.end() :]
        count = 1
        if parent is not _KEEP_PARENT:
            value = "null" if parent is None else str(int(parent))
            body, count = _PARENT_ID.subn(lambda m: m.group(1) + value, body, count=1)
        if count:
            sep = "" if body.lstrip().startswith("}") else ", "
            return f'{text[: match.end()]}"{CALL_LINE_ARG}": {int(line)}{sep}{body}'
    event = json.loads(text)
    args = event.get("args")
    if not isinstance(args, dict):
        args = event["args"] = {}
    args[CALL_LINE_ARG] = line
    if parent is not _KEEP_PARENT:
        args["Python parent id"] = parent
    return _ENCODE(event)
