"""The real server with code that writes to stdout, in both processes, while a trace loads.

``test_server_stdout.py`` checks that those writes end up on stderr and that stdout still carries
nothing but LSP frames. Run as a script: ``python tests/server/noisy_server.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Report
from brrr_trace.server.analysis import default_analyze


def noisy_analyze(
    path: str, options: AnalysisOptions, progress: Callable[[int, int], None]
) -> Report:
    print("noise from print() in the analysis process")
    os.write(1, b"noise from os.write(1) in the analysis process\n")
    return default_analyze(path, options, progress)


if __name__ == "__main__":
    from brrr_trace.server import messages, serve

    summary = messages.loaded_summary

    def noisy_summary(path: str, report: Report) -> str:
        print("noise from print() in the server process")
        os.write(1, b"noise from os.write(1) in the server process\n")
        return summary(path, report)

    messages.loaded_summary = noisy_summary
    sys.exit(serve(analyze=noisy_analyze))
