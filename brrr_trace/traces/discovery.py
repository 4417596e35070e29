"""Which files of a folder are traces: by name where the name says so, else by their head.

torch.profiler's handler writes ``*.pt.trace.json[.gz]``; people write ``trace.json``,
``profile.json.gz``, ``step_10.json``. Any ``.json``/``.json.gz`` whose first bytes read like a
Kineto trace counts, so ``profile.json.gz`` is found and ``package.json`` is not.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from brrr_trace.errors import NotATraceError
from brrr_trace.traces.files import read_head

HANDLER_NAMES = (".pt.trace.json", ".pt.trace.json.gz")
JSON_NAMES = (".json", ".json.gz")
_SNIFF_BYTES = 1 << 20
# Keys that only a Chrome/Kineto trace's head has, in either order Kineto has written them.
_TRACE_KEYS = (b'"traceEvents"', b'"deviceProperties"', b'"schemaVersion"')
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d{1,9})')


def rank_in_head(head: bytes) -> int | None:
    """The rank a trace's ``distributedInfo`` names in the head of its JSON, if it names one."""
    match = _RANK.search(head)
    return int(match.group(1)) if match else None


def looks_like_trace(path: Path) -> bool:
    """Whether the file's head reads like a trace: an object with a trace's keys, or the legacy
    bare array of events."""
    try:
        head = read_head(str(path), _SNIFF_BYTES)
    except NotATraceError:
        return False
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if body.startswith(b"{"):
        return any(key in head for key in _TRACE_KEYS)
    return body.startswith(b"[") and b'"ph"' in head


def _listing(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.name.endswith(JSON_NAMES) and p.is_file())
    except OSError as error:
        raise NotATraceError(f"{folder}: cannot be read ({error.strerror}).") from None


def traces_in(folder: Path) -> list[Path]:
    """The folder's own traces (not below it), sorted: files named like one, and other JSON
    files whose head reads like one."""
    return [p for p in _listing(folder) if "trace" in p.name.lower() or looks_like_trace(p)]


def find_traces(folder: str | os.PathLike[str]) -> list[Path]:
    """Trace files in a folder (a TensorBoard log dir or a folder of rank traces), sorted: the
    profiler handler's files anywhere below it, else the folder's own traces."""
    root = Path(folder)
    try:
        preferred = sorted(
            p for p in root.rglob("*") if p.name.endswith(HANDLER_NAMES) and p.is_file()
        )
    except OSError as error:
        raise NotATraceError(f"{root}: cannot be read ({error.strerror}).") from None
    return preferred or traces_in(root)
