"""``BrrrServer``: the pygls server holding brrr-trace's parts, as every handler receives it."""

from __future__ import annotations

from pygls.lsp.server import LanguageServer

from brrr_trace import __version__
from brrr_trace.server.analysis import AnalyzeFn, default_analyze
from brrr_trace.server.client import Client
from brrr_trace.server.logging import ClientLogHandler
from brrr_trace.server.protocol import BrrrProtocol
from brrr_trace.server.scheduling import Loader
from brrr_trace.server.session import Session
from brrr_trace.server.settings import Settings


class BrrrServer(LanguageServer):
    """The session (state), the client (what goes out) and the loader, on one pygls server."""

    def __init__(self, analyze: AnalyzeFn = default_analyze) -> None:
        super().__init__("brrr-trace", __version__, protocol_cls=BrrrProtocol)
        self.client_log = ClientLogHandler(self)
        self.session = Session(lambda: self.workspace, self._settings_changed)
        self.client = Client(self)
        self.loader = Loader(self.session, self.client, analyze)
        self.shut_down = False  # ``shutdown`` came
        self.exit_code = 0  # what ``serve`` returns: 1 after an ``exit`` without ``shutdown``

    def _settings_changed(self, settings: Settings) -> None:
        self.client_log.set_level_name(settings.log_level)
