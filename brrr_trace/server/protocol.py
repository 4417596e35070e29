"""pygls' protocol, where brrr-trace needs the LSP specification's answer instead of its own.

pygls drops every request that comes after ``shutdown`` without an answer, so a client waiting
for one waits forever; the specification says to answer it with the error InvalidRequest. This
subclass answers so, through pygls' private ``_shutdown`` and ``_send_response`` (README,
Security notes: pinned to the pygls version in ``pyproject.toml``).
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import RPCRequest

SHUT_DOWN = "the server is shut down: only exit is accepted"


class BrrrProtocol(LanguageServerProtocol):
    def handle_message(self, message: Any) -> None:
        if (
            self._shutdown
            and isinstance(message, RPCRequest)
            and getattr(message, "method", None) != t.EXIT
        ):
            error = JsonRpcInvalidRequest(SHUT_DOWN).to_response_error()
            self._send_response(message.id, error=error)
            return
        super().handle_message(message)
