"""The real server, except that importing pygls or lsprotocol waits until the file
``$BRRR_TEST_GATE`` exists: what the client gets while neither is imported yet. Run as a script:
``python tests/server/gated_server.py``; it says ``pygls import waits`` on stderr once such an
import has started and is held.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any


class PyglsGate:
    """A finder ahead of the others that holds imports of pygls and lsprotocol until the gate
    opens (then leaves them to the others)."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name in ("pygls", "lsprotocol") and not self.gate.exists():
            sys.stderr.write("pygls import waits\n")
            sys.stderr.flush()
            while not self.gate.exists():
                time.sleep(0.02)
        return None


if __name__ == "__main__":
    sys.meta_path.insert(0, PyglsGate(Path(os.environ["BRRR_TEST_GATE"])))
    from brrr_trace.server import serve

    sys.exit(serve())
