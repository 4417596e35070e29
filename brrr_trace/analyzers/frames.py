"""Python frame names: ``file.py(LINE): func`` parsed, and told apart into user code or not."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np

from brrr_trace.options import AnalysisOptions

_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
_STDLIB = frozenset(sys.stdlib_module_names) - {"this", "antigravity"}


@dataclass(frozen=True)
class FrameName:
    file: str
    line: int
    function: str


def parse_frame(name: str) -> FrameName | None:
    match = _FRAME.match(name)
    if match is None:
        return None
    return FrameName(match["file"], int(match["line"]), match["func"])


def _is_stdlib(file: str) -> bool:
    if "/lib/python3" in file and "-packages/" not in file:
        return True
    head = file.split("/", 1)[0]
    module = head[:-3] if head.endswith(".py") else head
    return module in _STDLIB


def is_user_file(file: str, options: AnalysisOptions) -> bool:
    """A file the user wrote, as far as the trace can tell: not torch, not stdlib, not builtins."""
    if any(fnmatchcase(file, pattern) for pattern in options.included_files):
        return True
    if any(fnmatchcase(file, pattern) for pattern in options.excluded_files):
        return False
    return not _is_stdlib(file)


def user_frame_mask(
    strings: tuple[str, ...], names: np.ndarray, options: AnalysisOptions
) -> np.ndarray:
    """For frame rows (string ids), whether each one is a user frame; each name is parsed once."""
    unique = np.unique(names)
    verdict = np.zeros(len(strings), dtype=bool)
    for sid in unique:
        frame = parse_frame(strings[sid])
        verdict[sid] = frame is not None and is_user_file(frame.file, options)
    return verdict[names] if len(names) else np.zeros(0, dtype=bool)


def parse_call_stack(stack: str, options: AnalysisOptions) -> FrameName | None:
    """The innermost user frame of a legacy ``Call stack`` (innermost first, ``;``-separated)."""
    for entry in stack.split(";"):
        frame = parse_frame(entry.strip())
        if frame is not None and is_user_file(frame.file, options):
            return frame
    return None
