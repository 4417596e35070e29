"""The report: the one versioned output contract (docs/architecture.md §8).

Inside, times are integer nanoseconds; ``render.json`` writes the contract's microsecond fields.
Fields may be added, never renamed or given another meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brrr_trace.units import duration
from brrr_trace.vocabulary import IdleCause, Precision, Regime

if TYPE_CHECKING:  # annotations only; importing them would load the analyzers (and numpy)
    from brrr_trace.analyzers.collectives import CollectiveCall
    from brrr_trace.analyzers.crossrank import CrossRank  # a folder of ranks only
    from brrr_trace.analyzers.timeline_view import TimelineView

SCHEMA_VERSION = 1
# The project's repository; a rule's page is docs/rules/<id>.md in it (docs/architecture.md §7),
# ``{rule}`` replaced by the rule id.
PROJECT_URL = "https://github.com/brrr-trace/brrr-trace"
RULES_DOCS_URL = PROJECT_URL + "/blob/main/docs/rules/{rule}.md"


@dataclass(frozen=True)
class DeviceInfo:
    """A GPU of the trace: its id, its name and the peak rates the roofline used."""

    id: int
    name: str | None
    peak: dict[str, Any] | None


@dataclass(frozen=True)
class TraceInfo:
    """What the trace is: its file, torch version, devices, span, ranks, stacks and shapes."""

    path: str
    torch_version: str | None
    devices: tuple[DeviceInfo, ...]
    span_ns: int
    ranks: tuple[int, ...]
    has_python_stacks: bool
    has_shapes: bool


@dataclass(frozen=True)
class Summary:
    """The whole trace in numbers: GPU busy and idle, idle by cause, time by regime."""

    gpu_busy_ns: int
    gpu_idle_ns: int
    gpu_utilization: float | None
    idle_by_cause_ns: dict[IdleCause, int]
    time_by_regime_ns: dict[Regime, int]
    kernels: int
    # What no source line could take: GPU ops without a launch or a Python frame, idle gaps of
    # cause "other" or with no frame to charge.
    unattributed_gpu_ns: int
    unattributed_idle_ns: int
    profiler_overhead_ns: int = 0  # estimated profiler cost inside host-caused idle


@dataclass(frozen=True)
class KernelStat:
    """One kernel name of a line: its kind, how often it ran and its GPU time."""

    name: str
    kind: str
    count: int
    total_ns: int


@dataclass(frozen=True)
class LineReport:
    """One source line: its GPU, idle and CPU time, its regime and its roofline numbers."""

    file: str
    path: str | None
    line: int
    function: str
    precision: Precision
    regime: Regime | None  # None on a trace without GPU activity: no GPU claim is made
    gpu_ns: int
    idle_ns: int
    cpu_ns: int
    kernels: int
    backward_gpu_ns: int
    time_by_regime_ns: dict[Regime, int]
    idle_by_cause_ns: dict[IdleCause, int]
    flops: int | None = None
    bytes: int | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    peak_fraction: float | None = None  # roofline time / measured time of the line's kernels
    intensity: float | None = None  # FLOP per byte
    ridge: float | None = None  # FLOP per byte where the device's roofline bends
    top_kernels: tuple[KernelStat, ...] = ()
    findings: tuple[str, ...] = ()
    # Part of idle_ns that is the profiler's own cost on the host (estimated,
    # docs/architecture.md §4).
    profiler_overhead_ns: int = 0
    # gpu_ns plus the GPU time of the code the line calls (user functions, a model), forward
    # and backward.
    inclusive_gpu_ns: int = 0
    # ``path`` relative to the source root (forward slashes), None when the file is unmapped or
    # lies outside the root: the repository-relative path of reports shared with others.
    relative_path: str | None = None
    # GPU and idle time of the line and of the code it calls, forward and backward, by regime
    # (the idle inside the callees is overhead); its sum is ``inclusive_ns``.
    inclusive_by_regime_ns: dict[Regime, int] = field(default_factory=dict)

    @property
    def inclusive_ns(self) -> int:
        """``total_ns`` plus that of the lines inside the user functions the line calls."""
        return sum(self.inclusive_by_regime_ns.values()) or self.total_ns

    @property
    def total_ns(self) -> int:
        return self.gpu_ns + self.idle_ns


@dataclass(frozen=True)
class Finding:
    """One rule's finding on a line: what is wrong, the fix, and the time the fix saves."""

    rule: str
    severity: str
    file: str
    path: str | None
    line: int
    message: str
    fix: str
    est_savings_ns: int
    function: str = ""
    evidence: dict[str, float | int | str] = field(default_factory=dict)
    doc: str = ""  # the rule's documentation page, relative to the repository
    lines: tuple[int, ...] = ()  # every line of `file` the finding covers, `line` among them
    est_savings_per_step_ns: int | None = None  # with ProfilerStep ranges: the saving per step
    relative_path: str | None = None  # as LineReport.relative_path
    # The least and most the fix saves with the profiler's cost at either end of what real
    # programs showed, or, calibrated on the program's own unprofiled steps, of the scales that
    # replay them within the calibration's tolerance; None where there are no such ends.
    est_savings_range_ns: tuple[int, int] | None = None


