"""Build a ~1 GB trace from a real one and time brrr-trace against orjson and HTA on it.

docs/architecture.md §11: the whole analysis of a 1 GB trace must take less wall time than a bare
``orjson.loads`` of the same file, peak RSS must stay below the file's size, and it must be at
least 10x faster than Holistic Trace Analysis's idle-time + temporal breakdown.

Usage (from the repository root):

    .venv/bin/python benchmarks/big_trace.py --size-gb 1.0 --hta-python /tmp/htavenv/bin/python

Each measurement runs in its own child process, so its peak RSS is its own (``os.wait4`` returns
the rusage of exactly that child) and no measurement warms caches for another. The trace is built
in a child process too: Linux carries the parent's RSS high-water mark into a (v)forked child's
``ru_maxrss`` across exec, so a parent that had grown to 400 MB would make every child read 400 MB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
PUBLIC = Path(os.environ.get("BRRR_PUBLIC_TRACES", ROOT.parent / "shared" / "traces" / "public"))
# A with-stack ROCm training trace: python_function frames, cpu ops, flows and 3.6 k GPU ops,
# so every stage of the pipeline (frames, attribution, idle causes) has real work to do.
DEFAULT_SOURCE = PUBLIC / "AMD-AGI-TraceLens" / "mi300__resnet_act_checkpoint.json.gz"

# args that hold ids which must stay unique when the events are repeated; each group shares one
# offset because its ids point at each other (a flow's id is its launch's correlation, a
# "Python parent id" is another frame's "Python id").
_CORRELATION_KEYS = ("correlation", "cid")
_EXTERNAL_KEYS = ("External id", "Record function id")
_PYTHON_KEYS = ("Python id", "Python parent id")
_SEQUENCE_KEYS = ("Sequence number",)
_INDEX_KEYS = ("Ev Idx",)


class _Text(str):
    """A JSON float kept as its text: shifting ts through float64 would lose its ns digits."""

    __slots__ = ()


def _freeze(value: Any) -> Any:
    """Turn parsed floats back into their exact text (orjson writes a Fragment verbatim)."""
    if isinstance(value, _Text):
        return orjson.Fragment(str(value).encode())
    if isinstance(value, dict):
        return {key: _freeze(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_freeze(item) for item in value]
    return value


def _shift_text(ts: str, shift_us: int) -> str:
    """``ts + shift`` on the decimal text, exact to the last digit the source wrote."""
    if "e" in ts or "E" in ts:
        return str(Decimal(ts) + shift_us)
    whole, dot, frac = ts.partition(".")
    return f"{int(whole) + shift_us}{dot}{frac}"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


@dataclass
class _Template:
    """One source event, ready to be re-emitted with shifted time and offset ids."""

    event: dict[str, Any]
    ts: str | int | None
    id_keys: tuple[tuple[str, int], ...]  # (args key, offset group)
    flow_id: bool


@dataclass
class Source:
    head: list[tuple[str, Any]]  # top-level keys before traceEvents, in file order
    tail: list[tuple[str, Any]]  # and after it
    once: list[bytes]  # metadata events, written a single time
    templates: list[_Template]
    span_us: int
    id_offsets: tuple[int, ...]  # per group: one more than the largest id in the source


_GROUPS = (_CORRELATION_KEYS, _EXTERNAL_KEYS, _PYTHON_KEYS, _SEQUENCE_KEYS, _INDEX_KEYS)
_GROUP_OF = {key: group for group, keys in enumerate(_GROUPS) for key in keys}
_FLOW_GROUP = 0


def read_source(path: Path) -> Source:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = json.loads(handle.read(), parse_float=_Text)
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise SystemExit(f"{path}: expected a Kineto trace object with a traceEvents array")
    keys = list(data)
    split = keys.index("traceEvents")
    head = [(key, _freeze(data[key])) for key in keys[:split]]
    tail = [(key, _freeze(data[key])) for key in keys[split + 1 :]]
    largest = [0] * len(_GROUPS)
    first, last = math.inf, -math.inf
    once: list[bytes] = []
    templates: list[_Template] = []
    for raw in data["traceEvents"]:
        if not isinstance(raw, dict):
            continue
        if raw.get("ph") == "M":
            once.append(orjson.dumps(_freeze(raw)))
            continue
        ts = raw.get("ts")
        start = _number(ts) if not isinstance(ts, _Text) else float(ts)
        if start is not None:
            dur = raw.get("dur")
            length = float(dur) if isinstance(dur, _Text) else (_number(dur) or 0.0)
            first, last = min(first, start), max(last, start + max(length, 0.0))
        args = raw.get("args")
        id_keys = []
        if isinstance(args, dict):
            for key, value in args.items():
                group = _GROUP_OF.get(key)
                if group is not None and type(value) is int:
                    id_keys.append((key, group))
                    largest[group] = max(largest[group], value)
        flow_id = raw.get("ph") in ("s", "f", "t") and type(raw.get("id")) is int
        if flow_id:
            largest[_FLOW_GROUP] = max(largest[_FLOW_GROUP], raw["id"])
        ts_text: str | int | None
        if isinstance(ts, _Text):
            ts_text = str(ts)
        elif type(ts) is int:
            ts_text = ts
        else:
            ts_text = None  # not a number: repeat it untouched, the reader deals with it
        event = _freeze({key: value for key, value in raw.items() if key != "ts"})
        templates.append(_Template(event, ts_text, tuple(id_keys), flow_id))
    if not templates or not math.isfinite(first):
        raise SystemExit(f"{path}: no timed events to repeat")
    return Source(
        head=head,
        tail=tail,
        once=once,
        templates=templates,
        span_us=math.ceil(last - first),
        id_offsets=tuple(n + 1 for n in largest),
    )


def _repetition(source: Source, index: int, shift_us: int) -> Iterator[bytes]:
    offsets = [index * step for step in source.id_offsets]
    shift = index * shift_us
    dumps, fragment = orjson.dumps, orjson.Fragment
    for template in source.templates:
        event = dict(template.event)
        ts = template.ts
        if type(ts) is int:
            event["ts"] = ts + shift
        elif ts is not None:
            event["ts"] = fragment(_shift_text(ts, shift))
        if template.id_keys:
            args = dict(event["args"])
            for key, group in template.id_keys:
                args[key] = args[key] + offsets[group]
            event["args"] = args
        if template.flow_id:
            event["id"] = event["id"] + offsets[_FLOW_GROUP]
        yield dumps(event)


def build_trace(source_path: Path, out: Path, size_bytes: int, gap_us: int) -> Path:
    """Write ``out``: the source's events repeated, shifted in time, until ``size_bytes``."""
    source = read_source(source_path)
    shift_us = source.span_us + gap_us
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    written = 0
    repetitions = 0
    with open(partial, "wb") as handle:

        def put(chunk: bytes) -> None:
            nonlocal written
            handle.write(chunk)
            written += len(chunk)

        put(b"{\n")
        for key, value in source.head:
            put(orjson.dumps(key) + b": " + orjson.dumps(value) + b",\n")
        put(b'"traceEvents": [\n')
        put(b",\n".join(source.once))
        separator = b",\n" if source.once else b""
        # Whole repetitions only, so that every step is complete; one repetition of the default
        # source is ~12 MB, so the result lands within 1.5 % of the asked size.
        while written < size_bytes:
            # One repetition at a time in memory (a few MB), never the whole file.
            chunk = b",\n".join(_repetition(source, repetitions, shift_us))
            put(separator + chunk)
            separator = b",\n"
            repetitions += 1
        put(b"\n]")
        for key, value in source.tail:
            put(b",\n" + orjson.dumps(key) + b": " + orjson.dumps(value))
        put(b"\n}\n")
    partial.replace(out)
    print(
        f"wrote {out} ({written / 1e9:.3f} GB): {repetitions} repetitions of "
        f"{len(source.templates)} events, shifted by {shift_us} us each",
        file=sys.stderr,
    )
    return out


