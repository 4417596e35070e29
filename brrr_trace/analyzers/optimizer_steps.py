"""The optimizer's steps in a trace: each ``Optimizer.step#`` range torch.optim records, the GPU
ops it launched, and the waits of a GradScaler for its found_inf flags just before it.

``GradScaler.step`` reads found_inf with ``.item()`` before it calls a foreach or per-parameter
step (``_maybe_opt_step``), so the host waits for the whole backward each step; a fused step
(``fused=True``) is handed found_inf on the GPU and nothing waits. Those waits are the fused
step's to remove, not a logging line's (``rules/unfused_optimizer.py``, ``rules/host_sync.py``).
A trace without Python frames (no ``with_stack``) cannot tell them from other syncs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from brrr_trace.analyzers.intervals import NONE, union_ns
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.arraysets import distinct, member
from brrr_trace.traces.model import Trace

_FOUND_INF_READ = re.compile(r"grad_scaler\.py\(\d+\): _maybe_opt_step$")
# torch.optim's classes with a fused implementation (``fused=True``, torch 2.x).
WITH_FUSED = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})


@dataclass(frozen=True)
class OptimizerStep:
    row: int  # the ``Optimizer.step#`` range in ``cpu_ops``
    optimizer: str  # its class: ``Optimizer.step#AdamW.step`` -> ``AdamW``
    kernels: np.ndarray  # GPU op rows launched inside it from its thread, in row order
    found_inf_reads: tuple[int, ...]  # blocking ``host_calls`` rows of a GradScaler before it
    # The host time it spent making the optimizer's state (its first step: ``zeros_like`` per
    # parameter and state), which any implementation spends too.
    state_init_ns: int = 0

    @property
    def reads_a_fused_step_removes(self) -> tuple[int, ...]:
        """The GradScaler's waits, where the optimizer has a fused step to hand them to."""
        return self.found_inf_reads if self.optimizer in WITH_FUSED else ()


def optimizer_steps(
    trace: Trace, ops: OpAttribution, blocking_rows: np.ndarray
) -> list[OptimizerStep]:
    cpu = trace.cpu_ops
    strings = trace.strings
    rows = [
        row
        for row in np.flatnonzero(cpu.annotation).tolist()
        if strings[cpu.name[row]].startswith("Optimizer.step#")
    ]
    if not rows:
        return []
    host = trace.host_calls
    launched = ops.launch != NONE
    launch_t = np.where(launched, host.start_ns[np.maximum(ops.launch, 0)], -1)
    launch_thread = np.where(launched, host.thread[np.maximum(ops.launch, 0)], NONE)
    # GPU ops by launch time, so that each step finds its own by binary search.
    by_launch = np.argsort(launch_t, kind="stable")
    launch_sorted = launch_t[by_launch]
    readers = _found_inf_frames(trace)
    blocking = np.asarray(blocking_rows, dtype=np.int64)
    steps = []
    for row in rows:
        thread, start, end = int(cpu.thread[row]), int(cpu.start_ns[row]), int(cpu.end_ns[row])
        lo = int(np.searchsorted(launch_sorted, start, side="left"))
        hi = int(np.searchsorted(launch_sorted, end, side="right"))
        near = by_launch[lo:hi]
        kernels = np.sort(near[launch_thread[near] == thread])
        reads: tuple[int, ...] = ()
        for f_start, f_end in readers.get(thread, ()):
            if f_start <= start <= f_end:
                inside = blocking[
                    (host.thread[blocking] == thread)
                    & (host.start_ns[blocking] >= f_start)
                    & (host.start_ns[blocking] < start)
                ]
                reads = tuple(sorted(inside.tolist()))
                break
        name = strings[cpu.name[row]][len("Optimizer.step#") :]
        steps.append(OptimizerStep(row, name.removesuffix(".step"), kernels, reads))
    return _with_state_init(trace, steps)


_STATE_MAKERS = frozenset({"aten::zeros_like", "aten::zeros"})


def ops_inside(trace: Trace, step: int) -> np.ndarray:
    """The CPU op rows inside an ``Optimizer.step#`` range, on its thread."""
    cpu = trace.cpu_ops
    # Ops are sorted by start: only those starting within the step's span can be inside it
    # (a mask over every op per step made this quadratic in long traces).
    lo = int(np.searchsorted(cpu.start_ns, cpu.start_ns[step], side="left"))
    hi = int(np.searchsorted(cpu.start_ns, cpu.end_ns[step], side="right"))
    return lo + np.flatnonzero(
        (cpu.thread[lo:hi] == cpu.thread[step]) & (cpu.end_ns[lo:hi] <= cpu.end_ns[step])
    )


def step_ranges(trace: Trace, steps: list[OptimizerStep]) -> list[tuple[int, int, int]]:
    """(host thread, start, end) of each step's range."""
    cpu = trace.cpu_ops
    return [
        (int(cpu.thread[s.row]), int(cpu.start_ns[s.row]), int(cpu.end_ns[s.row])) for s in steps
    ]


def _with_state_init(trace: Trace, steps: list[OptimizerStep]) -> list[OptimizerStep]:
    """Each step with the host time it spent making state: a step that makes state tensors
    (``zeros_like``: an Adam's first step, 2 per parameter) took that much longer than the same
    optimizer's steps that make none (their median); with no such step in the trace, the
    state-making ops' own time. A per-parameter Adam's first step: 30.4 ms against 20.6-20.9
    (tests/data/h200/session11/plain)."""
    cpu = trace.cpu_ops
    makers = [i for i, text in enumerate(trace.strings) if text in _STATE_MAKERS]
    if not makers or not steps:
        return steps
    is_maker = member(cpu.name, makers) & ~cpu.annotation
    made: dict[int, int] = {}
    for step in steps:
        inside = ops_inside(trace, step.row)
        inside = inside[is_maker[inside]]
        if len(inside):
            made[step.row] = union_ns(cpu.start_ns[inside], cpu.end_ns[inside])
    if not made:
        return steps
    took = {s.row: int(cpu.end_ns[s.row] - cpu.start_ns[s.row]) for s in steps}
    plain: dict[str, list[int]] = {}
    for s in steps:
        if s.row not in made:
            plain.setdefault(s.optimizer, []).append(took[s.row])
    usual = {name: int(np.median(times)) for name, times in plain.items()}
    return [
        replace(
            s,
            state_init_ns=max(0, took[s.row] - usual[s.optimizer])
            if s.optimizer in usual
            else made[s.row],
        )
        if s.row in made
        else s
        for s in steps
    ]


def _found_inf_frames(trace: Trace) -> dict[int, list[tuple[int, int]]]:
    """Per thread, the (start, end) of each GradScaler frame that reads found_inf."""
    frames = trace.frames
    if not len(frames):
        return {}
    names = distinct(frames.name)
    wanted = [int(n) for n in names.tolist() if _FOUND_INF_READ.search(trace.strings[int(n)])]
    if not wanted:
        return {}
    out: dict[int, list[tuple[int, int]]] = {}
    for k in np.flatnonzero(member(frames.name, wanted)).tolist():
        out.setdefault(int(frames.thread[k]), []).append(
            (int(frames.start_ns[k]), int(frames.end_ns[k]))
        )
    return out
