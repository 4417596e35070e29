"""What a fix would save, by replaying the host and the GPU's queues with the fix applied
(the method of Daydream, USENIX ATC 2020).

The host side is the trace's launching threads merged into one program, in start order: each
launch and each blocking call, with the host work before it (the time since the previous call
returned, less what the profiler itself cost there: the trace was recorded with stacks, which
slows the host down) and the call's own time. A launch puts its GPU ops on their streams; each
starts when launched (plus the launch latency the trace shows) or when its stream is free,
whichever is later. A blocking call holds the host until every op launched so far has finished.
GPU ops the program did not launch (launched before the trace began) keep their times. Where a
collective kernel and another stream's op waited for one another in the trace (DDP's
communication stream waits for the gradient, the optimizer for the all-reduce), the later one
starts no sooner than the earlier one ends in the replay too.

A ``Fix`` edits that graph: host work taken away (or handed to DataLoader worker processes, which
the host then waits for), calls that no longer block, GPU ops with a new duration (0 removes
one). The saving is the baseline replay's end minus the fixed replay's, so
it is zero where the fix shortens what is not on the critical path (GPU time in a host-bound
step, host time in a GPU-bound one), and never more than the time the fix takes away.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.kernels import communication_names
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.analyzers.replay_runs import CALL_NS, Runs, replay_runs
from brrr_trace.arraysets import distinct, member
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import GPU_KERNEL, Trace

_DEPENDENCY_SLACK_NS = 1_000  # an op may start this much before the one it waited for ends
_MAX_LATENCY_NS = 20_000  # longer than this from launch to start is not launch latency
_MIN_LAUNCH_NS = 500  # what a launch call costs the host at the least
# Parts of a step whose profiler cost can have a scale of their own (StepGraph.phase_of_event).
PHASE_OPTIMIZER = 1
PHASE_BACKWARD = 2


@dataclass(frozen=True)
class BatchQueue:
    """Batches made by worker processes instead of the host: the host waits at an event only
    until its batch is ready. Worker ``j % workers`` makes batch ``j`` (as DataLoader deals
    them out), taking as long as the host took, and starts it once its previous batch is done
    and the batch ``prefetch * workers`` before it has been taken (DataLoader's
    ``prefetch_factor`` bound on batches in flight)."""

    load_ns: dict[int, int]  # event -> how long its batch takes to make
    workers: int
    prefetch: int


@dataclass(frozen=True)
class Fix:
    """An edit of the replayed graph: what one fix changes."""

    what: str  # the fix replayed, said in the finding's evidence
    host_saved: dict[int, int] = field(default_factory=dict)  # event -> host work taken away
    unblocked: frozenset[int] = frozenset()  # events that no longer block
    durations: dict[int, int] = field(default_factory=dict)  # GPU op row -> new duration
    own: dict[int, int] = field(default_factory=dict)  # event -> the call's new own time
    batches: BatchQueue | None = None  # the host work taken away is done by these workers

    @staticmethod
    def together(what: str, fixes: list[Fix]) -> Fix:
        """Several fixes applied at once: where two edit the same event or op, the larger
        edit."""
        host: dict[int, int] = {}
        durations: dict[int, int] = {}
        own: dict[int, int] = {}
        for fix in fixes:
            for e, ns in fix.host_saved.items():
                host[e] = max(host.get(e, 0), ns)
            for r, ns in fix.durations.items():
                durations[r] = min(durations.get(r, ns), ns)
            for e, ns in fix.own.items():
                own[e] = min(own.get(e, ns), ns)
        unblocked = frozenset().union(*(f.unblocked for f in fixes))
        queues = [f.batches for f in fixes if f.batches is not None]
        batches = None
        if queues:
            loads: dict[int, int] = {}
            for queue in queues:
                for e, ns in queue.load_ns.items():
                    loads[e] = max(loads.get(e, 0), ns)
            batches = replace(queues[0], load_ns=loads)
        return Fix(what, host, unblocked, durations, own, batches)

    def touched_ns(self, graph: StepGraph) -> int:
        """The most the fix can save: the host work, waiting and GPU time it takes away. The
        waiting is the baseline replay's: without the profiler the host reaches a sync sooner
        and waits longer than the trace shows (the CNN's `.item()`: 0.07 ms a step in its
        trace, 0.4 replayed)."""
        host = int(sum(self.host_saved.values()))
        waits = int(graph.waits()[list(self.unblocked)].sum()) if self.unblocked else 0
        return host + waits + _cut_ns(graph.duration, self.durations) + _cut_ns(graph.own, self.own)


def _cut_ns(times: np.ndarray, new_ns: dict[int, int]) -> int:
    """How much shorter the given rows become, summed (a longer row adds nothing)."""
    if not new_ns:
        return 0
    rows = np.fromiter(new_ns, dtype=np.int64, count=len(new_ns))
    shorter = times[rows] - np.fromiter(new_ns.values(), dtype=np.int64, count=len(rows))
    return int(np.maximum(shorter, 0).sum())


@dataclass(frozen=True)
class Launches:
    """The GPU op rows each event launched, ragged: event ``e``'s are
    ``rows[first[e]:first[e + 1]]``, in row order."""

    rows: np.ndarray
    first: np.ndarray  # per event, and one more: where its rows begin

    @staticmethod
    def of(groups: list[tuple[int, ...]]) -> Launches:
        counts = np.fromiter((len(g) for g in groups), dtype=np.int64, count=len(groups))
        rows = np.fromiter((r for g in groups for r in g), dtype=np.int64, count=int(counts.sum()))
        return Launches(rows, np.concatenate(([0], np.cumsum(counts))))

    def __len__(self) -> int:
        return len(self.first) - 1

    def __getitem__(self, event: int) -> tuple[int, ...]:
        return tuple(self.rows[self.first[event] : self.first[event + 1]].tolist())

    def counts(self) -> np.ndarray:
        return np.diff(self.first)

    def without(self, events: np.ndarray) -> Launches:
        """The same with nothing launched by these events (a mask over the events)."""
        if not events.any():
            return self
        keep = np.repeat(~events, self.counts())
        counts = np.where(events, 0, self.counts())
        return Launches(self.rows[keep], np.concatenate(([0], np.cumsum(counts))))


@dataclass
class StepGraph:
    """The replayable graph of a trace: the host program and the GPU ops it launches."""

    host_rows: np.ndarray  # per event: its host call row, in replay order
    start: np.ndarray  # per event: host start, call's own ns, host work before it
    own: np.ndarray
    work: np.ndarray
    gap_start: np.ndarray  # where each event's host work began (the previous call's return)
    event_start: np.ndarray
    event_thread: np.ndarray
    blocks: np.ndarray  # per event: True for a blocking call
    blocked: np.ndarray  # how long each blocking call held the host in the trace
    launched: Launches  # GPU op rows each event launched
    event_of_op: np.ndarray  # per GPU op: the event that launched it, NONE
    stream: np.ndarray  # per GPU op
    duration: np.ndarray
    latency: np.ndarray
    others: np.ndarray  # (start, end, stream) of ops launched outside, by start: (k, 3)
    # GPU op -> the op on another stream it waited for in the trace (collectives only)
    after: dict[int, int] = field(default_factory=dict)
    fixed_ends: dict[int, int] = field(default_factory=dict)  # such an op, not launched: its end
    # What the profiler's cost was estimated from, so that it can be scaled (``with_cost_scale``)
    gap_ns: np.ndarray | None = None  # per event: the host time before it, profiler included
    cost_ns: np.ndarray | None = None  # per event: the profiler's estimated cost in that time
    call_ns: np.ndarray | None = None  # per event: the call's time in the trace
    launch_cost_ns: np.ndarray | None = None  # per event: the callbacks' cost, launches only
    tail_cost_ns: int = 0  # the profiler's cost from the last event's return to the trace's end
    cost_scale: float = 1.0
    # Events whose cost has a scale of its own: per event its phase (``PHASE_OPTIMIZER``,
    # ``PHASE_BACKWARD``; 0 for the rest), where the recorder timed that part of the step
    # unprofiled (``steps.calibrated``), and each phase's scale; ``with_cost_scale`` keeps them.
    phase_of_event: np.ndarray | None = None
    phase_scales: dict[int, float] = field(default_factory=dict)
    # The trace is a window of a training loop (it has ProfilerSteps): a saving is what one more
    # pass of the window takes in steady state, where the GPU work still queued when the host
    # finishes overlaps the next pass's host work instead of ending the run.
    periodic: bool = False
    _base: int | None = None
    _base_period: int | None = None
    _waits: np.ndarray | None = None  # per event: how long the baseline's host waited there
    # The graph as arrays for ``replay_runs``, built on first use (None after: the loop's).
    _runs: Runs | None = None
    _runs_built: bool = False
    # The graph as lists for the event loop of ``_replay``, built on first use.
    _lists: _Lists | None = None
    # What depends on the launches and GPU ops alone, built on first use: the same in every
    # graph ``with_cost_scale`` makes of this one (``as_loop`` starts anew). Per host thread
    # its events (``host_work_inside``); the ops in launch order (``Runs``); the ops as lists
    # (``_Lists``).
    _thread_events: dict[int, np.ndarray] = field(default_factory=dict)
    _shared: dict[str, Any] = field(default_factory=dict)

    def with_cost_scale(self, scale: float) -> StepGraph:
        """The same graph with the profiler's estimated cost multiplied by ``scale``."""
        if self.gap_ns is None or self.cost_ns is None or self.call_ns is None:
            return self
        assert self.launch_cost_ns is not None
        scales: float | np.ndarray = scale
        if self.phase_of_event is not None and self.phase_scales:
            by_phase = np.full(max(self.phase_scales) + 1, scale)
            for phase, phase_scale in self.phase_scales.items():
                by_phase[phase] = phase_scale
            scales = by_phase[self.phase_of_event]
        work = np.maximum(0, self.gap_ns - np.rint(self.cost_ns * scales).astype(np.int64))
        launch = self.launch_cost_ns > 0
        own = np.where(
            launch,
            np.maximum(self.call_ns - np.rint(self.launch_cost_ns * scales), _MIN_LAUNCH_NS),
            self.call_ns,
        ).astype(np.int64)
        return replace(
            self,
            work=work,
            own=own,
            cost_scale=scale,
            _base=None,
            _base_period=None,
            _waits=None,
            _runs=None,
            _runs_built=False,
            _lists=None,
        )

    def with_phase_cost_scale(self, phase: int, events: np.ndarray, scale: float) -> StepGraph:
        """The same graph with these events (a mask) in ``phase`` and the profiler's cost of the
        phase's events scaled by ``scale``; the other events' scales as before."""
        phases = (
            self.phase_of_event.copy()
            if self.phase_of_event is not None
            else np.zeros(len(self.start), dtype=np.int8)
        )
        phases[phases == phase] = 0
        phases[events] = phase
        scales = {**self.phase_scales, phase: scale}
        return replace(self, phase_of_event=phases, phase_scales=scales).with_cost_scale(
            self.cost_scale
        )

    def phase_events(self, phase: int) -> np.ndarray:
        """Per event: whether it is in ``phase`` (none are, before the phase is scaled)."""
        if self.phase_of_event is None:
            return np.zeros(len(self.start), dtype=bool)
        in_phase: np.ndarray = self.phase_of_event == phase
        return in_phase

    def as_loop(self, steps: list[tuple[int, int]]) -> StepGraph:
        """The graph as one pass of a training loop whose steps are these (start, end) ranges.
        A blocking call outside every step is no part of the loop (the profiler synchronizes
        the device when it stops); inside the loop it would hold each next pass's host."""
        if not steps:
            return self
        begins = np.asarray([a for a, _ in steps], dtype=np.int64)
        ends = np.asarray([b for _, b in steps], dtype=np.int64)
        at = self.start
        k = np.searchsorted(begins, at, side="right") - 1
        inside = (k >= 0) & (at < ends[np.maximum(k, 0)])
        outside = self.blocks & ~inside
        blocks = self.blocks & ~outside
        # Such a call's time in the trace was its waiting: as a plain call it costs little
        # (also once the profiler's cost is scaled, which recomputes ``own`` from ``call_ns``).
        own = np.where(outside, CALL_NS, self.own)
        call_ns = np.where(outside, CALL_NS, self.call_ns) if self.call_ns is not None else None
        # What the host did before the first step and after the last (the profiler starting
        # and stopping) is no part of a pass. A pass is the steps: from the first step's start
        # to its first event, and from the last event's return to the last step's end, which
        # a loop runs back to back.
        edge = (at < begins[0]) | (at >= ends[-1])
        if edge.all():  # no host event in the steps: nothing to make a pass of
            edge[:] = False
        work = np.where(edge, 0, self.work)
        own[edge] = 0
        launched = self.launched.without(edge)
        cost_before = self.cost_ns
        gap_ns, cost_ns = self.gap_ns, cost_before
        if gap_ns is not None and cost_ns is not None:
            gap_ns, cost_ns = np.where(edge, 0, gap_ns), np.where(edge, 0, cost_ns)
        if call_ns is not None:
            call_ns = np.where(edge, 0, call_ns)
        steps_events = np.flatnonzero(~edge)
        if len(steps_events):
            first, last = int(steps_events[0]), int(steps_events[-1])
            took = self.call_ns[last] if self.call_ns is not None else self.own[last]
            after_last = last + 1 < len(at)
            returned = int(self.gap_start[last + 1]) if after_last else int(at[last]) + int(took)
            pre = max(0, int(at[first]) - int(begins[0]))
            tail = max(0, int(ends[-1]) - returned)
            work[first] = pre + tail
            if gap_ns is not None and cost_ns is not None and cost_before is not None:
                # The profiler's cost in each part: what it recorded in the host gap the part
                # is cut from, which lies in the steps (the program's events) rather than
                # before or after them (the profiler starting and stopping).
                tail_cost = int(cost_before[last + 1]) if after_last else self.tail_cost_ns
                cost = min(pre, int(cost_before[first])) + min(tail, tail_cost)
                gap_ns[first], cost_ns[first] = pre + tail, cost
                work[first] = max(0, pre + tail - cost)
        return replace(
            self,
            periodic=True,
            blocks=blocks,
            own=own,
            work=work,
            launched=launched,
            gap_ns=gap_ns,
            cost_ns=cost_ns,
            call_ns=call_ns,
            _base=None,
            _base_period=None,
            _waits=None,
            _runs=None,
            _runs_built=False,
            _lists=None,
            _shared={},
        )

    def saving(self, fix: Fix) -> int:
        """ns the fix saves over the whole replay, at most what it takes away."""
        if not len(self.start):
            return 0
        most = fix.touched_ns(self)
        if most <= 0:
            return 0
        if self.periodic:
            return max(0, min(self.period() - self._period(fix), most))
        return max(0, min(self._baseline() - self._replay(fix), most))

    def period(self) -> int:
        """The baseline's steady-state time for one pass of the window (a periodic graph)."""
        if self._base_period is None:
            waits = np.zeros(len(self.start), dtype=np.int64)
            self._base_period = self._period(Fix("baseline"), waits)
            self._waits = waits
        return self._base_period

    def _period(self, fix: Fix, waits: np.ndarray | None = None) -> int:
        """How much longer two passes of the window take than one: the window's steady-state
        time."""
        ends: list[int] = []
        self._replay(fix, passes=2, pass_ends=ends, waits=waits)
        return ends[1] - ends[0]

    def _baseline(self) -> int:
        """The end of the replay without a fix."""
        if self._base is None:
            waits = np.zeros(len(self.start), dtype=np.int64)
            self._base = self._replay(Fix("baseline"), waits=waits)
            self._waits = waits
        return self._base

    def replayed_ns(self) -> int:
        """How long the baseline replay runs: a pass of the loop, or from the host's first
        event to the end."""
        if not len(self.start):
            return 0
        if self.periodic:
            return self.period()
        return self._baseline() - int(self.gap_start[0])

    def waits(self) -> np.ndarray:
        """Per event, how long the host waited there in the baseline replay (its last pass
        for a loop): a blocking call's time beyond what the call itself costs."""
        if self._waits is None:
            if not len(self.start):
                self._waits = np.zeros(0, dtype=np.int64)
            elif self.periodic:
                self.period()
            else:
                self._baseline()
        assert self._waits is not None
        return self._waits

    def events_of(self, host_rows: np.ndarray) -> list[int]:
        """The events of these host call rows (rows that are no event are left out)."""
        order = np.argsort(self.host_rows, kind="stable")
        k = np.searchsorted(self.host_rows[order], host_rows)
        k = np.minimum(k, max(len(order) - 1, 0))
        hit = self.host_rows[order][k] == host_rows if len(order) else np.zeros(0, dtype=bool)
        return sorted(set(order[k[hit]].tolist()))

    def events_launching(self, gpu_rows: np.ndarray) -> list[int]:
        """The events that launched these GPU ops."""
        events = self.event_of_op[gpu_rows]
        return sorted(set(events[events != NONE].tolist()))

    def host_work_inside(self, thread: int, starts: np.ndarray, ends: np.ndarray) -> dict[int, int]:
        """Per event: the host work before it that lies inside the given intervals of a thread
        (the profiler's cost out in proportion)."""
        mine = self._events_on(thread)
        if not len(mine) or not len(starts):
            return {}
        order = np.argsort(starts, kind="stable")
        merged_s, merged_e = _merge(starts[order], ends[order])
        # Only the events whose host work overlaps the intervals' extent can get a share (the
        # rules ask once per optimizer step: over every event of the thread, quadratic).
        near = (self.event_start[mine] > merged_s[0]) & (self.gap_start[mine] < merged_e[-1])
        mine = mine[near]
        if not len(mine):
            return {}
        cum = np.concatenate(([0], np.cumsum(merged_e - merged_s)))

        def covered_until(t: np.ndarray) -> np.ndarray:
            k = np.searchsorted(merged_s, t, side="right") - 1
            inside = np.where(k >= 0, np.clip(t - merged_s[np.maximum(k, 0)], 0, None), 0)
            inside = np.minimum(inside, (merged_e - merged_s)[np.maximum(k, 0)])
            return np.where(k >= 0, cum[np.maximum(k, 0)] + inside, 0)

        a, b = self.gap_start[mine], self.event_start[mine]
        overlap = covered_until(np.maximum(a, b)) - covered_until(a)
        gap = np.maximum(b - a, 1)
        work = self.work[mine]
        share = (overlap * work // gap).astype(np.int64)
        return {int(e): int(s) for e, s in zip(mine.tolist(), share.tolist(), strict=True) if s}

    def _events_on(self, thread: int) -> np.ndarray:
        """The events of one host thread, in replay order (built once per thread)."""
        found = self._thread_events.get(thread)
        if found is None:
            found = self._thread_events[thread] = np.flatnonzero(self.event_thread == thread)
        return found

    def _replay(
        self,
        fix: Fix,
        passes: int = 1,
        pass_ends: list[int] | None = None,
        waits: np.ndarray | None = None,
    ) -> int:
        """The replay's end; ``pass_ends`` gets each pass's end and ``waits`` each event's wait
        in the last pass."""
        if fix.batches is None:
            runs = self._runs_of_graph()
            if runs is not None:
                return replay_runs(runs, fix, passes, pass_ends, waits)
        # The hot loop of the rules (one replay per finding): names bound locally, the
        # comparisons written out, and the per-op checks a fix or graph does not need left out.
        lists = self._lists_of_graph()
        stream, latency = lists.stream, lists.latency
        duration = lists.duration
        removed: dict[int, int] | set[int] = {}
        if fix.durations:
            duration = list(duration)
            for row, ns in fix.durations.items():
                duration[row] = ns
            removed = {row for row, ns in fix.durations.items() if ns <= 0}
        others = lists.others
        n_others = len(others)
        other_k = 0
        stream_free: dict[int, int] = {}
        free = stream_free.get
        clock = int(self.gap_start[0])
        finish = max((end for _, end, _ in others), default=0)
        queued_end = 0
        # A rule may hand in the graph's own numpy ints: the loop's sums stay Python ints.
        saved = {e: int(ns) for e, ns in fix.host_saved.items()}
        after = self.after
        waited_for = set(after.values())
        ends = dict(self.fixed_ends)
        own_fix, unblocked = fix.own, fix.unblocked
        work, blocks, own = lists.work, lists.blocks, lists.own
        batches = fix.batches
        load_ns = batches.load_ns if batches is not None else {}
        worker_free: list[int] = [clock] * (batches.workers if batches is not None else 0)
        taken: list[int] = []  # when the host took each batch
        in_flight = batches.prefetch * batches.workers if batches is not None else 0
        launched = lists.launched
        n = len(launched)
        last_pass = n * (passes - 1)
        for k in range(n * passes):
            i = k % n
            if i == 0 and k and pass_ends is not None:
                pass_ends.append(max(finish, queued_end, clock))
            ops = launched[i]
            step = work[i] - saved.get(i, 0) if saved else work[i]
            if step > 0:
                clock += step
            if load_ns:
                load = load_ns.get(i)
                if load is not None:
                    j = len(taken)
                    w = j % len(worker_free)
                    begin = worker_free[w]
                    if j >= in_flight and taken[j - in_flight] > begin:
                        begin = taken[j - in_flight]
                    worker_free[w] = begin + load
                    if begin + load > clock:
                        clock = begin + load
                    taken.append(clock)
            while other_k < n_others and others[other_k][0] <= clock:
                _, end, s = others[other_k]
                if end > free(s, 0):
                    stream_free[s] = end
                other_k += 1
            for row in ops:
                ns = duration[row]
                if ns <= 0 and row in removed:
                    continue
                s = stream[row]
                begin = clock + latency[row]
                busy = free(s, 0)
                if busy > begin:
                    begin = busy
                if after:
                    wait = ends.get(after.get(row, NONE), 0)
                    if wait > begin:
                        begin = wait
                end = begin + ns
                if row in waited_for:
                    ends[row] = end
                stream_free[s] = end
                if end > queued_end:
                    queued_end = end
            if not blocks[i]:
                clock += own_fix.get(i, own[i]) if own_fix else own[i]
            elif i in unblocked:
                clock += own_fix.get(i, CALL_NS)
            else:
                if waits is not None and k >= last_pass and queued_end > clock + CALL_NS:
                    waits[i] = queued_end - clock - CALL_NS
                clock = clock + CALL_NS if clock + CALL_NS > queued_end else queued_end
        # The host's tail after its last launch or wait (often the profiler stopping) changes
        # no launch: the replay ends with the last GPU op or the last call.
        end = max(finish, queued_end, clock)
        if pass_ends is not None:
            pass_ends.append(end)
        return end

    def _runs_of_graph(self) -> Runs | None:
        """The graph as arrays for ``replay_runs``; None where the event loop replays it: ops
        wait for other streams (``after``), blocking calls come every few events (a run per
        call costs more than the loop), or times so large that int64 sums could overflow."""
        if not self._runs_built:
            self._runs = Runs.of(self)
            self._runs_built = True
        return self._runs

    def _lists_of_graph(self) -> _Lists:
        """The graph as lists for the event loop (indexing a list is what the loop does per op:
        several times faster than indexing an array)."""
        if self._lists is None:
            ops = self._shared.get("lists")
            if ops is None:
                ops = self._shared["lists"] = (
                    self.stream.tolist(),
                    self.latency.tolist(),
                    self.duration.tolist(),
                    _groups(self.launched),
                    [tuple(o) for o in self.others.tolist()],
                )
            stream, latency, duration, launched, others = ops
            self._lists = _Lists(
                work=self.work.tolist(),
                own=self.own.tolist(),
                blocks=self.blocks.tolist(),
                launched=launched,
                stream=stream,
                latency=latency,
                duration=duration,
                others=others,
            )
        return self._lists


def _groups(launched: Launches) -> list[tuple[int, ...]]:
    rows = launched.rows.tolist()
    return [tuple(rows[a:b]) for a, b in itertools.pairwise(launched.first.tolist())]


@dataclass(frozen=True)
class _Lists:
    """A graph as lists, for the event loop."""

    work: list[int]
    own: list[int]
    blocks: list[bool]
    launched: list[tuple[int, ...]]
    stream: list[int]
    latency: list[int]
    duration: list[int]
    others: list[tuple[int, int, int]]


def build_graph(
    trace: Trace,
    ops: OpAttribution,
    locator: Locator,
    blocking_rows: np.ndarray,
    options: AnalysisOptions,
) -> StepGraph:
    host, gpu = trace.host_calls, trace.gpu
    has = np.flatnonzero(ops.launch != NONE)
    calls = distinct(ops.launch[has])
    rows = distinct(np.concatenate((calls, blocking_rows.astype(np.int64, copy=False))))
    rows = rows[np.lexsort((rows, host.start_ns[rows]))] if len(rows) else rows
    starts, ends = host.start_ns[rows], host.end_ns[rows]
    threads = host.thread[rows]
    reach = np.maximum.accumulate(ends) if len(rows) else ends
    # The host work before the first launch (loading the first batch) counts too.
    first_seen = _first_host_time(trace, threads[0]) if len(rows) else 0
    prev = np.concatenate((np.minimum(starts[:1], first_seen), reach[:-1]))
    gap_end = np.maximum(prev, starts)
    cost = locator.profiler_cost_between(threads, prev, gap_end) if len(rows) else prev
    gap_ns = gap_end - prev
    work = np.maximum(0, gap_ns - cost)
    is_blocking = member(rows, blocking_rows)
    # A launch call's time in the trace includes the profiler's callback around it.
    names = distinct(host.name[rows])
    launch_names = names[[("aunch" in trace.strings[n]) for n in names.tolist()]]
    is_launch = member(host.name[rows], launch_names)
    own = np.where(
        is_launch,
        np.maximum(ends - starts - options.profiler_cost_per_launch_ns, _MIN_LAUNCH_NS),
        ends - starts,
    )
    # Each launched op's event: the place of its launch call among the events.
    event_of_op = np.full(len(gpu), NONE, dtype=np.int64)
    by_row = np.argsort(rows, kind="stable")
    event_of_op[has] = by_row[np.searchsorted(rows[by_row], ops.launch[has])]
    by_event = has[np.argsort(event_of_op[has], kind="stable")]
    counts = np.bincount(event_of_op[has], minlength=len(rows))
    launched = Launches(by_event, np.concatenate(([0], np.cumsum(counts))).astype(np.int64))
    fixed = np.flatnonzero(event_of_op == NONE)
    fixed = fixed[np.argsort(gpu.start_ns[fixed], kind="stable")]
    end_of_trace = int(
        max(table.end_ns.max(initial=0) for table in (host, gpu, trace.cpu_ops, trace.frames))
    )
    last_host = int(reach[-1]) if len(rows) else 0
    tail_cost = (
        int(locator.profiler_cost_between(threads[-1:], reach[-1:], np.array([end_of_trace]))[0])
        if len(rows) and end_of_trace > last_host
        else 0
    )
    after = _collective_waits(trace, ops)
    launched_ops = event_of_op != NONE
    return StepGraph(
        after=after,
        fixed_ends={y: int(gpu.end_ns[y]) for y in set(after.values()) if not launched_ops[y]},
        host_rows=rows,
        start=starts,
        own=own,
        work=work,
        gap_start=prev,
        event_start=gap_end,
        event_thread=threads,
        blocks=is_blocking,
        blocked=np.where(is_blocking, ends - starts, 0),
        launched=launched,
        event_of_op=event_of_op,
        stream=gpu.stream,
        duration=gpu.end_ns - gpu.start_ns,
        latency=_latencies(trace, ops),
        others=np.stack((gpu.start_ns[fixed], gpu.end_ns[fixed], gpu.stream[fixed]), axis=1),
        gap_ns=gap_ns,
        cost_ns=cost,
        call_ns=ends - starts,
        launch_cost_ns=np.where(is_launch, options.profiler_cost_per_launch_ns, 0),
        tail_cost_ns=tail_cost,
    )


def _collective_waits(trace: Trace, ops: OpAttribution) -> dict[int, int]:
    """GPU op -> the op on another stream it waited for, where one of the two is a collective
    kernel: launched, its stream free, it still started more than a launch latency later, just
    as the other one ended."""
    gpu, host = trace.gpu, trace.host_calls
    if not len(gpu) or not len(host):
        return {}
    is_comm_name = communication_names(trace.strings, gpu.name)
    comm = is_comm_name[gpu.name] & (gpu.kind == GPU_KERNEL)
    if not comm.any():
        return {}
    order = np.lexsort((gpu.start_ns, gpu.stream))
    stream = gpu.stream[order]
    free = np.concatenate(([np.iinfo(np.int64).min], gpu.end_ns[order][:-1]))
    free[np.concatenate(([True], stream[1:] != stream[:-1]))] = np.iinfo(np.int64).min
    ready = np.full(len(gpu), np.iinfo(np.int64).max, dtype=np.int64)
    launch = ops.launch[order]
    has = launch != NONE
    ready[order[has]] = np.maximum(host.start_ns[launch[has]], free[has])
    waited = np.flatnonzero(gpu.start_ns - ready > _MAX_LATENCY_NS)
    if not len(waited):
        return {}
    by_end = np.argsort(gpu.end_ns, kind="stable")
    ends = gpu.end_ns[by_end]
    k = np.searchsorted(ends, gpu.start_ns[waited] + _DEPENDENCY_SLACK_NS, side="right") - 1
    ok = k >= 0
    waited, k = waited[ok], k[ok]
    other = by_end[k]
    near = (gpu.end_ns[other] >= gpu.start_ns[waited] - _MAX_LATENCY_NS) & (other != waited)
    near &= gpu.stream[other] != gpu.stream[waited]
    near &= comm[waited] | comm[other]
    return dict(zip(waited[near].tolist(), other[near].tolist(), strict=True))


def _first_host_time(trace: Trace, thread: int) -> int:
    """When the trace first shows the thread at work (a frame, an op or a call)."""
    firsts = [
        table.start_ns[table.thread == thread].min(initial=np.iinfo(np.int64).max)
        for table in (trace.frames, trace.cpu_ops, trace.host_calls)
    ]
    return int(min(firsts))


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted intervals merged where they overlap."""
    if not len(starts):
        return starts, ends
    reach = np.maximum.accumulate(ends)
    new = np.concatenate(([True], starts[1:] > reach[:-1]))
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [len(starts) - 1]))
    return starts[first], reach[last]


def _latencies(trace: Trace, ops: OpAttribution) -> np.ndarray:
    """Launch-to-start delay of each GPU op where its stream was idle at launch, else 0."""
    gpu, host = trace.gpu, trace.host_calls
    out = np.zeros(len(gpu), dtype=np.int64)
    if not len(gpu) or not len(host):
        return out
    order = np.lexsort((gpu.start_ns, gpu.stream))
    stream = gpu.stream[order]
    # When each op's stream finished its previous op (never, for a stream's first op).
    free = np.concatenate(([np.iinfo(np.int64).min], gpu.end_ns[order][:-1]))
    free[np.concatenate(([True], stream[1:] != stream[:-1]))] = np.iinfo(np.int64).min
    launch = ops.launch[order]
    has = launch != NONE
    launched = np.where(has, host.start_ns[np.maximum(launch, 0)], 0)
    idle = has & (free <= launched)
    lag = np.clip(gpu.start_ns[order] - launched, 0, _MAX_LATENCY_NS)
    out[order[idle]] = lag[idle]
    return out
