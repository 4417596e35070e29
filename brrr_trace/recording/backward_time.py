"""The host time of the program's backward passes during the unprofiled wait steps.

``Tensor.backward`` (also under a GradScaler: ``scaler.scale(loss).backward()``) calls
``torch.autograd.backward``, looked up on the module at each call; so while the timer runs, that
name is a wrapper that adds each call's wall time to a total. It runs during the wait steps only
and gives the name back before the profiler records, so the trace never shows it. A program that
imported the function itself (``from torch.autograd import backward``) calls it untimed.

Why: the profiler's cost in the autograd engine's thread is a different share of its time than
in the forward's Python (GPT small's trace: the model takes 10 µs of cost per engine op), and a
step whose backward replays too fast and whose forward too slow leaves the GPU idle in the
replay where the program kept it busy.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any


class BackwardTimer:
    """Sums the wall time of ``torch.autograd.backward`` calls while started; ``take()`` returns
    the sum since the last ``take()``."""

    def __init__(self) -> None:
        self._total_ns = 0
        self._original: Any = None
        self._wrapper: Any = None

    def start(self) -> None:
        import torch.autograd

        if self._wrapper is not None:
            return
        original = torch.autograd.backward
        timer = self

        @functools.wraps(original)
        def timed_backward(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                timer._total_ns += time.perf_counter_ns() - began

        self._original, self._wrapper = original, timed_backward
        torch.autograd.backward = timed_backward

    def take(self) -> int:
        total, self._total_ns = self._total_ns, 0
        return total

    def stop(self) -> None:
        """Give ``torch.autograd.backward`` back, unless someone replaced our wrapper since."""
        if self._wrapper is None:
            return
        import torch.autograd

        with contextlib.suppress(Exception):
            if torch.autograd.backward is self._wrapper:
                torch.autograd.backward = self._original
        self._original = self._wrapper = None
