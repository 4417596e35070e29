"""Opening a trace file: regular files only, and never an open that can block.

A FIFO named like a trace blocks ``open()`` until something writes to it, and a pipe
(``/dev/stdin``, ``<(zcat t.json.gz)``) can be read only once, while a trace is read more than
once (its head for the rank, then the whole). So the file is opened without blocking and
refused, with one sentence, unless it is a regular file.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

from brrr_trace.errors import NotATraceError
from brrr_trace.traces.gunzip import LenientGunzip
from brrr_trace.traces.urls import is_url, remote_size

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_OPEN_FLAGS |= getattr(os, "O_BINARY", 0)


def not_regular(path: str, mode: int) -> NotATraceError:
    if stat.S_ISFIFO(mode):
        return NotATraceError(
            f"{path}: is a pipe (a FIFO, /dev/stdin or <(...)), which can be read only once; "
            "brrr-trace reads a trace more than once, so save it to a file first "
            "(... > trace.json) and pass that."
        )
    what = "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
    return NotATraceError(f"{path}: is {what}, not a trace file; pass the trace file itself.")


def open_trace(path: str) -> io.BufferedReader:
    """The trace file opened for reading (buffered, with ``peek``); NotATraceError otherwise."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except IsADirectoryError:
        raise NotATraceError(f"{path}: is a folder; pass one of its trace files.") from None
    except OSError as error:
        raise NotATraceError(f"{path}: cannot be read ({error.strerror}).") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise NotATraceError(f"{path}: is a folder; pass one of its trace files.")
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def open_stream(path: str) -> tuple[BinaryIO, BinaryIO | LenientGunzip]:
    """The file (or the trace at a URL) and the stream of its JSON text (decompressed when it is
    gzip)."""
    raw: io.BufferedReader
    if "://" in path and is_url(path):
        from brrr_trace.traces.urls import open_url

        raw = open_url(path)
    else:
        raw = open_trace(path)
    if raw.peek(2)[:2] == b"\x1f\x8b":
        return raw, LenientGunzip(raw)
    return raw, raw


def stream_size(raw: BinaryIO) -> int:
    """Bytes in all of a stream from ``open_stream``: the file's size, or what a URL's server or
    store said (0 when it did not)."""
    remote = remote_size(raw)
    return os.fstat(raw.fileno()).st_size if remote is None else remote


def trace_size(path: str) -> int | None:
    """The size of the trace file (or at a URL, when its server or store says), None when
    unknown."""
    if "://" in path and is_url(path):
        from brrr_trace.traces.urls import size_of

        return size_of(path)
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def read_head(path: str, size: int) -> bytes:
    """The first ``size`` bytes of the trace's JSON text; NotATraceError if it cannot be read."""
    raw, stream = open_stream(path)
    with raw:
        try:
            return stream.read(size)
        except OSError as error:
            raise NotATraceError(f"{path}: cannot be read ({error.strerror}).") from None
