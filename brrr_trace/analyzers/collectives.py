"""Every collective call of one rank's trace: what it was, its group and place in the group's
order, its size, and where it ran on the host and on the GPU (docs/architecture.md §12).

A call is one outermost host-side collective op on a thread: ``c10d::*`` (and functional
``_c10d_functional::*``) ops, ``record_param_comms`` (which carries the collective's metadata),
and the backend's own region (``nccl:all_reduce``, ``gloo:all_reduce``, ...). They nest (c10d op
> record_param_comms > nccl:...), so the outermost is the call and the inner ones tell about it.
gloo runs a call on its worker thread: a region alone on a thread is the run of the call of the
same name issued before it elsewhere. What a call launched (correlation, then time containment
on the launching thread: the External id is wrong in 2021-2024 traces) is its GPU side: the
collective kernels, and copies (gloo stages CUDA tensors through host memory).

The per-group ``index`` is what ranks agree on: every rank of a process group issues the
group's collectives in the same order, so the k-th call of a group is the same collective on
every rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec
import numpy as np

from brrr_trace.analyzers.intervals import NONE, Innermost
from brrr_trace.analyzers.kernels import kernel_kind
from brrr_trace.analyzers.op_lines import link_launches
from brrr_trace.analyzers.opcost.args import bytes_per_element, dtype_of_type
from brrr_trace.analyzers.steps import profiler_steps
from brrr_trace.arraysets import distinct, member
from brrr_trace.traces.model import GPU_KERNEL, NO_ID, Trace
from brrr_trace.vocabulary import KernelKind

DEFAULT_GROUP = "default"


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    group: str  # process group name/id from the trace ("default" when unknown)
    index: int  # 0-based order of this call among this rank's calls in `group`
    name: str  # normalized: allreduce, allgather, reduce_scatter, broadcast, alltoall, ...
    bytes: int | None  # message size when the trace says (elements x dtype size)
    step: int | None  # ProfilerStep number it falls in, if any
    host_start_ns: int  # the host-side collective op (record_param_comms / c10d::* / nccl:*)
    host_end_ns: int
    kernel_start_ns: int | None  # its GPU collective kernel(s); None for gloo/CPU
    kernel_end_ns: int | None
    line: str | None  # "relative/path.py:LINE" of the source line it is charged to


# Host-side op names that are (part of) a collective call.
_HOST_OP = re.compile(
    r"^(?:record_param_comms$|c10d::|_c10d_functional::|c10d_functional::|symm_mem::"
    r"|(?:nccl|rccl|gloo|ucc|mpi|xccl|hccl):)"
)
_PARAM_COMMS = "record_param_comms"
# The backend's own region of a call (its run, on a gloo worker thread when asynchronous).
_REGION = re.compile(r"^(?:nccl|rccl|gloo|ucc|mpi|xccl|hccl):")

# Spellings of collectives in c10d op names, backend regions and "Collective name", normalized.
_NAMES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), name)
    for pattern, name in (
        (r"reduce_?scatter", "reduce_scatter"),
        (r"all_?reduce", "allreduce"),
        (r"all_?gather", "allgather"),
        (r"all_?to_?all", "alltoall"),
        (r"broadcast", "broadcast"),
        (r"barrier", "barrier"),
        (r"send", "send"),
        (r"recv", "recv"),
        (r"^_?reduce", "reduce"),
        (r"^_?gather", "gather"),
        (r"^_?scatter", "scatter"),
    )
)
_COLLECTIVES = frozenset(name for _, name in _NAMES)

# c10::ScalarType names, as "dtype" of the collective metadata writes them: bytes per element.
_SCALAR_TYPE_BYTES = {
    "Double": 8,
    "Float": 4,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "ComplexHalf": 4,
    "UInt16": 2,
    "UInt32": 4,
    "UInt64": 8,
}


def normalized_name(text: str) -> str:
    """``c10d::_allgather_base_``, ``nccl:all_gather``, ``_allgather_base`` -> ``allgather``."""
    word = text.rsplit(":", 1)[-1].strip().lower()
    for pattern, name in _NAMES:
        if pattern.search(word):
            return name
    return word.strip("_") or "unknown"  # not a collective: waits, set-up


@dataclass(frozen=True)
class _Meta:
    name: str | None = None
    in_nelems: int | None = None
    out_nelems: int | None = None
    dtype_bytes: int | None = None
    group: str | None = None


@dataclass(frozen=True)
class Collectives:
    """The calls, and what the analysis needs about each beyond the contract."""

    calls: tuple[CollectiveCall, ...]
    thread: tuple[int, ...]  # the host thread that issued each
    kernels: tuple[tuple[int, ...], ...]  # its GPU collective kernels (rows of trace.gpu)
    # Every GPU op launched inside it (its kernels, gloo's staging copies, NCCL's fills)
    launched: tuple[tuple[int, ...], ...] = ()
    # Where the host carried it out: (thread, start, end) of the issuing op, then of each run
    # on another thread (gloo's worker)
    windows: tuple[tuple[tuple[int, int, int], ...], ...] = ()
    # What its runs launched (gloo's copies of the result back to the GPU): the GPU waits for
    # the collective when one of these ends an idle gap
    returned: tuple[tuple[int, ...], ...] = ()
    line_id: tuple[int, ...] = ()  # the line it is charged to (NONE), once placed
    # Every line it is charged for (the bucket's producers, by GPU time), line_id first.
    lines: tuple[tuple[int, ...], ...] = ()

    def launched_rows(self) -> np.ndarray:
        """Every GPU op some call launched, sorted."""
        rows = sorted({row for launched in self.launched for row in launched})
        return np.array(rows, dtype=np.int64)


def collectives_of(trace: Trace) -> tuple[CollectiveCall, ...]:
    """The trace's collective calls in host start order, ``line`` None
    (``collective_lines.place_collectives`` charges them to lines, docs/architecture.md §12)."""
    return find_collectives(trace).calls


def find_collectives(trace: Trace) -> Collectives:
    cpu, strings = trace.cpu_ops, trace.strings
    none = Collectives((), (), ())
    if not len(cpu):
        return none
    is_comm = np.array([bool(_HOST_OP.match(s)) for s in strings], dtype=bool)
    rows = np.flatnonzero(is_comm[cpu.name])
    if not len(rows):
        return none
    outer = _outermost(trace, rows)
    index = Innermost(cpu.thread[outer], cpu.start_ns[outer], cpu.end_ns[outer])
    # Which call each collective op (its outermost op) belongs to.
    owner = index.at_many(cpu.thread[rows], cpu.start_ns[rows])
    metas: dict[int, list[int]] = {}
    for row, k in zip(rows.tolist(), owner.tolist(), strict=True):
        if k != NONE:
            metas.setdefault(k, []).append(row)
    launched_in = _launched_by_call(trace, index)
    is_kernel = _is_collective_kernel(trace)
    # The calls: each outermost op with the ops inside it; a backend region alone on a thread
    # (gloo runs a collective on its worker threads) is the execution of the call of the same
    # name issued before it elsewhere, else a call of its own.
    found: list[tuple[list[int], _Meta]] = []  # outermost op of each call, then its runs
    lone: list[tuple[int, _Meta]] = []
    waiting: dict[str | None, list[int]] = {}  # calls without a region of their own, in order
    for k, row in enumerate(outer.tolist()):
        inside = metas.get(k, [row])
        meta = _meta_of(trace, inside)
        # A bare record_param_comms without metadata (2023 traces) says nothing of what it is;
        # c10d also has ops that are no collective (rendezvous, process-group set-up).
        if meta.name not in _COLLECTIVES:
            continue
        regions = [r for r in inside if _REGION.match(strings[int(cpu.name[r])])]
        if regions == inside:
            lone.append((k, meta))
            continue
        if not regions:
            waiting.setdefault(meta.name, []).append(len(found))
        found.append(([k], meta))
    for k, meta in lone:
        row = int(outer[k])
        queue = waiting.get(meta.name, [])
        matched = None
        while queue:
            issued = int(outer[found[queue[0]][0][0]])
            if cpu.start_ns[issued] > cpu.start_ns[row]:
                break  # issued after this run began: not its call
            candidate = queue.pop(0)
            if cpu.thread[issued] != cpu.thread[row]:
                matched = candidate
                break
        if matched is None:
            found.append(([k], meta))
        else:
            found[matched][0].append(k)
    found.sort(key=lambda call: int(cpu.start_ns[outer[call[0][0]]]))
    steps = profiler_steps(trace)
    step_starts = np.array([a for a, _ in steps], dtype=np.int64)
    step_numbers = _step_numbers(trace)
    counters: dict[str, int] = {}
    calls, threads, kernel_rows, launched_rows, windows, returned = [], [], [], [], [], []
    gpu = trace.gpu
    for ks, meta in found:
        row = int(outer[ks[0]])
        group = meta.group or DEFAULT_GROUP
        index_in_group = counters.get(group, 0)
        counters[group] = index_in_group + 1
        start = int(cpu.start_ns[row])
        end = max(int(cpu.end_ns[outer[k]]) for k in ks)
        step = None
        if len(step_starts):
            s = int(np.searchsorted(step_starts, start, side="right")) - 1
            if s >= 0 and start < steps[s][1]:
                step = step_numbers[s]
        launched = sorted(r for k in ks for r in launched_in.get(k, []))
        returned.append(tuple(sorted(r for k in ks[1:] for r in launched_in.get(k, []))))
        if _bytes(meta) is None and len(ks) > 1:
            # gloo's issuing op has a tensor list; its run's region names the tensor.
            meta = _meta_of(trace, [int(outer[k]) for k in ks[1:]])
        mine = [r for r in launched if is_kernel[r]]
        calls.append(
            CollectiveCall(
                group=group,
                index=index_in_group,
                name=meta.name or "",
                bytes=_bytes(meta),
                step=step,
                host_start_ns=start,
                host_end_ns=end,
                kernel_start_ns=int(gpu.start_ns[mine].min()) if mine else None,
                kernel_end_ns=int(gpu.end_ns[mine].max()) if mine else None,
                line=None,
            )
        )
        threads.append(int(cpu.thread[row]))
        kernel_rows.append(tuple(mine))
        launched_rows.append(tuple(launched))
        windows.append(
            tuple(
                (int(cpu.thread[outer[k]]), int(cpu.start_ns[outer[k]]), int(cpu.end_ns[outer[k]]))
                for k in ks
            )
        )
    return Collectives(
        tuple(calls),
        tuple(threads),
        tuple(kernel_rows),
        launched=tuple(launched_rows),
        windows=tuple(windows),
        returned=tuple(returned),
    )


def _outermost(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """The collective ops no other collective op of their thread contains, by start."""
    cpu = trace.cpu_ops
    order = rows[np.lexsort((-cpu.end_ns[rows], cpu.start_ns[rows], cpu.thread[rows]))]
    keep: list[int] = []
    reach: dict[int, int] = {}
    for row in order.tolist():
        thread = int(cpu.thread[row])
        if int(cpu.start_ns[row]) >= reach.get(thread, np.iinfo(np.int64).min):
            keep.append(row)
            reach[thread] = int(cpu.end_ns[row])
        else:
            reach[thread] = max(reach[thread], int(cpu.end_ns[row]))
    found = np.array(keep, dtype=np.int64)
    return found[np.argsort(cpu.start_ns[found], kind="stable")]


def _meta_of(trace: Trace, rows: list[int]) -> _Meta:
    """What the call's ops say: record_param_comms' metadata first, then the op names and the
    backend region's input (a trace before 2023 has no metadata)."""
    cpu, strings, values = trace.cpu_ops, trace.strings, trace.values
    for row in rows:
        vid = int(cpu.collective[row])
        if vid == NO_ID:
            continue
        try:
            raw = msgspec.json.decode(values[vid])
        except (msgspec.DecodeError, RecursionError):
            continue
        if not isinstance(raw, list) or len(raw) != 6:
            continue
        name, n_in, n_out, dtype, group, _size = raw
        return _Meta(
            name=normalized_name(name) if isinstance(name, str) else None,
            in_nelems=_count(n_in),
            out_nelems=_count(n_out),
            dtype_bytes=_SCALAR_TYPE_BYTES.get(dtype) if isinstance(dtype, str) else None,
            group=str(group) if isinstance(group, (str, int)) and str(group) else None,
        )
    name = None
    for row in rows:
        text = strings[int(cpu.name[row])]
        if text != _PARAM_COMMS:
            name = normalized_name(text)
            break
    for row in rows:
        nelems, size = _first_input(trace, row)
        if nelems is not None:
            return _Meta(name=name, in_nelems=nelems, out_nelems=None, dtype_bytes=size)
    return _Meta(name=name)


