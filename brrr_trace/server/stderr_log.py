"""Where the server's records go first: stderr (``logging.py`` adds the client's log later).

Apart from ``logging.py`` because ``serve`` sets this up before anything of pygls or
lsprotocol is imported (``handshake.py``), and that module needs lsprotocol's types.
"""

from __future__ import annotations

import logging
import sys

_FORMAT = "brrr-trace %(levelname)s %(name)s: %(message)s"


def configure_stderr(verbose: int = 0) -> None:
    """Send ``brrr_trace`` records (INFO and up; DEBUG with -v) and pygls warnings to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    package = logging.getLogger("brrr_trace")
    package.setLevel(logging.DEBUG if verbose else logging.INFO)
    package.addHandler(handler)
    package.propagate = False
    pygls = logging.getLogger("pygls")
    pygls.setLevel(logging.DEBUG if verbose > 1 else logging.WARNING)
    pygls.addHandler(handler)
    pygls.propagate = False
