"""What every rule reads and returns: the analysis so far, as one context, and a finding."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.collectives import Collectives
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.analyzers.optimizer_steps import OptimizerStep, optimizer_steps, step_ranges
from brrr_trace.analyzers.packed_fix import PackedFix
from brrr_trace.analyzers.regimes import LineCost, OpClasses
from brrr_trace.analyzers.replay import Fix, StepGraph, build_graph
from brrr_trace.analyzers.steps import (
    calibrated,
    calibration_band,
    profiler_steps,
    recorded_unprofiled_optimizer_step,
    recorded_unprofiled_step,
)
from brrr_trace.analyzers.timeline import Timeline
from brrr_trace.arraysets import member
from brrr_trace.hardware.peaks import GpuPeak
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import Trace
from brrr_trace.vocabulary import IdleCause, KernelKind


@dataclass(frozen=True)
class RawFinding:
    rule: str
    line_id: int
    est_savings_ns: int
    message: str
    fix: str
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    covers: tuple[int, ...] = ()  # every line id the finding spans; () means line_id alone
    # The fix its saving replayed; ``rules.find`` keeps it packed (analyzers/packed_fix.py).
    replayed: Fix | PackedFix | None = field(default=None, compare=False)
    # The most the saving can be whatever the replay says (host-sync: the idle after the waits
    # in the trace); the range's ends are held to it too.
    saving_cap_ns: int | None = field(default=None, compare=False)


@dataclass
class RuleContext:
    trace: Trace
    ops: OpAttribution
    classes: OpClasses
    timeline: Timeline
    locator: Locator
    costs: list[LineCost]
    peak: GpuPeak | None
    options: AnalysisOptions
    span_ns: int
    sms: int | None
    collectives: Collectives = field(default_factory=lambda: Collectives((), (), ()))
    _rows: dict[int, np.ndarray] = field(default_factory=dict)
    _graph: StepGraph | None = None
    last_fix: Fix | None = None  # the fix ``replayed`` was last asked for
    _bounds: tuple[StepGraph, ...] | None = None
    _replayed_span: int | None = None
    _optimizer_steps: list[OptimizerStep] | None = None

    def __post_init__(self) -> None:
        placed = np.flatnonzero(self.ops.line != NONE)
        order = placed[np.argsort(self.ops.line[placed], kind="stable")]
        lines = self.ops.line[order]
        cuts = np.flatnonzero(np.diff(lines)) + 1
        for chunk in np.split(order, cuts) if len(order) else ():
            self._rows[int(self.ops.line[chunk[0]])] = chunk
        self.by_id = {cost.line_id: cost for cost in self.costs}

    @property
    def cost_bound_graphs(self) -> tuple[StepGraph, StepGraph] | None:
        """The graph with the profiler's cost at the low and the high end of what it may be:
        of what real programs showed, or, where the cost was calibrated on the trace's own
        unprofiled steps (``brrr-trace record``), of the scales that replay those steps within
        the calibration's tolerance (``calibration_band``); None where there is nothing to
        replay or the band is the calibrated scale alone."""
        if self._bounds is None:
            graph = self.graph
            options = self.options
            scales: tuple[float, float] | None = None
            if not len(graph.start):
                scales = None
            elif recorded_unprofiled_step(self.trace) is not None:
                scales = calibration_band(
                    graph, self.trace, options.profiler_cost_calibration_tolerance
                )
            else:
                scales = (options.profiler_cost_scale_low, options.profiler_cost_scale_high)
            if scales is None or scales == (graph.cost_scale, graph.cost_scale):
                self._bounds = ()
            else:
                self._bounds = tuple(graph.with_cost_scale(scale) for scale in scales)
        if not self._bounds:
            return None
        low_graph, high_graph = self._bounds
        return low_graph, high_graph

    @property
    def graph(self) -> StepGraph:
        """The trace as a replayable graph, built on first use (docs/architecture.md §7)."""
        if self._graph is None:
            graph = build_graph(
                self.trace, self.ops, self.locator, self.timeline.blocking_rows, self.options
            )
            # The optimizer's ranges only where the recorder timed its steps (they are found
            # from every annotation of the trace).
            ranges = (
                step_ranges(self.trace, self.optimizer_steps)
                if recorded_unprofiled_optimizer_step(self.trace) is not None
                else []
            )
            self._graph = calibrated(
                graph.as_loop(profiler_steps(self.trace)),
                self.trace,
                self.options.profiler_cost_calibration_tolerance,
                ranges,
            )
        return self._graph

    @property
    def optimizer_steps(self) -> list[OptimizerStep]:
        """The optimizer's steps, their kernels and a GradScaler's waits before each."""
        if self._optimizer_steps is None:
            self._optimizer_steps = optimizer_steps(
                self.trace, self.ops, self.timeline.blocking_rows
            )
        return self._optimizer_steps

    def replayed(self, fix: Fix) -> tuple[int, dict[str, float | int | str]]:
        """The saving of a fix by replay, and the evidence that says which fix it was. A fix
        that takes away less than a finding needs is not replayed: it cannot save more."""
        evidence: dict[str, float | int | str] = {"replayed": fix.what}
        self.last_fix = fix
        if not self.worth_it(fix.touched_ns(self.graph)):
            return 0, evidence
        return self.graph.saving(fix), evidence

    def together(self, fixes: list[Fix]) -> int:
        """The saving of several fixes applied at once, replayed as one."""
        fix = Fix.together("together", fixes)
        return self.graph.saving(fix) if self.worth_it(fix.touched_ns(self.graph)) else 0

    def rows(self, line_id: int) -> np.ndarray:
        return self._rows.get(line_id, np.zeros(0, dtype=np.int64))

    def kind(self, row: int) -> KernelKind:
        return self.classes.kind[int(self.classes.op_kind[row])]

    def of_kind(self, *kinds: KernelKind) -> np.ndarray:
        """Per GPU op: whether its kind is one of ``kinds``."""
        codes = [code for code, kind in enumerate(self.classes.kind) if kind in kinds]
        found: np.ndarray = member(self.classes.op_kind, codes)
        return found

    def name(self, row: int) -> str:
        return self.trace.strings[int(self.trace.gpu.name[row])]

    def duration(self, rows: np.ndarray) -> np.ndarray:
        gpu = self.trace.gpu
        lengths: np.ndarray = gpu.end_ns[rows] - gpu.start_ns[rows]
        return lengths

    def idle(self, cost: LineCost, *causes: IdleCause) -> int:
        """Idle of these causes charged to the line, less the profiler's own estimated cost."""
        raw = sum(cost.idle_by_cause.get(c, 0) for c in causes)
        profiled = sum(self.timeline.profiler_charges.get((cost.line_id, c), 0) for c in causes)
        return max(0, raw - profiled)

    def worth_it(self, saving_ns: float) -> bool:
        return saving_ns >= max(
            self.options.min_savings_ns, self.options.min_savings_share * self.replayed_span_ns
        )

    @property
    def replayed_span_ns(self) -> int:
        """What the savings are a share of: the replayed run without the profiler (a pass of
        the steps for a loop), or the trace's span where that is shorter. A profiled run is up
        to several times as long as the program's own (the CNN's record trace: 97 ms a step
        against 19.7 timed), and a share of it would hide fixes worth a few percent."""
        if self._replayed_span is None:
            replayed = self.graph.replayed_ns()
            self._replayed_span = min(self.span_ns, replayed) if replayed > 0 else self.span_ns
        return self._replayed_span


Rule = Callable[[RuleContext], Iterator[RawFinding]]


def duration_text(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms" if ns >= 100_000 else f"{ns / 1e3:.1f} µs"
