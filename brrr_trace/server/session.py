"""The server's state in one place: the settings, the documents, the loaded trace, the load.

pygls keeps the text of the documents; the session keeps, per document, the syntax index of its
current text and the inlay hints worked out for it, until the text or the trace changes. Request
handlers read through ``view``, which takes everything a request needs at one moment; the loader
(``scheduling.py``) writes the trace fields. The private fields are the session's alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import Workspace

from brrr_trace.analyzers.paths import SourceFolders
from brrr_trace.analyzers.safe_read import SourceSkipped, read_source
from brrr_trace.options import AnalysisOptions
from brrr_trace.server import convert, messages
from brrr_trace.server.convert import Positions
from brrr_trace.server.discovery import TraceFile, norm_path, path_of_uri, rank_of, run_of
from brrr_trace.server.settings import Settings, parse_settings
from brrr_trace.server.snapshot import Snapshot
from brrr_trace.server.source import SourceIndex

log = logging.getLogger("brrr_trace.server")
# Traces the picker lists (each has its head read once for its rank).
_LISTED_TRACES = 100

# What the cached hints of a document were worked out from: the trace, the text, the cut-offs.
_HintKey = tuple[Snapshot, SourceIndex, tuple[float, float]]


@dataclass(frozen=True)
class DocumentView:
    """One document with the loaded trace and the settings, as one request sees them."""

    uri: str
    path: str  # the document's file, as ``norm_path`` spells it (the snapshot's keys)
    positions: Positions  # its syntax index, in the client's position units
    snapshot: Snapshot
    settings: Settings

    @property
    def index(self) -> SourceIndex:
        return self.positions.index


class Session:
    """Settings, documents and the trace. ``snapshot`` is replaced whole, never changed."""

    def __init__(
        self, workspace: Callable[[], Workspace], on_settings: Callable[[Settings], None]
    ) -> None:
        self._workspace = workspace
        self._on_settings = on_settings
        self._settings = Settings()
        self._setting_problems: list[str] = []
        self._indexes: dict[str, SourceIndex] = {}
        self._hints: dict[str, tuple[_HintKey, list[t.InlayHint]]] = {}
        self._published: set[str] = set()
        # Documents not open, read by ``read_closed`` for their diagnostics: uri -> (path, text).
        self._closed: dict[str, tuple[str, str]] = {}
        # The trace, written by the loader: what is shown, what could be, what is loading.
        self.snapshot: Snapshot | None = None
        self.candidates: tuple[TraceFile, ...] = ()
        self.pinned: str | None = None  # chosen with ``brrr-trace.selectTrace``
        self.active: TraceFile | None = None
        self.loading: str | None = None
        self.last_error: str | None = None
        self.watching = False  # the client watches the trace files (else the loader polls)

    # --- settings ------------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    def apply_settings(self, payload: Any, origin: str) -> bool:
        """Take settings from the client; True when they changed. Bad values: one message."""
        parsed = parse_settings(payload, self._settings)
        if parsed.unknown_keys:
            log.info("%s: ignoring unknown settings %s", origin, ", ".join(parsed.unknown_keys))
        for problem in parsed.problems:
            log.warning("%s: %s", origin, problem)
        if parsed.problems:
            self._setting_problems.append(messages.settings_problems(parsed.problems))
        changed = parsed.settings != self._settings
        self._settings = parsed.settings
        self._on_settings(self._settings)
        return changed

    def take_setting_problems(self) -> list[str]:
        """The messages about bad settings not shown yet (the client may not be ready before)."""
        problems, self._setting_problems = self._setting_problems, []
        return problems

    def roots(self) -> list[str]:
        """The workspace folders (else the root, else the current folder)."""
        try:
            workspace = self._workspace()
            folders = [to_fs_path(f.uri) for f in workspace.folders.values()]
            root = workspace.root_path
        except RuntimeError:  # not initialized
            folders, root = [], None
        paths = [p for p in folders if p] or ([root] if root else [])
        return paths or [os.getcwd()]

    def analysis_options(self) -> AnalysisOptions:
        return self._settings.analysis_options(self.roots()[0])

    def trace_setting(self) -> str | None:
        """The ``trace`` setting as a path, relative ones taken from the first folder."""
        if not self._settings.trace:
            return None
        return os.path.join(self.roots()[0], os.path.expanduser(self._settings.trace))

    def load_inputs(self) -> tuple[Any, ...]:
        """What decides which trace is loaded, and how: when it changes, load again."""
        return (self._settings.traces, self._settings.trace, self.analysis_options())

    # --- documents -----------------------------------------------------------------------------

    def open_uris(self) -> list[str]:
        return list(self._workspace().text_documents)

    def source_folders(self) -> SourceFolders:
        """Where the server may read source: the workspace folders, the source root and the
        path mappings' targets (README, Security notes)."""
        options = self.analysis_options()
        targets = [local for _, local in options.path_mappings]
        return SourceFolders([*self.roots(), *targets, options.source_root or self.roots()[0]])

    def in_scope(self, uri: str) -> bool:
        """Whether a document is a Python file inside the source folders: the only kind the
        server reads, publishes diagnostics for, or edits."""
        path = to_fs_path(uri)
        return path is not None and self.source_folders().refusal(path) is None

    def document(self, uri: str, closed_ok: bool = False) -> tuple[str, Positions] | None:
        """The local path (``norm_path``) and the positions of a document in scope: one the
        client has open, or (``closed_ok``) one that ``read_closed`` read. Never read from disk
        here, on the event loop: a FIFO would block it, a large file stall it."""
        workspace = self._workspace()
        opened = workspace.text_documents.get(uri)
        if opened is not None:
            path, source = opened.path, opened.source  # the client's text, not the disk's
        elif closed_ok and uri in self._closed:
            path, source = self._closed[uri]
        else:
            return None
        if not self.in_scope(uri):
            return None
        index = self._indexes.get(uri)
        if index is None or (index.text is not source and index.text != source):
            index = SourceIndex(source)
            self._indexes[uri] = index
        return norm_path(path), Positions(index, workspace.position_codec)

    async def read_closed(self) -> None:
        """Read the files with findings that are not open (their diagnostics need the text),
        off the loop, through ``safe_read``: in scope, regular, at most ``max_source_bytes``."""
        snapshot = self.snapshot
        if snapshot is None or not self._settings.diagnostics:
            self._closed = {}
            return
        open_uris = set(self.open_uris())
        uris = [_uri_of(path) for path in snapshot.findings_by_path]
        wanted = [u for u in uris if u not in open_uris and self.in_scope(u)]
        limit = snapshot.options.max_source_bytes
        loop = asyncio.get_running_loop()
        self._closed = await loop.run_in_executor(None, _read_sources, wanted, limit)

    def view(self, uri: str, request: str, closed_ok: bool = False) -> DocumentView | None:
        """The document with the trace, for ``request``; None (and why, in the log) if either
        is missing. Only diagnostics take a document that is not open (``closed_ok``)."""
        snapshot = self.snapshot
        if snapshot is None:
            log.debug("%s: no trace is loaded", request)
            return None
        found = self.document(uri, closed_ok)
        if found is None:
            log.debug("%s: %s is not open in the workspace", request, uri)
            return None
        path, positions = found
        return DocumentView(uri, path, positions, snapshot, self._settings)

    def forget(self, uri: str) -> None:
        """A closed document: drop what was kept for its text."""
        self._indexes.pop(uri, None)
        self._hints.pop(uri, None)

    def hints(self, view: DocumentView) -> list[t.InlayHint]:
        """All the hints of a document, in line order; kept until its text or the trace changes."""
        cut = (view.settings.threshold, view.settings.hint_share)
        key = (view.snapshot, view.index, cut)
        cached = self._hints.get(view.uri)
        if cached is not None:
            (old_snapshot, old_index, old_cut), hints = cached
            if old_snapshot is key[0] and old_index is key[1] and old_cut == cut:
                return hints
        hints = convert.inlay_hints(
            view.snapshot.lines(view.path),
            view.snapshot.span_ns,
            view.settings.threshold,
            view.positions,
            view.settings.hint_share,
        )
        self._hints[view.uri] = (key, hints)
        return hints

    def prepare_hints(self) -> None:
        """Work out the hints of every open document, before the client asks again."""
        for uri in self.open_uris():
            view = self.view(uri, "inlayHint")
            if view is not None:
                self.hints(view)

    # --- diagnostics and status ----------------------------------------------------------------

    def diagnostics(self, uri: str) -> list[t.Diagnostic]:
        if not self._settings.diagnostics:
            return []
        view = self.view(uri, "diagnostics", closed_ok=True)
        if view is None:
            return []
        return convert.document_diagnostics(
            view.snapshot, view.path, view.settings, view.positions, uri
        )

    def diagnostics_to_publish(self) -> list[t.PublishDiagnosticsParams]:
        """Diagnostics for every file with findings and every open document, and empty ones for
        files that had diagnostics and have none now."""
        snapshot = self.snapshot
        open_uris = self.open_uris()
        uris = {path_of_uri(uri): uri for uri in open_uris if self.in_scope(uri)}
        if snapshot is not None and self._settings.diagnostics:
            for path in snapshot.findings_by_path:
                uris.setdefault(path, _uri_of(path))
        out = []
        published = set()
        for uri in uris.values():
            diagnostics = self.diagnostics(uri)
            if diagnostics or uri in self._published or uri in open_uris:
                out.append(t.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
            if diagnostics:
                published.add(uri)
        for uri in self._published - set(uris.values()):
            out.append(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self._published = published
        return out

    def is_active(self, trace: TraceFile) -> bool:
        return self.active is not None and norm_path(self.active.path) == norm_path(trace.path)

    def status(self) -> dict[str, Any]:
        run = run_of(self.snapshot.trace.path, self.roots()) if self.snapshot else None
        # With its run's other ranks beside it, the report names all of them; it covers the
        # rank of the file shown.
        rank = rank_of(self.snapshot.trace) if self.snapshot else None
        return messages.status(
            self.snapshot,
            self.loading,
            self.last_error,
            self.watching,
            run,
            len(self.candidates),
            rank,
        )

    def trace_entries(self, limit: int = _LISTED_TRACES) -> list[dict[str, Any]]:
        """The traces it could show, newest first, with their run and rank (the picker)."""
        roots = self.roots()
        return [
            messages.trace_entry(c, self.is_active(c), rank_of(c), run_of(c.path, roots))
            for c in self.candidates[:limit]
        ]


def _uri_of(path: str) -> str:
    return from_fs_path(path) or Path(path).as_uri()


def _read_sources(uris: list[str], max_bytes: int) -> dict[str, tuple[str, str]]:
    """``uri -> (path, text)`` of the files that can be read safely; the others are left out."""
    texts = {}
    for uri in uris:
        path = to_fs_path(uri)
        if path is None:
            continue
        try:
            texts[uri] = (path, read_source(path, max_bytes))
        except (OSError, SourceSkipped) as error:
            log.info("not reading %s for its diagnostics: %s", path, error)
    return texts
