"""``-o FILE``: checked before the analysis starts, written atomically after it.

A missing folder, a folder given as the file or an unwritable place is said in one line before
minutes of analysis, not after. The report goes to a new file beside the target, created with
O_EXCL (a link planted under that name is refused, never followed), and replaces the target
only once it is written whole: a full disk or a kill leaves the previous report as it was.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, BinaryIO

from brrr_trace.errors import BrrrError

_CREATE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


class _FdWriter(io.RawIOBase):
    """The claimed descriptor as a raw stream (for a buffer or a gzip writer on top)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return os.write(self._fd, data)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


class _NewFile:
    """A new file claimed beside ``target``; ``commit`` renames it over the target."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.folder = os.path.dirname(os.path.abspath(target))
        self._mode = _check_target(target, self.folder)
        self.temp, fd = _claim_temp(target, self.folder)
        self.stream: BinaryIO = io.BufferedWriter(_FdWriter(fd), 1 << 20)

    def commit(self) -> None:
        """Flush, keep the replaced file's permissions, sync, and rename over the target."""
        try:
            self.stream.flush()
            fd = self.stream.fileno()
            if self._mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, self._mode)  # the replaced file's permissions
            os.fsync(fd)
            self.stream.close()
            os.replace(self.temp, self.target)
        except OSError as error:
            raise BrrrError(
                f"-o {self.target}: could not be written ({error.strerror}); "
                "a previous file of that name is unchanged."
            ) from None

    def write_all(self, text: str) -> None:
        try:
            self.stream.write(text.encode("utf-8"))
        except OSError as error:
            raise BrrrError(
                f"-o {self.target}: could not be written ({error.strerror}); "
                "a previous file of that name is unchanged."
            ) from None
        self.commit()

    def discard(self) -> None:
        with suppress(OSError):  # a full disk fails the flush of a close; the file goes anyway
            self.stream.close()
        with suppress(FileNotFoundError):  # already renamed onto the target
            os.unlink(self.temp)


def _check_target(target: str, folder: str) -> int | None:
    """The target's permission bits when it exists (kept on the new file), else None."""
    if not os.path.isdir(folder):
        raise BrrrError(f"-o {target}: the folder {folder} does not exist; create it first.")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise BrrrError(f"-o {target}: cannot be written ({error.strerror}).") from None
    if stat.S_ISDIR(info.st_mode):
        raise BrrrError(
            f"-o {target}: is a folder; name a file in it "
            f"(-o {os.path.join(target, 'report.txt')})."
        )
    if not stat.S_ISREG(info.st_mode):
        raise BrrrError(
            f"-o {target}: is not a regular file (a device or a pipe); name a file, "
            "or leave -o out to print the report."
        )
    return stat.S_IMODE(info.st_mode)


def _temp_suffix() -> str:
    # What secrets.token_hex(4) reads; importing secrets (hashlib, hmac) cost ~7-10 ms of
    # every start.
    return os.urandom(4).hex()


def _claim_temp(target: str, folder: str) -> tuple[str, int]:
    name = os.path.basename(target)
    for _ in range(8):
        temp = os.path.join(folder, f".{name}.{_temp_suffix()}.tmp")
        try:
            return temp, os.open(temp, _CREATE_FLAGS, 0o666)
        except FileExistsError:
            continue  # taken (or a planted link): another name
        except OSError as error:
            raise BrrrError(f"-o {target}: cannot write in {folder} ({error.strerror}).") from None
    raise BrrrError(f"-o {target}: could not create a new file in {folder}.")


Emit = Callable[[str], object]


@contextmanager
def report_output(target: str | None, stdout: Emit) -> Iterator[Emit]:
    """A function that writes the report: to ``target`` (claimed now, replaced atomically when
    it is called), or to ``stdout`` when there is no target."""
    if target is None:
        yield stdout
        return
    out = _NewFile(target)
    try:
        yield out.write_all
    finally:
        out.discard()


@contextmanager
def replaced_atomically(target: str) -> Iterator[BinaryIO]:
    """A binary stream to a new file beside ``target`` that replaces it when the block ends
    without an error; on an error the new file is removed and ``target`` stays as it was.
    BrrrError when the target cannot be written (a folder, a device, a missing folder)."""
    out = _NewFile(target)
    try:
        yield out.stream
        out.commit()
    finally:
        out.discard()
