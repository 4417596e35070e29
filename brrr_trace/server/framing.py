"""The server's stdin, with every read bounded: a client's frame header cannot make it allocate.

pygls reads a frame as header lines, then ``read(Content-Length)`` bytes in one call; a header
that says ``Content-Length: 100000000000`` would allocate 100 GB and kill the server. Here a
line is at most ``MAX_LINE_BYTES`` bytes (a longer one comes in pieces, which match no header),
and a body over ``MAX_MESSAGE_BYTES`` is not read: the reader hands pygls a placeholder notification
instead (``SKIPPED_MESSAGE``, handled by doing nothing) and pygls goes on reading lines, which
it ignores until the next ``Content-Length`` header, so the server stays alive and in step.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

from brrr_trace.server.names import SKIPPED_MESSAGE

log = logging.getLogger("brrr_trace.server")

MAX_MESSAGE_BYTES = 64 << 20  # a didOpen of a 60 MB file still fits
MAX_LINE_BYTES = 64 << 10
_PLACEHOLDER = json.dumps({"jsonrpc": "2.0", "method": SKIPPED_MESSAGE, "params": None}).encode()


class Input(Protocol):
    """What pygls reads stdin with (a binary file, or ``handshake.ReplayedInput``)."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def read(self, size: int = -1, /) -> bytes: ...


class BoundedInput:
    """``readline`` and ``read``, the two calls pygls makes on stdin, with bounds."""

    def __init__(self, stream: Input) -> None:
        self._stream = stream

    def readline(self) -> bytes:
        return self._stream.readline(MAX_LINE_BYTES)

    def read(self, size: int) -> bytes:
        if size <= MAX_MESSAGE_BYTES:
            return self._stream.read(size)
        log.error(
            "skipped a message of %d bytes: a message may have at most %d bytes",
            size,
            MAX_MESSAGE_BYTES,
        )
        return _PLACEHOLDER
