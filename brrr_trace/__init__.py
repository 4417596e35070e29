"""brrr-trace: where your GPU time goes, line by line, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brrr_trace import dataclass_code

if TYPE_CHECKING:
    from brrr_trace.api import analyze
    from brrr_trace.recording import record

# The one place the version is written: pyproject.toml reads it (setuptools dynamic attr).
__version__ = "0.1.0"

__all__ = ["__version__", "analyze", "record"]

# Before any module of the package creates its dataclasses.
dataclass_code.install()


def __getattr__(name: str) -> Any:
    # `brrr_trace.record(...)` and `brrr_trace.analyze(...)` are looked up on first use, so
    # that `import brrr_trace` (and with it `brrr-trace analyze`) loads none of the recorder,
    # and importing the package for its version loads no numpy.
    if name == "analyze":
        from brrr_trace.api import analyze

        return analyze
    if name == "record":
        from brrr_trace.recording import record

        return record
    raise AttributeError(f"module 'brrr_trace' has no attribute {name!r}")
