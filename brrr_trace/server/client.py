"""The editor as the server talks to it: what it is sent unasked, and what it is asked.

Each message goes only where the client said it can take it (its capabilities); a request to the
client that fails or times out is logged and answered as "no", never raised into a handler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from brrr_trace.server.names import STATUS_NOTIFICATION

log = logging.getLogger("brrr_trace.server")

_ANSWER_WITHIN_S = 5


class Client:
    """Sends to the client of one pygls server and asks it things."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server
        self._progress_tokens = 0
        self._closed = False

    def close(self) -> None:
        """Send nothing from now on: the client said ``exit`` and stdout is about to close."""
        self._closed = True

    # --- sent unasked --------------------------------------------------------------------------

    def show_message(self, message: str, kind: t.MessageType) -> None:
        if self._closed:
            return
        self._server.window_show_message(t.ShowMessageParams(type=kind, message=message))

    def publish(self, params: t.PublishDiagnosticsParams) -> None:
        if self._closed:
            return
        self._server.text_document_publish_diagnostics(params)

    def send_status(self, status: dict[str, Any]) -> None:
        if self._closed:
            return
        self._server.protocol.notify(STATUS_NOTIFICATION, status)

    def refresh_views(self) -> None:
        """Ask the client to re-request hints and lenses (if it can be asked)."""
        if self._closed:
            return
        workspace = self._server.client_capabilities.workspace
        if workspace and workspace.inlay_hint and workspace.inlay_hint.refresh_support:
            _ignore_answer(self._server.workspace_inlay_hint_refresh(None))
        if workspace and workspace.code_lens and workspace.code_lens.refresh_support:
            _ignore_answer(self._server.workspace_code_lens_refresh(None))

    # --- progress ------------------------------------------------------------------------------

    async def begin_progress(self, begin: t.WorkDoneProgressBegin) -> str | None:
        """A new ``$/progress`` token, begun; None when the client shows no progress."""
        window = self._server.client_capabilities.window
        if self._closed or not (window and window.work_done_progress):
            return None
        self._progress_tokens += 1
        token = f"brrr-trace/load/{self._progress_tokens}"
        progress = self._server.work_done_progress
        try:
            await asyncio.wait_for(progress.create_async(token), timeout=_ANSWER_WITHIN_S)
        except Exception as error:
            log.debug("window/workDoneProgress/create failed: %s", error)
            return None
        progress.begin(token, begin)
        return token

    def report_progress(self, token: str, report: t.WorkDoneProgressReport) -> None:
        if self._closed:
            return
        self._server.work_done_progress.report(token, report)

    def end_progress(self, token: str, end: t.WorkDoneProgressEnd) -> None:
        if self._closed:
            return
        self._server.work_done_progress.end(token, end)

    # --- asked ---------------------------------------------------------------------------------

    async def configuration(self, section: str) -> dict[str, Any] | None:
        """The client's settings ``section`` (``workspace/configuration``); None if it has none."""
        workspace = self._server.client_capabilities.workspace
        if not (workspace and workspace.configuration):
            return None
        try:
            answer = await asyncio.wait_for(
                self._server.workspace_configuration_async(
                    t.ConfigurationParams(items=[t.ConfigurationItem(section=section)])
                ),
                timeout=_ANSWER_WITHIN_S,
            )
        except Exception as error:
            log.debug("workspace/configuration failed: %s", error)
            return None
        found = answer[0] if answer else None
        return found if isinstance(found, dict) and found else None

    async def watch_files(self, patterns: Sequence[str], roots: Sequence[str]) -> bool:
        """Have the client report changes to files matching ``patterns``; False: poll them."""
        workspace = self._server.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if not (watched and watched.dynamic_registration):
            return False
        watchers = file_watchers(patterns, roots, bool(watched.relative_pattern_support))
        registration = t.Registration(
            id="brrr-trace-traces",
            method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=t.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await asyncio.wait_for(
                self._server.client_register_capability_async(
                    t.RegistrationParams(registrations=[registration])
                ),
                timeout=_ANSWER_WITHIN_S,
            )
        except Exception as error:
            log.info("the client did not take the file watchers (%s); polling instead", error)
            return False
        return True

    async def choose(self, question: str, titles: Sequence[str]) -> str | None:
        """The title the user picked among buttons (``window/showMessageRequest``), if any."""
        window = self._server.client_capabilities.window
        if window is None or window.show_message is None:
            return None
        try:
            answer = await self._server.window_show_message_request_async(
                t.ShowMessageRequestParams(
                    type=t.MessageType.Info,
                    message=question,
                    actions=[t.MessageActionItem(title=title) for title in titles],
                )
            )
        except Exception as error:
            log.debug("window/showMessageRequest failed: %s", error)
            return None
        return answer.title if answer is not None else None


def file_watchers(
    patterns: Sequence[str], roots: Sequence[str], relative: bool
) -> list[t.FileSystemWatcher]:
    """Watchers for the ``traces`` globs (all relative: ``settings`` refuses the others): one per
    workspace folder where the client takes relative patterns, else a ``**/`` glob."""
    watchers = []
    for pattern in patterns:
        if relative:
            for root in roots:
                base = from_fs_path(root) or Path(root).as_uri()
                relative_pattern = t.RelativePattern(base_uri=base, pattern=pattern)
                watchers.append(t.FileSystemWatcher(glob_pattern=relative_pattern))
        else:
            glob = pattern if pattern.startswith("**/") else f"**/{pattern}"
            watchers.append(t.FileSystemWatcher(glob_pattern=glob))
    return watchers


def _ignore_answer(future: Any) -> None:
    """Log, and otherwise drop, a refusal of a refresh request."""

    def done(f: Any) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.debug("the client refused a refresh: %s", f.exception())

    if hasattr(future, "add_done_callback"):
        future.add_done_callback(done)
