"""brrr-trace's own functions that run on the user's stack, and how to know them in the profile.

The line mode's ``__torch_function__`` and the optimizer step wrapper sit between the user's code
and what it calls; the profiler records them like any Python call. The export drops their events
(and their plumbing) so that the trace shows the user's call going straight to its callee.

A frame is one of them by identity: the profiler's frame state must name the function's own code
object (its ``co_filename``, ``co_name`` and ``co_firstlineno``). torch shortens ``co_filename``
by the longest ``sys.path`` or site prefix, so the reported file is the real one or a tail of it
that starts at a path separator.
"""

from __future__ import annotations

import dis
from collections.abc import Iterable
from dataclasses import dataclass
from types import CodeType
from typing import Any


def call_ex_line(code: CodeType) -> int:
    """The line of the one ``func(*args, **kwargs)`` in ``code``."""
    line = 0
    for instr in dis.get_instructions(code):
        positions = getattr(instr, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        elif isinstance(instr.starts_line, int) and not isinstance(instr.starts_line, bool):
            line = instr.starts_line
        if instr.opname == "CALL_FUNCTION_EX":
            return line
    raise RuntimeError(f"brrr-trace: no call with *args in {code.co_name}")


def _same_file(reported: str, real: str) -> bool:
    reported, real = reported.replace("\\", "/"), real.replace("\\", "/")
    return bool(reported) and (reported == real or real.endswith("/" + reported))


@dataclass(frozen=True)
class HiddenFrame:
    """One of brrr-trace's functions, as the profiler reports it.

    ``call_line``: the line of the one call it passes on (the user's call it stands in for), or
    ``None`` when all it calls is plumbing. ``keep_callee``: that callee is what the user called
    (``optimizer.step``), kept and re-attached to the user's line; otherwise the callee repeats
    the user's own call event (the torch function) and is dropped too.
    """

    file: str
    function: str
    def_line: int
    call_line: int | None
    keep_callee: bool

    @classmethod
    def passing_call(cls, code: CodeType, *, keep_callee: bool) -> HiddenFrame:
        """A function whose one ``inner(*args, **kwargs)`` call stands in for the user's call."""
        return cls(
            code.co_filename, code.co_name, code.co_firstlineno, call_ex_line(code), keep_callee
        )

    @classmethod
    def plumbing(cls, code: CodeType) -> HiddenFrame:
        """A function that only does brrr-trace's bookkeeping: everything under it is hidden."""
        return cls(code.co_filename, code.co_name, code.co_firstlineno, None, False)

    @property
    def event_name_tail(self) -> str:
        """How the profiler's event name for a call of this function ends (after the file)."""
        return f"({self.def_line}): {self.function}"

    def is_callee(self, callsite: Any) -> bool:
        """Is the profiler's callsite frame state (the function called) this function?"""
        try:
            return (
                callsite.line_number == self.def_line
                and callsite.function_name == self.function
                and _same_file(callsite.file_name, self.file)
            )
        except UnicodeDecodeError:  # torch can hand out undecodable names of freed code objects
            return False

    def passes_on(self, caller: Any) -> bool:
        """Is the profiler's caller frame state this function, at the call it passes on?"""
        if self.call_line is None:
            return False
        try:
            return (
                caller.line_number == self.call_line
                and caller.function_name == self.function
                and _same_file(caller.file_name, self.file)
            )
        except UnicodeDecodeError:
            return False


class HiddenFrames:
    """The hidden functions of one recording, looked up per Python call event of the profile."""

    def __init__(self, frames: Iterable[HiddenFrame]) -> None:
        self.frames = tuple(frames)
        self._tails = tuple(frame.event_name_tail for frame in self.frames)

    def of_call(self, event_name: str, fields: Any) -> HiddenFrame | None:
        """The hidden function a Python call event (its name and ``extra_fields``) calls."""
        # The name test is only a cheap filter (most events are not ours); the callsite decides.
        if not self._tails or not event_name.endswith(self._tails):
            return None
        callsite = fields.callsite
        return next((frame for frame in self.frames if frame.is_callee(callsite)), None)
