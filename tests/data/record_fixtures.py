"""Record the fixture traces of ``workloads.py``; time each workload with and without the profiler.

Usage (the H200 recording; see FIXTURES.md)::

    python3 record_fixtures.py --device cuda --scale full --out h200
    python3 record_fixtures.py --device cpu --scale small --out /tmp/cpu_fixtures

For every fixture: one warm-up call (compilation, cuBLAS and allocator warm-up), then
``--repeats`` timed calls without the profiler (median reported) plus as many timed calls with one
step (so setup can be separated from the per-step cost), then one profiled call whose trace is
written gzipped as ``<out>/<name>.json.gz``. Everything measured goes to
``<out>/measurements.json``, rewritten after every fixture. A failing fixture is logged there and
the next one runs.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import gzip
import json
import os
import platform
import re
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads

SCALES = {"full": 1.0, "small": 1.0 / 64}
SCHEDULE = {"wait": 1, "warmup": 1, "active": 2}


@dataclass(frozen=True)
class Fixture:
    """One recorded trace: a workload function and the arguments it is recorded with."""

    name: str
    fn: Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    cuda_only: bool = False
    scheduled: bool = False  # fn takes ``prof=`` and calls ``prof.step()`` once per step

    @property
    def steps(self) -> int:
        return int(self.kwargs.get("steps", default_steps(self.fn)))


def default_steps(fn: Callable[..., Any]) -> int:
    defaults = fn.__defaults__ or ()
    names = fn.__code__.co_varnames[: fn.__code__.co_argcount]
    values = dict(zip(names[len(names) - len(defaults) :], defaults, strict=True))
    return int(values["steps"])


W = workloads
FIXTURES: list[Fixture] = [
    Fixture("sample", W.sample),
    Fixture("bf16_matmul", W.bf16_matmul),
    Fixture("bf16_matmul_bs4", W.bf16_matmul, {"batch": 4}),
    Fixture("fp32_matmul", W.fp32_matmul),
    Fixture("fp32_matmul_tf32", W.fp32_matmul_tf32),
    Fixture("tiny_op_loop", W.tiny_op_loop),
    Fixture("tiny_op_loop_bs4", W.tiny_op_loop, {"batch": 4}),
    Fixture("small_matmul_loop", W.small_matmul_loop),
    Fixture("item_in_loop", W.item_in_loop),
    Fixture("item_in_loop_fixed", W.item_in_loop_fixed),
    Fixture("pageable_copy", W.pageable_copy),
    Fixture("pinned_copy", W.pinned_copy, cuda_only=True),
    Fixture("manual_attention", W.manual_attention),
    Fixture("sdpa_attention", W.sdpa_attention),
    Fixture("optimizer_foreach_false", W.optimizer_foreach_false),
    Fixture("optimizer_fused", W.optimizer_fused),
    Fixture("transformer_step", W.transformer_step, scheduled=True),
    Fixture("elementwise_chain", W.elementwise_chain),
    Fixture("elementwise_chain_compiled", W.elementwise_chain_compiled),
    Fixture("compiled_pointwise", W.compiled_pointwise),
    # Last: a failed graph capture can leave the CUDA context unusable, and worker processes
    # forked while the profiler runs could hang; neither should cost the fixtures before them.
    Fixture("cuda_graph_replay", W.cuda_graph_replay, cuda_only=True),
    Fixture("dataloader_slow", W.dataloader_slow),
    Fixture("dataloader_workers", W.dataloader_workers),
    Fixture("cpu_tensor_each_step", W.cpu_tensor_each_step),
    Fixture("device_tensor_each_step", W.device_tensor_each_step),
    Fixture("misaligned_matmul", W.misaligned_matmul),
]

# (before, after): the "after" applies the fix that a finding on the "before" recommends.
PAIRS: list[tuple[str, str]] = [
    ("fp32_matmul", "fp32_matmul_tf32"),
    ("elementwise_chain", "elementwise_chain_compiled"),
    ("item_in_loop", "item_in_loop_fixed"),
    ("pageable_copy", "pinned_copy"),
    ("dataloader_slow", "dataloader_workers"),
    ("optimizer_foreach_false", "optimizer_fused"),
    ("manual_attention", "sdpa_attention"),
    ("cpu_tensor_each_step", "device_tensor_each_step"),
    ("misaligned_matmul", "bf16_matmul"),
]
# (batch 1, batch 4): same code, 4x the batch dimension.
BATCH_PAIRS: list[tuple[str, str]] = [
    ("tiny_op_loop", "tiny_op_loop_bs4"),
    ("bf16_matmul", "bf16_matmul_bs4"),
]


def log(message: str) -> None:
    print(f"[record {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def activities(device: torch.device) -> list[ProfilerActivity]:
    if device.type == "cuda":
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    return [ProfilerActivity.CPU]


def timed_call(fx: Fixture, device: torch.device, scale: float, steps: int) -> float:
    """Run the workload once without the profiler; return its wall time in ms."""
    kwargs = {**fx.kwargs, "steps": steps}
    gc.collect()
    synchronize(device)
    start = time.perf_counter()
    fx.fn(device, scale, **kwargs)
    synchronize(device)
    return (time.perf_counter() - start) * 1e3


def profiled_call(fx: Fixture, device: torch.device, scale: float, path: Path) -> float:
    """Run the workload once under the profiler, export the trace; return the wall time in ms.

    For a scheduled fixture the export happens inside the last ``prof.step()``; its time is
    subtracted from the wall time (the profiler's own post-processing is not).
    """
    export_ms = 0.0

    def export(prof: profile) -> None:
        nonlocal export_ms
        start = time.perf_counter()
        prof.export_chrome_trace(str(path))
        export_ms += (time.perf_counter() - start) * 1e3

    kwargs = dict(fx.kwargs)
    options: dict[str, Any] = {}
    if fx.scheduled:
        kwargs["steps"] = sum(SCHEDULE.values())
        options = {"schedule": schedule(**SCHEDULE, repeat=1), "on_trace_ready": export}
    gc.collect()
    synchronize(device)
    with profile(
        activities=activities(device), record_shapes=True, with_stack=True, **options
    ) as prof:
        start = time.perf_counter()
        if fx.scheduled:
            fx.fn(device, scale, prof=prof, **kwargs)
        else:
            fx.fn(device, scale, **kwargs)
        synchronize(device)
        wall_ms = (time.perf_counter() - start) * 1e3
    if not fx.scheduled:
        export(prof)
    if not path.exists():
        raise RuntimeError(f"the profiler wrote no trace to {path}")
    return wall_ms - export_ms if fx.scheduled else wall_ms


_CAT = re.compile(rb'"cat"\s*:\s*"([^"]*)"')


def trace_summary(path: Path) -> dict[str, Any]:
    """Counts that show whether a trace holds what the analyzer needs."""
    raw = gzip.decompress(path.read_bytes())
    summary: dict[str, Any] = {"file": path.name, "gz_bytes": path.stat().st_size}
    summary["json_bytes"] = len(raw)
    try:
        trace = json.loads(raw)
    except ValueError as exc:  # e.g. unescaped quotes in dynamo-generated names
        summary["json_error"] = str(exc)
        summary["categories"] = dict(Counter(m.decode() for m in _CAT.findall(raw)))
        return summary
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    cats = Counter(str(e.get("cat", e.get("ph", "?"))) for e in events)
    summary["events"] = len(events)
    summary["categories"] = dict(cats)
    summary["kernels"] = cats.get("kernel", 0)
    summary["python_functions"] = cats.get("python_function", 0)
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    gpu = [e for e in events if e.get("cat") in gpu_cats]
    summary["gpu_op_sum_us"] = round(sum(float(e.get("dur", 0)) for e in gpu), 3)
    if gpu:
        first = min(float(e["ts"]) for e in gpu)
        last = max(float(e["ts"]) + float(e.get("dur", 0)) for e in gpu)
        summary["gpu_span_us"] = round(last - first, 3)
    op_threads = Counter(e.get("tid") for e in events if e.get("cat") == "cpu_op")
    summary["cpu_op_threads"] = {str(tid): n for tid, n in op_threads.items()}
    names = {
        str(e.get("tid")): e.get("args", {}).get("name")
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    summary["thread_names"] = {tid: names.get(tid) for tid in summary["cpu_op_threads"]}
    if isinstance(trace, dict):
        summary["trace_keys"] = sorted(k for k in trace if k != "traceEvents")
    return summary


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "device": str(device),
        "gpu_name": None,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["gpu_name"] = props.name
        env["gpu"] = {
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "multi_processor_count": props.multi_processor_count,
            "total_memory_bytes": props.total_memory,
            "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        }
        env["cudnn_version"] = torch.backends.cudnn.version()
        env["float32_matmul_precision"] = torch.get_float32_matmul_precision()
        env["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        env["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    return env


def record_fixture(
    fx: Fixture, device: torch.device, scale: float, out: Path, repeats: int
) -> dict[str, Any]:
    steps = fx.steps if not fx.scheduled else sum(SCHEDULE.values())
    result: dict[str, Any] = {
        "function": fx.fn.__name__,
        "kwargs": {k: v for k, v in fx.kwargs.items() if k != "steps"},
        "iterations": steps,
    }
    torch.manual_seed(0)
    log(f"{fx.name}: warm-up")
    result["warmup_ms"] = round(timed_call(fx, device, scale, steps), 3)
    full: list[float] = []
    one: list[float] = []
    for _ in range(repeats):
        full.append(timed_call(fx, device, scale, steps))
        one.append(timed_call(fx, device, scale, 1))
    result["unprofiled_ms"] = round(statistics.median(full), 3)
    result["unprofiled_runs_ms"] = [round(t, 3) for t in full]
    result["one_step_ms"] = round(statistics.median(one), 3)
    if steps > 1:
        per_step = (result["unprofiled_ms"] - result["one_step_ms"]) / (steps - 1)
        result["per_step_ms"] = round(per_step, 4)
    log(f"{fx.name}: profiling")
    path = out / f"{fx.name}.json.gz"
    profiled = profiled_call(fx, device, scale, path)
    result["profiled_wall_ms"] = round(profiled, 3)
    result["profiler_inflation"] = round(profiled / max(result["unprofiled_ms"], 1e-9), 3)
    result["trace"] = trace_summary(path)
    return result


def compare(fixtures: dict[str, dict[str, Any]], pairs: list[tuple[str, str]]) -> list[dict]:
    rows = []
    for before, after in pairs:
        a, b = fixtures.get(before, {}), fixtures.get(after, {})
        if a.get("status") != "ok" or b.get("status") != "ok":
            continue
        row: dict[str, Any] = {"before": before, "after": after}
        row["before_ms"] = a["unprofiled_ms"]
        row["after_ms"] = b["unprofiled_ms"]
        row["saved_ms"] = round(a["unprofiled_ms"] - b["unprofiled_ms"], 3)
        row["speedup"] = round(a["unprofiled_ms"] / max(b["unprofiled_ms"], 1e-9), 3)
        if "per_step_ms" in a and "per_step_ms" in b:
            row["before_per_step_ms"] = a["per_step_ms"]
            row["after_per_step_ms"] = b["per_step_ms"]
            if b["per_step_ms"] > 0:
                row["per_step_speedup"] = round(a["per_step_ms"] / b["per_step_ms"], 3)
        row["before_profiled_ms"] = a["profiled_wall_ms"]
        row["after_profiled_ms"] = b["profiled_wall_ms"]
        rows.append(row)
    return rows


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)


def warm_up_profiler(device: torch.device) -> None:
    """The first profiling session in a process pays for CUPTI's start; pay it outside."""
    with profile(activities=activities(device)):
        x = torch.ones(1024, device=device)
        (x * 2).sum()
        synchronize(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "h200")
    parser.add_argument("--only", default="", help="comma-separated fixture names")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--budget-s", type=float, default=0.0, help="skip the remaining fixtures after this long"
    )
    parser.add_argument(
        "--watchdog-s", type=float, default=0.0, help="abort the run if one fixture takes longer"
    )
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    scale = SCALES[args.scale]
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - {fx.name for fx in FIXTURES})
    if unknown:
        parser.error(f"unknown fixtures: {', '.join(unknown)}")
    selected = [fx for fx in FIXTURES if not names or fx.name in names]

    env = environment(device)
    log(f"torch {env['torch_version']} on {env['gpu_name'] or env['platform']}")
    measurements_path = args.out / "measurements.json"
    report: dict[str, Any] = {
        "schema_version": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "scale": args.scale,
        "scale_factor": scale,
        "repeats": args.repeats,
        "profiler_options": {
            "activities": [a.name for a in activities(device)],
            "record_shapes": True,
            "with_stack": True,
            "profile_memory": False,
        },
        "schedule_for_scheduled_fixtures": SCHEDULE,
        "environment": env,
        "fixtures": {},
        "pairs": [],
        "batch_pairs": [],
    }
    if names and measurements_path.exists():  # re-recording some: keep the others' entries
        previous = json.loads(measurements_path.read_text())
        for name, entry in previous.get("fixtures", {}).items():
            entry.setdefault("recorded_at", previous.get("created"))
            report["fixtures"][name] = entry
        report["history"] = [
            *previous.get("history", []),
            {"created": previous.get("created"), "command": previous.get("command")},
        ]
    warm_up_profiler(device)
    started = time.perf_counter()
    precision = torch.get_float32_matmul_precision()
    for fx in selected:
        entry: dict[str, Any] = {
            "torch_version": env["torch_version"],
            "gpu_name": env["gpu_name"],
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        if fx.cuda_only and device.type != "cuda":
            entry["status"] = "skipped"
            entry["reason"] = "needs CUDA"
        elif args.budget_s and time.perf_counter() - started > args.budget_s:
            entry["status"] = "skipped"
            entry["reason"] = f"time budget of {args.budget_s:.0f} s spent"
        else:
            fixture_start = time.perf_counter()
            if args.watchdog_s:  # a hung fixture ends the run; what was written so far stays
                faulthandler.dump_traceback_later(args.watchdog_s, exit=True)
            try:
                entry.update(record_fixture(fx, device, scale, args.out, args.repeats))
                entry["status"] = "ok"
            except Exception as exc:  # keep going: one bug must not cost the whole run
                entry["status"] = "error"
                entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["traceback"] = traceback.format_exc()[-4000:]
                log(f"{fx.name}: FAILED {entry['error']}")
            finally:
                faulthandler.cancel_dump_traceback_later()
                torch.set_float32_matmul_precision(precision)
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            entry["record_seconds"] = round(time.perf_counter() - fixture_start, 2)
        if entry["status"] != "skipped" or fx.name not in report["fixtures"]:
            report["fixtures"][fx.name] = entry
        report["pairs"] = compare(report["fixtures"], PAIRS)
        report["batch_pairs"] = compare(report["fixtures"], BATCH_PAIRS)
        write_json(measurements_path, report)
        log(f"{fx.name}: {entry['status']} {short(entry)}")
    report["total_seconds"] = round(time.perf_counter() - started, 2)
    write_json(measurements_path, report)
    failed = [fx.name for fx in selected if report["fixtures"][fx.name]["status"] == "error"]
    log(f"done in {report['total_seconds']} s; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


def short(entry: dict[str, Any]) -> str:
    if entry.get("status") != "ok":
        return entry.get("reason", entry.get("error", ""))
    trace = entry["trace"]
    return (
        f"unprofiled {entry['unprofiled_ms']} ms, profiled {entry['profiled_wall_ms']} ms, "
        f"{trace['gz_bytes'] / 1024:.0f} KiB gz, {trace.get('kernels', '?')} kernels, "
        f"{trace.get('python_functions', '?')} python events"
    )


if __name__ == "__main__":
    sys.exit(main())
