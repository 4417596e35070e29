"""The caller's line of every Python call, from the profiler's in-process event tree.

Kineto's exported JSON names only the callee's ``def`` line; the in-process tree also knows the
caller's frame, hence the line the call was made on. The tree's Python calls are indexed by
(start ns, name), which is how the export finds them again among the exported events.

brrr-trace's hidden frames (``hidden_frames``) and their plumbing are marked to drop; the calls
under them are re-parented to the nearest kept ancestor, and a callee that stands in for the
user's call gets the user's line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brrr_trace.recording.hidden_frames import HiddenFrame, HiddenFrames


class PythonCall:
    """One Python call of the tree, and what the export does with its event."""

    __slots__ = ("caller_line", "drop", "dur_ns", "new_parent", "python_id")

    def __init__(self, caller_line: int, dur_ns: int) -> None:
        self.caller_line = caller_line
        self.dur_ns = dur_ns
        self.drop = False
        # False: keep the exported parent id; None or a call: the new parent (None: a root)
        self.new_parent: PythonCall | bool | None = False
        self.python_id: Any = None  # the exported event's "Python id", once matched


class CallIndex:
    """(start ns, name) -> the tree's Python calls that start then under that name."""

    def __init__(self) -> None:
        self._calls: dict[tuple[int, str], list[PythonCall]] = {}

    def add(self, start_ns: int, name: str, call: PythonCall) -> None:
        same = self._calls.get((start_ns, name))
        if same is None:
            self._calls[start_ns, name] = [call]
        else:
            same.append(call)

    def take(self, start_ns: int, name: str, dur_ns: int | None) -> PythonCall | None:
        """The call an exported event is, removed from the index (each matches once): of
        several that start together under one name, the one closest in duration."""
        candidates = self._calls.get((start_ns, name))
        if not candidates:
            return None
        call = candidates[0]
        if len(candidates) > 1 and dur_ns is not None:
            call = min(candidates, key=lambda c: abs(c.dur_ns - dur_ns))
        candidates.remove(call)
        return call


# Where the walk is, relative to the hidden frames above it.
_NORMAL, _INSIDE_HIDDEN, _PLUMBING = range(3)
# What the children of an event inherit: the nearest kept Python ancestor (None: a root), whether
# their Python parent was dropped, the region, and inside a hidden frame: the frame and the
# user's line that called it.
_Inherited = tuple[PythonCall | None, bool, int, tuple[HiddenFrame, int] | None]


def index_tree(roots: Sequence[Any], hidden: HiddenFrames) -> CallIndex:
    """Index the Python calls of the profiler's event tree (``experimental_event_tree()``)."""
    from torch._C._profiler import _ExtraFields_PyCall as PyCall
    from torch._C._profiler import _ExtraFields_PyCCall as PyCCall

    index = CallIndex()
    stack: list[tuple[Any, _Inherited]] = [(e, (None, False, _NORMAL, None)) for e in roots]
    pop, push = stack.pop, stack.append
    while stack:
        event, child = pop()
        kept, parent_dropped, region, inside = child
        fields = event.extra_fields
        kind = type(fields)
        if kind is PyCall or kind is PyCCall:
            caller = fields.caller
            call = PythonCall(caller.line_number, event.duration_time_ns)
            try:
                name = event.name
            except UnicodeDecodeError:
                # torch can hand out undecodable strings (names of freed code objects): such
                # an event is not indexed (its call line will be 0), its children still are
                name = ""
            else:
                index.add(event.start_time_ns, name, call)
            frame = hidden.of_call(name, fields) if kind is PyCall else None
            if region == _PLUMBING:
                call.drop = True
            elif region == _INSIDE_HIDDEN:
                assert inside is not None
                outer, user_line = inside
                if not outer.passes_on(caller):
                    call.drop = True
                    child = (kept, True, _PLUMBING, None)
                elif outer.keep_callee:  # seen from outside, the user called this
                    call.caller_line = user_line
                    call.new_parent = kept
                    child = (call, False, _NORMAL, None)
                else:
                    call.drop = True
                    child = (kept, True, _NORMAL, None)
            elif frame is not None:
                call.drop = True
                child = (kept, True, _INSIDE_HIDDEN, (frame, caller.line_number))
            else:
                if parent_dropped:
                    call.new_parent = kept
                child = (call, False, _NORMAL, None)
        for sub in event.children:
            push((sub, child))
    return index
