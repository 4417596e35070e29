"""``workspace/executeCommand``: what code lenses and actions run, and the extension's commands."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from lsprotocol import types as t
from pygls.uris import to_fs_path

from brrr_trace.server import convert, messages
from brrr_trace.server.discovery import stat_trace
from brrr_trace.server.language_server import BrrrServer

log = logging.getLogger("brrr_trace.server")


def show_fix(ls: BrrrServer, *args: Any) -> str:
    """Show how to fix a finding (the argument of an explaining code action)."""
    text = convert.fix_explanation(args[0] if args else None)
    ls.client.show_message(text, t.MessageType.Info)
    return text


def show_function(ls: BrrrServer, *args: Any) -> str | None:
    """Show a function's lines with their times (what its code lens runs)."""
    if len(args) < 2 or not isinstance(args[0], str):
        log.debug("showFunction: expected a document URI and a line, got %r", args)
        return None
    view = ls.session.view(args[0], "showFunction")
    if view is None:
        return None
    text = convert.function_text(view.snapshot, view.path, view.index, args[1])
    if text is None:
        log.debug("showFunction: no function is defined on line %s of %s", args[1], view.path)
        return None
    ls.client.show_message(text, t.MessageType.Info)
    return text


async def list_traces(ls: BrrrServer, *args: Any) -> list[dict[str, Any]]:
    """The trace files the server can show, newest first, each with its run (folder) and rank
    (the extension's "Open Trace…" picker). Off the loop: a rank is read from a file's head."""
    return await asyncio.to_thread(ls.session.trace_entries)


def heat(ls: BrrrServer, *args: Any) -> dict[str, Any]:
    """The heat of a document's lines: each line's time over that of its file's hottest line
    (the extension's line backgrounds)."""
    uri = args[0] if args and isinstance(args[0], str) else None
    if uri is None:
        log.debug("heat: expected a document URI, got %r", args)
        return {"uri": None, "lines": []}
    if not ls.session.settings.heat:
        return {"uri": uri, "lines": []}
    view = ls.session.view(uri, "heat")
    if view is None:
        return {"uri": uri, "lines": []}
    return {"uri": uri, "lines": convert.heat(view.snapshot.lines(view.path), view.positions)}


def timeline(ls: BrrrServer, *args: Any) -> dict[str, Any] | None:
    """The loaded trace's drawn timeline, as its script reads it (the extension's timeline
    panel); null while nothing is loaded."""
    snapshot = ls.session.snapshot
    if snapshot is None or snapshot.report.timeline is None:
        return None
    # Here, not at the top: the server starts ~20 ms sooner without the timeline's modules.
    from brrr_trace.analyzers.timeline_data import timeline_data

    return timeline_data(snapshot.report.timeline)


async def select_trace(ls: BrrrServer, *args: Any) -> dict[str, Any] | None:
    """Show one trace from now on: the path given, or the one the user picks from the newest."""
    choice = args[0] if args and isinstance(args[0], str) else await _ask_for_trace(ls)
    if choice is None:
        return None
    if choice.startswith("file:"):
        choice = to_fs_path(choice) or choice
    path = os.path.join(ls.session.roots()[0], os.path.expanduser(choice))
    if stat_trace(path) is None:
        ls.client.show_message(messages.pin_missing_message(path), t.MessageType.Warning)
        return None
    ls.session.pinned = os.path.abspath(path)
    ls.loader.request(rescan=True, restart=True)
    return {"path": ls.session.pinned}


def reload(ls: BrrrServer, *args: Any) -> None:
    """Load the trace again, even one that failed."""
    ls.loader.reload()


def status(ls: BrrrServer, *args: Any) -> dict[str, Any]:
    """What is loaded, loading or broken (the extension's status bar)."""
    return ls.session.status()


async def _ask_for_trace(ls: BrrrServer) -> str | None:
    """No path given: offer the newest traces as buttons of a ``window/showMessageRequest``."""
    session = ls.session
    if not session.candidates:
        return None
    entries = [messages.trace_entry(c, session.is_active(c)) for c in session.candidates[:10]]
    path_of = {entry["name"]: entry["path"] for entry in entries}
    title = await ls.client.choose(messages.WHICH_TRACE, list(path_of))
    return path_of.get(title) if title is not None else None
