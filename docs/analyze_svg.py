"""Regenerate docs/analyze.svg: `brrr-trace analyze` on the bundled sample trace, in colour.

python docs/analyze_svg.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))


def main() -> int:
    from rich.console import Console
    from rich.text import Text

    from brrr_trace.cli import sample_trace
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.pipeline import analyze
    from brrr_trace.render import text

    # The path as a user in a checkout would type it, not this machine's.
    trace = sample_trace().relative_to(DOCS.parent)
    os.chdir(DOCS.parent)
    report = analyze(trace, AnalysisOptions(source_root=str(trace.parent)))
    shown = text.render(report, top=8, color=True, width=120)
    console = Console(record=True, width=120, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(Text.from_ansi(shown))
    (DOCS / "analyze.svg").write_text(console.export_svg(title="brrr-trace analyze"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