def severity_of_saving(
    savings_ns: int, span_ns: int, warning_share: float, information_share: float
) -> str:
    """A finding's ``severity``: ``warning`` when its fix saves at least ``warning_share`` of the
    GPU span, ``information`` from ``information_share`` on, ``hint`` below.

    The pipeline grades each finding with the analysis options' cut-offs; the language server
    grades again, with this same function, only when the user set cut-offs of their own.
    """
    share = savings_ns / span_ns if span_ns > 0 else 0.0
    if share >= warning_share:
        return "warning"
    if share >= information_share:
        return "information"
    return "hint"


@dataclass(frozen=True)
class ProblemReport:
    """Something the trace lacked or got wrong, of one kind, and how often."""

    kind: str
    count: int
    detail: str


@dataclass(frozen=True)
class RuleSaving:
    """All of one rule's findings fixed at once, replayed as one fix (docs/architecture.md §7):
    less than the sum of their savings where they overlap."""

    rule: str
    findings: int
    est_savings_ns: int
    est_savings_per_step_ns: int | None = None
    # [least, most] at either end of the profiler's cost, as a finding's
    est_savings_range_ns: tuple[int, int] | None = None


@dataclass(frozen=True)
class StepsReport:
    """The trace's ProfilerStep ranges: the time of each, and without the profiler."""

    durations_ns: tuple[int, ...]
    median_ns: int
    spread_ns: int  # slowest minus fastest
    replayed_ns: int | None  # per step, replayed with the profiler's own cost taken out
    recorded_unprofiled_ns: int | None = None  # per step, timed unprofiled by `brrr-trace record`
    profiler_cost_scale: float = 1.0  # the cost model's scale that matches it (1: not calibrated)
    # Its scale inside the optimizer's steps, where `record` timed them too (None: not apart).
    optimizer_profiler_cost_scale: float | None = None
    # Its scale in the autograd engine's threads, where `record` timed the backward too.
    backward_profiler_cost_scale: float | None = None

    @property
    def count(self) -> int:
        return len(self.durations_ns)


@dataclass(frozen=True)
class RunInfo:
    """One run of a folder of traces: its ranks, or a single trace without rank information."""

    index: int  # 0: the oldest run of the folder
    ranks: tuple[int, ...]
    world_size: int | None
    backend: str | None
    paths: tuple[str, ...]


@dataclass(frozen=True)
class TrackSlice:
    """One slice of a Track: a line or an idle cause over a stretch of the trace's clock."""

    start_ns: int  # on the trace's own clock
    end_ns: int
    name: str  # a line ("file:line function") or an idle cause
    args: dict[str, str | int | float | None]


@dataclass(frozen=True)
class Track:
    """One row of the analysis for a timeline viewer (``--format perfetto``): ``group`` is its
    process there, ``name`` its thread."""

    group: str
    name: str
    slices: tuple[TrackSlice, ...]


@dataclass(frozen=True)
class Report:
    """The analysis of one trace, or of one run of rank traces (docs/architecture.md §8)."""

    tool_version: str
    trace: TraceInfo
    summary: Summary
    lines: tuple[LineReport, ...]
    findings: tuple[Finding, ...] = ()
    problems: tuple[ProblemReport, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # Source files named by lines that map to no local file (docs/architecture.md §5: never
    # guess silently).
    unmapped_files: tuple[str, ...] = ()
    steps: StepsReport | None = None
    # A folder of traces: its runs, the one this report covers, and across that run's ranks the
    # time each waits in collectives and the line spread (docs/architecture.md §13).
    runs: tuple[RunInfo, ...] = ()
    run: int | None = None
    cross_rank: CrossRank | None = None
    schema_version: int = SCHEMA_VERSION
    # The rank's collective calls in host start order (docs/architecture.md §12).
    collectives: tuple[CollectiveCall, ...] = ()
    # Rules with several findings: the saving of fixing them all together.
    rule_savings: tuple[RuleSaving, ...] = ()
    # Only with AnalysisOptions.timeline_tracks; not part of the JSON contract.
    tracks: tuple[Track, ...] = ()
    # The timeline as bounded segments, for the HTML report and the editor's timeline panel;
    # not part of the JSON contract (docs/architecture.md §4, "The drawn timeline").
    timeline: TimelineView | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        # The dataclass repr prints every line and finding: tens of thousands of characters in
        # a notebook cell. One line says what the report is about.
        t, s = self.trace, self.summary
        top = max(s.time_by_regime_ns.items(), key=lambda kv: kv[1], default=None)
        regime = f"{top[0]}-bound" if top and top[1] > 0 else "no GPU time"
        return (
            f"<Report {t.path!r}: span {duration(t.span_ns)}, mostly {regime}, "
            f"{len(self.lines)} lines, {len(self.findings)} findings>"
        )