# -- measurements -------------------------------------------------------------------------------

# Each child prints one JSON line last: the seconds spent in the measured call itself (imports
# excluded), a few numbers to check that the work was really done, and its own VmHWM (the peak
# RSS of this process image alone) as a cross-check of the rusage number.
_HWM = """
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) / 1024
    return None
"""
_ORJSON = """
import sys, time, json, orjson
t = time.perf_counter()
with open(sys.argv[1], 'rb') as f:
    data = orjson.loads(f.read())
inner = time.perf_counter() - t
print(json.dumps({'inner_s': inner, 'events': len(data['traceEvents']), 'hwm_mb': hwm()}))
"""

_BRRR_LOAD = """
import sys, time, json
from brrr_trace.traces import load
t = time.perf_counter()
loaded = load(sys.argv[1])
inner = time.perf_counter() - t
print(json.dumps({'inner_s': inner, 'gpu_ops': len(loaded.trace.gpu),
                  'frames': len(loaded.trace.frames), 'cpu_ops': len(loaded.trace.cpu_ops),
                  'hwm_mb': hwm()}))
"""

_BRRR_ANALYZE = """
import sys, time, json
from brrr_trace.pipeline import analyze
t = time.perf_counter()
report = analyze(sys.argv[1])
inner = time.perf_counter() - t
s = report.summary
print(json.dumps({'inner_s': inner, 'utilization': s.gpu_utilization,
                  'idle_us': s.gpu_idle_ns / 1e3, 'span_us': report.trace.span_ns / 1e3,
                  'lines': len(report.lines), 'hwm_mb': hwm()}))
"""

