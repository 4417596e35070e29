"""Counting the user's training steps at ``optimizer.step()``, for ``record(steps=N)``.

torch's global optimizer post-hook sees every step, but it runs inside ``optimizer.step``'s
``Optimizer.step#`` annotation: ending a profiler step there would cut that annotation in two.
So the hook counts only the first step of an optimizer and wraps that optimizer's ``step``; the
wrapper counts every later step when ``step`` has returned. Both are brrr-trace's own frames on
the user's stack, hidden from the trace (:func:`hidden_frames`).

A step is one step of one optimizer (the first seen). A second optimizer that steps twice while
the first one does not takes over: the first one was replaced.
"""

from __future__ import annotations

import contextlib
import functools
import time
import weakref
from collections.abc import Callable
from typing import Any

from brrr_trace.recording.hidden_frames import HiddenFrame

_MISSING = object()


class StepCounter:
    """Calls ``on_step()`` after each step of the training loop's optimizer, while started.

    An error raised by ``on_step`` goes to ``on_error`` once and stops the counting: it never
    reaches the user's ``optimizer.step()``.
    """

    def __init__(self, on_step: Callable[[], None], on_error: Callable[[Exception], None]) -> None:
        self.on_step = on_step
        self.on_error = on_error
        self.running = False
        self.broken = False
        self._hook: Any = None
        self._clock: weakref.ref[Any] | None = None  # the optimizer whose steps count
        self._other_steps = 0
        self._inside_wrapper = 0
        self._wrapped: list[tuple[weakref.ref[Any], Any, Any]] = []  # optimizer, wrapper, before
        # The wall time of the last wrapped step() that counted, in ns (None: the step that just
        # ended was not timed, e.g. the first one, counted by the hook).
        self.last_step_ns: int | None = None

    def start(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.running = True
        self.broken = False
        self._hook = register_optimizer_step_post_hook(
            functools.partial(_post_hook, weakref.ref(self))
        )

    def stop_wrapping(self) -> None:
        """No new optimizers are wrapped (the ones wrapped go on counting until ``close``)."""
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def close(self) -> None:
        """Stop counting and give every wrapped optimizer its own ``step`` back."""
        self.running = False
        self.stop_wrapping()
        for ref, wrapper, before in self._wrapped:
            optimizer = ref()
            if optimizer is None or optimizer.__dict__.get("step") is not wrapper:
                continue
            with contextlib.suppress(Exception):
                if before is _MISSING:
                    del optimizer.step
                else:
                    optimizer.step = before
        self._wrapped = []

    def _first_step_of(self, optimizer: Any) -> None:
        if self._inside_wrapper or self.broken:
            return
        self._wrap(optimizer)
        self._stepped(optimizer)

    def _wrap(self, optimizer: Any) -> None:
        if self._hook is None or any(ref() is optimizer for ref, _, _ in self._wrapped):
            return
        before = optimizer.__dict__.get("step", _MISSING)
        try:
            wrapper = functools.partial(
                _counted_step, optimizer.step, weakref.ref(self), weakref.ref(optimizer)
            )
            if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
                # An LR scheduler marks the step it wrapped and warns at its first step() when
                # the mark is gone ("optimizer.step() has been overridden after learning rate
                # scheduler initialization"); ours still calls its wrapper.
                wrapper._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
            optimizer.step = wrapper
        except Exception:  # an optimizer that refuses attributes: steps stay counted in the hook
            return
        self._wrapped.append((weakref.ref(optimizer), wrapper, before))

    def _stepped(self, optimizer: Any, took_ns: int | None = None) -> None:
        """Runs inside the user's ``optimizer.step()``: never lets an error of ours out."""
        try:
            self._count(optimizer, took_ns)
        except Exception as error:
            self.broken = True
            self.on_error(error)

    def _count(self, optimizer: Any, took_ns: int | None = None) -> None:
        self.last_step_ns = None
        if optimizer is None or self.broken:
            return
        if self._clock is None or self._clock() is None:
            self._clock = weakref.ref(optimizer)
        if self._clock() is not optimizer:
            self._other_steps += 1
            if self._other_steps < 2:
                return
            self._clock = weakref.ref(optimizer)
        self._other_steps = 0
        self.last_step_ns = took_ns
        self.on_step()


def _post_hook(counter_ref: weakref.ref[StepCounter], optimizer: Any, *_: Any) -> None:
    counter = counter_ref()
    if counter is not None and counter.running:
        counter._first_step_of(optimizer)


def _counted_step(
    step: Callable[..., Any],
    counter_ref: weakref.ref[StepCounter],
    optimizer_ref: weakref.ref[Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    counter = counter_ref()
    if counter is not None and not counter.running:
        counter = None
    if counter is not None:
        counter._inside_wrapper += 1
    began = time.perf_counter_ns()
    try:
        out = step(*args, **kwargs)  # the one call: hidden_frames() finds its line
    finally:
        if counter is not None:
            counter._inside_wrapper -= 1
    took = time.perf_counter_ns() - began
    if counter is not None and counter.running:
        counter._stepped(optimizer_ref(), took)
    return out


def hidden_frames() -> list[HiddenFrame]:
    """The wrapper stands in for the user's ``optimizer.step()``; the hook is bookkeeping."""
    return [
        HiddenFrame.passing_call(_counted_step.__code__, keep_callee=True),
        HiddenFrame.plumbing(_post_hook.__code__),
    ]
