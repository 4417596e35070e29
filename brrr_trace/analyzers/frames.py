"""Python frame names: ``file.py(LINE): func`` parsed, and told apart into user code or not."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

import numpy as np

from brrr_trace.arraysets import distinct
from brrr_trace.options import AnalysisOptions

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_STDLIB = frozenset(sys.stdlib_module_names) - {"this", "antigravity"}


@dataclass(frozen=True)
class FrameName:
    file: str
    line: int
    function: str


@lru_cache(maxsize=1 << 16)
def parse_frame(name: str) -> FrameName | None:
    # Cached: the analyzers parse the same few thousand names again and again.
    match = _FRAME.match(name)
    if match is None:
        return None
    return FrameName(match["file"], int(match["line"]), match["func"])


# Installed packages and interpreters, on any OS: site-packages, dist-packages, a Python's lib/.
_LIBRARY_PATH = re.compile(
    r"(?:^|/)(?:site|dist)-packages/|(?:^|/)lib/python\d[^/]*/|(?:^|/)python\d+/lib/",
    re.IGNORECASE,
)


def is_library_path(file: str) -> bool:
    if _LIBRARY_PATH.search(file):
        return True
    head = file.split("/", 1)[0]
    module = head[:-3] if head.endswith(".py") else head
    return module in _STDLIB


def is_user_file(
    file: str, options: AnalysisOptions, local: Callable[[str], bool] | None = None
) -> bool:
    """A file the user wrote: not torch, the standard library, installed packages or builtins.

    ``local`` says whether a trace path maps to a file under the source root; when given, a file
    that does not map is library code (installed packages show up with paths shortened to the
    package, ``tinyvit/model.py``, so the path alone cannot tell).
    """
    file = file.replace("\\", "/")
    if any(fnmatchcase(file, pattern) for pattern in options.included_files):
        return True
    if any(fnmatchcase(file, pattern) for pattern in options.excluded_files):
        return False
    if is_library_path(file):
        return False
    return local(file) if local is not None else True


def user_frame_mask(
    strings: tuple[str, ...],
    names: np.ndarray,
    options: AnalysisOptions,
    local: Callable[[str], bool] | None = None,
) -> np.ndarray:
    """For frame rows (string ids), whether each one is a user frame; each name is parsed once."""
    unique = distinct(names)
    verdict = np.zeros(len(strings), dtype=bool)
    for sid in unique:
        frame = parse_frame(strings[sid])
        verdict[sid] = frame is not None and is_user_file(frame.file, options, local)
    return verdict[names] if len(names) else np.zeros(0, dtype=bool)


def parse_call_stack(
    stack: str, options: AnalysisOptions, local: Callable[[str], bool] | None = None
) -> FrameName | None:
    """The innermost user frame of a legacy ``Call stack`` (innermost first, ``;``-separated)."""
    for entry in stack.split(";"):
        frame = parse_frame(entry.strip())
        if frame is not None and is_user_file(frame.file, options, local):
            return frame
    return None
