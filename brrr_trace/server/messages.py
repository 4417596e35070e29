"""Every sentence the server says outside the document: progress, load results, notes, status.

What it shows in the document itself (hints, hovers, lenses, diagnostics, fixes) is in
``convert.py``; the two are the only modules of the server that word things for people.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as t

from brrr_trace import units
from brrr_trace.report import Report
from brrr_trace.safe_text import terminal_safe
from brrr_trace.server.discovery import TraceFile
from brrr_trace.server.snapshot import Snapshot


def trace_name(path: str) -> str:
    """A trace's file name, for plain text (hovers put it in a code span themselves)."""
    return terminal_safe(os.path.basename(path))


def progress_begin(path: str) -> t.WorkDoneProgressBegin:
    return t.WorkDoneProgressBegin(
        title="brrr-trace", message=f"loading {trace_name(path)}", percentage=0, cancellable=False
    )


def progress_report(path: str, done: int, total: int) -> t.WorkDoneProgressReport:
    if total > 0 and done >= total:
        return t.WorkDoneProgressReport(message=f"analyzing {trace_name(path)}", percentage=99)
    percent = min(99, int(100 * done / total)) if total > 0 else 0
    return t.WorkDoneProgressReport(
        message=f"reading {trace_name(path)} ({percent}%)", percentage=percent
    )


def loaded_summary(path: str, report: Report) -> str:
    util = report.summary.gpu_utilization
    busy = f"GPU {units.percent(util)} busy" if util is not None else "no GPU activity"
    return f"{trace_name(path)}: {len(report.lines)} lines, {busy}"


def progress_end(message: str) -> t.WorkDoneProgressEnd:
    return t.WorkDoneProgressEnd(message=message)


def load_failed(path: str, error: str, bad_input: bool) -> str:
    if bad_input:
        return f"brrr-trace could not read the trace {trace_name(path)}: {terminal_safe(error)}"
    return (
        f"brrr-trace could not analyze the trace {trace_name(path)} ({terminal_safe(error)}). "
        "The server keeps running; see its log for details."
    )


def settings_problems(problems: Sequence[str]) -> str:
    return "brrr-trace: some settings were ignored. " + " ".join(problems)


def unmapped_message(path: str, files: Sequence[str], mapped_any: bool) -> str:
    shown = ", ".join(f"`{terminal_safe(f)}`" for f in files[:5]) + (
        " ..." if len(files) > 5 else ""
    )
    if mapped_any:
        return (
            f"brrr-trace: {len(files)} source file(s) in {trace_name(path)} map onto no local "
            f"file: {shown}."
        )
    return (
        f"brrr-trace: none of the source files in {trace_name(path)} ({shown}) map onto this "
        "workspace. Set brrr-trace.pathMappings or brrr-trace.sourceRoot."
    )


def no_traces_message(globs: Sequence[str]) -> str:
    return f"brrr-trace: no trace file matches {', '.join(globs)} in the workspace."


def pin_missing_message(path: str) -> str:
    return (
        f"brrr-trace: the chosen trace {terminal_safe(path)} does not exist or is not a regular "
        "file; showing the newest one instead."
    )


def report_notes(report: Report) -> list[str]:
    notes = [f"problem in the trace: {p.kind} ({p.count}): {p.detail}" for p in report.problems]
    return notes + [f"note: {note}" for note in report.notes]


def trace_choice(path: str, active: bool) -> str:
    return f"{trace_name(path)}{' (active)' if active else ''}"


WHICH_TRACE = "brrr-trace: which trace should the editor show?"


def serving_message(version: str, roots: Sequence[str], watching: bool, poll_s: float) -> str:
    how = (
        "the client watches the trace files"
        if watching
        else f"checking trace files every {poll_s:g} s"
    )
    return f"brrr-trace {version} serving {', '.join(roots)}; {how}"


def trace_entry(
    trace: TraceFile, active: bool, rank: int | None = None, run: str | None = None
) -> dict[str, Any]:
    """One trace of ``brrr-trace.listTraces``: the VS Code extension's "Open Trace…" picker.
    ``run`` is the trace's folder in the workspace, ``rank`` the one its head names."""
    return {
        "path": trace.path,
        "name": trace_choice(trace.path, active),
        "mtimeNs": trace.mtime_ns,
        "size": trace.size,
        "active": active,
        "rank": rank,
        "run": run,
    }


def status(
    snapshot: Snapshot | None,
    loading: str | None,
    error: str | None,
    watching: bool,
    run: str | None = None,
    traces: int = 0,
    rank: int | None = None,
) -> dict[str, Any]:
    """What is loaded, loading or broken: ``brrr-trace.status`` and ``brrr-trace/status``.
    ``run`` is the loaded trace's folder in the workspace, ``traces`` how many it could show,
    ``rank`` the rank the shown trace's file names (else the report's only rank)."""
    summary = snapshot.report.summary if snapshot else None
    ranks = snapshot.report.trace.ranks if snapshot else ()
    if rank is None and len(ranks) == 1:
        rank = ranks[0]
    return {
        "run": run,
        "rank": rank,
        "traces": traces,
        "trace": snapshot.trace.path if snapshot else None,
        "loading": loading,
        "error": error,
        "lines": len(snapshot.report.lines) if snapshot else 0,
        "findings": len(snapshot.report.findings) if snapshot else 0,
        "gpuUtilization": summary.gpu_utilization if summary else None,
        "spanNs": snapshot.span_ns if snapshot else 0,
        "watching": watching,
    }
