"""Decompressing a .json.gz that may be cut short, keeping every byte before the cut.

``gzip.GzipFile.read(n)`` raises at a missing trailer or a cut and throws away the up to ``n``
bytes it had decompressed in that call: a small file cut short was "corrupt", a big one lost
its last 16 MiB of events without a word. Here the output comes out as it is inflated; the
damage is noted in ``damage`` and reading simply ends there.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import zlib
from typing import BinaryIO

_IN_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class LenientGunzip:
    """A read-only stream over the members of a gzip file, one after another."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(_GZIP_WBITS)
        self._member_started = False
        self._carry = b""  # input read past the end of a member: the start of the next
        self._out = bytearray()
        self._done = False
        self.damage: str | None = None  # why the data ended early, when it did

    def read(self, size: int) -> bytes:
        while len(self._out) < size and not self._done:
            self._step(size - len(self._out))
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def close(self) -> None:
        self._done = True

    def _input(self) -> bytes:
        if self._inflate.unconsumed_tail:
            return self._inflate.unconsumed_tail
        if self._carry:
            data, self._carry = self._carry, b""
            return data
        return self._raw.read(_IN_CHUNK)

    def _step(self, want: int) -> None:
        data = self._input()
        if not data:
            self._end_of_file()
            return
        self._member_started = True
        try:
            # At most ``want`` bytes out per call: a small file that inflates to gigabytes
            # never sits in memory whole.
            self._out += self._inflate.decompress(data, want)
        except zlib.error as error:
            self._done = True
            self.damage = f"the gzip data is damaged ({error})"
            return
        if self._inflate.eof:
            self._next_member()

    def _end_of_file(self) -> None:
        self._done = True
        if not self._member_started or self._inflate.eof:
            return
        with contextlib.suppress(zlib.error):  # what inflated before the cut still counts
            self._out += self._inflate.flush()
        self.damage = "the file ends inside the gzip stream (cut short, or missing its trailer)"

    def _next_member(self) -> None:
        rest = self._inflate.unused_data
        self._inflate = zlib.decompressobj(_GZIP_WBITS)
        self._member_started = False
        while True:
            rest = rest.lstrip(b"\0")  # gzip files may be padded with zeros
            if rest:
                break
            rest = self._raw.read(_IN_CHUNK)
            if not rest:
                self._done = True
                return
        if rest[:2] == _GZIP_MAGIC or len(rest) < 2:
            self._carry = rest
        else:
            self._done = True  # bytes after the last member that are not gzip: not the trace


class Prefetch:
    """Decompresses ahead, in a thread, while the caller decodes what came before.

    zlib releases the GIL while it inflates, so on two cores the inflating of the next run
    overlaps the decoding of this one. At most ``depth`` runs wait, so memory stays bounded.
    Reads must all ask for the same ``size``; an error in the thread is raised by ``read``."""

    def __init__(self, stream: LenientGunzip, size: int, depth: int = 1) -> None:
        self._stream = stream
        self._size = size
        self._ready: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._fill, name="brrr-gunzip", daemon=True)
        self._thread.start()

    @property
    def damage(self) -> str | None:
        return self._stream.damage

    def _fill(self) -> None:
        while not self._stop.is_set():
            try:
                data: bytes | BaseException = self._stream.read(self._size)
            except BaseException as error:  # handed to the reader, raised there
                data = error
            while not self._stop.is_set():
                try:
                    self._ready.put(data, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if not isinstance(data, bytes) or not data:
                return

    def read(self, size: int) -> bytes:
        if size != self._size:
            raise ValueError(f"Prefetch reads {self._size} bytes at a time, not {size}")
        if self._ended:
            return b""
        data = self._ready.get()
        if isinstance(data, BaseException):
            self._ended = True
            raise data
        if not data:
            self._ended = True
            self._thread.join()
        return data

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._stream.close()
