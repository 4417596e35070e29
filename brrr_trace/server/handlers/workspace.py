"""Notifications about the workspace: settings changed, trace files changed, folders changed."""

from __future__ import annotations

import logging

from lsprotocol import types as t

from brrr_trace.server.discovery import norm_path, path_of_uri
from brrr_trace.server.language_server import BrrrServer
from brrr_trace.server.settings import SECTION, parse_settings

log = logging.getLogger("brrr_trace.server")


async def did_change_configuration(ls: BrrrServer, params: t.DidChangeConfigurationParams) -> None:
    """Take the new settings (sent, or else pulled); load again only if the load depends on them."""
    session = ls.session
    before = session.load_inputs()
    if parse_settings(params.settings, session.settings).found:
        changed = session.apply_settings(params.settings, "workspace/didChangeConfiguration")
    else:
        changed = await pull_settings(ls)
    show_setting_problems(ls)
    if not changed:
        log.debug("workspace/didChangeConfiguration: the settings are the same")
    elif session.load_inputs() != before:
        ls.loader.request(rescan=True, restart=True)
    else:
        ls.loader.publish()


def did_change_watched_files(ls: BrrrServer, params: t.DidChangeWatchedFilesParams) -> None:
    """Look at the trace files again; a change to the one loading restarts its load."""
    loading = ls.session.loading and norm_path(ls.session.loading)
    touches_load = any(path_of_uri(change.uri) == loading for change in params.changes)
    ls.loader.request(rescan=True, restart=bool(touches_load))


def did_change_folders(ls: BrrrServer, params: t.DidChangeWorkspaceFoldersParams) -> None:
    """Look for trace files in the new set of folders."""
    ls.loader.request(rescan=True)


async def pull_settings(ls: BrrrServer) -> bool:
    """Ask the client for the ``brrr-trace`` settings; True when they changed."""
    section = await ls.client.configuration(SECTION)
    if section is None:
        return False
    return ls.session.apply_settings({SECTION: section}, "workspace/configuration")


def show_setting_problems(ls: BrrrServer) -> None:
    """Show the messages about bad settings not shown yet."""
    for message in ls.session.take_setting_problems():
        ls.client.show_message(message, t.MessageType.Warning)
