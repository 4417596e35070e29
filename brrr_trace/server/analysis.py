"""Running ``pipeline.analyze`` on a trace in a fresh *process*, with progress and clear failures.

A thread would share the GIL with the event loop: on a 100 MB trace, parts of the loader hold it
for a third of a second at a time (``benchmarks/server.md``), and hints must keep coming. A new
process per load also gives the memory of a large trace back to the system when done.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from brrr_trace.errors import BrrrError
from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Report

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PARENT_POLL_S = 0.5

AnalyzeFn = Callable[[str, AnalysisOptions, Callable[[int, int], None]], Report]


class AnalysisFailed(Exception):
    """The trace could not be analyzed; ``bad_input`` is False for a bug or a crash."""

    def __init__(self, message: str, bad_input: bool, detail: str = "") -> None:
        super().__init__(message)
        self.bad_input = bad_input
        self.detail = detail


def default_analyze(
    path: str, options: AnalysisOptions, progress: Callable[[int, int], None]
) -> Report:
    from brrr_trace.pipeline import analyze_with_its_ranks

    return analyze_with_its_ranks(path, options, progress)


def _die_with(parent: int) -> None:
    """End this process when the server ends, even killed: a load it no longer waits for must
    not go on (a FIFO or a huge trace could keep it forever). Linux: the kernel's parent-death
    signal; everywhere else too: a thread that sees the parent change (reparented on POSIX)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):  # not Linux
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # died before the signal was asked for
        _end_now()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    _end_now()


def _end_now() -> None:
    """End the whole process from any thread, at once (no clean-up: nobody waits for it)."""
    os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))


def _worker(
    conn: Any, analyze: AnalyzeFn, path: str, options: AnalysisOptions, parent: int
) -> None:
    _die_with(parent)
    # The parent's stdout carries LSP frames: nothing in here may write to it.
    with contextlib.suppress(OSError):
        os.dup2(2, 1)
    sys.stdout = sys.stderr
    last = [0.0, -1]

    def progress(done: int, total: int) -> None:
        percent = int(100 * done / total) if total > 0 else 0
        now = time.monotonic()
        if percent != last[1] and (now - last[0] >= 0.1 or done >= total):
            last[0], last[1] = now, percent
            conn.send(("progress", done, total))

    try:
        report = analyze(path, options, progress)
    except BrrrError as error:
        conn.send(("failed", str(error), True, ""))
    except MemoryError:
        conn.send(("failed", "ran out of memory while analyzing it", False, ""))
    except Exception as error:
        conn.send(("failed", f"{type(error).__name__}: {error}", False, traceback.format_exc()))
    else:
        conn.send(("done", report))
    finally:
        conn.close()


class AnalysisJob:
    """Analyze one trace in a spawned process; cancelling the awaiting task kills the process."""

    def __init__(self, analyze: AnalyzeFn, path: str, options: AnalysisOptions) -> None:
        self.analyze = analyze
        self.path = path
        self.options = options

    async def run(self, on_progress: Callable[[int, int], None]) -> Report:
        loop = asyncio.get_running_loop()
        ctx = multiprocessing.get_context("spawn")
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=_worker,
            args=(sender, self.analyze, self.path, self.options, os.getpid()),
            name="brrr-trace-analysis",
            daemon=True,
        )
        pending: asyncio.Future[Any] | None = None
        try:
            process.start()  # a fork+exec: a few ms, and no thread that could outlive a cancel
            sender.close()
            while True:
                pending = loop.run_in_executor(None, _receive, receiver)
                message = await pending
                pending = None
                if message[0] == "progress":
                    on_progress(message[1], message[2])
                elif message[0] == "done":
                    return message[1]
                elif message[0] == "failed":
                    raise AnalysisFailed(message[1], bad_input=message[2], detail=message[3])
                else:  # the pipe closed without an answer: the process died
                    await loop.run_in_executor(None, process.join, 5)
                    code = process.exitcode
                    why = " (killed: out of memory?)" if code in (-9, 137) else ""
                    raise AnalysisFailed(
                        f"the analysis process stopped with exit code {code}{why}", bad_input=False
                    )
        finally:
            if process.is_alive():
                process.terminate()
            if pending is not None:
                # The reader thread returns once the dead process closes its end of the pipe.
                await asyncio.wait({pending}, timeout=5)
            receiver.close()
            if process.pid is not None:
                loop.run_in_executor(None, process.join, 5)


def _receive(conn: Any) -> tuple[Any, ...]:
    try:
        return conn.recv()
    except (EOFError, OSError):
        return ("closed",)
