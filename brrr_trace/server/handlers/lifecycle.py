"""Starting and stopping: settings from ``initialize``, then watching and loading from
``initialized``; ``shutdown`` stops the background work, ``exit`` everything."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types as t

from brrr_trace import __version__
from brrr_trace.server import messages
from brrr_trace.server.handlers.workspace import pull_settings, show_setting_problems
from brrr_trace.server.language_server import BrrrServer

log = logging.getLogger("brrr_trace.server")


def initialize(ls: BrrrServer, params: t.InitializeParams) -> None:
    """Take the settings the client sends along (``initializationOptions``)."""
    if params.initialization_options is not None:
        ls.session.apply_settings(params.initialization_options, "initializationOptions")


async def initialized(ls: BrrrServer, params: t.InitializedParams) -> None:
    """Log to the client from now on, pull the settings, watch the traces, start loading."""
    ls.client_log.connected(asyncio.get_running_loop())
    session = ls.session
    await pull_settings(ls)
    show_setting_problems(ls)
    session.watching = await ls.client.watch_files(session.settings.traces, session.roots())
    poll_s = session.settings.poll_interval
    log.info("%s", messages.serving_message(__version__, session.roots(), session.watching, poll_s))
    ls.loader.start()
    ls.loader.request(rescan=True)


def shutdown(ls: BrrrServer, *args: Any) -> None:
    """Stop loading and polling."""
    ls.shut_down = True
    ls.loader.stop()


def exit_server(ls: BrrrServer, *args: Any) -> None:
    """Stop everything and say nothing more (pygls closes stdout next): exit code 0 after
    ``shutdown``, 1 without it (the LSP specification)."""
    ls.exit_code = 0 if ls.shut_down else 1
    ls.client.close()
    ls.loader.stop()


def skipped_message(ls: BrrrServer, *args: Any) -> None:
    """A message too large to read was skipped (``framing.py`` said so in the log)."""
