"""Streaming the bytes of a trace file into runs of whole events, with bounded memory.

A trace is one JSON object whose ``traceEvents`` array holds nearly all the bytes (or, in the
legacy format, a bare array). The reader finds the array, then hands out runs of complete
events cut at object boundaries, 4 MiB at a time, so the file is never held whole.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple, cast

import msgspec

from brrr_trace.errors import NotATraceError
from brrr_trace.traces.files import open_stream, stream_size
from brrr_trace.traces.formats import describe
from brrr_trace.traces.gunzip import LenientGunzip, Prefetch
from brrr_trace.traces.urls import is_url

# 4 MiB runs: each run is held three or four times over while it is cut and decoded (the
# pending bytes, the run, the decoder's input, the decoded events), so the run size sets most of
# the loader's peak memory; 16 MiB runs made the peak 2.6x larger (266 MB against 102 MB on an
# 85 MB trace) for the same CPU time.
CHUNK_BYTES = 4 << 20
HEADER_SEARCH_BYTES = 64 << 20
MAX_EVENT_BYTES = 64 << 20

_KEY_TEXTS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_EXACT_TS = re.compile(rb'"ts"\s*:\s*\d{16,}\.\d')
_LEADING_BLANKS = re.compile(rb"[\xef\xbb\xbf \t\r\n]*")
_MIN_BUFFER_BYTES = 1 << 16
_HEAD_BYTES = 256  # of a file's first text, enough to tell what it is

ProgressFn = Callable[[int, int], None]


@dataclass
class ReadState:
    """What the reader learned besides the events: header keys, and how the file ended."""

    header: dict[str, Any] = field(default_factory=dict)
    legacy_array: bool = False
    exact_timestamps: bool = False
    truncated: bool = False
    header_unreadable: bool = False
    uncompressed_bytes: int = 0
    # Why the data ended early besides a cut in the JSON (damaged gzip, a read error).
    damage: str | None = None
    repeated_events_keys: int = 0  # "traceEvents" lists after the first
    # When the header is longer than one chunk: the bytes after "traceEvents": [.
    events_head: bytes | None = None
    # The top-level keys as their JSON text, in file order, before and after traceEvents: for a
    # writer that copies a trace (``brrr-trace record``) without re-encoding what it keeps.
    text_before_events: dict[str, bytes] = field(default_factory=dict)
    text_after_events: dict[str, bytes] = field(default_factory=dict)
    # The keys after traceEvents could not be read (the file's tail is not clean JSON).
    after_events_unreadable: bool = False


Stream = BinaryIO | LenientGunzip | Prefetch


class FileSpan(NamedTuple):
    """A run of events as where it lies in a plain file: ``size`` bytes from ``offset``.

    What ``iter_event_spans`` hands out instead of the run's bytes, so that a worker process
    reads the run from the file itself: joining, pickling and piping a 4 MiB run to a worker
    cost the reading process more than reading the file (79 MB trace: ~10 ms a run)."""

    offset: int
    size: int


def _read(stream: Stream, size: int) -> bytes:
    """Up to ``size`` bytes; a read error or damaged gzip data ends the data (``_damage``)."""
    try:
        return stream.read(size)
    except OSError as error:
        raise _ReadBroken(error.strerror or str(error)) from error


def _read_into(stream: io.BufferedReader, buffer: bytearray) -> bytes | bytearray:
    """``_read`` into one buffer used again for every read, so that each run's read does not
    fault in fresh pages (~1 ms per MiB here); the caller copies what it keeps before the next
    read. The last, short read is copied out."""
    try:
        n = stream.readinto(buffer)
    except OSError as error:
        raise _ReadBroken(error.strerror or str(error)) from error
    return buffer if n == len(buffer) else bytes(memoryview(buffer)[:n])


def _damage(stream: Stream) -> str | None:
    return stream.damage if isinstance(stream, LenientGunzip | Prefetch) else None


class _ReadBroken(Exception):
    pass


def iter_event_runs(
    path: str, state: ReadState, progress: ProgressFn | None = None
) -> Iterator[bytes]:
    """Yield byte runs ``{..}, {..}, ... {..}`` of whole events; fill ``state`` on the way."""
    # Without spans every run is bytes.
    return cast(Iterator[bytes], _event_runs(path, state, progress, spans=False))


def iter_event_spans(
    path: str, state: ReadState, progress: ProgressFn | None, same_as: int
) -> Iterator[bytes | FileSpan]:
    """The runs of ``iter_event_runs``, cut at the same places, but those that are a plain
    file's bytes as they lie in it as a ``FileSpan`` of them (the first run, the last and
    the runs of a gzip or URL stream stay bytes). Spans only while ``path`` is the file open
    as ``same_as``, the one they are read from (not one put in its place in between)."""
    return _event_runs(path, state, progress, spans=True, same_as=same_as)


def _event_runs(
    path: str,
    state: ReadState,
    progress: ProgressFn | None,
    spans: bool,
    same_as: int | None = None,
) -> Iterator[bytes | FileSpan]:
    raw, plain = open_stream(path)
    total = stream_size(raw)
    if spans and same_as is not None and plain is raw:
        mine, theirs = os.fstat(raw.fileno()), os.fstat(same_as)
        spans = (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
    stream: Stream = plain
    if isinstance(plain, LenientGunzip):
        stream = Prefetch(plain, CHUNK_BYTES)
    try:
        yield from _runs(path, raw, stream, total, state, progress, spans)
    finally:
        stream.close()
        raw.close()


def _runs(
    path: str,
    raw: BinaryIO,
    stream: Stream,
    total: int,
    state: ReadState,
    progress: ProgressFn | None,
    spans: bool = False,
) -> Iterator[bytes | FileSpan]:
    name = os.path.basename(path)
    try:
        first = _read(stream, CHUNK_BYTES)
    except _ReadBroken as error:
        raise NotATraceError(f"{name}: cannot be read ({error}).") from None
    if not first and _damage(stream):
        raise NotATraceError(f"{name}: {_damage(stream)}; nothing could be decompressed.")
    state.uncompressed_bytes = len(first)
    start = _find_events_start(name, stream, first, state, path)
    # A view of the first read's events, not a copy of them: joined with the next read.
    pending: bytes | memoryview = memoryview(first)[start:]
    if state.events_head is not None:
        pending = state.events_head
    del first
    eof = False
    # A plain file is read into one buffer (``_read_into``); a gzip or URL stream as it comes.
    plain = stream if isinstance(stream, io.BufferedReader) else None
    # Where ``pending`` starts in the file, while that is known: only a local plain file's
    # runs are spans (a URL's bytes are not there to read again), and not when the header
    # took more than one read (``events_head``, rare enough not to track).
    at: int | None = None
    local = "://" not in path or not is_url(path)
    if spans and plain is not None and state.events_head is None and local:
        at = start
    # No bigger than what is left of a plain file (4 MiB made and zeroed for a 5 MB trace's
    # last 0.9 MB cost ~4 ms), and never small (a file that grows is still read in big runs).
    left = total - state.uncompressed_bytes if plain is not None else CHUNK_BYTES
    buffer = bytearray(min(CHUNK_BYTES, max(left, _MIN_BUFFER_BYTES)))
    more: bytes | bytearray
    while True:
        if not eof:
            try:
                if plain is not None:
                    more = _read_into(plain, buffer)
                else:
                    more = _read(stream, CHUNK_BYTES)
            except _ReadBroken as error:
                more = b""
                state.truncated = True
                state.damage = f"reading the file failed ({error})"
            more_at = state.uncompressed_bytes  # the file offset of ``more``
            if more:
                state.uncompressed_bytes += len(more)
            else:
                eof = True
                if _damage(stream):
                    state.truncated = True
                    state.damage = _damage(stream)
            if progress is not None:
                progress(min(raw.tell(), total), total)
        if eof:
            yield from _finish(bytes(pending), state)
            return
        # Most reads end past an event boundary: the run is what is pending and the new bytes
        # up to it, joined in one copy (``pending += more`` and a slice of it were two, each
        # into fresh pages). A boundary whose "}" lies in ``more`` lies wholly in it, so the
        # last one in ``more`` is the last one in ``pending + more`` when there is one.
        cut = _last_boundary(more)
        if cut >= 0:
            # A span where the run is the file's bytes as they are; a run that holds a second
            # "traceEvents" key (or the first run: ``pending`` a view of the first read) is
            # joined and split as always. The run ends with the "}" at ``cut``: it has text.
            span = (
                FileSpan(at, len(pending) + cut + 1)
                if at is not None
                and isinstance(pending, bytes)
                and not _holds_events_key(pending, more, cut + 1)
                else None
            )
            tail = bytes(memoryview(more)[cut + 1 :])
            rest = tail.lstrip()
            if span is None:
                run = b"".join((pending, memoryview(more)[: cut + 1]))
            pending = rest[1:] if rest[:1] == b"," else rest
            if at is not None:
                at = more_at + len(more) - len(pending)
            if span is not None:
                yield span
                continue
            run = yield from _before_repeats(run, state)
            if _has_text(run):
                yield run
            continue
        pending = b"".join((pending, more))  # pending may be a view: no +=
        cut = _last_boundary(pending)
        if cut < 0:
            if len(pending) > MAX_EVENT_BYTES:
                # Whitespace (a gzip bomb of spaces), or whitespace and then the array's end
                # read in the same run: no event at all, however long.
                stripped = pending.lstrip()
                if not stripped or stripped[:1] == b"]":
                    pending = stripped
                    continue
                raise NotATraceError(
                    f"{name}: found a single event larger than {MAX_EVENT_BYTES >> 20} MiB; "
                    "this does not look like a profiler trace."
                )
            continue
        run = pending[: cut + 1]
        rest = pending[cut + 1 :].lstrip()
        left_over = len(pending)
        pending = rest[1:] if rest[:1] == b"," else rest
        if at is not None:
            at += left_over - len(pending)
        run = yield from _before_repeats(run, state)
        if _has_text(run):
            yield run


_KEY = b'"traceEvents"'


def _holds_events_key(pending: bytes, more: bytes | bytearray, stop: int) -> bool:
    """``_KEY in pending + more[:stop]`` without the copy: in either, or across the two."""
    if _KEY in pending or more.find(_KEY, 0, stop) >= 0:
        return True
    return _KEY in pending[-len(_KEY) :] + bytes(more[: min(stop, len(_KEY))])


def _has_text(run: bytes) -> bool:
    """``run.strip()`` is not empty, without its copy: a run that starts with the newline
    after an event's comma is copied whole by ``strip``."""
    return bool(run) and not run.isspace()


