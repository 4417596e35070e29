"""Which files of a folder are traces: by name where the name says so, else by their head.

torch.profiler's handler writes ``*.pt.trace.json[.gz]``; people write ``trace.json``,
``profile.json.gz``, ``step_10.json``. Any ``.json``/``.json.gz`` whose first bytes read like a
Kineto trace counts, so ``profile.json.gz`` is found and ``package.json`` is not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
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


def looks_like_trace(path: Path | str) -> bool:
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


def trace_urls(url: str) -> list[str]:
    """The trace files a URL names: itself, or those under it when it is a prefix that its store
    can list (an http(s) URL always names one file)."""
    from brrr_trace.traces.urls import is_folder, scheme_of

    if scheme_of(url) in ("http", "https"):
        if url.split("?", 1)[0].endswith("/"):
            raise NotATraceError(
                f"{url}: an http(s) URL ending in / is a folder, which a web server cannot "
                "list; pass the URL of each rank's trace file."
            )
        return [url]
    if not is_folder(url):
        return [url]
    found = find_trace_urls(url)
    if not found:
        raise NotATraceError(
            f"{url}: no trace under it (*.pt.trace.json[.gz], or a .json[.gz] file that reads "
            "like a torch.profiler trace)."
        )
    return found


def find_trace_urls(prefix: str) -> list[str]:
    """Trace files under a URL prefix (an fsspec store that can list: s3://bucket/run/, ...),
    sorted, chosen as in a folder: the profiler handler's files at any depth, else the
    prefix's own files named like a trace or whose head reads like one."""
    from brrr_trace.traces.urls import listing, name_of

    below, direct = listing(prefix)
    preferred = [u for u in below if name_of(u).endswith(HANDLER_NAMES)]
    if preferred:
        return preferred
    named = [u for u in direct if name_of(u).endswith(JSON_NAMES)]
    return [u for u in named if "trace" in name_of(u).lower() or looks_like_trace(u)]


# Runs versus ranks (docs/architecture.md §13). The head of each file says which rank of which job
# it is: `distributedInfo` (rank, world size, backend) and the time of its first event. Files
# without `distributedInfo` are separate runs (a TensorBoard folder of two experiments); ranks of
# one job share world size and backend, hold distinct ranks, and start together.
_DISTRIBUTED = re.compile(rb'"distributedInfo"\s*:\s*(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})')
_INT_FIELD = rb'"%s"\s*:\s*"?(\d+)"?'
_BACKEND = re.compile(rb'"backend"\s*:\s*"([A-Za-z0-9_:-]{1,40})"')
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')
_FIRST_TS = re.compile(rb'"ts"\s*:\s*"?(-?\d+(?:\.\d+)?)')
_HEAD_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class RankFile:
    """What a trace's head says about where it comes from."""

    path: Path | str  # a str: a URL
    rank: int | None  # distributedInfo.rank; None when the trace has no distributedInfo
    world_size: int | None
    backend: str | None
    start_ns: int | None  # the first event's time (base time + ts), to tell runs apart


@dataclass(frozen=True, slots=True)
class Run:
    """One job: its rank traces (sorted by rank), or one trace without rank information."""

    files: tuple[RankFile, ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(f.rank for f in self.files if f.rank is not None)

    @property
    def world_size(self) -> int | None:
        return self.files[0].world_size

    @property
    def start_ns(self) -> int | None:
        starts = [f.start_ns for f in self.files if f.start_ns is not None]
        return min(starts) if starts else None


def rank_file(path: Path | str) -> RankFile:
    """The rank, world size, backend and start time read from the first MiB of the trace."""
    try:
        head = read_head(str(path), _HEAD_BYTES)
    except NotATraceError:
        head = b""
    rank = world = backend = None
    info = _DISTRIBUTED.search(head)
    if info:
        body = info.group(1)
        rank = _int_of(body, b"rank")
        world = _int_of(body, b"world_size")
        found = _BACKEND.search(body)
        backend = found.group(1).decode() if found else None
    base = _BASE_TIME.search(head)
    events = head.find(b'"traceEvents"')
    first = _FIRST_TS.search(head, max(events, 0)) if events >= 0 or head[:1] == b"[" else None
    start = None
    if first:
        start = int(float(first.group(1)) * 1000) + (int(base.group(1)) if base else 0)
    return RankFile(path=path, rank=rank, world_size=world, backend=backend, start_ns=start)


def _int_of(body: bytes, key: bytes) -> int | None:
    found = re.search(_INT_FIELD % key, body)
    return int(found.group(1)) if found else None


def group_runs(files: list[RankFile], start_tolerance_ns: int) -> list[Run]:
    """Split trace files into runs, oldest first.

    A file with a rank joins a run of the same world size and backend that lacks its rank and
    started within ``start_tolerance_ns`` of it; a file without one is a run of its own."""
    open_runs: list[list[RankFile]] = []
    runs: list[list[RankFile]] = []
    for file in sorted(files, key=lambda f: (f.start_ns is None, f.start_ns or 0, str(f.path))):
        if file.rank is None:
            runs.append([file])
            continue
        home = next((run for run in open_runs if _joins(run, file, start_tolerance_ns)), None)
        if home is None:
            home = []
            open_runs.append(home)
            runs.append(home)
        home.append(file)
    ordered = [Run(tuple(sorted(run, key=lambda f: (f.rank or 0, str(f.path))))) for run in runs]
    return sorted(
        ordered, key=lambda r: (r.start_ns is None, r.start_ns or 0, str(r.files[0].path))
    )


def _joins(run: list[RankFile], file: RankFile, tolerance_ns: int) -> bool:
    first = run[0]
    if (first.world_size, first.backend) != (file.world_size, file.backend):
        return False
    if any(f.rank == file.rank for f in run):
        return False
    if first.world_size is not None and len(run) >= first.world_size:
        return False
    if first.start_ns is None or file.start_ns is None:
        return True
    return abs(file.start_ns - first.start_ns) <= tolerance_ns
