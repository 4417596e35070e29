"""Every threshold and policy of the analysis, in one frozen object passed to the analyzers."""

from __future__ import annotations

from dataclasses import dataclass

# Frames from these files are never "the user's line": the framework, the interpreter, builtins.
DEFAULT_EXCLUDED_FILES: tuple[str, ...] = (
    "torch/*",
    "torchvision/*",
    "torchaudio/*",
    "triton/*",
    "functorch/*",
    "numpy/*",
    "*/site-packages/torch/*",
    "*/dist-packages/torch/*",
    "<*",
    "*torchinductor_*",
)


@dataclass(frozen=True)
class AnalysisOptions:
    # A gap shorter than this between two kernels, with the next one already launched, is
    # launch latency; HTA uses the same 30 µs for its kernel_wait class.
    launch_gap_ns: int = 30_000
    # Host and device clocks disagree by a few µs; a sync call that ends this close to the start
    # of a gap still drained the queue.
    clock_tolerance_ns: int = 2_000
    # Kernels shorter than this cannot be anything but launch-latency bound (DESIGN §6).
    tiny_kernel_ns: int = 5_000
    # What the profiler itself costs the host per event it records (a Python frame or an ATen
    # op) when stacks are on: least squares of profiled minus unprofiled wall time against event
    # counts over the 23 H200 fixtures (tests/data/FIXTURES.md) gave about 3 µs.
    profiler_cost_per_event_ns: int = 3_000
    excluded_files: tuple[str, ...] = DEFAULT_EXCLUDED_FILES
    included_files: tuple[str, ...] = ()
    source_root: str | None = None
    path_mappings: tuple[tuple[str, str], ...] = ()
    device: int | None = None
    rank: int | None = None