def _find_events_start(name: str, stream: Stream, first: bytes, state: ReadState, path: str) -> int:
    # The opening BOM and blanks measured, not stripped: a strip copied the whole first run.
    blanks = _LEADING_BLANKS.match(first)
    offset = blanks.end() if blanks is not None else 0
    head = first[offset : offset + _HEAD_BYTES]
    if not head:
        raise NotATraceError(f"{name}: the file is empty; expected a PyTorch profiler trace.")
    if head[:1] == b"[":
        state.legacy_array = True
        start = offset + 1
    elif head[:1] == b"{":
        match = _EVENTS_KEY.search(first)
        buf = first
        while match is None and len(buf) < HEADER_SEARCH_BYTES:
            try:
                more = _read(stream, CHUNK_BYTES)
            except _ReadBroken:
                more = b""
            if not more:
                break
            buf += more
            match = _EVENTS_KEY.search(buf)
        if match is None:
            raise NotATraceError(
                f'{name}: a JSON object without a "traceEvents" list; '
                "expected a trace written by torch.profiler (export_chrome_trace)."
            )
        if buf is not first:
            state.events_head = buf[match.end() :]
        _parse_header(buf[offset : match.start()], state)
        start = match.end()
    else:
        known = describe(name, head)
        if known is not None:
            raise NotATraceError(known)
        shown = head[:20].decode("utf-8", errors="replace")
        raise NotATraceError(
            f"{name}: not JSON (starts with {shown!r}); "
            "expected a trace written by torch.profiler (.json or .json.gz)."
        )
    state.exact_timestamps = _EXACT_TS.search(first, start, start + (1 << 16)) is not None
    return start


