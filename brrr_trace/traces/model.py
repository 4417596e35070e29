"""The loaded trace: typed, columnar tables with integer nanoseconds (docs/architecture.md §3).

Every table is a set of equally long numpy arrays sorted by start time. Names are ids into
``Trace.strings``; shapes, dtypes and concrete inputs are ids into ``Trace.values`` (interned
Python tuples), so a repeated op costs a few integers, not a dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

NO_ID = -1


@dataclass(frozen=True)
class Problem:
    """Something odd the loader found and worked around."""

    kind: str
    count: int
    detail: str


@dataclass(frozen=True)
class GpuOps:
    """Kernels, memcpys and memsets. ``kind`` holds GPU_KERNEL, GPU_MEMCPY or GPU_MEMSET."""

    device: np.ndarray
    stream: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    kind: np.ndarray
    correlation: np.ndarray
    grid: np.ndarray  # (n, 3), 0 when unknown
    block: np.ndarray  # (n, 3), 0 when unknown
    nbytes: np.ndarray  # memcpy/memset bytes, -1 when unknown
    graph: np.ndarray  # True when launched by a CUDA/HIP graph replay

    def __len__(self) -> int:
        return len(self.start_ns)


GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET = 0, 1, 2


@dataclass(frozen=True)
class HostCalls:
    """CUDA/HIP runtime and driver API calls on host threads."""

    thread: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    correlation: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class CpuOps:
    """ATen operators and user annotations (``record_function``)."""

    thread: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    annotation: np.ndarray  # True for user_annotation
    sequence: np.ndarray  # autograd sequence number, -1 when absent
    fwd_thread: np.ndarray  # the trace's "Fwd thread id" of backward ops, -1
    input_dims: np.ndarray  # id into Trace.values, -1
    input_types: np.ndarray
    concrete_inputs: np.ndarray
    call_stack: np.ndarray  # id into Trace.strings (legacy/verbose "Call stack"), -1
    # id into Trace.values: [collective name, in nelems, out nelems, dtype, group name, group
    # size] of a record_param_comms op, -1
    collective: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class PyFrames:
    """``python_function`` events: Python frames, named ``file.py(DEFLINE): func``."""

    thread: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray
    call_line: np.ndarray  # call-site line when the recorder wrote one, else -1

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class Spans:
    """Named intervals on a device or thread (GPU user annotations)."""

    where: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    name: np.ndarray

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass(frozen=True)
class Thread:
    pid: int | str | None
    tid: int | str | None
    name: str


@dataclass(frozen=True)
class Trace:
    """One rank's trace, ready for the analyzers."""

    path: str
    strings: tuple[str, ...]
    values: tuple[Any, ...]
    threads: tuple[Thread, ...]
    gpu: GpuOps
    host_calls: HostCalls
    cpu_ops: CpuOps
    frames: PyFrames
    gpu_annotations: Spans
    device_properties: tuple[dict[str, Any], ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    base_time_ns: int = 0

    @property
    def rank(self) -> int | None:
        info = self.metadata.get("distributedInfo")
        if isinstance(info, dict):
            rank = info.get("rank")
            if isinstance(rank, int):
                return rank
        return None


@dataclass(frozen=True)
class LoadResult:
    trace: Trace
    problems: tuple[Problem, ...]
