"""The real server, except that analyzing a trace never ends: for what happens during a load
(an ``exit``, a kill, the trace deleted). Run as a script: ``python tests/server/slow_server.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Report


def endless_analyze(
    path: str, options: AnalysisOptions, progress: Callable[[int, int], None]
) -> Report:
    while True:
        time.sleep(1)


if __name__ == "__main__":
    from brrr_trace.server import serve

    sys.exit(serve(analyze=endless_analyze))
