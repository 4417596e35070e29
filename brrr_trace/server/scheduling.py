"""Keeping the loaded trace current, off the event loop, so that requests never wait for a load.

- ``Loader.request`` wakes ``_reload_loop``; reasons that arrive during a load add up (debounced
  into one more load), and ``restart`` abandons the load in progress for a newer reason;
- ``_reload`` finds the trace to show, analyzes it in a child process (``analysis.AnalysisJob``)
  with ``$/progress``, swaps in the new snapshot, publishes the diagnostics, asks the client to
  refresh hints and lenses, and only then ends the progress; ``brrr-trace/status`` follows each
  load's start, end or failure;
- ``_poll_loop`` checks the trace files every ``pollInterval`` seconds, for clients that cannot
  watch files for us (``workspace/didChangeWatchedFiles`` with dynamic registration).
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback

from lsprotocol import types as t

from brrr_trace.options import AnalysisOptions
from brrr_trace.server import messages
from brrr_trace.server.analysis import AnalysisFailed, AnalysisJob, AnalyzeFn
from brrr_trace.server.client import Client
from brrr_trace.server.discovery import TraceFile, choose_active, discover, stat_trace
from brrr_trace.server.session import Session
from brrr_trace.server.settings import Settings
from brrr_trace.server.snapshot import Snapshot, build_snapshot

log = logging.getLogger("brrr_trace.server")

_RESCAN_EVERY_TICKS = 5  # when polling: stat the active trace every tick, walk the folders less
_SETTLE_S = 0.2  # a trace written less than a second ago is re-read until it stops changing
_NO_TRACES = "no-traces"  # the key of "no trace file matches" among the things said once

_LoadKey = tuple[TraceFile, AnalysisOptions]


class Loader:
    """Loads the session's trace: one load at a time, each in a fresh process."""

    def __init__(self, session: Session, client: Client, analyze: AnalyzeFn) -> None:
        self._session = session
        self._client = client
        self._analyze = analyze
        self._wake = asyncio.Event()
        self._rescan = True
        self._force = False
        self._load_task: asyncio.Task[None] | None = None
        self._background: list[asyncio.Task[None]] = []
        # Versions of traces that failed, with these options: not tried again until they change.
        self._failed: dict[_LoadKey, str] = {}
        self._told: set[str] = set()  # messages the user sees once per server

    # --- what handlers ask for -----------------------------------------------------------------

    def request(self, rescan: bool = False, force: bool = False, restart: bool = False) -> None:
        """Load again soon. ``rescan``: list the trace files again; ``force``: even the same
        version; ``restart``: abandon a load in progress (a newer reason won)."""
        self._rescan = self._rescan or rescan
        self._force = self._force or force
        self._wake.set()
        if restart and self._load_task is not None:
            self._load_task.cancel()

    def reload(self) -> None:
        """Load the trace again now, even one that failed as it is."""
        self._failed.clear()
        self.request(rescan=True, force=True, restart=True)

    def start(self) -> None:
        self._background.append(asyncio.ensure_future(self._reload_loop()))
        if not self._session.watching:
            self._background.append(asyncio.ensure_future(self._poll_loop()))

    def stop(self) -> None:
        for task in self._background:
            task.cancel()
        if self._load_task is not None:
            self._load_task.cancel()

    def publish(self) -> None:
        """The settings changed how results look: diagnostics again, hints and lenses refreshed."""
        self._publish_diagnostics()
        self._client.refresh_views()

    # --- the loading loop ----------------------------------------------------------------------

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
        """Load the trace to show, unless it is loaded, or failed, as it is on disk now."""
        session = self._session
        settings = session.settings
        if rescan or not session.candidates:
            session.candidates = await self._discover(settings)
        pin = session.pinned or session.trace_setting()
        options = settings.analysis_options(session.roots()[0])
        active = session.active = self._choose(pin, options)
        if active is None:
            self._show_no_trace(settings)
            return
        self._told.discard(_NO_TRACES)
        active = session.active = await self._settled(stat_trace(active.path) or active)
        key = (active, options)
        loaded = session.snapshot
        if not force and loaded is not None and (loaded.trace, loaded.options) == key:
            return
        if not force and key in self._failed:
            return
        await self._load(active, options, try_next=not pin)

    async def _discover(self, settings: Settings) -> tuple[TraceFile, ...]:
        """The trace files, off the loop; a search cut short by its bound is said once."""
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, discover, self._session.roots(), settings.traces)
        if found.capped and found.capped not in self._told:
            self._told.add(found.capped)
            log.warning("%s", found.capped)
            self._client.show_message(found.capped, t.MessageType.Warning)
        return found.traces

    def _choose(self, pin: str | None, options: AnalysisOptions) -> TraceFile | None:
        """The pinned trace, else the newest that has not failed; says once if the pin is gone."""
        candidates = self._session.candidates
        active, missing = choose_active(candidates, pin)
        if active is not None and (missing or not pin):
            # Not chosen by name: skip files that already failed (a JSON file that matches the
            # globs but is no trace) for the newest one that has not.
            active = next((c for c in candidates if (c, options) not in self._failed), active)
        if missing and missing not in self._told:
            self._told.add(missing)
            message = messages.pin_missing_message(missing)
            self._client.show_message(message, t.MessageType.Warning)
        return active

    def _show_no_trace(self, settings: Settings) -> None:
        if _NO_TRACES not in self._told:
            self._told.add(_NO_TRACES)
            log.info(messages.no_traces_message(settings.traces))
        if self._session.snapshot is not None:
            self._session.snapshot = None
            self.publish()
            self._send_status()

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

    async def _load(self, trace: TraceFile, options: AnalysisOptions, try_next: bool) -> None:
        """Analyze ``trace`` with progress; on failure keep the last good snapshot and, if the
        trace was not chosen by name, try the next newest one."""
        session, path = self._session, trace.path
        session.loading = path
        self._send_status()
        token = await self._client.begin_progress(messages.progress_begin(path))
        try:
            report = await AnalysisJob(self._analyze, path, options).run(
                lambda done, total: self._report_progress(token, path, done, total)
            )
            session.loading = None
            session.last_error = None
            session.snapshot = build_snapshot(trace, options, report)
            await self._after_load(session.snapshot)
        except AnalysisFailed as failure:
            self._load_failed((trace, options), str(failure), failure.bad_input, failure.detail)
            self._end_progress(token, "failed")
            if try_next and any((c, options) not in self._failed for c in session.candidates):
                self.request(rescan=True)
        except asyncio.CancelledError:
            # A newer reason won (the trace changed or went): not "loading" it any more.
            session.loading = None
            self._end_progress(token, "cancelled")
            self._send_status()
            raise
        except Exception as error:  # a bug of ours: say so once, keep serving
            detail = traceback.format_exc()
            self._load_failed((trace, options), f"{type(error).__name__}: {error}", False, detail)
            self._end_progress(token, "failed")
        else:
            self._end_progress(token, messages.loaded_summary(path, report))
        finally:
            session.loading = None

    async def _after_load(self, snapshot: Snapshot) -> None:
        """Tell the client: log, diagnostics, hints ready, refresh. Then the progress may end."""
        report = snapshot.report
        log.info("loaded %s", messages.loaded_summary(snapshot.trace.path, report))
        for note in messages.report_notes(report):
            log.info("%s", note)
        self._tell_unmapped(snapshot)
        await self._session.read_closed()
        self._publish_diagnostics()
        self._session.prepare_hints()
        self._client.refresh_views()
        self._send_status()

    def _load_failed(self, key: _LoadKey, error: str, bad_input: bool, detail: str) -> None:
        """One message per broken version of a trace; the server keeps the last good result."""
        self._failed[key] = error
        session = self._session
        session.loading = None
        session.last_error = messages.load_failed(key[0].path, error, bad_input)
        if detail:
            log.error("%s\n%s", session.last_error, detail)
        else:
            log.warning("%s", session.last_error)
        kind = t.MessageType.Warning if bad_input else t.MessageType.Error
        self._client.show_message(session.last_error, kind)
        self._send_status()

    def _tell_unmapped(self, snapshot: Snapshot) -> None:
        """Source files of the trace that are not in the workspace: in the log, or (when none
        is) once as a message, since then the editor shows nothing at all."""
        if not snapshot.unmapped_files:
            return
        mapped_any = bool(snapshot.lines_by_path)
        path = snapshot.trace.path
        message = messages.unmapped_message(path, snapshot.unmapped_files, mapped_any)
        if mapped_any:
            log.info("%s", message)
        elif message not in self._told:
            self._told.add(message)
            self._client.show_message(message, t.MessageType.Warning)

    # --- polling -------------------------------------------------------------------------------

    async def _poll_loop(self) -> None:
        """For clients without file watching: notice new, changed and deleted traces."""
        ticks = 0
        session = self._session
        while True:
            await asyncio.sleep(session.settings.poll_interval)
            ticks += 1
            try:
                active = session.active
                if active is not None and stat_trace(active.path) != active:
                    self.request(rescan=True, restart=session.loading == active.path)
                    continue
                if ticks % _RESCAN_EVERY_TICKS == 0 and self._load_task is None:
                    found = await self._discover(session.settings)
                    if found != session.candidates:
                        session.candidates = found
                        self.request()
            except Exception:
                log.exception("checking the trace files failed; trying again")

    # --- telling the client --------------------------------------------------------------------

    def _publish_diagnostics(self) -> None:
        for params in self._session.diagnostics_to_publish():
            self._client.publish(params)

    def _send_status(self) -> None:
        self._client.send_status(self._session.status())

    def _report_progress(self, token: str | None, path: str, done: int, total: int) -> None:
        if token is not None:
            self._client.report_progress(token, messages.progress_report(path, done, total))

    def _end_progress(self, token: str | None, message: str) -> None:
        if token is not None:
            self._client.end_progress(token, messages.progress_end(message))
