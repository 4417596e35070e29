"""What the recorder tells the user while their program runs: one line on stderr.

A problem of the recorder's own (no call lines, a trace it could not finish) is said, never
raised into the user's program.
"""

from __future__ import annotations

import sys


def warn(message: str) -> None:
    print(f"brrr-trace: {message}", file=sys.stderr)
