"""Errors a person sees: one sentence that says which file, what was wrong and what to do."""

from __future__ import annotations


class BrrrError(Exception):
    """Base of the errors that carry a message meant for a person."""


class NotATraceError(BrrrError):
    """The input is not a profiler trace at all (as opposed to a trace with dirt in it)."""
