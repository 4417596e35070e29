"""Compare brrr-trace's GPU idle time and utilization with HTA 0.5.0 and with a plain reference.

For every GPU trace under the public trace folder:

- brrr-trace: ``analyze(path).summary`` (idle, utilization) and ``report.trace.span_ns``;
- HTA 0.5.0, in its own venv, as a child process printing JSON: the temporal breakdown (idle,
  span) and the per-stream idle-time breakdown, in three variants: default, with
  ``include_last_profiler_step=True``, and that plus ``HTA_DISABLE_NS_ROUNDING=1``;
- a plain reference computed here from the raw JSON, sharing no code with brrr-trace: the union
  of kernel / memcpy / memset intervals of the device, over (last end - first start);
- HTA's temporal breakdown re-derived from its source with each of its behaviours as a switch,
  so that every difference from brrr-trace is measured, not guessed (see ``HtaModel``).

Usage (from the repository root):

    .venv/bin/python benchmarks/compare_hta.py --hta-python /tmp/htavenv/bin/python

Writes ``benchmarks/out/hta_comparison.json`` and ``benchmarks/out/hta_comparison.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
PUBLIC = Path(os.environ.get("BRRR_PUBLIC_TRACES", ROOT.parent / "shared" / "traces" / "public"))

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
HTA_TIMEOUT_S = 600

# Run by HTA's python. Each analysis is tried on its own so that one crash does not hide the
# other's result; exceptions are reported, not raised, because crashing is a finding here.
_HTA_CHILD = r"""
import json, logging, os, sys, tempfile, traceback
logging.disable(logging.WARNING)  # HTA logs every phase at WARNING
path, include_last = sys.argv[1], sys.argv[2] == "1"
out = {}

def error(exc):
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
    return f"{type(exc).__name__}: {str(exc)[:160]} ({where})"

from hta.trace_analysis import TraceAnalysis
with tempfile.TemporaryDirectory() as folder:
    # HTA takes a folder of rank traces; give it one holding only this file.
    os.symlink(path, os.path.join(folder, os.path.basename(path)))
    try:
        analysis = TraceAnalysis(trace_dir=folder, include_last_profiler_step=include_last)
    except BaseException as exc:
        print(json.dumps({"load_error": error(exc)}))
        sys.exit(0)
    rank = next(iter(analysis.t.traces))
    try:
        row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
        out["idle_us"] = float(row["idle_time(us)"])
        out["span_us"] = float(row["kernel_time(us)"])
        out["compute_us"] = float(row["compute_time(us)"])
    except BaseException as exc:
        out["temporal_error"] = error(exc)
    try:
        frame = analysis.get_idle_time_breakdown(ranks=[rank], visualize=False)[0]
        streams = {}
        for record in frame.to_dict("records"):
            by_category = streams.setdefault(str(record["stream"]), {})
            by_category[str(record["idle_category"])] = float(record["idle_time"])
        out["streams"] = streams
    except BaseException as exc:
        out["idle_error"] = error(exc)
print(json.dumps(out))
"""


@dataclass
class HtaResult:
    idle_us: float | None = None
    span_us: float | None = None
    compute_us: float | None = None
    streams: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None
    fallback: bool = False  # computed by the fallback venv after the main one raised


@dataclass
class Plain:
    device: int
    devices: int
    busy_us: float
    span_us: float

    @property
    def idle_us(self) -> float:
        return self.span_us - self.busy_us

    @property
    def utilization(self) -> float:
        return self.busy_us / self.span_us if self.span_us > 0 else float("nan")


@dataclass
class Row:
    trace: str
    plain: Plain
    brrr_idle_us: float | None
    brrr_span_us: float | None
    brrr_utilization: float | None
    brrr_error: str | None
    hta: dict[str, HtaResult]
    model: dict[str, float] = field(default_factory=dict)  # HTA re-derived: variant -> idle µs
    # variant -> behaviour code (LEGEND) -> idle µs it adds to HTA's result
    effects: dict[str, dict[str, float]] = field(default_factory=dict)
    explanation: str = ""


# -- the plain reference ------------------------------------------------------------------------


def read_events(path: Path) -> list[Any] | None:
    """The event list of a trace, or None for a file that is not a Kineto trace."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        # Floats stay text: epoch-µs timestamps with ns digits do not fit in a float64.
        data = json.loads(handle.read(), parse_float=str)
    if isinstance(data, dict):
        events = data.get("traceEvents")
        return events if isinstance(events, list) else None
    return data if isinstance(data, list) else None


