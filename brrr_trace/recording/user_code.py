"""Whose code a frame runs: the user's, brrr-trace's own, or a library's.

The line mode annotates only torch calls made from the user's code, and the runner trims
brrr-trace's frames off the top of a user's traceback. brrr-trace's own code is known by
identity: the real paths of the package's modules, resolved once (its ``data/`` folder holds
example workloads, which are user code like any other). Libraries are known by where they live
(torch, the standard library, site-packages, inductor's cache of generated code).
"""

from __future__ import annotations

import contextlib
import functools
import os
import site
import sysconfig
from pathlib import Path
from types import CodeType
from typing import Any

import brrr_trace

_PACKAGE = Path(brrr_trace.__file__).resolve().parent
_EXAMPLES = _PACKAGE / "data"
_EXAMPLES_PREFIX = os.path.normcase(os.path.join(str(_EXAMPLES), ""))


def _path_forms(filename: str) -> tuple[str, str]:
    """The file's absolute and real path, case-normalized: the forms compared below."""
    return (
        os.path.normcase(os.path.abspath(filename)),
        os.path.normcase(os.path.realpath(filename)),
    )


@functools.cache
def own_files() -> frozenset[str]:
    """brrr-trace's modules (``data/`` excluded), in the forms of :func:`_path_forms`."""
    found: set[str] = set()
    for path in _PACKAGE.rglob("*.py"):
        if _EXAMPLES not in path.parents:
            found.update(_path_forms(str(path)))
    return frozenset(found)


def is_own_file(filename: str) -> bool:
    """Is ``filename`` (a code object's ``co_filename``) one of brrr-trace's modules?"""
    if not filename or filename.startswith("<"):
        return False
    ours = own_files()
    return any(form in ours for form in _path_forms(filename))


def _library_prefixes(torch: Any) -> tuple[str, ...]:
    roots = [os.path.dirname(torch.__file__)]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        with contextlib.suppress(KeyError):
            roots.append(sysconfig.get_paths()[key])
    roots.append(os.path.dirname(os.__file__))
    with contextlib.suppress(Exception):
        roots.extend(site.getsitepackages())
    with contextlib.suppress(Exception):
        roots.append(site.getusersitepackages())
    roots.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))  # inductor's generated code
    prefixes = set()
    for root in roots:
        if root:
            for form in _path_forms(root):
                prefixes.add(form.rstrip(os.sep) + os.sep)
    return tuple(sorted(prefixes))


class UserCode:
    """Is a code object the user's: a real file that is not brrr-trace's nor a library's?
    ``cache`` holds the answers per code object (the line mode reads it directly)."""

    def __init__(self, torch: Any) -> None:
        self.cache: dict[CodeType, bool] = {}
        self.prefixes = _library_prefixes(torch)
        # Resolved here, before recording starts: classify() runs inside the profile, where
        # every Python call it makes is one more event to hide.
        self._own = own_files()

    def classify(self, code: CodeType) -> bool:
        self.cache[code] = user = self._is_user(code.co_filename)
        return user

    def _is_user(self, filename: str) -> bool:
        if not filename or filename.startswith("<") or not os.path.isfile(filename):
            return False
        for variant in (os.path.abspath(filename), os.path.realpath(filename)):
            path = os.path.normcase(variant)
            if path.startswith(_EXAMPLES_PREFIX):
                return True  # brrr_trace/data/: example workloads
            if path in self._own:
                return False
            if path.startswith(self.prefixes):
                return False
            parts = path.split(os.sep)
            if "site-packages" in parts or "dist-packages" in parts:
                return False
            if any(part.startswith("torchinductor_") for part in parts):
                return False  # inductor's generated code: /tmp/torchinductor_<user>/…
        return True
