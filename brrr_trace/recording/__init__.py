"""Recording traces that brrr-trace reads best: ``record`` and ``brrr-trace record``.

``record(path)`` (a :class:`Recorder`) is a context manager and a decorator; ``run_program`` runs
a script or module in-process under one. The trace is Kineto's own Chrome trace with brrr-trace's
additions (``traces.brrr_fields``): every Python call's caller line and, with ``exact_ops``, a
``brrr.line N`` annotation around each torch call made from user code.

The only package of brrr-trace that imports torch, and only once recording starts: importing
it (``brrr_trace.record``) costs no torch import.

    recorder         the profiler session
    optimizer_steps  the steps window's clock: optimizer.step()
    function_mode    the brrr.line annotations
    user_code        whose code a frame runs
    hidden_frames    brrr-trace's own frames, left out of the trace
    call_lines       the caller's line of each Python call, from the profiler's event tree
    export           writing the trace
    runner           running the user's program
"""

from __future__ import annotations

from brrr_trace.recording.recorder import Recorder, record
from brrr_trace.recording.runner import run_program

__all__ = ["Recorder", "record", "run_program"]