def to_ns(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value * 1000
    try:
        return int((Decimal(value) * 1000).to_integral_value())
    except ArithmeticError:
        return None


def union_ns(intervals: list[tuple[int, int]]) -> tuple[int, int]:
    """(busy, span): the length of the union, and last end - first start."""
    if not intervals:
        return 0, 0
    intervals.sort()
    busy = 0
    first = intervals[0][0]
    cur_start, cur_end = intervals[0]
    last = cur_end
    for start, end in intervals[1:]:
        last = max(last, end)
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    return busy, last - first


def plain_reference(events: list[Any]) -> Plain | None:
    by_device: dict[int, list[tuple[int, int]]] = {}
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category = str(event.get("cat", "")).lower()
        if category not in GPU_CATEGORIES:
            continue
        start, length = to_ns(event.get("ts")), to_ns(event.get("dur", 0))
        if start is None:
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        device = args.get("device", event.get("pid"))
        device = device if isinstance(device, int) else -1
        by_device.setdefault(device, []).append((start, start + max(length or 0, 0)))
    if not by_device:
        return None
    # The busiest device by summed durations: the one brrr-trace reports by default.
    device = max(by_device, key=lambda d: (sum(e - s for s, e in by_device[d]), d))
    busy, span = union_ns(list(by_device[device]))
    return Plain(device, len(by_device), busy / 1e3, span / 1e3)


# -- HTA's temporal breakdown, re-derived ------------------------------------------------------
#
# To explain a difference instead of guessing, HTA 0.5.0's temporal breakdown is re-implemented
# from its source (hta/common/trace_parser.py, trace.py, analyzers/breakdown_analysis.py) with
# each of its behaviours as a switch; flipping one switch at a time to brrr-trace's behaviour
# measures what that behaviour costs.


@dataclass(frozen=True)
class _HtaRow:
    name: str
    ts: Decimal  # µs
    dur: Decimal
    stream: int
    correlation: int
    gpu_op: bool  # kernel / memcpy / memset: what brrr-trace counts


@dataclass(frozen=True)
class HtaModel:
    filter: str  # "none" | "default" (drop the last ProfilerStep) | "last" (keep it)
    rounding: bool  # ceil(ts), floor(ts + dur) when the trace has float timestamps
    other_rows: bool  # every row with a stream counts as GPU work (cuda_sync, ...), not just ops


def _hta_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def hta_rows(events: list[Any]) -> tuple[list[_HtaRow], bool]:
    """HTA's rows (null dur/cat and cat "Trace" dropped) and whether its ts column is float."""
    rows = []
    # pandas makes the ts column float64 when any event has a float or a missing ts.
    float_ts = False
    for event in events:
        if not isinstance(event, dict):
            continue
        ts = event.get("ts")
        float_ts = float_ts or isinstance(ts, str) or ts is None
        category, dur = event.get("cat"), event.get("dur")
        if category is None or dur is None or category == "Trace" or ts is None:
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        rows.append(
            _HtaRow(
                name=str(event.get("name")),
                ts=Decimal(ts),
                dur=Decimal(dur),
                stream=_hta_int(args.get("stream", -1)),
                correlation=_hta_int(args.get("correlation", -1)),
                gpu_op=str(category).lower() in GPU_CATEGORIES,
            )
        )
    return rows, float_ts


def hta_temporal(rows: list[_HtaRow], float_ts: bool, model: HtaModel) -> tuple[float, float]:
    """(idle µs, span µs) of HTA's temporal breakdown under ``model``."""
    spans = []  # (ts, end, row)
    for row in rows:
        if model.rounding and float_ts:
            # In float64, as pandas does: 16-digit µs have lost their ns digits before the ceil.
            start = Decimal(math.ceil(float(row.ts)))
            end = Decimal(math.floor(float(row.ts) + float(row.dur)))
        else:
            start, end = row.ts, row.ts + row.dur
        spans.append((start, end, row))
    steps = {row.name for row in rows if "ProfilerStep" in row.name}
    if model.filter != "none" and len(steps) >= 2:
        # Trace._filter_irrelevant_gpu_kernels: CPU rows up to the last step, GPU rows whose
        # correlation is among them. Its "end" column is computed before the ranks are aligned
        # to ts 0 and never shifted, so "ts <= last step end" compares shifted with unshifted
        # times: with include_last_profiler_step=True every CPU row is kept.
        min_ts = min(start for start, _, _ in spans)

        def is_gpu(row: _HtaRow) -> bool:
            gpu = row.stream >= 0 and row.correlation >= 0
            return gpu or row.name in ("Event Sync", "Context Sync")

        cpu = [(s, e, r) for s, e, r in spans if not is_gpu(r)]
        marks = [(s, e) for s, e, r in cpu if r.name in steps]
        last_start = max(s for s, _ in marks) - min_ts
        last_end = max(e for _, e in marks)
        if model.filter == "default":
            cpu = [(s, e, r) for s, e, r in cpu if s - min_ts < last_start]
        else:
            cpu = [(s, e, r) for s, e, r in cpu if s - min_ts <= last_end]
        launched = {r.correlation for _, _, r in cpu}
        gpu = [(s, e, r) for s, e, r in spans if is_gpu(r) and r.correlation in launched]
        spans = gpu + cpu
    busy = [(s, e) for s, e, r in spans if r.stream != -1 and (model.other_rows or r.gpu_op)]
    if not busy:
        return 0.0, 0.0
    # utils.merge_kernel_intervals: a new group starts when ts > the running max of earlier ends.
    busy.sort(key=lambda interval: interval[0])
    groups = []
    reach = None
    for start, end in busy:
        if reach is None or start > reach:
            groups.append([start, end])
        else:
            groups[-1][1] = max(groups[-1][1], end)
        reach = end if reach is None else max(reach, end)
    span = groups[-1][1] - groups[0][0]
    run = sum(end - start for start, end in groups)
    return float(span - run), float(span)


HTA_MODELS = {
    "default": HtaModel("default", True, True),
    "last_step": HtaModel("last", True, True),
    "no_rounding": HtaModel("last", False, True),
}
BRRR_MODEL = HtaModel("none", False, False)
# Each behaviour: a code for the table, the model switch to flip and the value that does what
# brrr-trace does.
BEHAVIOURS = {
    "L": ("filter", "last"),
    "U": ("filter", "none"),
    "R": ("rounding", False),
    "S": ("other_rows", False),
}
LEGEND = {
    "L": "HTA drops GPU ops launched in the last ProfilerStep (default, >= 2 ProfilerSteps)",
    "U": "HTA drops GPU ops whose launch is not among its kept CPU rows (>= 2 ProfilerSteps)",
    "R": "HTA rounds float timestamps: ts up, ts + dur down (unless HTA_DISABLE_NS_ROUNDING=1)",
    "S": "HTA counts every row with a stream (cuda_sync) as GPU activity",
    "X": "HTA raised an exception",
}
SHORT = {"default": "default", "last_step": "last", "no_rounding": "exact"}


# -- HTA and brrr -------------------------------------------------------------------------------


def run_hta(python: str, path: Path, include_last: bool, no_rounding: bool) -> HtaResult:
    env = dict(os.environ)
    env.pop("HTA_DISABLE_NS_ROUNDING", None)
    if no_rounding:
        env["HTA_DISABLE_NS_ROUNDING"] = "1"
    command = [python, "-c", _HTA_CHILD, str(path.resolve()), "1" if include_last else "0"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=HTA_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return HtaResult(error=f"timed out after {HTA_TIMEOUT_S} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return HtaResult(error=f"crashed: {tail[0][:200]}")
    out = json.loads(lines[-1])
    errors = [out[key] for key in ("load_error", "temporal_error", "idle_error") if key in out]
    return HtaResult(
        idle_us=out.get("idle_us"),
        span_us=out.get("span_us"),
        compute_us=out.get("compute_us"),
        streams=out.get("streams", {}),
        error="; ".join(errors) or None,
    )


def run_brrr(path: Path) -> tuple[float | None, float | None, float | None, str | None]:
    from brrr_trace.pipeline import analyze

    try:
        report = analyze(path)
    except Exception as exc:  # a crash is a finding to report, not a reason to stop
        return None, None, None, f"{type(exc).__name__}: {exc}"
    summary = report.summary
    return (
        summary.gpu_idle_ns / 1e3,
        report.trace.span_ns / 1e3,
        summary.gpu_utilization,
        None,
    )


# -- explaining differences ---------------------------------------------------------------------

# docs/architecture.md §4: agree with HTA within 1 % where both define the same quantity.
TOLERANCE = 0.01


def relative(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b == 0:
        return 0.0 if a == 0 else float("inf")
    return (a - b) / b


def close(a: float | None, b: float | None, tolerance: float = TOLERANCE) -> bool:
    diff = relative(a, b)
    return diff is not None and abs(diff) <= tolerance


def explain(row: Row) -> str:
    """Account for a > 1 % difference with the behaviours of HTA that the model reproduces.

    Per variant: the codes of ``LEGEND`` with what each costs in idle µs (HTA - brrr-trace), or
    UNEXPLAINED when the model does not reproduce HTA's number.
    """
    brrr = row.brrr_idle_us
    if brrr is None:
        return f"brrr failed: {row.brrr_error}"
    parts = []
    for variant in ("default", "last_step", "no_rounding"):
        result = row.hta[variant]
        if result.idle_us is None:
            parts.append(f"{SHORT[variant]}: X")
            continue
        if close(brrr, result.idle_us):
            continue
        modelled = row.model.get(variant)
        if modelled is None or not close(modelled, result.idle_us, 0.001):
            parts.append(f"{SHORT[variant]}: UNEXPLAINED (model {modelled}, HTA {result.idle_us})")
            continue
        effects = [
            f"{code} {'+' if ns > 0 else ''}{_us(ns)}"
            for code, ns in row.effects.get(variant, {}).items()
            if abs(ns) > 0.001 * max(brrr, 1.0)
        ]
        parts.append(f"{SHORT[variant]}: " + ", ".join(effects or ["UNEXPLAINED"]))
    return "; ".join(parts) or "agrees"


def model_row(row: Row, events: list[Any]) -> None:
    """Fill ``row.model`` and ``row.effects`` (each HTA behaviour's share of the difference)."""
    rows, float_ts = hta_rows(events)
    if not rows:
        return
    for variant, model in HTA_MODELS.items():
        idle, _ = hta_temporal(rows, float_ts, model)
        row.model[variant] = idle
        effects = {}
        # Flip the behaviours one after another, so that the effects add up to HTA - brrr.
        current, current_idle = model, idle
        for code, (switch, brrr_value) in BEHAVIOURS.items():
            if switch == "filter" and brrr_value == "last" and current.filter != "default":
                continue
            if getattr(current, switch) == brrr_value:
                continue
            current = replace(current, **{switch: brrr_value})
            flipped, _ = hta_temporal(rows, float_ts, current)
            effects[code] = current_idle - flipped
            current_idle = flipped
        row.effects[variant] = effects
    row.model["brrr_model"] = hta_temporal(rows, float_ts, BRRR_MODEL)[0]


# -- output -------------------------------------------------------------------------------------


def _us(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:,.2f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.2f} %"


def markdown(rows: list[Row]) -> str:
    lines = [
        "| trace | brrr idle µs | HTA idle µs default / last / exact | (brrr − HTA) / HTA "
        "default / last / exact | brrr span µs | HTA span µs (exact) | plain-union util. | "
        "brrr util. | Δ pp | why HTA differs by > 1 % (idle µs) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        hta = row.hta
        idles = " / ".join(
            "error"
            if hta[k].idle_us is None
            else _us(hta[k].idle_us) + ("†" if hta[k].fallback else "")
            for k in ("default", "last_step", "no_rounding")
        )
        diffs = " / ".join(
            _pct(relative(row.brrr_idle_us, hta[k].idle_us))
            for k in ("default", "last_step", "no_rounding")
        )
        util = row.brrr_utilization
        delta = None if util is None else 100 * (util - row.plain.utilization)
        lines.append(
            f"| {row.trace} | {_us(row.brrr_idle_us)} | {idles} | {diffs} | "
            f"{_us(row.brrr_span_us)} | {_us(hta['no_rounding'].span_us)} | "
            f"{100 * row.plain.utilization:.2f} % | "
            f"{'–' if util is None else f'{100 * util:.2f} %'} | "
            f"{'–' if delta is None else f'{delta:+.3f}'} | {row.explanation} |"
        )
    lines += [
        "",
        "Variants: default = HTA's defaults; last = include_last_profiler_step=True; "
        "exact = that and HTA_DISABLE_NS_ROUNDING=1. Δ pp = brrr − plain union utilization.",
        "",
    ]
    lines += [f"- {code}: {text}" for code, text in LEGEND.items()]
    if any(result.fallback for row in rows for result in row.hta.values()):
        lines += ["", "† computed by the fallback venv (the main one raised, see below)."]
    errors: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        for variant, result in row.hta.items():
            if result.error:
                errors.setdefault((row.trace, result.error), []).append(SHORT[variant])
    if errors:
        lines += ["", "HTA exceptions:", ""]
        lines += [
            f"- `{trace}` ({', '.join(variants)}): {error}"
            for (trace, error), variants in errors.items()
        ]
    streams = [
        "",
        "HTA per-stream idle breakdown (include_last_profiler_step, no rounding), µs:",
        "",
    ]
    streams += ["| trace | stream: host_wait / kernel_wait / other |", "|---|---|"]
    for row in rows:
        parts = []
        for stream, cats in sorted(row.hta["no_rounding"].streams.items()):
            parts.append(
                f"{stream}: {_us(cats.get('host_wait'))} / {_us(cats.get('kernel_wait'))} / "
                f"{_us(cats.get('other'))}"
            )
        if parts:
            streams.append(f"| {row.trace} | {'; '.join(parts)} |")
    return "\n".join(lines + streams) + "\n"


VARIANTS = {
    "default": (False, False),
    "last_step": (True, False),
    "no_rounding": (True, True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--public", type=Path, default=PUBLIC, help="folder of public traces")
    parser.add_argument("--hta-python", required=True, help="python of an HTA 0.5.0 venv")
    parser.add_argument(
        "--hta-fallback-python",
        help="a second HTA 0.5.0 venv (e.g. with pandas<3) tried where the first one raises",
    )
    parser.add_argument("--out-dir", type=Path, default=OUT)
    parser.add_argument("--match", default="", help="only traces whose path contains this")
    parser.add_argument("--no-cache", action="store_true", help="rerun HTA on every trace")
    args = parser.parse_args(argv)

    files = sorted(
        p for p in args.public.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.is_file()
    )
    # HTA takes minutes over all traces; its results only change with the file, so keep them.
    cache_file = args.out_dir / "hta_cache.json"
    cache: dict[str, Any] = {}
    if cache_file.exists() and not args.no_cache:
        cache = json.loads(cache_file.read_text())
    rows: list[Row] = []
    for path in files:
        name = str(path.relative_to(args.public))
        if args.match not in name:
            continue
        try:
            events = read_events(path)
        except (OSError, ValueError) as exc:
            print(f"skip {name}: unreadable ({exc})", file=sys.stderr)
            continue
        if events is None:
            print(f"skip {name}: not a Kineto trace", file=sys.stderr)
            continue
        plain = plain_reference(events)
        if plain is None:
            print(f"skip {name}: no GPU activity", file=sys.stderr)
            continue
        print(f"{name} ...", file=sys.stderr)
        try:
            brrr_idle, brrr_span, brrr_util, brrr_error = run_brrr(path)
        except Exception:
            brrr_idle = brrr_span = brrr_util = None
            brrr_error = traceback.format_exc(limit=1)
        hta = {}
        for variant, (include_last, no_rounding) in VARIANTS.items():
            key = f"{name}|{path.stat().st_mtime_ns}|{variant}"
            if key not in cache:
                cache[key] = asdict(run_hta(args.hta_python, path, include_last, no_rounding))
            result = HtaResult(**cache[key])
            if result.idle_us is None and args.hta_fallback_python:
                fallback_key = f"{key}|fallback"
                if fallback_key not in cache:
                    again = run_hta(args.hta_fallback_python, path, include_last, no_rounding)
                    cache[fallback_key] = asdict(replace(again, fallback=True))
                again = HtaResult(**cache[fallback_key])
                if again.idle_us is not None:
                    # Keep the main venv's exception: it is a finding of its own.
                    result = replace(again, error=f"main venv: {result.error}")
            hta[variant] = result
        row = Row(name, plain, brrr_idle, brrr_span, brrr_util, brrr_error, hta)
        model_row(row, events)
        del events
        row.explanation = explain(row)
        rows.append(row)

    args.out_dir.mkdir(parents=True, exist_ok=True)
    cache_file.write_text(json.dumps(cache))
    text = markdown(rows)
    print(text)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "hta_comparison.md").write_text(text)
    payload = [asdict(row) | {"plain_utilization": row.plain.utilization} for row in rows]
    (args.out_dir / "hta_comparison.json").write_text(json.dumps(payload, indent=1))
    worst = [
        row
        for row in rows
        if row.plain.devices == 1
        and row.brrr_utilization is not None
        and abs(row.brrr_utilization - row.plain.utilization) > 0.005
    ]
    for row in worst:
        print(
            f"brrr utilization differs from the plain union by > 0.5 pp: {row.trace}: "
            f"{100 * row.brrr_utilization:.3f} % vs {100 * row.plain.utilization:.3f} %",
            file=sys.stderr,
        )
    return 1 if worst else 0


if __name__ == "__main__":
    raise SystemExit(main())
