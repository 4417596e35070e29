"""Decoding of raw trace events: a typed msgspec fast path and a lenient per-event fallback.

Only the fields the analyzers read are declared; msgspec skips everything else without
building Python objects for it, which is where the speed over a dict-per-event parse comes from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec

from brrr_trace.traces.brrr_fields import CALL_LINE_ARG

Scalar = int | float | str | None


NO_RAW = msgspec.Raw(b"")


class RawArgs(msgspec.Struct, omit_defaults=True, gc=False):
    correlation: Scalar = None
    device: Scalar = None
    stream: Scalar = None
    grid: Any = None
    block: Any = None
    nbytes: Scalar = msgspec.field(default=None, name="bytes")
    sequence: Scalar = msgspec.field(default=None, name="Sequence number")
    fwd_thread: Scalar = msgspec.field(default=None, name="Fwd thread id")
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_dims_legacy: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input dims")
    input_types: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    call_line: Scalar = msgspec.field(default=None, name=CALL_LINE_ARG)
    graph_id: Scalar = msgspec.field(default=None, name="graph id")
    name: Any = None  # metadata events: thread_name / process_name
    # Collective metadata (record_param_comms, and NCCL kernels since 2023-10).
    collective: Scalar = msgspec.field(default=None, name="Collective name")
    in_nelems: Scalar = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Scalar = msgspec.field(default=None, name="Out msg nelems")
    dtype: Scalar = None
    group_name: Scalar = msgspec.field(default=None, name="Process Group Name")
    group_size: Scalar = msgspec.field(default=None, name="Group size")


NAN = float("nan")


class RawEvent(msgspec.Struct, gc=False):
    """The fast path: ``ts``/``dur`` must be JSON numbers; anything else takes the slow path."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: float = NAN
    dur: float = 0.0
    args: RawArgs | None = None


class ExactNumber(str):
    """A JSON float kept as its text, so that 16-digit epoch microseconds keep their nanoseconds."""

    __slots__ = ()


class ExactRawEvent(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: RawArgs | None = None


FAST_DECODER = msgspec.json.Decoder(list[RawEvent])
EXACT_DECODER = msgspec.json.Decoder(list[ExactRawEvent], float_hook=ExactNumber)
_ONE_FAST = msgspec.json.Decoder(RawEvent)
_ONE_EXACT = msgspec.json.Decoder(ExactRawEvent, float_hook=ExactNumber)
_ANY = msgspec.json.Decoder()

_LOOSE_WHOLE_RUN_BYTES = 64 << 20
_BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{)")


class DecodeStats:
    """Counts of what the lenient path had to repair or drop."""

    def __init__(self) -> None:
        self.bad_utf8 = 0
        self.wrong_types = 0
        self.unparseable = 0
        self.unescaped_quotes = 0

    def add(self, other: DecodeStats) -> None:
        self.bad_utf8 += other.bad_utf8
        self.wrong_types += other.wrong_types
        self.unparseable += other.unparseable
        self.unescaped_quotes += other.unescaped_quotes


def decode_batch(text: bytes, exact: bool, stats: DecodeStats) -> list[Any]:
    """Decode ``ev, ev, ...`` (no brackets), falling back step by step on dirt.

    Typed decoding of the whole run first; if a field has an odd type, a generic decode of the
    run with per-event coercion; only if the run is not valid JSON at all, one event at a time.
    """
    # One copy of the run, not two (``b"[" + text + b"]"`` copies it once per ``+``).
    body = b"".join((b"[", text, b"]"))
    decoder = EXACT_DECODER if exact else FAST_DECODER
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, RecursionError, ValueError):
        pass
    try:
        loose = _ANY.decode(body)
    except (msgspec.DecodeError, RecursionError, ValueError):
        loose = None
    if loose is None and len(body) <= _LOOSE_WHOLE_RUN_BYTES:
        # Python's parser takes what msgspec refuses: NaN/Infinity, control characters.
        try:
            loose = _python_loads(body)
        except (ValueError, RecursionError):
            loose = None
    if isinstance(loose, list):
        events = []
        for obj in loose:
            if isinstance(obj, dict):
                stats.wrong_types += 1
                events.append(coerce_event(obj, exact))
            else:
                stats.unparseable += 1
        return events
    events = []
    for piece in split_events(text):
        event = decode_one(piece, exact, stats)
        if event is not None:
            events.append(event)
    return events


# Bytes of a run decoded at a time by ``typed_pieces``: the structs of a 4 MiB run (~8 MB) are
# out of the CPU's caches by the time the columns read them; a piece's (~120 KB) are not.
PIECE_BYTES = 1 << 16


class PieceError(Exception):
    """A piece of a run that the typed decoder refuses: the run takes ``decode_batch``."""


def typed_pieces(text: bytes, exact: bool) -> Iterator[list[Any]]:
    """The events of a run ``ev, ev, ...``, typed-decoded a piece of about ``PIECE_BYTES`` at
    a time, in order; raises ``PieceError`` at the first piece that does not decode.

    The pieces are cut where ``_BOUNDARY`` matches past each ``PIECE_BYTES``. A cut inside a
    string or a nested value leaves its piece invalid JSON (an unterminated string or
    bracket), so when every piece decodes, every cut was between two events and the events
    are those of the whole run, the same as ``decode_batch`` gives when its typed decode
    succeeds (which it does exactly when every event decodes)."""
    decoder = EXACT_DECODER if exact else FAST_DECODER
    view = memoryview(text)
    start, n = 0, len(text)
    while start < n:
        match = _BOUNDARY.search(text, start + PIECE_BYTES) if n - start > PIECE_BYTES else None
        stop = match.start() + 1 if match is not None else n
        try:
            yield decoder.decode(b"".join((b"[", view[start:stop], b"]")))
        except (msgspec.DecodeError, RecursionError, ValueError):
            raise PieceError from None
        start = match.end() if match is not None else n