def _parse_header(text: bytes, state: ReadState) -> None:
    body = text.strip()
    if body.endswith(b","):
        body = body[:-1]
    if body in (b"{", b""):
        return
    try:
        texts = _KEY_TEXTS.decode(body + b"}")
        header = {key: msgspec.json.decode(text) for key, text in texts.items()}
    except (msgspec.DecodeError, RecursionError, ValueError):
        state.header_unreadable = True
        return
    state.text_before_events.update((key, bytes(text)) for key, text in texts.items())
    state.header.update(header)


def _last_boundary(buf: bytes | bytearray) -> int:
    """Index of the ``}`` that closes the last complete event in ``buf``, or -1."""
    j = len(buf)
    while True:
        j = buf.rfind(b"}", 0, j)
        if j < 0:
            return -1
        k = j + 1
        n = len(buf)
        while k < n and buf[k] in b" \t\r\n":
            k += 1
        if k < n and buf[k] == 0x2C:  # ","
            k += 1
            while k < n and buf[k] in b" \t\r\n":
                k += 1
            if k < n and buf[k] == 0x7B:  # "{"
                return j


def _finish(pending: bytes, state: ReadState) -> Iterator[bytes]:
    """The last run: events, the array's end, and (object format) the keys after it."""
    body = pending.rstrip()
    if not state.legacy_array:
        body = yield from _before_repeats(body, state)
    if state.legacy_array:
        if body.endswith(b"]"):
            body = body[:-1]
        else:
            state.truncated = True
            yield from _cut_to_last_event(body)
            return
        if body.strip():
            yield body
        return
    # Object format: find the "]" that closes traceEvents by letting msgspec parse the tail.
    try:
        doc = _KEY_TEXTS.decode(b'{"traceEvents":[' + body)
    except (msgspec.DecodeError, RecursionError, ValueError):
        doc = None
    if doc is not None and "traceEvents" in doc:
        events = bytes(doc.pop("traceEvents"))
        for key, value in doc.items():
            state.text_after_events[key] = bytes(value)
            with contextlib.suppress(msgspec.DecodeError):
                state.header[key] = msgspec.json.decode(value)
        inner = events.strip()[1:-1]
        if inner.strip():
            yield inner
        return
    state.after_events_unreadable = True
    end = _array_end(body)
    if end is None:
        state.truncated = True
        yield from _cut_to_last_event(body)
        return
    body = body[:end]
    if body.strip():
        yield body


