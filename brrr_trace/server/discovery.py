"""Which trace files the workspace has: the ``traces`` globs matched, newest first.

``discover`` walks the workspace folders (skipping environments and caches) for files that match
the globs; ``choose_active`` picks the one to show. A ``TraceFile`` is a version of a file as last
seen on disk, so that a rewritten trace reads as a new one.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from pygls.uris import to_fs_path

from brrr_trace.errors import NotATraceError
from brrr_trace.server.globs import compiled
from brrr_trace.traces.discovery import rank_in_head
from brrr_trace.traces.files import read_head

log = logging.getLogger(__name__)

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
_MAX_ENTRIES = 200_000  # files and folders visited, over all workspace folders
_MAX_MATCHES = 1_000  # trace files kept: the picker shows the newest few anyway
_RANK_HEAD_BYTES = 256 * 1024  # Kineto writes distributedInfo before the events


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


@dataclass(frozen=True)
class Found:
    """The trace files found, and what bound stopped the search early (for the user), if any."""

    traces: tuple[TraceFile, ...]
    capped: str | None = None


def discover(roots: Sequence[str], globs: Sequence[str]) -> Found:
    """The trace files matching ``globs`` under ``roots``, newest first (then by path).

    The globs are relative to each root (``settings`` refuses the others); the walk stops after
    ``_MAX_ENTRIES`` entries or ``_MAX_MATCHES`` traces, so that no setting can make it endless.
    """
    patterns = [rx for rx in map(compiled, globs) if rx is not None]
    found: dict[str, TraceFile] = {}
    walk = _Walk()
    for root in roots if patterns else ():
        for path in walk.files(root):
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if any(rx.match(rel) for rx in patterns):
                _add(found, path)
                if len(found) >= _MAX_MATCHES:
                    walk.capped = f"stopped after the first {_MAX_MATCHES} trace files"
                    break
        if walk.capped:
            break
    traces = tuple(sorted(found.values(), key=lambda t: (-t.mtime_ns, t.path)))
    return Found(traces, walk.capped and f"brrr-trace: {walk.capped} in the workspace.")


def _add(found: dict[str, TraceFile], path: str) -> None:
    trace = stat_trace(os.path.abspath(path))
    if trace is not None:
        found.setdefault(norm_path(trace.path), trace)


class _Walk:
    """The folders' files that may be traces, ``_MAX_ENTRIES`` entries at most over all roots."""

    def __init__(self) -> None:
        self.seen = 0
        self.capped: str | None = None

    def files(self, root: str) -> Iterable[str]:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
            for name in files:
                if name.endswith((".json", ".gz")):
                    yield os.path.join(folder, name)
            self.seen += len(files) + len(dirs)
            if self.seen > _MAX_ENTRIES:
                self.capped = f"stopped looking for traces after {_MAX_ENTRIES} files and folders"
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


def path_of_uri(uri: str) -> str:
    """The ``norm_path`` of a ``file:`` URI (or of a path sent where a URI was expected)."""
    return norm_path(to_fs_path(uri) or unquote(uri))


@functools.lru_cache(maxsize=4096)
def rank_of(trace: TraceFile) -> int | None:
    """The rank a trace file names (``distributedInfo``), read once per version of the file."""
    try:
        return rank_in_head(read_head(trace.path, _RANK_HEAD_BYTES))
    except (NotATraceError, OSError) as error:
        log.debug("no rank read from %s: %s", trace.path, error)
        return None


def run_of(path: str, roots: Sequence[str]) -> str:
    """The run a trace belongs to, as discovery knows runs today: its folder, relative to the
    workspace folder that holds it (``.`` for the folder itself)."""
    folder = os.path.dirname(os.path.abspath(path))
    for root in roots:
        rel = os.path.relpath(folder, root)
        if rel != os.pardir and not rel.startswith(os.pardir + os.sep):
            return rel.replace(os.sep, "/")
    return folder