_HTA = """
import sys, time, json, logging
logging.disable(logging.WARNING)  # HTA logs every phase at WARNING; keep stderr readable
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
parsed = time.perf_counter()
idle = analysis.get_idle_time_breakdown(visualize=False)[0]
temporal = analysis.get_temporal_breakdown(visualize=False)
inner = time.perf_counter() - t
print(json.dumps({'inner_s': inner, 'parse_s': parsed - t,
                  'idle_us': float(temporal['idle_time(us)'].iloc[0]),
                  'span_us': float(temporal['kernel_time(us)'].iloc[0]),
                  'idle_rows': len(idle), 'hwm_mb': hwm()}))
"""


@dataclass
class Measurement:
    name: str
    wall_s: float  # the whole child process: interpreter start, imports and the call
    inner_s: float | None  # the measured call alone
    peak_rss_mb: float
    # user + system CPU seconds of the child: on a shared machine, the number that other
    # processes' load does not inflate (the measured code is single-threaded).
    cpu_s: float
    load: tuple[float, float]  # 1-minute load average before and after
    result: dict[str, Any] | None
    error: str | None = None


def measure(name: str, python: str, code: str, target: str, timeout_s: float) -> Measurement:
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)  # plain runs: no -X importtime overhead
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [python, "-c", _HWM + code, target], stdout=out, stderr=err, env=env
        )
        timer = threading.Timer(timeout_s, child.kill)
        timer.start()
        try:
            # wait4, not RUSAGE_CHILDREN: the latter is the max over every child so far.
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    peak_mb = usage.ru_maxrss / 1024  # Linux reports KiB
    cpu = usage.ru_utime + usage.ru_stime
    load = (load_before, os.getloadavg()[0])
    lines = stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        reason = "timed out" if wall >= timeout_s else f"exit {child.returncode}"
        tail = stderr.strip().splitlines()[-1:] or [""]
        error = f"{reason}: {tail[0][:200]}"
        return Measurement(name, wall, None, peak_mb, cpu, load, None, error)
    result = json.loads(lines[-1])
    return Measurement(name, wall, result.get("inner_s"), peak_mb, cpu, load, result)


def warm_page_cache(path: Path) -> None:
    """Read the file once so that every measurement starts from the same warm page cache."""
    # Small reads: a big buffer would raise this process's RSS high-water mark, which every
    # child started afterwards inherits in its ru_maxrss.
    with open(path, "rb") as handle:
        while handle.read(1 << 20):
            pass


def hta_folder(trace: Path) -> Path:
    """HTA takes a folder of rank traces: give it one holding just a link to this file."""
    folder = trace.parent / f"hta_{trace.stem}"
    folder.mkdir(exist_ok=True)
    link = folder / trace.name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(trace.resolve())
    return folder


