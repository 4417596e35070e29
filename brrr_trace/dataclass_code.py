"""The compiled methods of brrr_trace's dataclasses, kept between runs as a module's bytecode is.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and (when
frozen) ``__setattr__``/``__delattr__`` as source text and compiles it with ``exec`` every time
the class is created: about 70 classes and 400 compiles (~140 k characters) before a 5 MB
trace's ``analyze`` starts, 0.05-0.1 s of its ~0.6 s. A code object depends on its text alone,
so the code compiled once is kept in a file beside the package's bytecode (``__pycache__``, or
under ``PYTHONPYCACHEPREFIX``), looked up by that text and run in its place: the same functions
as a compile gives, loaded instead of compiled.

Only the text ``dataclasses`` hands to ``exec`` for a class of a ``brrr_trace`` module is looked
up; any other (the user's dataclasses, in a ``record`` run) is compiled as before, and not kept.
The file is written as Python writes bytecode: not under ``PYTHONDONTWRITEBYTECODE``,
atomically, silently given up where it cannot be (a read-only install). One that cannot be read
back, or was written by another Python or optimisation level, counts as empty.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import marshal
import os
import sys
from types import CodeType
from typing import Any

# Named as bytecode is: the interpreter's tag, and the optimisation level when there is one.
_FILE = "dataclass-methods.{tag}{opt}.bin"
# A run's texts plus those of earlier runs are kept (other commands create other classes), up
# to this many (the whole package has ~100 dataclasses, ~600 texts; reading 600 takes ~3 ms);
# beyond it, what this run used alone (the rest was left by older code).
_MAX_KEPT = 1_500

_real_exec = exec
_codes: dict[str, CodeType] | None = None
_used: set[str] = set()
_compiled = False
_installed = False


def install() -> None:
    """From now on, the texts of brrr_trace's dataclasses are looked up before compiling."""
    global _installed
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    if not _installed:
        _installed = True
        atexit.register(save)  # the command itself ends with os._exit and calls save first


def _exec(source: Any, namespace: Any = None, local_namespace: Any = None, /) -> None:
    if isinstance(source, str):
        # Compiled here, not by exec: exec would give the text the __future__ flags of the
        # frame calling it, this module's (annotations as strings) instead of dataclasses'.
        source = _code(source) if _ours(namespace) else _compile(source)
    _real_exec(source, namespace, local_namespace)


def _ours(namespace: Any) -> bool:
    name = namespace.get("__name__") if isinstance(namespace, dict) else None
    return isinstance(name, str) and (name == "brrr_trace" or name.startswith("brrr_trace."))


def _code(source: str) -> CodeType:
    global _codes, _compiled
    if _codes is None:
        _codes = _read()
    _used.add(source)
    code = _codes.get(source)
    if code is None:
        code = _compile(source)
        _codes[source] = code
        _compiled = True
    return code


def _compile(source: str) -> CodeType:
    """What exec(source) in dataclasses compiles: with none of this module's __future__ flags."""
    return compile(source, "<string>", "exec", dont_inherit=True)


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER + bytes([sys.flags.optimize])


def _path() -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    from importlib.util import cache_from_source

    package_init = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py")
    try:
        folder = os.path.dirname(cache_from_source(package_init))
    except (NotImplementedError, ValueError):
        return None
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(folder, _FILE.format(tag=tag, opt=opt))


def _read() -> dict[str, CodeType]:
    path = _path()
    if path is None:
        return {}
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    header = _header()
    if not data.startswith(header):
        return {}
    try:
        loaded = marshal.loads(data[len(header) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {
        text: code
        for text, code in loaded.items()
        if isinstance(text, str) and isinstance(code, CodeType)
    }


def save() -> None:
    """Write the file if this process compiled any text it did not hold (once, at the end)."""
    global _compiled
    if not _compiled or _codes is None or sys.dont_write_bytecode:
        return
    _compiled = False
    path = _path()
    if path is None:
        return
    kept = _codes if len(_codes) <= _MAX_KEPT else {t: _codes[t] for t in _used if t in _codes}
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as f:
            f.write(_header() + marshal.dumps(kept))
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
