"""Loading PyTorch profiler traces into typed columns (docs/architecture.md §3).

``load(path)`` (traces/loader.py) returns a ``LoadResult``: the trace plus the problems met on
the way. Only input that is not a trace at all raises ``NotATraceError``; everything else is
loaded leniently.

The names here are imported on first use, so that a module that needs one part of the package
(the language server's trace discovery: ``traces.discovery``) does not import the loader, numpy
and msgspec with it (~110 ms).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from brrr_trace.errors import NotATraceError
    from brrr_trace.traces.discovery import find_traces
    from brrr_trace.traces.loader import load
    from brrr_trace.traces.model import (
        CpuOps,
        GpuOps,
        HostCalls,
        LoadResult,
        Problem,
        PyFrames,
        Spans,
        Thread,
        Trace,
    )

__all__ = [
    "CpuOps",
    "GpuOps",
    "HostCalls",
    "LoadResult",
    "NotATraceError",
    "Problem",
    "PyFrames",
    "Spans",
    "Thread",
    "Trace",
    "find_traces",
    "load",
]

_HOME = {
    "NotATraceError": "brrr_trace.errors",
    "find_traces": "brrr_trace.traces.discovery",
    "load": "brrr_trace.traces.loader",
    **dict.fromkeys(
        (
            "CpuOps",
            "GpuOps",
            "HostCalls",
            "LoadResult",
            "Problem",
            "PyFrames",
            "Spans",
            "Thread",
            "Trace",
        ),
        "brrr_trace.traces.model",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
