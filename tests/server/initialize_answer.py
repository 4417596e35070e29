"""pygls' own answer to ``initialize``, computed by the real server (every handler registered),
in this process: what ``brrr_trace/server/initialize_result.json`` must match.

``python tests/server/initialize_answer.py`` rewrites that file from it (after a handler or a
command is added, or pygls changes); ``test_server_handshake.py`` fails until it matches.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def pygls_frame(request: dict[str, Any]) -> bytes:
    """What pygls writes in answer to this ``initialize`` request, header and body (no trace
    is loaded: ``initialized`` never comes)."""
    from brrr_trace.server.app import create_server

    server = create_server()
    written: list[bytes] = []

    class Capture:
        def write(self, data: bytes) -> None:
            written.append(data)

        def close(self) -> None:
            pass

    server.protocol.set_writer(Capture())
    try:
        message = json.loads(json.dumps(request), object_hook=server.protocol.structure_message)
        server.protocol.handle_message(message)
    finally:
        logging.getLogger("brrr_trace").removeHandler(server.client_log)
    (frame,) = written
    return frame


def pygls_answer(request: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(pygls_frame(request).partition(b"\r\n\r\n")[2])
    return answer


def initialize_request(capabilities: Any = None, msg_id: Any = 1, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "initialize",
        "params": {"processId": None, "capabilities": capabilities or {}, **params},
    }


def main() -> int:
    from brrr_trace.server.handshake import RESULT_FILE

    result = pygls_answer(initialize_request(rootUri=ROOT.as_uri()))["result"]
    del result["serverInfo"]["version"]  # brrr_trace.__version__, filled in when answering
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULT_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