def split_events(text: bytes) -> list[bytes]:
    """Cut a run of events at object boundaries; a wrong cut only costs the pieces around it."""
    pieces = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        pieces.append(text[start : match.start() + 1])
        start = match.end()
    last = text[start:].strip().rstrip(b",")
    if last:
        pieces.append(last)
    return pieces


def decode_one(piece: bytes, exact: bool, stats: DecodeStats) -> Any:
    one = _ONE_EXACT if exact else _ONE_FAST
    try:
        return one.decode(piece)
    except (msgspec.DecodeError, RecursionError, ValueError) as error:
        message = str(error)
    if "UTF-8" in message:
        piece = piece.decode("utf-8", errors="replace").encode("utf-8")
        stats.bad_utf8 += 1
        try:
            return one.decode(piece)
        except (msgspec.DecodeError, RecursionError, ValueError):
            pass
    obj = _parse_loose(piece, stats)
    if not isinstance(obj, dict):
        stats.unparseable += 1
        return None
    stats.wrong_types += 1
    return coerce_event(obj, exact)


def _python_loads(text: bytes) -> Any:
    """Python's own JSON parser, lenient about control characters; imported on first need
    (a clean trace never gets here, and the import is a few ms of a 5 MB trace's run)."""
    import json

    return json.loads(text.decode("utf-8", errors="replace"), strict=False)


def _parse_loose(piece: bytes, stats: DecodeStats) -> Any:
    try:
        return _ANY.decode(piece)
    except (msgspec.DecodeError, RecursionError, ValueError):
        pass
    try:
        return _python_loads(piece)
    except (ValueError, RecursionError):
        pass
    repaired = _escape_inner_quotes(piece)
    if repaired is not None:
        try:
            obj = _python_loads(repaired)
        except (ValueError, RecursionError):
            return None
        stats.unescaped_quotes += 1
        return obj
    return None


_NAME_VALUE = re.compile(
    rb'("name"\s*:\s*")(.*?)("\s*,\s*"(?:ph|cat|pid|tid|ts|dur|args|id)")', re.S
)


def _escape_inner_quotes(piece: bytes) -> bytes | None:
    """Kineto before mid-2026 wrote Python names with raw quotes; escape them in ``name``."""
    match = _NAME_VALUE.search(piece)
    if match is None or b'"' not in match.group(2):
        return None
    inner = re.sub(rb'(?<!\\)"', rb'\\"', match.group(2))
    return piece[: match.start(2)] + inner + piece[match.end(2) :]


def _scalar(value: Any) -> Scalar:
    if value is None or isinstance(value, (int, float, str)):
        return value
    return None


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or value is None:
        return default
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return NAN
    return number


def _raw(value: Any) -> msgspec.Raw:
    return NO_RAW if value is None else msgspec.Raw(msgspec.json.encode(value))


def coerce_event(obj: dict[str, Any], exact: bool) -> Any:
    """Build an event from a loosely parsed dict, dropping fields of the wrong type."""
    args_obj = obj.get("args")
    args = None
    if isinstance(args_obj, dict):
        args = RawArgs(
            correlation=_scalar(args_obj.get("correlation")),
            device=_scalar(args_obj.get("device")),
            stream=_scalar(args_obj.get("stream")),
            grid=args_obj.get("grid"),
            block=args_obj.get("block"),
            nbytes=_scalar(args_obj.get("bytes")),
            sequence=_scalar(args_obj.get("Sequence number")),
            fwd_thread=_scalar(args_obj.get("Fwd thread id")),
            input_dims=_raw(args_obj.get("Input Dims")),
            input_dims_legacy=_raw(args_obj.get("Input dims")),
            input_types=_raw(args_obj.get("Input type")),
            concrete_inputs=_raw(args_obj.get("Concrete Inputs")),
            call_stack=args_obj.get("Call stack"),
            call_line=_scalar(args_obj.get(CALL_LINE_ARG)),
            graph_id=_scalar(args_obj.get("graph id")),
            name=args_obj.get("name"),
            collective=_scalar(args_obj.get("Collective name")),
            in_nelems=_scalar(args_obj.get("In msg nelems")),
            out_nelems=_scalar(args_obj.get("Out msg nelems")),
            dtype=_scalar(args_obj.get("dtype")),
            group_name=_scalar(args_obj.get("Process Group Name")),
            group_size=_scalar(args_obj.get("Group size")),
        )
    head = {key: obj.get(key) for key in ("ph", "cat", "name", "pid", "tid")}
    ts = obj.get("ts")
    dur = obj.get("dur")
    if exact:
        return ExactRawEvent(
            **head,
            ts=ExactNumber(repr(ts)) if isinstance(ts, float) else _scalar(ts),
            dur=ExactNumber(repr(dur)) if isinstance(dur, float) else _scalar(dur),
            args=args,
        )
    return RawEvent(
        **head,
        ts=_number(ts, NAN),
        dur=_number(dur, 0.0),
        args=args,
    )
