"""One module-level function per LSP notification, request and command; ``app`` registers them.

A handler takes the session's state (``session.py``), asks ``convert`` for the answer, and
leaves loading to the loader (``scheduling.py``). The tables below are the whole protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsprotocol import types as t

from brrr_trace.server import names
from brrr_trace.server.handlers import commands, documents, lifecycle, requests, workspace

# (method, handler, options): in the order pygls is told about them.
FEATURES: tuple[tuple[str, Callable[..., Any], Any], ...] = (
    (t.INITIALIZE, lifecycle.initialize, None),
    (t.INITIALIZED, lifecycle.initialized, None),
    (t.SHUTDOWN, lifecycle.shutdown, None),
    (t.EXIT, lifecycle.exit_server, None),
    (names.SKIPPED_MESSAGE, lifecycle.skipped_message, None),
    (t.WORKSPACE_DID_CHANGE_CONFIGURATION, workspace.did_change_configuration, None),
    (t.WORKSPACE_DID_CHANGE_WATCHED_FILES, workspace.did_change_watched_files, None),
    (t.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, workspace.did_change_folders, None),
    (t.TEXT_DOCUMENT_DID_OPEN, documents.did_open, None),
    (t.TEXT_DOCUMENT_DID_SAVE, documents.did_save, None),
    (t.TEXT_DOCUMENT_DID_CLOSE, documents.did_close, None),
    (t.TEXT_DOCUMENT_INLAY_HINT, requests.inlay_hint, None),
    (t.TEXT_DOCUMENT_HOVER, requests.hover, None),
    (t.TEXT_DOCUMENT_CODE_LENS, requests.code_lens, None),
    (t.TEXT_DOCUMENT_CODE_ACTION, requests.code_action, requests.QUICK_FIXES),
)

# (command, handler): the order of ``executeCommandProvider.commands``.
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (names.CMD_SHOW_FIX, commands.show_fix),
    (names.CMD_SHOW_FUNCTION, commands.show_function),
    (names.CMD_LIST_TRACES, commands.list_traces),
    (names.CMD_SELECT_TRACE, commands.select_trace),
    (names.CMD_RELOAD, commands.reload),
    (names.CMD_STATUS, commands.status),
    (names.CMD_HEAT, commands.heat),
    (names.CMD_TIMELINE, commands.timeline),
)