def table(rows: list[Measurement], size_bytes: int, machine: str) -> str:
    size_mb = size_bytes / 2**20
    lines = [
        f"File: {size_bytes / 1e9:.3f} GB ({size_mb:.0f} MiB). Machine: {machine}.",
        "",
        "| measurement | wall s (process) | wall s (call) | CPU s | peak RSS MB | RSS / file "
        "| load 1m | notes |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        inner = f"{row.inner_s:.2f}" if row.inner_s is not None else "–"
        note = row.error or ", ".join(
            f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
            for key, value in (row.result or {}).items()
            if key != "inner_s"
        )
        lines.append(
            f"| {row.name} | {row.wall_s:.2f} | {inner} | {row.cpu_s:.2f} | "
            f"{row.peak_rss_mb:.0f} | {row.peak_rss_mb / size_mb:.2f} | "
            f"{row.load[0]:.1f}→{row.load[1]:.1f} | {note} |"
        )
    by_name = {row.name: row for row in rows}
    base, brrr = by_name.get("orjson.loads"), by_name.get("brrr analyze")
    hta = by_name.get("HTA idle + temporal")
    lines.append("")
    if base and brrr and base.inner_s and brrr.inner_s:
        lines.append(
            f"- brrr analyze / orjson.loads: {brrr.inner_s / base.inner_s:.2f}x (call), "
            f"{brrr.wall_s / base.wall_s:.2f}x (process), {brrr.cpu_s / base.cpu_s:.2f}x (CPU); "
            "target < 1."
        )
        lines.append(
            f"- brrr analyze peak RSS / file size: {brrr.peak_rss_mb / size_mb:.2f}; target < 1."
        )
    if hta and brrr and hta.inner_s and brrr.inner_s:
        lines.append(
            f"- HTA / brrr analyze: {hta.inner_s / brrr.inner_s:.1f}x (call), "
            f"{hta.wall_s / brrr.wall_s:.1f}x (process), {hta.cpu_s / brrr.cpu_s:.1f}x (CPU); "
            "target >= 10."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="trace to repeat")
    parser.add_argument("--size-gb", type=float, default=1.0, help="size of the built trace")
    parser.add_argument("--gap-us", type=int, default=1000, help="idle gap between repetitions")
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--rebuild", action="store_true", help="rebuild even if the file exists")
    parser.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis 0.5.0")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="per measurement")
    parser.add_argument(
        "--only", nargs="*", choices=["orjson", "load", "analyze", "hta"], help="subset to run"
    )
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    size_bytes = int(args.size_gb * 1e9)
    name = f"big_{args.source.name.split('.')[0]}_{args.size_gb:g}gb.json"
    trace = args.out_dir / name
    if args.build_only:
        build_trace(args.source, trace, size_bytes, args.gap_us)
        return 0
    if args.rebuild or not trace.exists():
        started = time.perf_counter()
        # In a child: building holds the parsed source (hundreds of MB), see the module docstring.
        command = [sys.executable, __file__, "--build-only", "--source", str(args.source)]
        command += ["--size-gb", str(args.size_gb), "--gap-us", str(args.gap_us)]
        subprocess.run([*command, "--out-dir", str(args.out_dir)], check=True)
        print(f"built in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    file_size = trace.stat().st_size
    warm_page_cache(trace)

    python = sys.executable
    plan = [
        ("orjson", "orjson.loads", python, _ORJSON, str(trace)),
        ("analyze", "brrr analyze", python, _BRRR_ANALYZE, str(trace)),
        ("load", "brrr load", python, _BRRR_LOAD, str(trace)),
    ]
    if args.hta_python:
        plan.append(("hta", "HTA idle + temporal", args.hta_python, _HTA, str(hta_folder(trace))))
    rows = []
    for key, label, exe, code, target in plan:
        if args.only and key not in args.only:
            continue
        row = measure(label, exe, code, target, args.timeout_s)
        print(
            f"{label}: {row.wall_s:.2f} s, {row.cpu_s:.2f} s CPU, {row.peak_rss_mb:.0f} MB, "
            f"load {row.load[0]:.1f}→{row.load[1]:.1f} {row.error or ''}",
            file=sys.stderr,
        )
        rows.append(row)

    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    # The floor every child's ru_maxrss starts from (this process's own high-water mark).
    floor_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = table(rows, file_size, f"{machine}; launcher RSS {floor_mb:.0f} MB")
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "results.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
