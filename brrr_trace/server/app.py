"""The language server: a ``BrrrServer`` with every handler of ``handlers/`` registered.

Threads of control, all on one asyncio loop: request handlers answer from the session's current
snapshot and never wait for a load; the loader (``scheduling.py``) loads in the background, in a
child process, and swaps the snapshot in.
"""

from __future__ import annotations

import logging

from brrr_trace.server.analysis import AnalyzeFn, default_analyze
from brrr_trace.server.handlers import COMMANDS, FEATURES
from brrr_trace.server.language_server import BrrrServer


def create_server(analyze: AnalyzeFn = default_analyze) -> BrrrServer:
    """A server with every handler registered. ``analyze`` must be picklable (module level)."""
    server = BrrrServer(analyze)
    logging.getLogger("brrr_trace").addHandler(server.client_log)
    for method, handler, options in FEATURES:
        server.feature(method, options)(handler)
    for command, handler in COMMANDS:
        server.command(command)(handler)
    return server
