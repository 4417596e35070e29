"""What the server knows: the trace files it can see, and the immutable result of the active one.

- ``discover`` lists the trace files under the workspace that match the ``traces`` globs.
- ``AnalysisJob`` runs ``pipeline.analyze`` in a fresh *process* and hands back the ``Report``.
  A thread would share the GIL with the event loop: on a 100 MB trace, parts of the loader hold
  it for a third of a second at a time (``benchmarks/server.md``), and hints must keep coming.
  A new process per load also gives the memory of a large trace back to the system when done.
- ``Snapshot`` is the cached result, indexed by local file. It is built once per load and never
  changed; the server swaps the whole object, so a handler sees either the old one or the new one.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import glob as globlib
import logging
import multiprocessing
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from brrr_trace.errors import BrrrError
from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Finding, LineReport, Report

log = logging.getLogger(__name__)

AnalyzeFn = Callable[[str, AnalysisOptions, Callable[[int, int], None]], Report]

_SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "site-packages",
    }
)
_MAX_ENTRIES = 200_000


# --- trace files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFile:
    """A trace file as last seen on disk; ``(path, mtime_ns, size)`` tells versions apart."""

    path: str
    mtime_ns: int
    size: int


def stat_trace(path: str) -> TraceFile | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return TraceFile(path, st.st_mtime_ns, st.st_size)


def norm_path(path: str) -> str:
    """The one spelling of a local path used as a key (links resolved, case folded on Windows)."""
    return os.path.normcase(os.path.realpath(path))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A VS Code / LSP glob (``**``, ``*``, ``?``, ``[...]``, ``{a,b}``) as a regex on ``a/b/c``."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif c == "{":
            end = pattern.find("}", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(glob_regex(o).pattern[:-2] for o in options) + ")")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def discover(roots: Sequence[str], globs: Sequence[str]) -> tuple[TraceFile, ...]:
    """The trace files matching ``globs`` under ``roots``, newest first (then by path)."""
    found: dict[str, TraceFile] = {}
    relative = []
    for pattern in globs:
        if os.path.isabs(os.path.expanduser(pattern)):
            for path in globlib.glob(os.path.expanduser(pattern), recursive=True):
                _add(found, path)
        else:
            relative.append(glob_regex(pattern.replace("\\", "/").removeprefix("./")))
    if relative:
        for root in roots:
            for path in _walk(root):
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                if any(rx.match(rel) for rx in relative):
                    _add(found, path)
    return tuple(sorted(found.values(), key=lambda t: (-t.mtime_ns, t.path)))


def _add(found: dict[str, TraceFile], path: str) -> None:
    trace = stat_trace(os.path.abspath(path))
    if trace is not None:
        found.setdefault(norm_path(trace.path), trace)


def _walk(root: str) -> Iterable[str]:
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in files:
            if name.endswith((".json", ".gz")):
                yield os.path.join(folder, name)
        seen += len(files) + len(dirs)
        if seen > _MAX_ENTRIES:
            log.warning("stopped looking for traces after %d entries under %s", seen, root)
            return


def choose_active(
    candidates: Sequence[TraceFile], pinned: str | None
) -> tuple[TraceFile | None, str | None]:
    """The trace to show: the pinned one if it exists, else the newest. Also: why not the pin."""
    if pinned:
        trace = stat_trace(pinned)
        if trace is not None:
            return trace, None
        return (candidates[0] if candidates else None), pinned
    return (candidates[0] if candidates else None), None


# --- the cached result ------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One analyzed trace, indexed for the handlers. Never mutated after ``build_snapshot``."""

    trace: TraceFile
    options: AnalysisOptions
    report: Report
    # The GPU span the shares are taken of (busy + idle of the reported device).
    span_ns: int
    # Local file (``norm_path``) -> its line reports, sorted by line.
    lines_by_path: Mapping[str, tuple[LineReport, ...]]
    findings_by_path: Mapping[str, tuple[Finding, ...]]
    # Files named in the trace that map onto no local file.
    unmapped_files: tuple[str, ...] = ()
    loaded_at: float = field(default_factory=time.time)

    def lines(self, path: str) -> tuple[LineReport, ...]:
        return self.lines_by_path.get(path, ())

    def findings(self, path: str) -> tuple[Finding, ...]:
        return self.findings_by_path.get(path, ())

    def line_at(self, path: str, line: int) -> LineReport | None:
        """The report of a 1-based line (the costliest one if two trace files map here)."""
        lines = self.lines_by_path.get(path, ())
        i = bisect.bisect_left(lines, line, key=lambda r: r.line)
        return lines[i] if i < len(lines) and lines[i].line == line else None

    def lines_between(self, path: str, first: int, last: int) -> tuple[LineReport, ...]:
        """The reports of 1-based lines ``first..last``, in line order."""
        lines = self.lines_by_path.get(path, ())
        lo = bisect.bisect_left(lines, first, key=lambda r: r.line)
        hi = bisect.bisect_right(lines, last, key=lambda r: r.line)
        return lines[lo:hi]


def build_snapshot(trace: TraceFile, options: AnalysisOptions, report: Report) -> Snapshot:
    by_path: dict[str, list[LineReport]] = {}
    local_of_file: dict[str, str] = {}
    unmapped: set[str] = set(report.unmapped_files)
    for line in report.lines:
        if line.path is None:
            continue
        key = norm_path(line.path)
        local_of_file.setdefault(line.file, key)
        by_path.setdefault(key, []).append(line)
    lines_by_path = {}
    for key, lines in by_path.items():
        # Costliest first within a line, so that line_at finds it first.
        lines.sort(key=lambda r: (r.line, -r.total_ns))
        deduped = [r for i, r in enumerate(lines) if i == 0 or lines[i - 1].line != r.line]
        lines_by_path[key] = tuple(deduped)
    findings: dict[str, list[Finding]] = {}
    for finding in report.findings:
        local = norm_path(finding.path) if finding.path else local_of_file.get(finding.file)
        if local is None:
            unmapped.add(finding.file)
            continue
        findings.setdefault(local, []).append(finding)
    summary = report.summary
    return Snapshot(
        trace=trace,
        options=options,
        report=report,
        span_ns=summary.gpu_busy_ns + summary.gpu_idle_ns,
        lines_by_path=MappingProxyType(lines_by_path),
        findings_by_path=MappingProxyType(
            {
                k: tuple(sorted(v, key=lambda f: (f.line, -f.est_savings_ns, f.rule)))
                for k, v in findings.items()
            }
        ),
        unmapped_files=tuple(sorted(unmapped)),
    )


# --- running the analysis in a child process --------------------------------------------------


class AnalysisFailed(Exception):
    """The trace could not be analyzed; ``bad_input`` is False for a bug or a crash."""

    def __init__(self, message: str, bad_input: bool, detail: str = "") -> None:
        super().__init__(message)
        self.bad_input = bad_input
        self.detail = detail


def default_analyze(
    path: str, options: AnalysisOptions, progress: Callable[[int, int], None]
) -> Report:
    from brrr_trace.pipeline import analyze

    return analyze(path, options, progress)


def _worker(conn: Any, analyze: AnalyzeFn, path: str, options: AnalysisOptions) -> None:
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
            args=(sender, self.analyze, self.path, self.options),
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