def _before_repeats(body: bytes, state: ReadState) -> Generator[bytes, None, bytes]:
    """A second ``"traceEvents"`` list after the first (files glued together by hand): yield the
    events of each list that another follows, keep the keys between, return the rest.

    A JSON reader would keep only the last list, silently; here every list is read and the
    repeat is reported. Inside a string the key's quotes are escaped, so the plain ``in`` is a
    cheap, exact test on each run."""
    while _KEY in body:
        split = _split_at_repeat(body)
        if split is None:
            break
        events, keys, body = split
        state.repeated_events_keys += 1
        for key, value in keys.items():
            with contextlib.suppress(msgspec.DecodeError):
                state.header[key] = msgspec.json.decode(value)
        if events.strip():
            yield events
    return body


def _split_at_repeat(body: bytes) -> tuple[bytes, dict[str, msgspec.Raw], bytes] | None:
    """``ev, ev], "k": v, "traceEvents": [rest`` -> (``ev, ev``, {k: v}, ``rest``)."""
    for match in _EVENTS_KEY.finditer(body):
        head = body[: match.start()].rstrip()
        if head.endswith(b","):
            head = head[:-1]
        try:
            doc = msgspec.json.decode(
                b'{"traceEvents":[' + head + b"}", type=dict[str, msgspec.Raw]
            )
        except (msgspec.DecodeError, RecursionError, ValueError):
            continue
        events = doc.pop("traceEvents", None)
        if events is not None:
            return bytes(events).strip()[1:-1], doc, body[match.end() :]
    return None


_ARRAY_END = re.compile(rb"\}\s*\]\s*(?:,|\})")


def _array_end(body: bytes) -> int | None:
    """Position after the last event when the tail itself is dirty; None when the file is cut."""
    matches = list(_ARRAY_END.finditer(body))
    match = matches[-1] if matches else None
    if match is None:
        stripped = body.rstrip()
        if stripped.endswith(b"]}") or stripped.endswith(b"]"):
            return stripped.rfind(b"]")
        return None
    return match.start() + 1


def _cut_to_last_event(body: bytes) -> Iterator[bytes]:
    """A cut file: the whole events first, then the broken remainder for the lenient decoder."""
    cut = _last_boundary(body)
    if cut < 0:
        yield body
        return
    yield body[: cut + 1]
    rest = body[cut + 1 :].lstrip().lstrip(b",")
    if rest.strip():
        yield rest
