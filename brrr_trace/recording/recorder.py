"""The profiler session behind ``brrr_trace.record`` and ``brrr-trace record``.

A :class:`Recorder` runs ``torch.profiler`` with the settings brrr-trace needs (CPU and CUDA
activities, input shapes, Python stacks), optionally over a window of optimizer steps, with the
line mode on while it records (``exact_ops``), and writes the trace through ``export``.
torch is imported when recording starts, not when this module is.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from brrr_trace.recording import function_mode, optimizer_steps
from brrr_trace.recording.backward_time import BackwardTimer
from brrr_trace.recording.export import export, recording_info
from brrr_trace.recording.hidden_frames import HiddenFrames
from brrr_trace.recording.notices import warn
from brrr_trace.traces.brrr_fields import (
    RECORD_KEY,
    UNPROFILED_BACKWARD_KEY,
    UNPROFILED_OPTIMIZER_STEPS_KEY,
    UNPROFILED_STEPS_KEY,
    UNPROFILED_WINDOW_KEY,
)

_F = TypeVar("_F", bound=Callable[..., Any])


class Recorder:
    """Record a trace to ``path`` (gzipped when it ends in ``.gz``); a context manager or decorator.

    ``steps=None`` records everything inside the block. ``steps=N`` records N steps after
    ``wait`` steps and one warm-up step: a step ends at every ``optimizer.step()``
    (``auto_step``), or at every ``Recorder.step()`` call when ``auto_step=False``. The trace is
    written as soon as the N steps are done, or when the block ends with some of them recorded.
    ``exact_ops`` adds ``brrr.line N`` annotations around the torch calls made directly from
    user code (several µs per call while recording).

    After the block: ``written`` (bool), ``path``, ``steps_recorded`` and ``stats`` (call lines
    matched / unmatched, hidden events).

    The ``wait`` steps run without the profiler, so their wall times (from the second on: the
    first holds the start-up) are the program's own step time; the trace carries them
    (``brrr_record.unprofiled_step_ns``) for the analysis to measure the profiler's cost against.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "trace.json.gz",
        *,
        steps: int | None = None,
        wait: int = 0,
        exact_ops: bool = True,
        auto_step: bool = True,
        on_written: Callable[[Recorder], None] | None = None,
    ) -> None:
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError(f"steps must be a positive integer or None, not {steps!r}")
        if not isinstance(wait, int) or wait < 0:
            raise ValueError(f"wait must be a non-negative integer, not {wait!r}")
        if wait and steps is None:
            raise ValueError("wait needs steps")
        self.path = Path(path)
        self.steps = steps
        self.wait = wait
        self.exact_ops = exact_ops
        self.auto_step = auto_step
        self.on_written = on_written
        self.written = False
        self.steps_seen = 0
        self.steps_recorded = 0
        self.stats: dict[str, int] = {}
        self._prof: Any = None
        self._mode: Any = None
        self._counter: optimizer_steps.StepCounter | None = None
        self._metadata_added = False
        self._running = False
        self._wait_step_ends: list[int] = []
        self._wait_optimizer_ns: list[int] = []
        self._backward: BackwardTimer | None = None
        self._wait_backward_ns: list[int] = []
        self._mode_pushed = False
        self._compiled_at_start = 0

    # -- context manager / decorator -------------------------------------------------------------

    def __enter__(self) -> Recorder:
        if self._running:
            raise RuntimeError("this Recorder is already recording")
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.written = False
        self.steps_seen = self.steps_recorded = 0
        self._metadata_added = False
        self._wait_step_ends = []
        self._wait_optimizer_ns = []
        self._wait_backward_ns = []
        self._running = True
        if self.exact_ops:
            # Pushed when the warm-up step begins, not now: a mode on the stack slows every torch
            # call even while inactive, and the wait steps are timed as the unprofiled program.
            self._mode = function_mode.line_mode_class()()
            self._mode_pushed = False
            self._compiled_at_start = _compiled_frames()
        kwargs: dict[str, Any] = {}
        if self.steps is not None:
            kwargs["schedule"] = schedule(wait=self.wait, warmup=1, active=self.steps, repeat=1)
            kwargs["on_trace_ready"] = self._trace_ready
        self._prof = profile(
            activities=activities,
            record_shapes=True,
            with_stack=True,
            profile_memory=False,
            **kwargs,
        )
        try:
            with _quiet_profiler():
                self._prof.start()
            if self.steps is not None and self.auto_step:
                self._counter = optimizer_steps.StepCounter(self.step, self._counting_failed)
                self._counter.start()
            if self.steps is not None and self.wait > 1:
                self._backward = BackwardTimer()
                self._backward.start()
            self._sync()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if not self._running:
            return
        prof = self._prof
        try:
            if self._counter is not None:
                self._counter.stop_wrapping()
            if self._mode is not None:
                self._mode.active = False
            if self.steps is None:
                prof.stop()
                self._write(prof)
            else:
                if not self.written and _is_recording(prof):
                    self.steps_recorded = self._steps_in_window(prof)
                prof.stop()  # calls _trace_ready when steps were being recorded
        except Exception as error:
            if exc_type is None:
                raise
            warn(f"could not write the trace ({type(error).__name__}: {error})")
        finally:
            self._teardown()

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._copy():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _copy(self) -> Recorder:
        return Recorder(
            self.path,
            steps=self.steps,
            wait=self.wait,
            exact_ops=self.exact_ops,
            auto_step=self.auto_step,
            on_written=self.on_written,
        )

    def step(self) -> None:
        """End a step of the ``steps`` window (only needed with ``auto_step=False``)."""
        if not self._running or self.steps is None or self.written:
            return
        if self.steps_seen < self.wait:
            if self.steps_seen in (self._window_from(), self.wait - 1):
                _synchronize()  # the timed window's edges: the GPU's work counted, not queued
            self._wait_step_ends.append(time.perf_counter_ns())
            took = self._counter.last_step_ns if self._counter is not None else None
            if took is not None and self.steps_seen > self._window_from():
                self._wait_optimizer_ns.append(took)
            if self._backward is not None:
                backward_ns = self._backward.take()
                if self.steps_seen > self._window_from():
                    self._wait_backward_ns.append(backward_ns)
                if self.steps_seen == self.wait - 1:  # the profiler records from the next step
                    self._backward.stop()
        self.steps_seen += 1
        with _quiet_profiler():
            self._prof.step()
        self._sync()

    # -- internals -------------------------------------------------------------------------------

    def _counting_failed(self, error: Exception) -> None:
        warn(f"recording stopped ({type(error).__name__}: {error})")
        if self._mode is not None:
            self._mode.active = False

    def _sync(self) -> None:
        """Metadata once the profiler records; the line mode on exactly while it does."""
        prof = self._prof
        recording = _is_recording(prof) if self.steps is not None else True
        if recording and not self._metadata_added:
            info = recording_info(self.exact_ops)
            ends = self._wait_step_ends
            info[UNPROFILED_STEPS_KEY] = [b - a for a, b in itertools.pairwise(ends)]
            first = self._window_from()
            if len(ends) == self.wait and first < self.wait - 1:
                info[UNPROFILED_WINDOW_KEY] = {
                    "steps": self.wait - 1 - first,
                    "ns": ends[-1] - ends[first],
                }
                if self._wait_optimizer_ns:
                    info[UNPROFILED_OPTIMIZER_STEPS_KEY] = list(self._wait_optimizer_ns)
                if any(self._wait_backward_ns):
                    info[UNPROFILED_BACKWARD_KEY] = list(self._wait_backward_ns)
            prof.add_metadata_json(RECORD_KEY, json.dumps(info))
            prof.add_metadata_json("torch_version", json.dumps(info["torch_version"]))
            self._metadata_added = True
        if self._mode is not None:
            if not self._mode_pushed and (self.steps is None or self.steps_seen >= self.wait):
                if self.steps_seen and _compiled_frames() > self._compiled_at_start:
                    # Pushing a mode now would invalidate the guards of code torch.compile
                    # compiled during the wait steps: record without the line mode.
                    warn("torch.compile ran before recording began: no exact-op annotations")
                    self._mode, self.exact_ops = None, False
                    return
                self._mode.__enter__()
                self._mode_pushed = True
            self._mode.active = recording and not self.written

    def _window_from(self) -> int:
        """The wait step whose end starts the timed window: the later half of the wait."""
        return self.wait // 2

    def _steps_in_window(self, prof: Any) -> int:
        return max(0, prof.step_num - self.wait - 1)

    def _trace_ready(self, prof: Any) -> None:
        if self._mode is not None:
            self._mode.active = False
        if not self.steps_recorded:
            self.steps_recorded = min(self.steps or 0, self._steps_in_window(prof))
        self._write(prof)

    def _hidden_frames(self) -> HiddenFrames:
        frames = optimizer_steps.hidden_frames()
        if self.exact_ops:
            frames.append(function_mode.handler_frame())
        return HiddenFrames(frames)

    def _write(self, prof: Any) -> None:
        if self.written:
            return
        self.stats = export(prof, self.path, exact_ops=self.exact_ops, hidden=self._hidden_frames())
        self.written = True
        if self._counter is not None:
            self._counter.stop_wrapping()
        if self.on_written is not None:
            self.on_written(self)

    def _teardown(self) -> None:
        self._running = False
        if self._backward is not None:
            self._backward.stop()
            self._backward = None
        if self._counter is not None:
            self._counter.close()
            self._counter = None
        if self._mode is not None:
            function_mode.remove_mode(self._mode)
            self._mode = None
        self._prof = None


# `brrr_trace.record(path, ...)`: the recording itself is the context manager and decorator.
record = Recorder


@contextlib.contextmanager
def _quiet_profiler() -> Iterator[None]:
    """Without torch's warning that a schedule's cycles are not accumulated: ours has one."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each")
        yield


def _compiled_frames() -> int:
    """How many frames torch.compile (dynamo) has compiled in this process so far."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    return int(dynamo.counters.get("frames", {}).get("ok", 0))


def _is_recording(prof: Any) -> bool:
    from torch.profiler import ProfilerAction

    return prof.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def _synchronize() -> None:
    """Wait for the GPU's queued work, where torch has started CUDA."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
