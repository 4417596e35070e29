"""Decompressing a .json.gz that may be cut short, keeping every byte before the cut.

``gzip.GzipFile.read(n)`` raises at a missing trailer or a cut and throws away the up to ``n``
bytes it had decompressed in that call: a small file cut short was "corrupt", a big one lost
its last 16 MiB of events without a word. Here the output comes out as it is inflated; the
damage is noted in ``damage`` and reading simply ends there.
"""

from __future__ import annotations

import contextlib
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
