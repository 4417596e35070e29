"""The GPU timeline: busy time, idle gaps, and why each gap happened (docs/architecture.md §4)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.collectives import Collectives
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.op_lines import OpAttribution
from brrr_trace.arraysets import distinct
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.model import GPU_MEMCPY, Trace
from brrr_trace.vocabulary import IdleCause

# Host calls that block until the GPU drains (CUDA runtime, driver API and HIP spellings).
_SYNC_CALLS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpyFromSymbol",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "cuMemcpyDtoH",
        "cuMemcpyDtoH_v2",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
        "hipMemcpyDtoH",
    }
)
CAUSES: tuple[IdleCause, ...] = tuple(IdleCause)
_CAUSE_CODE = {cause: code for code, cause in enumerate(CAUSES)}


@dataclass(frozen=True)
class DeviceTimeline:
    device: int
    first_ns: int
    last_ns: int
    busy_ns: int
    gap_start: np.ndarray
    gap_end: np.ndarray
    gap_cause: np.ndarray  # codes into CAUSES
    gap_next_op: np.ndarray  # gpu row of the op that ended the gap
    # The one line a view shows for each gap (the drawn timeline): for a sync gap the line that
    # blocked, else the line charged with the largest part of it; NONE for no line.
    gap_line: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def span_ns(self) -> int:
        return self.last_ns - self.first_ns

    @property
    def idle_ns(self) -> int:
        return self.span_ns - self.busy_ns

    @property
    def utilization(self) -> float | None:
        return self.busy_ns / self.span_ns if self.span_ns > 0 else None

    def idle_by_cause(self) -> dict[IdleCause, int]:
        lengths = self.gap_end - self.gap_start
        return {
            cause: int(lengths[self.gap_cause == code].sum()) for code, cause in enumerate(CAUSES)
        }


@dataclass(frozen=True)
class Timeline:
    devices: tuple[DeviceTimeline, ...]
    exclusive_ns: np.ndarray  # per gpu row: the part of the union this op alone accounts for
    # (line id, cause) -> idle ns charged; line NONE collects what no line can take.
    idle_charges: dict[tuple[int, IdleCause], int] = field(default_factory=dict)
    # (line id, cause) -> the profiler's own estimated cost inside that idle (host-side gaps):
    # each event the profiler records on the host thread during a gap slowed the host down.
    profiler_charges: dict[tuple[int, IdleCause], int] = field(default_factory=dict)
    # line id -> the blocking calls (host rows) on it after which the GPU's queue ran dry.
    sync_waits: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # line id -> the whole GPU idle after its blocking calls, wherever the rest of it is charged.
    sync_gaps: dict[int, int] = field(default_factory=dict)
    # Every blocking host call: syncs, synchronous copies, device-to-host copies.
    blocking_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def build_timeline(
    trace: Trace,
    ops: OpAttribution,
    locator: Locator,
    options: AnalysisOptions,
    collectives: Collectives | None = None,
) -> Timeline:
    gpu = trace.gpu
    exclusive = np.zeros(len(gpu), dtype=np.int64)
    charges: dict[tuple[int, IdleCause], int] = {}
    profiler: dict[tuple[int, IdleCause], int] = {}
    waits: dict[int, set[int]] = {}
    sync_gaps: dict[int, int] = {}
    sync = _sync_calls(trace, ops)
    waits_in = _host_collectives(collectives)
    devices = []
    for device in distinct(gpu.device).tolist():
        rows = np.flatnonzero(gpu.device == device)
        start, end = gpu.start_ns[rows], gpu.end_ns[rows]
        reach = np.maximum.accumulate(end)
        before = np.concatenate(([start[0]], reach[:-1]))
        exclusive[rows] = np.maximum(0, end - np.maximum(start, before))
        is_gap = start > before
        gap_rows = rows[is_gap]
        gap_start, gap_end = before[is_gap], start[is_gap]
        cause, owner = _classify(
            trace, ops, locator, options, sync, gap_start, gap_end, gap_rows, charges, profiler,
            waits, sync_gaps, waits_in,
        )  # fmt: skip
        devices.append(
            DeviceTimeline(
                device=int(device),
                first_ns=int(start[0]),
                last_ns=int(reach[-1]),
                busy_ns=int(exclusive[rows].sum()),
                gap_start=gap_start,
                gap_end=gap_end,
                gap_cause=cause,
                gap_next_op=gap_rows,
                gap_line=owner,
            )
        )
    return Timeline(
        devices=tuple(devices),
        exclusive_ns=exclusive,
        idle_charges=charges,
        profiler_charges=profiler,
        sync_waits={line: tuple(sorted(w)) for line, w in waits.items()},
        sync_gaps=sync_gaps,
        blocking_rows=sync.row,
    )


def _sync_before(sync: _SyncCalls, g0: np.ndarray, tol: int) -> np.ndarray:
    """For each gap start: the host row of the sync call it began in or right after, NONE."""
    out = np.full(len(g0), NONE, dtype=np.int64)
    if len(sync.start):
        j = np.searchsorted(sync.start, g0 + tol, side="right") - 1
        ok = j >= 0
        ok[ok] = sync.end[j[ok]] >= g0[ok] - tol
        out[ok] = sync.row[j[ok]]
    return out


@dataclass(frozen=True)
class _SyncCalls:
    start: np.ndarray
    end: np.ndarray
    row: np.ndarray  # host call rows


@dataclass(frozen=True)
class _HostCollectives:
    """Collectives the host carries out itself (no GPU kernel: gloo, CPU). The GPU waits for one
    while the thread that would launch its next work sits in the call, or until the copies of
    its result that its run launched (gloo's worker thread) arrive."""

    thread: np.ndarray  # the issuing thread
    start: np.ndarray  # the issuing op
    end: np.ndarray
    line: np.ndarray  # the line each is charged to, NONE
    returned_by: dict[int, int]  # GPU row a run launched -> its call


def _host_collectives(found: Collectives | None) -> _HostCollectives:
    rows: list[tuple[int, int, int, int]] = []
    returned_by: dict[int, int] = {}
    if found is not None:
        for k in range(len(found.calls)):
            if found.kernels[k]:
                continue
            thread, start, end = found.windows[k][0]
            rows.append((thread, start, end, found.line_id[k]))
            for row in found.returned[k]:
                returned_by[row] = len(rows) - 1
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return _HostCollectives(table[:, 0], table[:, 1], table[:, 2], table[:, 3], returned_by)


def _in_collective(
    found: _HostCollectives, thread: np.ndarray, g0: np.ndarray, g1: np.ndarray, tol: int
) -> tuple[np.ndarray, np.ndarray]:
    """For each gap: the host collective its next op's launching thread sat in when the gap
    began or for at least half of it (NONE), and how long of the gap it sat there."""
    call = np.full(len(g0), NONE, dtype=np.int64)
    inside = np.zeros(len(g0), dtype=np.int64)
    for k, (h, a, b) in enumerate(
        zip(found.thread.tolist(), found.start.tolist(), found.end.tolist(), strict=True)
    ):
        # Gaps are disjoint and in order: those meeting [a - tol, b) are one run of them.
        lo = int(np.searchsorted(g1, a - tol, side="right"))
        hi = int(np.searchsorted(g0, b, side="left"))
        if hi <= lo:
            continue
        at = slice(lo, hi)
        ns = np.minimum(g1[at], b) - np.maximum(g0[at], a)
        began = (g0[at] + tol >= a) & (g0[at] < b)
        hit = (call[at] == NONE) & (thread[at] == h) & (began | (2 * ns >= g1[at] - g0[at]))
        hit &= ns > 0
        where = lo + np.flatnonzero(hit)
        call[where] = k
        inside[where] = ns[hit]
    return call, inside


def _sync_calls(trace: Trace, ops: OpAttribution) -> _SyncCalls:
    host = trace.host_calls
    is_sync_name = np.array([s in _SYNC_CALLS for s in trace.strings], dtype=bool)
    mask = is_sync_name[host.name] if len(host) else np.zeros(0, dtype=bool)
    # A device-to-host copy makes the host wait for everything queued before it.
    gpu = trace.gpu
    dtoh = (gpu.kind == GPU_MEMCPY) & (ops.launch != NONE)
    if dtoh.any():
        is_dtoh_name = np.array(["DtoH" in s or "Device -> Pageable" in s for s in trace.strings])
        dtoh &= is_dtoh_name[gpu.name]
        mask[ops.launch[dtoh]] = True
    rows = np.flatnonzero(mask)
    order = rows[np.argsort(host.start_ns[rows], kind="stable")]
    return _SyncCalls(host.start_ns[order], host.end_ns[order], order)


def _classify(
    trace: Trace,
    ops: OpAttribution,
    locator: Locator,
    options: AnalysisOptions,
    sync: _SyncCalls,
    g0: np.ndarray,
    g1: np.ndarray,
    next_rows: np.ndarray,
    charges: dict[tuple[int, IdleCause], int],
    profiler: dict[tuple[int, IdleCause], int],
    waits: dict[int, set[int]],
    sync_gaps: dict[int, int],
    in_collective: _HostCollectives,
) -> tuple[np.ndarray, np.ndarray]:
    """Each gap's cause code, and the line charged with the largest part of it (NONE)."""
    host = trace.host_calls
    n = len(g0)
    cause = np.full(n, _CAUSE_CODE[IdleCause.OTHER], dtype=np.int8)
    gap_owner = np.full(n, NONE, dtype=np.int64)
    tol = options.clock_tolerance_ns
    launch = ops.launch[next_rows]
    known = launch != NONE
    thread = np.full(n, NONE, dtype=np.int64)
    launched_at = np.zeros(n, dtype=np.int64)
    thread[known] = host.thread[launch[known]]
    launched_at[known] = host.start_ns[launch[known]]

    def charge(line: int, kind: IdleCause, ns: int, cost: int = 0) -> None:
        key = (line, kind)
        charges[key] = charges.get(key, 0) + ns
        if cost:
            profiler[key] = profiler.get(key, 0) + cost

    def charge_many(
        lines: np.ndarray, ns: np.ndarray, kind: IdleCause, cost: np.ndarray | None = None
    ) -> None:
        if len(lines) == 0:
            return
        keys, inverse = np.unique(lines, return_inverse=True)
        sums = np.bincount(inverse, weights=ns, minlength=len(keys))
        costs = (
            np.bincount(inverse, weights=cost, minlength=len(keys))
            if cost is not None
            else np.zeros(len(keys))
        )
        for line, total, c in zip(keys.tolist(), sums.tolist(), costs.tolist(), strict=True):
            charge(line, kind, int(total), int(c))

    profiler_cost = locator.profiler_cost_between

    # collective: the thread that launches the GPU's next work sat in a collective of its own
    # (gloo) when the queue ran dry, or the work the GPU waited for is the collective's result
    # (gloo's worker copies it back). The call's line owns the gap while the host was in it; for
    # the rest, the line whose launch ends the gap (the result's copy: the call's line too).
    call, inside = _in_collective(in_collective, thread, g0, g1, tol)
    if in_collective.returned_by:
        for gap in np.flatnonzero(call == NONE).tolist():
            call[gap] = in_collective.returned_by.get(int(next_rows[gap]), NONE)
    is_collective = call != NONE
    cause[is_collective] = _CAUSE_CODE[IdleCause.COLLECTIVE]
    if is_collective.any():
        length = (g1 - g0)[is_collective]
        owner = in_collective.line[call[is_collective]]
        ended_by = ops.line[next_rows[is_collective]]
        ended_by = np.where(ended_by != NONE, ended_by, owner)
        charge_many(owner, inside[is_collective], IdleCause.COLLECTIVE)
        charge_many(ended_by, length - inside[is_collective], IdleCause.COLLECTIVE)
        gap_owner[is_collective] = owner

    # sync: the host sat in a blocking call when the queue ran dry.
    sync_row = _sync_before(sync, g0, tol)
    sync_row[is_collective] = NONE
    is_sync = sync_row != NONE
    cause[is_sync] = _CAUSE_CODE[IdleCause.SYNC]
    if is_sync.any():
        rows = sync_row[is_sync]
        sync_threads = host.thread[rows]
        sync_lines = locator.lines_at(sync_threads, host.start_ns[rows])
        a, b = g0[is_sync], g1[is_sync]
        # The sync line owns the gap while the host sat in the call. Once it returned, the host
        # went on: the rest belongs to the lines it ran (a Dataset's own code while a batch
        # loads), and where no user code ran, to the line whose launch ends the gap.
        returned = np.clip(host.end_ns[rows], a, b)
        gap_owner[is_sync] = sync_lines
        cost = profiler_cost(sync_threads, a, returned)
        charge_many(sync_lines, returned - a, IdleCause.SYNC, cost)
        after = np.flatnonzero(returned < b)
        later = profiler_cost(sync_threads[after], returned[after], b[after])
        next_line = ops.line[next_rows[is_sync]]
        ran = locator.lines_over_many(sync_threads[after], returned[after], b[after])
        for k, c, pieces in zip(after.tolist(), later.tolist(), ran, strict=True):
            length = int(b[k] - returned[k])
            rest_owner = int(next_line[k]) if next_line[k] != NONE else int(sync_lines[k])
            for line, ns in pieces:
                owner = rest_owner if line == NONE else line
                charge(owner, IdleCause.SYNC, ns, c * ns // length)
        for line, row, gap in zip(
            sync_lines.tolist(), rows.tolist(), (b - a).tolist(), strict=True
        ):
            waits.setdefault(line, set()).add(row)
            sync_gaps[line] = sync_gaps.get(line, 0) + gap

    undecided = ~is_sync & ~is_collective
    # dataloader: the launching thread was inside DataLoader.__next__ for most of the gap.
    if len(locator.dataloader_rows):
        for k in np.flatnonzero(undecided & known).tolist():
            covered, caller = locator.dataloader_wait(int(thread[k]), int(g0[k]), int(g1[k]))
            if covered * 2 >= int(g1[k] - g0[k]):
                cause[k] = _CAUSE_CODE[IdleCause.DATALOADER]
                gap_owner[k] = caller
                undecided[k] = False
                loading_cost = int(
                    profiler_cost(thread[k : k + 1], g0[k : k + 1], g1[k : k + 1])[0]
                )
                # The lines that ran while the batch loaded: a Dataset's own code, else the
                # statement that asked for the batch.
                length = int(g1[k] - g0[k])
                for line, ns in locator.lines_over(int(thread[k]), int(g0[k]), int(g1[k])):
                    owner = caller if line == NONE else line
                    charge(owner, IdleCause.DATALOADER, ns, loading_cost * ns // length)

    # host: the launch had not even started when the GPU ran out of work.
    is_host = undecided & known & (launched_at >= g0)
    cause[is_host] = _CAUSE_CODE[IdleCause.HOST]
    host_idx = np.flatnonzero(is_host)
    if len(host_idx):
        next_of = ops.line[next_rows[host_idx]]
        # The autograd engine launched late: the forward line whose backward it was running.
        in_backward = locator.backward_points(thread[host_idx], launched_at[host_idx]).inside
        at_start = locator.lines_at(thread[host_idx], g0[host_idx])
        at_start = np.where(in_backward | (at_start == NONE), next_of, at_start)
        # One statement ran throughout where no call or op started or ended in the gap. A thread
        # with no Python frames (a legacy ``Call stack`` trace) has no statements to cut by:
        # its gap stays with the line running when the GPU ran dry.
        framed = locator.has_user_frames(thread[host_idx])
        cuts = locator.calls_between(thread[host_idx], g0[host_idx], g1[host_idx])
        same = ~in_backward & ~(cuts & framed)
        cost = profiler_cost(thread[host_idx], g0[host_idx], g1[host_idx])
        gap_owner[host_idx] = at_start
        charge_many(at_start[same], (g1 - g0)[host_idx[same]], IdleCause.HOST, cost[same])
        rest = np.flatnonzero(~same)
        # The engine's gaps go node by node (looked up together); the rest, statement by
        # statement.
        by_engine = rest[in_backward[rest]]
        engine_pieces = dict(
            zip(
                by_engine.tolist(),
                locator.engine_lines_over(
                    thread[host_idx[by_engine]],
                    g0[host_idx[by_engine]],
                    g1[host_idx[by_engine]],
                    launched_at[host_idx[by_engine]],
                ),
                strict=True,
            )
        )
        by_statement = rest[~in_backward[rest]]
        statement_pieces = dict(
            zip(
                by_statement.tolist(),
                locator.lines_over_many(
                    thread[host_idx[by_statement]],
                    g0[host_idx[by_statement]],
                    g1[host_idx[by_statement]],
                ),
                strict=True,
            )
        )
        for j in rest.tolist():
            k, c, fallback = int(host_idx[j]), int(cost[j]), int(next_of[j])
            length = int(g1[k] - g0[k])
            pieces = engine_pieces[j] if j in engine_pieces else statement_pieces[j]
            most = 0
            for line, ns in pieces or [(NONE, length)]:
                line_owner = fallback if line == NONE else line
                charge(line_owner, IdleCause.HOST, ns, c * ns // length if length else 0)
                if ns > most:
                    most, gap_owner[k] = ns, line_owner

    # launch: work was already submitted; a short gap is the launch latency of the next op.
    is_launch = undecided & known & ~is_host & ((g1 - g0) <= options.launch_gap_ns)
    cause[is_launch] = _CAUSE_CODE[IdleCause.LAUNCH]
    next_line = ops.line[next_rows]
    charge_many(next_line[is_launch], (g1 - g0)[is_launch], IdleCause.LAUNCH)
    gap_owner[is_launch] = next_line[is_launch]

    rest = undecided & ~is_host & ~is_launch
    if rest.any():
        charge(NONE, IdleCause.OTHER, int((g1 - g0)[rest].sum()))
    return cause, gap_owner
