"""Reading a source file that a trace names, without trusting the trace (README, Security notes).

A trace may come from anywhere, and its frames name files: ``/etc/passwd(1): f``, a FIFO that
blocks the reader forever, a device, a link from the project to somewhere else. The path mapper
only hands out Python files under the allowed folders (``PathMapper.admit``); this module adds
what must hold at the moment of reading: a regular file, not a link swapped in since, and at
most ``max_bytes`` of it.
"""

from __future__ import annotations

import os
import stat

# O_NONBLOCK: a FIFO swapped in after the check opens at once instead of waiting for a writer.
# O_NOFOLLOW: the mapper resolved the path; a link planted there since is refused, not followed.
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

NOT_REGULAR = "not a regular file"
TOO_LARGE = "too large"


class SourceSkipped(Exception):
    """A source file that was not read; ``reason`` is NOT_REGULAR or TOO_LARGE."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _check(path: str, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise SourceSkipped(path, NOT_REGULAR)
    if info.st_size > max_bytes:
        raise SourceSkipped(path, TOO_LARGE)


def source_mtime(path: str, max_bytes: int) -> int:
    """The file's mtime (the parse cache's key) after the checks; OSError if it is gone."""
    info = os.stat(path)
    _check(path, info, max_bytes)
    return info.st_mtime_ns


def read_source(path: str, max_bytes: int) -> str:
    """The text of a regular file of at most ``max_bytes``; SourceSkipped or OSError otherwise."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        _check(path, os.fstat(fd), max_bytes)
        chunks = []
        left = max_bytes + 1  # one byte more tells a file that grew since the fstat
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left <= 0:
        raise SourceSkipped(path, TOO_LARGE)
    return b"".join(chunks).decode("utf-8", errors="replace")
