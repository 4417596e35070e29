"""Logs go to stderr (``stderr_log.py``) and to the client's log (``window/logMessage``); never
to stdout.

Records logged before the client is ready are kept and sent once ``initialized`` arrives. pygls'
own records (it logs every message it sends at INFO) stay on stderr, which also keeps sending a
log message from logging another one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from lsprotocol import types as t

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

_LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO}
_MESSAGE_TYPE = {
    logging.CRITICAL: t.MessageType.Error,
    logging.ERROR: t.MessageType.Error,
    logging.WARNING: t.MessageType.Warning,
    logging.INFO: t.MessageType.Info,
}


class ClientLogHandler(logging.Handler):
    """Forwards ``brrr_trace`` records to ``window/logMessage``, from any thread."""

    def __init__(self, server: LanguageServer, buffer_size: int = 500) -> None:
        super().__init__(logging.DEBUG)
        self.server = server
        self.setFormatter(logging.Formatter("%(message)s"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buffer: list[t.LogMessageParams] = []
        self._buffer_size = buffer_size
        self._lock = threading.Lock()
        self.threshold = logging.INFO

    def set_level_name(self, name: str) -> None:
        self.threshold = _LEVELS.get(name, logging.DEBUG)

    def connected(self, loop: asyncio.AbstractEventLoop) -> None:
        """The client is ready: send what was kept, and send from now on."""
        with self._lock:
            self._loop = loop
            buffered, self._buffer = self._buffer, []
        for params in buffered:
            self._send(params)

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("pygls") or record.levelno < self.threshold:
            return
        try:
            message = self.format(record)
        except Exception:
            return
        params = t.LogMessageParams(
            type=_MESSAGE_TYPE.get(record.levelno, t.MessageType.Log), message=message
        )
        with self._lock:
            loop = self._loop
            if loop is None:
                if len(self._buffer) < self._buffer_size:
                    self._buffer.append(params)
                return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._send(params)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._send, params)

    def _send(self, params: t.LogMessageParams) -> None:
        with contextlib.suppress(Exception):  # the client is gone; stderr still has the record
            self.server.window_log_message(params)
