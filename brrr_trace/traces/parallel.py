"""A large trace's runs decoded in worker processes, merged in file order (architecture §3).

Decoding and sorting events into columns is the loader's cost, one run of events at a time
and independent between runs. The reading process hands each run to a worker (forked
before the file is opened, so no reader thread is copied): a plain file's run as where it lies
in the file (``FileSpan``), which the worker reads itself, other runs as their bytes. Each
worker decodes its run into the columns of a ``Columns`` of its own, and the reader merges
those in file order: names, values and threads are renumbered into the reader's tables in the
order a single process would have met them, so the trace is the same, id for id.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from brrr_trace.errors import BrrrError
from brrr_trace.traces.columns import Columns
from brrr_trace.traces.events import DecodeStats, PieceError, decode_batch, typed_pieces
from brrr_trace.traces.files import open_trace
from brrr_trace.traces.reader import FileSpan

Run = bytes | FileSpan

if TYPE_CHECKING:
    from concurrent.futures import Future

# multiprocessing and concurrent.futures are imported where a pool starts: a command that reads
# small traces does not pay for them.

# Below this many bytes of JSON a second process costs more than it saves (forking and
# starting a worker takes tens of ms; a run decodes at ~100 MB/s per core).
MIN_PARALLEL_BYTES = 32 << 20
# Runs queued per worker: enough that a worker never waits for the reader, few enough that the
# queued runs (4 MiB each) add little memory.
_QUEUED_PER_WORKER = 2


def workers_for(path: str, asked: int) -> int:
    """How many worker processes to decode ``path`` with (1: decode in this process).

    ``asked`` 0 is one per core, at most 4. Only a plain file large enough, only where ``fork``
    exists and is safe (Linux), and never inside a daemonic process (which may not have
    children: the language server's analysis)."""
    if asked == 1 or not sys.platform.startswith("linux"):
        return 1
    try:
        size = os.stat(path).st_size
    except OSError:
        return 1
    if path.endswith(".gz"):
        size *= 8  # about what Kineto's JSON inflates to
    if size < MIN_PARALLEL_BYTES:
        return 1
    import multiprocessing

    if multiprocessing.current_process().daemon:
        return 1
    if asked > 1:
        return asked
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 4))


def run_text(run: Run, fd: int | None) -> bytes:
    """A run's bytes: a ``FileSpan`` read from the trace file open as ``fd``."""
    if isinstance(run, bytes):
        return run
    if fd is None:
        raise ValueError("a FileSpan needs the file it lies in")
    parts = []
    offset, left = run.offset, run.size
    while left > 0:  # a regular file reads short only at its end
        part = os.pread(fd, left, offset)
        if not part:
            raise BrrrError("the trace file became shorter while it was read")
        parts.append(part)
        offset += len(part)
        left -= len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def decode_run(
    run: Run, exact: bool, max_name_chars: int, fd: int | None = None
) -> tuple[Columns, DecodeStats]:
    """One run of events as columns of their own (in a worker, or in the reading process for
    a small trace): decoded and added a piece at a time (``typed_pieces``), or where a piece
    does not decode, the whole run anew through the lenient ``decode_batch``. A ``FileSpan``
    is read from ``fd`` first."""
    run = run_text(run, fd)
    columns = Columns(exact=exact, max_name_chars=max_name_chars)
    try:
        for events in typed_pieces(run, exact):
            columns.add(events)
    except PieceError:
        columns = Columns(exact=exact, max_name_chars=max_name_chars)
        stats = DecodeStats()
        columns.add(decode_batch(run, exact, stats))
        return columns, stats
    return columns, DecodeStats()


# glibc's mallopt parameter, and the free bytes at the top of the heap that it keeps from then on.
_M_TRIM_THRESHOLD = -1
_TRIM_THRESHOLD_BYTES = 8 << 20


def give_back_free_memory() -> None:
    """Hand the allocator's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). The pool's result thread unpickles the workers' columns in an allocator arena of
    its own, which nothing allocates from once the pool is gone: on the 0.86 GB benchmark trace
    ~50 MB that stayed resident to the end.

    And from then on the heap's free top goes back once it passes 8 MiB: glibc raises that
    threshold to twice the largest array freed so far (up to 64 MiB), and the analysis of a
    large trace frees tens of MB at a time, so its stages' peaks held that much free memory on
    top of what they use (0.86 GB benchmark trace: 8-10 MiB off the peak, ~0.3 s more system
    time for the pages taken again). A large trace only: this is for the process's lifetime,
    and glibc keeps the size above which it maps arrays of their own where it stands."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no malloc_trim
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD_BYTES)


def _ready() -> None:
    """A no-op task: makes the pool fork its workers now."""


class RunDecoder:
    """A pool of forked workers that turns runs of events into ``Columns``, in order.

    The trace file is opened before the workers are forked, so that each inherits it: a
    ``FileSpan`` is read through that descriptor (``fd``), from the file the reader reads
    when the reader opens the same path (a plain file only: gzip and URLs give no spans)."""

    def __init__(self, workers: int, path: str | None = None) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.workers = workers
        self._file = open_trace(path) if path is not None else None
        self.fd = self._file.fileno() if self._file is not None else None
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
        # Fork every worker before the caller opens the trace (a .json.gz is inflated by a
        # thread, which a fork must not copy).
        for future in [self._pool.submit(_ready) for _ in range(workers)]:
            future.result()

    def decode(
        self, runs: Iterator[Run], exact_of: Any, max_name_chars: int
    ) -> Iterator[tuple[Run, Columns, DecodeStats]]:
        """Each run with its columns, in the order of ``runs``; ``exact_of()`` says how the
        runs' timestamps are read (known once the first run is out)."""
        pending: deque[tuple[Run, Future[tuple[Columns, DecodeStats]]]] = deque()
        limit = self.workers * _QUEUED_PER_WORKER
        try:
            for run in runs:
                pending.append(
                    (run, self._pool.submit(decode_run, run, exact_of(), max_name_chars, self.fd))
                )
                while len(pending) >= limit:
                    yield self._next(pending)
            while pending:
                yield self._next(pending)
        finally:
            for _, future in pending:
                future.cancel()

    @staticmethod
    def _next(
        pending: deque[tuple[Run, Future[tuple[Columns, DecodeStats]]]],
    ) -> tuple[Run, Columns, DecodeStats]:
        from concurrent.futures.process import BrokenProcessPool

        run, future = pending.popleft()
        try:
            columns, stats = future.result()
        except BrokenProcessPool:
            raise BrrrError(
                "a process decoding the trace stopped abruptly (out of memory, or killed); "
                "AnalysisOptions(load_workers=1) decodes it in this process."
            ) from None
        return run, columns, stats

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._file is not None:
            self._file.close()