def _first_input(trace: Trace, row: int) -> tuple[int | None, int | None]:
    """Elements and bytes per element of the op's first tensor input (Input Dims/type)."""
    cpu, values = trace.cpu_ops, trace.values
    dims_id, types_id = int(cpu.input_dims[row]), int(cpu.input_types[row])
    if dims_id == NO_ID or types_id == NO_ID:
        return None, None
    try:
        dims = msgspec.json.decode(values[dims_id])
        types = msgspec.json.decode(values[types_id])
    except (msgspec.DecodeError, RecursionError):
        return None, None
    if not isinstance(dims, list) or not isinstance(types, list) or not dims or not types:
        return None, None
    shape, kind = dims[0], types[0]
    size = bytes_per_element(dtype_of_type(kind))
    if size is None or not isinstance(shape, list) or not shape:
        return None, None
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        return None, None
    return int(np.prod(shape, dtype=np.float64)), size


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _bytes(meta: _Meta) -> int | None:
    counts = [c for c in (meta.in_nelems, meta.out_nelems) if c is not None]
    if not counts or meta.dtype_bytes is None:
        return None
    # The larger buffer: allgather's output, reduce_scatter's input, the one buffer otherwise.
    return max(counts) * meta.dtype_bytes


def _launched_by_call(trace: Trace, calls: Innermost) -> dict[int, list[int]]:
    """The GPU ops launched inside each call, on its thread (rows of trace.gpu, by start)."""
    gpu, host = trace.gpu, trace.host_calls
    if not len(gpu):
        return {}
    launch = link_launches(gpu.correlation, host.correlation)
    rows = np.flatnonzero(launch != NONE)
    owner = calls.at_many(host.thread[launch[rows]], host.start_ns[launch[rows]])
    out: dict[int, list[int]] = {}
    for row, k in zip(rows.tolist(), owner.tolist(), strict=True):
        if k != NONE:
            out.setdefault(k, []).append(row)
    return out


def _is_collective_kernel(trace: Trace) -> np.ndarray:
    """Per GPU op: a collective kernel (ncclKernel_*, ncclDevKernel_*, RCCL, ...)."""
    gpu, strings = trace.gpu, trace.strings
    names = distinct(gpu.name).tolist() if len(gpu) else []
    comm = [sid for sid in names if kernel_kind(strings[sid]) is KernelKind.COMMUNICATION]
    mask: np.ndarray = (gpu.kind == GPU_KERNEL) & member(gpu.name, comm)
    return mask


def _step_numbers(trace: Trace) -> list[int | None]:
    cpu, strings = trace.cpu_ops, trace.strings
    out: list[int | None] = []
    for a, _ in profiler_steps(trace):
        rows = np.flatnonzero(cpu.annotation & (cpu.start_ns == a))
        number = None
        for row in rows.tolist():
            text = strings[int(cpu.name[row])]
            if text.startswith("ProfilerStep#") and text[13:].isdigit():
                number = int(text[13:])
                break
        out.append(number)
    return out
