"""Which trace files the workspace has: the ``traces`` globs matched, newest first.

``discover`` walks the workspace folders (skipping environments and caches) for files that match
the globs; ``choose_active`` picks the one to show. A ``TraceFile`` is a version of a file as last
seen on disk, so that a rewritten trace reads as a new one.
"""

from __future__ import annotations

import glob as globlib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from pygls.uris import to_fs_path

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
_MAX_ENTRIES = 200_000


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


def path_of_uri(uri: str) -> str:
    """The ``norm_path`` of a ``file:`` URI (or of a path sent where a URI was expected)."""
    return norm_path(to_fs_path(uri) or unquote(uri))
