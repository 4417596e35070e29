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
    "brrr_trace/*",
)


@dataclass(frozen=True)
class AnalysisOptions:
    # A gap shorter than this between two kernels, with the next one already launched, is
    # launch latency; HTA uses the same 30 µs for its kernel_wait class.
    launch_gap_ns: int = 30_000
    # Host and device clocks disagree by a few µs; a sync call that ends this close to the start
    # of a gap still drained the queue.
    clock_tolerance_ns: int = 2_000
    # Kernels shorter than this cannot be anything but launch-latency bound
    # (docs/architecture.md §6).
    tiny_kernel_ns: int = 5_000
    # What the profiler itself costs the host per event it records (shapes + stacks, CPU +
    # CUDA), fitted so that the replay of each H200 real-code trace (tests/data/realcode) gives
    # the unprofiled step time measured for it (benchmarks/savings_real.py): a Python frame, an
    # ATen op on a thread that runs Python, an ATen op on a thread that runs none (the autograd
    # engine: its ops cost several times more), a CUDA API call, and the profiler's callbacks
    # inside a kernel launch call (6-8 µs in the traces). Micro-loops on the same machine
    # (tests/data/realcode/profiler_cost.py) measure less per event: 0.4 µs a frame, about
    # 1.3 µs an op, 2.4 µs a launch, 3 µs a backward op; real programs lose about twice that.
    profiler_cost_per_frame_ns: int = 1_500
    profiler_cost_per_op_ns: int = 1_000
    profiler_cost_per_engine_op_ns: int = 10_000
    profiler_cost_per_call_ns: int = 1_000
    profiler_cost_per_launch_ns: int = 4_000
    # How far the profiler's real cost strays from that model, program by program: a saving
    # that depends on the host's pace is also replayed with the cost scaled to these ends where
    # the trace has no unprofiled measurement to calibrate on (``est_savings_range``). The
    # recorded programs' calibrations gave 0.78-4 (tests/data/realcode/h200/record-timed), the
    # small fixtures' tight loops about 2.5 (README, "Estimated savings against reality").
    profiler_cost_scale_low: float = 0.75
    profiler_cost_scale_high: float = 3.0
    # A recorded trace's cost model is left as it is where its replayed step lies within this
    # share of the step timed unprofiled (about what two timings of one program differ by): a
    # GPU-bound step replays the same for a wide range of scales (``steps.calibrated``).
    profiler_cost_calibration_tolerance: float = 0.03
    # `brrr-trace record`'s line annotation around each torch call from user code: +19.6 µs per
    # op measured on the H200 machine's CPU.
    profiler_cost_per_marker_ns: int = 19_000
    # The DataLoader that dataloader-stall proposes (its fix text and its replay): batches made
    # by this many worker processes, at most prefetch x workers of them in flight.
    dataloader_workers: int = 4
    dataloader_prefetch: int = 2
    # Findings: report a fix only when it saves at least this much, absolutely and as a share
    # of the replayed run (the GPU span where that is shorter).
    min_savings_ns: int = 50_000
    min_savings_share: float = 0.005
    # A finding is a warning when its saving is at least this share of the span, information
    # above the second share, a hint below.
    warning_share: float = 0.1
    information_share: float = 0.02
    many_kernels: int = 20  # "many" kernels on a line or in an optimizer step
    # A line's specific fix (a fused optimizer step) hides a generic finding on the line (launch
    # overhead) unless the generic one spans more lines and the specific saves less than this
    # share of it (the tiny MLP's step as a CUDA graph: 2.1 ms a step, its fused Adam 0.6).
    superseding_share: float = 0.5
    # What a fused optimizer step still costs the host (its Python and a launch per parameter
    # group), taken out of the fused-optimizer saving.
    fused_step_host_ns: int = 100_000
    # The GPU time of a fused AdamW step against the foreach one: each parameter's weight,
    # gradient and two moments read and written once, instead of once per foreach op. Measured
    # on the H200 (tests/data/realcode/h200/gpt_small{,.after-fused-adamw}.json.gz, torch 2.11):
    # the foreach step's 46 kernels took 1221 µs, the fused step's 10 took 416 µs.
    fused_share_of_foreach_traffic: float = 0.34
    # The host time of a fused step against the foreach one: both gather every parameter's
    # state in Python (``_init_group``), the fused step then makes one call instead of a call
    # per foreach op and a ``.item()`` per parameter's step count. Measured as the
    # ``Optimizer.step`` ranges' medians, both profiled, on the H200 (torch 2.11): GPT small
    # 1.75 against 4.24 ms (0.41, tests/data/realcode/h200/gpt_small{,.after-fused-adamw}),
    # the AMP transformer under a GradScaler 4.8 against 9.9 (0.49, h200/session10).
    fused_share_of_foreach_host: float = 0.45
    # A GEMM moved onto tensor cores takes its FLOPs at this share of the unit's peak plus a
    # fixed time a kernel (launch, ramp-up, tail). Measured on the H200, FP32 -> TF32, torch
    # 2.11: the 1.1 PFLOP GEMMs of tests/data/h200/fp32_matmul{,_tf32} reach 0.83 of the TF32
    # peak; GPT small's (realcode/h200/gpt_small{,.after-tf32}) take 14.6 µs at 1.1 and at
    # 2.1 GFLOP, 34 µs at 8.6 and 105 µs at 34 (0.15 to 0.66 of the peak); the peak ratio
    # alone put them at 4.2 to 95 µs and the whole step's GEMMs at 2.6 ms for 4.5 measured.
    tensor_core_efficiency: float = 0.8
    matrix_kernel_latency_ns: int = 12_000
    # Savings replays (each replays the host thread twice): for this many lines at most.
    max_replayed_lines: int = 8
    short_kernel_ns: int = 10_000  # median kernel below this: launch-bound territory
    small_grid_min_ns: int = 20_000  # a kernel worth filling the GPU for
    # Fractions of the datasheet peaks that real code reaches (reference §5.2).
    achievable_link: float = 0.85
    achievable_bandwidth: float = 0.8
    default_link_gbps: float = 25.0  # host link when the GPU is unknown (PCIe 4.0 x16, practical)
    # An op may beat its roofline bound by this much (clock and rounding noise) before the
    # model is said not to explain it.
    roofline_slack: float = 0.0
    # Bounds on what a trace can make the loader do. The public traces' longest name is 5.1 k
    # characters (a templated kernel); names are cut at 16 k, so that the per-name regexes of
    # the analyzers cost a bounded time (an 8 MB name took 13 s). Events: the 1 GB benchmark
    # trace has 4.0 M; 20 M (a 5 GB trace, ~5 GB of memory) is read, more is cut with a problem,
    # so that a 3 MB gzip that inflates to 100 M events cannot take the machine.
    max_name_chars: int = 16_384
    max_events: int = 20_000_000
    # Processes decoding a large trace file (traces/parallel.py): 0 one per core (at most 4),
    # 1 none besides this one. Rank workers (jobs) decode in their own process.
    load_workers: int = 0
    # A source file larger than this is not read (its lines stay at def-line precision): the
    # largest hand-written Python files are a few hundred KB, and a trace may name any file.
    max_source_bytes: int = 4 << 20
    # `brrr-trace diff --fail-on-regression`: a line fails the gate only when it grew by at
    # least this share of the span before as well (a 2 µs line taking 4 µs is noise).
    regression_min_share: float = 0.005
    # Keep the analysis as timeline intervals in the report (Report.tracks) for --format
    # perfetto; off by default, since a big trace has hundreds of thousands of them.
    timeline_tracks: bool = False
    # Segments per device in the drawn timeline (the HTML report): beyond it, runs of short
    # kernels and gaps merge (analyzers/timeline_view.py). A canvas draws 20 k rectangles in a
    # frame; the report's page stays a few MB.
    timeline_segments: int = 20_000
    excluded_files: tuple[str, ...] = DEFAULT_EXCLUDED_FILES
    included_files: tuple[str, ...] = ()
    source_root: str | None = None
    path_mappings: tuple[tuple[str, str], ...] = ()
    device: int | None = None
    rank: int | None = None
    # Folders of traces (docs/architecture.md §13). Files whose heads say the same world size
    # and backend, with distinct ranks, are one run when their first events are this close: the
    # ranks of a job start profiling at the same step; two jobs are minutes apart or more.
    run: int | None = None  # which run of the folder (0: the oldest); None: every run
    run_start_tolerance_ns: int = 120_000_000_000
    jobs: int = 0  # processes analyzing ranks at once; 0: one per core
    ray: str | None = None  # analyze the ranks as Ray tasks: "local", or a cluster's address
