"""brrr-trace: where your GPU time goes, line by line, and why."""

# The one place the version is written: pyproject.toml reads it (setuptools dynamic attr).
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # `brrr_trace.record(...)` without importing torch at `import brrr_trace`: the record module
    # is callable (it forwards to record.record).
    if name == "record":
        import importlib

        return importlib.import_module("brrr_trace.record")
    raise AttributeError(f"module 'brrr_trace' has no attribute {name!r}")
