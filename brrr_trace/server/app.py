"""The language server: handler registration and the loading loop. Handlers stay thin.

Threads of control, all on one asyncio loop:
- request handlers (inlay hints, hover, lenses, actions) read ``server.snapshot`` and convert;
  they never wait for a load, they answer from whatever snapshot is current;
- ``_reload_loop`` waits for a reason to (re)load, finds the active trace, analyzes it in a child
  process (``state.AnalysisJob``) with ``$/progress``, swaps in the new snapshot, publishes the
  diagnostics, asks the client to refresh hints and lenses, and only then ends the progress;
- ``_poll_loop`` checks the trace files every ``pollInterval`` seconds, for clients that cannot
  watch files for us (``workspace/didChangeWatchedFiles`` with dynamic registration).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import time
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from brrr_trace import __version__
from brrr_trace.options import AnalysisOptions
from brrr_trace.server import convert
from brrr_trace.server.actions import fix_for
from brrr_trace.server.analysis import AnalysisFailed, AnalysisJob, AnalyzeFn, default_analyze
from brrr_trace.server.convert import Positions
from brrr_trace.server.discovery import TraceFile, choose_active, discover, norm_path, stat_trace
from brrr_trace.server.logging import ClientLogHandler
from brrr_trace.server.settings import SECTION, Settings, parse_settings
from brrr_trace.server.snapshot import Snapshot, build_snapshot
from brrr_trace.server.source import SourceIndex

log = logging.getLogger("brrr_trace.server")

CMD_SELECT_TRACE = "brrr-trace.selectTrace"
CMD_LIST_TRACES = "brrr-trace.listTraces"
CMD_RELOAD = "brrr-trace.reload"
CMD_STATUS = "brrr-trace.status"
# Sent whenever a load starts, ends or fails, with the ``brrr-trace.status`` command's answer
# (the VS Code extension's status bar); clients that do not know it ignore it.
STATUS_NOTIFICATION = "brrr-trace/status"
_RESCAN_EVERY_TICKS = 5  # when polling: stat the active trace every tick, walk the folders less
_SETTLE_S = 0.2  # a trace written less than a second ago is re-read until it stops changing


class BrrrServer(LanguageServer):
    """Server state. ``snapshot`` is replaced whole, never changed in place."""

    def __init__(self, analyze: AnalyzeFn = default_analyze) -> None:
        super().__init__("brrr-trace", __version__)
        self.analyze = analyze
        self.settings = Settings()
        self.snapshot: Snapshot | None = None
        self.candidates: tuple[TraceFile, ...] = ()
        self.pinned: str | None = None
        self.active: TraceFile | None = None
        self.loading: str | None = None
        self.last_error: str | None = None
        self.watching = False
        self.client_log = ClientLogHandler(self)
        self._pending_problems: list[str] = []
        self._wake = asyncio.Event()
        self._rescan = True
        self._force = False
        self._load_task: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._failed: dict[tuple[Any, ...], str] = {}
        self._told: set[str] = set()
        self._published: set[str] = set()
        self._indexes: dict[str, SourceIndex] = {}
        self._hints: dict[str, tuple[tuple[Any, ...], list[t.InlayHint]]] = {}
        self._progress_count = 0

    # --- settings ------------------------------------------------------------------------------

    def apply_settings(self, payload: Any, origin: str) -> bool:
        """Parse settings from the client; True when they changed. Bad values: one message."""
        parsed = parse_settings(payload, self.settings)
        if parsed.unknown_keys:
            log.info("%s: ignoring unknown settings %s", origin, ", ".join(parsed.unknown_keys))
        for problem in parsed.problems:
            log.warning("%s: %s", origin, problem)
        if parsed.problems:
            self._pending_problems.append(convert.settings_problems(parsed.problems))
        changed = parsed.settings != self.settings
        self.settings = parsed.settings
        self.client_log.set_level_name(self.settings.log_level)
        return changed

    def flush_setting_problems(self) -> None:
        problems, self._pending_problems = self._pending_problems, []
        for message in problems:
            self.window_show_message(
                t.ShowMessageParams(type=t.MessageType.Warning, message=message)
            )

    async def pull_settings(self) -> bool:
        """Ask the client for the ``brrr-trace`` section (``workspace/configuration``)."""
        workspace = self.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return False
        try:
            answer = await asyncio.wait_for(
                self.workspace_configuration_async(
                    t.ConfigurationParams(items=[t.ConfigurationItem(section=SECTION)])
                ),
                timeout=5,
            )
        except Exception as error:
            log.debug("workspace/configuration failed: %s", error)
            return False
        section = answer[0] if answer else None
        if not isinstance(section, dict) or not section:
            return False
        return self.apply_settings({SECTION: section}, "workspace/configuration")

    # --- workspace and documents ---------------------------------------------------------------

    def roots(self) -> list[str]:
        try:
            folders = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
            root = self.workspace.root_path
        except RuntimeError:  # not initialized
            folders, root = [], None
        paths = [p for p in folders if p] or ([root] if root else [])
        return paths or [os.getcwd()]

    def analysis_options(self) -> AnalysisOptions:
        return self.settings.analysis_options(self.roots()[0])

    def document(self, uri: str) -> tuple[str, SourceIndex] | None:
        """The local path (``norm_path``) and the syntax index of a document, open or on disk."""
        document = self.workspace.get_text_document(uri)
        try:
            source = document.source
        except OSError:
            return None
        index = self._indexes.get(uri)
        if index is None or (index.text is not source and index.text != source):
            index = SourceIndex(source)
            self._indexes[uri] = index
        return norm_path(document.path), index

    def positions(self, index: SourceIndex) -> Positions:
        return Positions(index, self.workspace.position_codec)

    def document_hints(self, uri: str) -> list[t.InlayHint]:
        """All the hints of a document, in line order; kept until its text or the trace changes."""
        snapshot = self.snapshot
        found = self.document(uri) if snapshot is not None else None
        if snapshot is None or found is None:
            return []
        path, index = found
        key = (snapshot, index, self.settings.threshold)
        cached = self._hints.get(uri)
        if cached is not None:
            (old_snapshot, old_index, old_threshold), hints = cached
            if old_snapshot is snapshot and old_index is index and old_threshold == key[2]:
                return hints
        hints = convert.inlay_hints(
            snapshot.lines(path), snapshot.span_ns, self.settings.threshold, self.positions(index)
        )
        self._hints[uri] = (key, hints)
        return hints

    # --- loading -------------------------------------------------------------------------------

    def request_reload(
        self, rescan: bool = False, force: bool = False, restart: bool = False
    ) -> None:
        """Wake the loading loop. ``restart`` abandons a load in progress (a newer reason won)."""
        self._rescan = self._rescan or rescan
        self._force = self._force or force
        self._wake.set()
        if restart and self._load_task is not None:
            self._load_task.cancel()

    def start_background(self) -> None:
        self._background.append(asyncio.ensure_future(self._reload_loop()))
        if not self.watching:
            self._background.append(asyncio.ensure_future(self._poll_loop()))

    def stop_background(self) -> None:
        for task in self._background:
            task.cancel()
        if self._load_task is not None:
            self._load_task.cancel()

    async def _reload_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            rescan, force = self._rescan, self._force
            self._rescan = self._force = False
            self._load_task = asyncio.ensure_future(self._reload(rescan, force))
            try:
                await asyncio.wait({self._load_task})
                if not self._load_task.cancelled() and self._load_task.exception():
                    error = self._load_task.exception()
                    log.error("loading failed", exc_info=error)
            finally:
                self._load_task = None

    async def _reload(self, rescan: bool, force: bool) -> None:
        loop = asyncio.get_running_loop()
        settings = self.settings
        if rescan or not self.candidates:
            self.candidates = await loop.run_in_executor(
                None, discover, self.roots(), settings.traces
            )
        pin = self.pinned or self._setting_trace()
        options = settings.analysis_options(self.roots()[0])
        active, missing = choose_active(self.candidates, pin)
        if active is not None and (missing or not pin):
            # Not chosen by name: skip files that already failed (a JSON file that matches the
            # globs but is no trace) for the newest one that has not.
            active = next((c for c in self.candidates if (c, options) not in self._failed), active)
        if missing and missing not in self._told:
            self._told.add(missing)
            self.window_show_message(
                t.ShowMessageParams(
                    type=t.MessageType.Warning, message=convert.pin_missing_message(missing)
                )
            )
        self.active = active
        if active is None:
            if "no-traces" not in self._told:
                self._told.add("no-traces")
                log.info(convert.no_traces_message(settings.traces))
            if self.snapshot is not None:
                self.snapshot = None
                self.publish_diagnostics()
                self.refresh_client()
                self.send_status()
            return
        self._told.discard("no-traces")
        active = await self._settled(stat_trace(active.path) or active)
        self.active = active
        key = (active, options)
        if not force and self.snapshot is not None and self._key(self.snapshot) == key:
            return
        if not force and key in self._failed:
            return
        self.loading = active.path
        self.send_status()
        token = await self._begin_progress(active.path)
        try:
            report = await AnalysisJob(self.analyze, active.path, options).run(
                lambda done, total: self._report_progress(token, active.path, done, total)
            )
            self.loading = None
            self.last_error = None
            self.snapshot = build_snapshot(active, options, report)
            self._after_load(self.snapshot)
        except AnalysisFailed as failure:
            self._load_failed(key, active.path, str(failure), failure.bad_input, failure.detail)
            self._end_progress(token, "failed")
            if not pin and any((c, options) not in self._failed for c in self.candidates):
                self.request_reload(rescan=True)  # try the next newest file
        except asyncio.CancelledError:
            self._end_progress(token, "cancelled")
            raise
        except Exception as error:  # a bug of ours: say so once, keep serving
            detail = traceback.format_exc()
            self._load_failed(key, active.path, f"{type(error).__name__}: {error}", False, detail)
            self._end_progress(token, "failed")
        else:
            self._end_progress(token, convert.loaded_summary(active.path, report))
        finally:
            self.loading = None

    def _after_load(self, snapshot: Snapshot) -> None:
        """Tell the client: log, diagnostics, hints ready, refresh. Then the progress may end."""
        report = snapshot.report
        log.info("loaded %s", convert.loaded_summary(snapshot.trace.path, report))
        for note in convert.report_notes(report):
            log.info("%s", note)
        self._tell_unmapped(snapshot)
        self.publish_diagnostics()
        for uri in list(self.workspace.text_documents):
            self.document_hints(uri)  # ready before the client asks again
        self.refresh_client()
        self.send_status()

    def _load_failed(
        self, key: tuple[Any, ...], path: str, error: str, bad_input: bool, detail: str
    ) -> None:
        """One message per broken version of a trace; the server keeps the last good result."""
        self._failed[key] = error
        self.loading = None
        self.last_error = convert.load_failed(path, error, bad_input)
        if detail:
            log.error("%s\n%s", self.last_error, detail)
        else:
            log.warning("%s", self.last_error)
        self.window_show_message(
            t.ShowMessageParams(
                type=t.MessageType.Warning if bad_input else t.MessageType.Error,
                message=self.last_error,
            )
        )
        self.send_status()

    def _setting_trace(self) -> str | None:
        if not self.settings.trace:
            return None
        return os.path.join(self.roots()[0], os.path.expanduser(self.settings.trace))

    @staticmethod
    def _key(snapshot: Snapshot) -> tuple[Any, ...]:
        return (snapshot.trace, snapshot.options)

    async def _settled(self, trace: TraceFile) -> TraceFile:
        """Wait while a freshly written trace keeps changing (up to about 5 s)."""
        for _ in range(25):
            if time.time() - trace.mtime_ns / 1e9 > 1.0:
                return trace
            await asyncio.sleep(_SETTLE_S)
            again = stat_trace(trace.path)
            if again is None or again == trace:
                return again or trace
            trace = again
        return trace

    def _tell_unmapped(self, snapshot: Snapshot) -> None:
        if not snapshot.unmapped_files:
            return
        mapped_any = bool(snapshot.lines_by_path)
        message = convert.unmapped_message(snapshot.trace.path, snapshot.unmapped_files, mapped_any)
        if mapped_any:
            log.info("%s", message)
        elif message not in self._told:
            self._told.add(message)
            self.window_show_message(
                t.ShowMessageParams(type=t.MessageType.Warning, message=message)
            )

    async def _poll_loop(self) -> None:
        """For clients without file watching: notice new, changed and deleted traces."""
        ticks = 0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.settings.poll_interval)
            ticks += 1
            try:
                active = self.active
                if active is not None and stat_trace(active.path) != active:
                    self.request_reload(rescan=True, restart=self.loading == active.path)
                    continue
                if ticks % _RESCAN_EVERY_TICKS == 0 and self._load_task is None:
                    found = await loop.run_in_executor(
                        None, discover, self.roots(), self.settings.traces
                    )
                    if found != self.candidates:
                        self.candidates = found
                        self.request_reload()
            except Exception:
                log.exception("checking the trace files failed; trying again")

    # --- progress ------------------------------------------------------------------------------

    async def _begin_progress(self, path: str) -> str | None:
        window = self.client_capabilities.window
        if not (window and window.work_done_progress):
            return None
        self._progress_count += 1
        token = f"brrr-trace/load/{self._progress_count}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), timeout=5)
        except Exception as error:
            log.debug("window/workDoneProgress/create failed: %s", error)
            return None
        self.work_done_progress.begin(token, convert.progress_begin(path))
        return token

    def _report_progress(self, token: str | None, path: str, done: int, total: int) -> None:
        if token is not None:
            self.work_done_progress.report(token, convert.progress_report(path, done, total))

    def _end_progress(self, token: str | None, message: str) -> None:
        if token is not None:
            self.work_done_progress.end(token, convert.progress_end(message))

    # --- pushing to the client -----------------------------------------------------------------

    def diagnostics_for(self, uri: str) -> list[t.Diagnostic]:
        snapshot = self.snapshot
        if snapshot is None or not self.settings.diagnostics:
            return []
        found = self.document(uri)
        if found is None:
            return []
        path, index = found
        positions = self.positions(index)
        return [
            d
            for f in snapshot.findings(path)
            for d in convert.diagnostics(f, snapshot.span_ns, self.settings, positions, uri)
        ]

    def publish_diagnostics(self) -> None:
        """Diagnostics for every file with findings and every open document; clear the rest."""
        snapshot = self.snapshot
        uris = {}
        for uri in self.workspace.text_documents:
            uris[self._norm_uri_path(uri)] = uri
        if snapshot is not None and self.settings.diagnostics:
            for path in snapshot.findings_by_path:
                uris.setdefault(path, from_fs_path(path) or Path(path).as_uri())
        published = set()
        for uri in uris.values():
            diagnostics = self.diagnostics_for(uri)
            if diagnostics or uri in self._published or uri in self.workspace.text_documents:
                self.text_document_publish_diagnostics(
                    t.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
                )
            if diagnostics:
                published.add(uri)
        for uri in self._published - set(uris.values()):
            self.text_document_publish_diagnostics(
                t.PublishDiagnosticsParams(uri=uri, diagnostics=[])
            )
        self._published = published

    def status(self) -> dict[str, Any]:
        """What is loaded, loading or broken: ``brrr-trace.status`` and ``brrr-trace/status``."""
        snapshot = self.snapshot
        summary = snapshot.report.summary if snapshot else None
        return {
            "trace": snapshot.trace.path if snapshot else None,
            "loading": self.loading,
            "error": self.last_error,
            "lines": len(snapshot.report.lines) if snapshot else 0,
            "findings": len(snapshot.report.findings) if snapshot else 0,
            "gpuUtilization": summary.gpu_utilization if summary else None,
            "spanNs": snapshot.span_ns if snapshot else 0,
            "watching": self.watching,
        }

    def send_status(self) -> None:
        self.protocol.notify(STATUS_NOTIFICATION, self.status())

    def _norm_uri_path(self, uri: str) -> str:
        path = to_fs_path(uri) or unquote(uri)
        return norm_path(path)

    def refresh_client(self) -> None:
        """Ask the client to re-request hints and lenses (if it can be asked)."""
        workspace = self.client_capabilities.workspace
        if workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support:
            _ignore_answer(self.workspace_inlay_hint_refresh(None))
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            _ignore_answer(self.workspace_code_lens_refresh(None))

    async def register_watchers(self) -> bool:
        workspace = self.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if not (watched and watched.dynamic_registration):
            return False
        relative = bool(watched.relative_pattern_support)
        watchers = []
        for pattern in self.settings.traces:
            if os.path.isabs(pattern):
                watchers.append(t.FileSystemWatcher(glob_pattern=pattern))
            elif relative:
                for root in self.roots():
                    watchers.append(
                        t.FileSystemWatcher(
                            glob_pattern=t.RelativePattern(
                                base_uri=from_fs_path(root) or Path(root).as_uri(), pattern=pattern
                            )
                        )
                    )
            else:
                glob = pattern if pattern.startswith("**/") else f"**/{pattern}"
                watchers.append(t.FileSystemWatcher(glob_pattern=glob))
        registration = t.Registration(
            id="brrr-trace-traces",
            method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=t.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await asyncio.wait_for(
                self.client_register_capability_async(
                    t.RegistrationParams(registrations=[registration])
                ),
                timeout=5,
            )
        except Exception as error:
            log.info("the client did not take the file watchers (%s); polling instead", error)
            return False
        return True


def _ignore_answer(future: Any) -> None:
    def done(f: Any) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.debug("the client refused a refresh: %s", f.exception())

    if hasattr(future, "add_done_callback"):
        future.add_done_callback(done)


# --- handlers ---------------------------------------------------------------------------------


def create_server(analyze: AnalyzeFn = default_analyze) -> BrrrServer:
    """A server with every handler registered. ``analyze`` must be picklable (module level)."""
    server = BrrrServer(analyze)
    logging.getLogger("brrr_trace").addHandler(server.client_log)

    @server.feature(t.INITIALIZE)
    def initialize(ls: BrrrServer, params: t.InitializeParams) -> None:
        if params.initialization_options is not None:
            ls.apply_settings(params.initialization_options, "initializationOptions")

    @server.feature(t.INITIALIZED)
    async def initialized(ls: BrrrServer, params: t.InitializedParams) -> None:
        ls.client_log.connected(asyncio.get_running_loop())
        await ls.pull_settings()
        ls.flush_setting_problems()
        ls.watching = await ls.register_watchers()
        log.info(
            "brrr-trace %s serving %s; %s",
            __version__,
            ", ".join(ls.roots()),
            "the client watches the trace files"
            if ls.watching
            else f"checking trace files every {ls.settings.poll_interval:g} s",
        )
        ls.start_background()
        ls.request_reload(rescan=True)

    @server.feature(t.SHUTDOWN)
    def shutdown(ls: BrrrServer, *args: Any) -> None:
        ls.stop_background()

    @server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: BrrrServer, params: t.DidChangeConfigurationParams
    ) -> None:
        before = (ls.settings.traces, ls.settings.trace, ls.analysis_options())
        parsed = parse_settings(params.settings, ls.settings)
        if parsed.found:
            changed = ls.apply_settings(params.settings, "workspace/didChangeConfiguration")
        else:
            changed = await ls.pull_settings()
        ls.flush_setting_problems()
        if not changed:
            return
        if (ls.settings.traces, ls.settings.trace, ls.analysis_options()) != before:
            ls.request_reload(rescan=True, restart=True)
        else:
            ls.publish_diagnostics()
            ls.refresh_client()

    @server.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: BrrrServer, params: t.DidChangeWatchedFilesParams) -> None:
        loading = ls.loading and norm_path(ls.loading)
        touches_load = any(ls._norm_uri_path(c.uri) == loading for c in params.changes)
        ls.request_reload(rescan=True, restart=bool(touches_load))

    @server.feature(t.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: BrrrServer, params: t.DidChangeWorkspaceFoldersParams) -> None:
        ls.request_reload(rescan=True)

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: BrrrServer, params: t.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.text_document_publish_diagnostics(
            t.PublishDiagnosticsParams(uri=uri, diagnostics=ls.diagnostics_for(uri))
        )

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: BrrrServer, params: t.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.text_document_publish_diagnostics(
            t.PublishDiagnosticsParams(uri=uri, diagnostics=ls.diagnostics_for(uri))
        )

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: BrrrServer, params: t.DidCloseTextDocumentParams) -> None:
        ls._indexes.pop(params.text_document.uri, None)
        ls._hints.pop(params.text_document.uri, None)

    @server.feature(t.TEXT_DOCUMENT_INLAY_HINT)
    def inlay_hint(ls: BrrrServer, params: t.InlayHintParams) -> list[t.InlayHint]:
        if not ls.settings.inlay_hints:
            return []
        hints = ls.document_hints(params.text_document.uri)
        first, last = params.range.start.line, params.range.end.line
        lo = bisect.bisect_left(hints, first, key=lambda h: h.position.line)
        hi = bisect.bisect_right(hints, last, key=lambda h: h.position.line)
        return hints[lo:hi]

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: BrrrServer, params: t.HoverParams) -> t.Hover | None:
        snapshot = ls.snapshot
        found = ls.document(params.text_document.uri) if snapshot is not None else None
        if snapshot is None or found is None:
            return None
        path, index = found
        line = params.position.line + 1
        name = convert.trace_name(snapshot.trace.path)
        report_line = snapshot.line_at(path, line)
        if report_line is not None:
            findings = [f for f in snapshot.findings(path) if f.line == line]
            markdown = convert.hover_markdown(
                report_line, snapshot.report, snapshot.span_ns, findings, name
            )
            return convert.hover(markdown, ls.positions(index), line)
        function = index.function_defined_on(line)
        lines = _own_lines(snapshot, path, function) if function else ()
        if function is None or not lines:
            return None
        markdown = convert.function_markdown(function, lines, snapshot.span_ns, name)
        return convert.hover(markdown, ls.positions(index), line)

    @server.feature(t.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: BrrrServer, params: t.CodeLensParams) -> list[t.CodeLens]:
        snapshot = ls.snapshot
        if snapshot is None or not ls.settings.code_lens:
            return []
        found = ls.document(params.text_document.uri)
        if found is None:
            return []
        path, index = found
        if not snapshot.lines(path):
            return []
        positions = ls.positions(index)
        lenses = []
        for function in index.functions:
            lines = _own_lines(snapshot, path, function)
            if lines and sum(line.total_ns for line in lines) > 0:
                lenses.append(
                    convert.code_lens(function, lines, params.text_document.uri, positions)
                )
        return lenses

    @server.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix]),
    )
    def code_action(ls: BrrrServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        snapshot = ls.snapshot
        only = params.context.only
        if only and not any(t.CodeActionKind.QuickFix.value.startswith(k) for k in only):
            return []
        found = ls.document(params.text_document.uri) if snapshot is not None else None
        if snapshot is None or found is None:
            return []
        path, index = found
        uri = params.text_document.uri
        first, last = params.range.start.line + 1, params.range.end.line + 1
        positions = ls.positions(index)
        actions = []
        for finding in snapshot.findings(path):
            if not first <= finding.line <= last:
                continue
            sent = [
                d
                for d in params.context.diagnostics
                if d.source == convert.SOURCE
                and d.code == finding.rule
                and d.range.start.line == finding.line - 1
            ]
            own = convert.diagnostic(finding, snapshot.span_ns, ls.settings, positions)
            diagnostics = sent or ([own] if own else [])
            fix = fix_for(finding.rule, index, finding.line)
            if fix is not None:
                actions.append(convert.fix_action(fix, uri, diagnostics, positions))
            else:
                actions.append(convert.explain_action(finding, uri, diagnostics))
        return actions

    # --- commands -------------------------------------------------------------------------------

    @server.command(convert.CMD_SHOW_FIX)
    def show_fix(ls: BrrrServer, *args: Any) -> str:
        text = convert.fix_explanation(args[0] if args else None)
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Info, message=text))
        return text

    @server.command(convert.CMD_SHOW_FUNCTION)
    def show_function(ls: BrrrServer, *args: Any) -> str | None:
        snapshot = ls.snapshot
        if snapshot is None or len(args) < 2 or not isinstance(args[0], str):
            return None
        found = ls.document(args[0])
        function = found[1].function_defined_on(args[1]) if found else None
        if found is None or function is None:
            return None
        lines = _own_lines(snapshot, found[0], function)
        text = convert.function_markdown(
            function, lines, snapshot.span_ns, convert.trace_name(snapshot.trace.path)
        )
        ls.window_show_message(t.ShowMessageParams(type=t.MessageType.Info, message=text))
        return text

    @server.command(CMD_LIST_TRACES)
    def list_traces(ls: BrrrServer, *args: Any) -> list[dict[str, Any]]:
        return [_trace_entry(ls, trace) for trace in ls.candidates]

    @server.command(CMD_SELECT_TRACE)
    async def select_trace(ls: BrrrServer, *args: Any) -> dict[str, Any] | None:
        choice = args[0] if args and isinstance(args[0], str) else None
        if choice is None:
            choice = await _ask_for_trace(ls)
            if choice is None:
                return None
        if choice.startswith("file:"):
            choice = to_fs_path(choice) or choice
        path = os.path.join(ls.roots()[0], os.path.expanduser(choice))
        if stat_trace(path) is None:
            ls.window_show_message(
                t.ShowMessageParams(
                    type=t.MessageType.Warning, message=convert.pin_missing_message(path)
                )
            )
            return None
        ls.pinned = os.path.abspath(path)
        ls.request_reload(rescan=True, restart=True)
        return {"path": ls.pinned}

    @server.command(CMD_RELOAD)
    def reload(ls: BrrrServer, *args: Any) -> None:
        ls._failed.clear()
        ls.request_reload(rescan=True, force=True, restart=True)

    @server.command(CMD_STATUS)
    def status(ls: BrrrServer, *args: Any) -> dict[str, Any]:
        return ls.status()

    return server


def _own_lines(snapshot: Snapshot, path: str, function: Any) -> tuple[Any, ...]:
    lines = snapshot.lines_between(path, function.first_line, function.last_line)
    return tuple(line for line in lines if function.owns(line.line))


def _trace_entry(ls: BrrrServer, trace: TraceFile) -> dict[str, Any]:
    active = ls.active is not None and norm_path(ls.active.path) == norm_path(trace.path)
    return {
        "path": trace.path,
        "name": convert.trace_choice(trace.path, active),
        "mtimeNs": trace.mtime_ns,
        "size": trace.size,
        "active": active,
    }


async def _ask_for_trace(ls: BrrrServer) -> str | None:
    """No path given: offer the newest traces as buttons of a ``window/showMessageRequest``."""
    window = ls.client_capabilities.window
    if not ls.candidates or window is None or window.show_message is None:
        return None
    entries = {e["name"]: e["path"] for e in (_trace_entry(ls, c) for c in ls.candidates[:10])}
    try:
        answer = await ls.window_show_message_request_async(
            t.ShowMessageRequestParams(
                type=t.MessageType.Info,
                message="brrr-trace: which trace should the editor show?",
                actions=[t.MessageActionItem(title=name) for name in entries],
            )
        )
    except Exception as error:
        log.debug("window/showMessageRequest failed: %s", error)
        return None
    return entries.get(answer.title) if answer is not None else None
