"""The benchmark matrix of issue #17: four trace sizes, brrr-trace against HTA and orjson.

For each trace: ``brrr-trace analyze --format json`` as a user runs it (a fresh process, end to
end: interpreter start, imports, load, analysis, the JSON written), the share of each stage of
the analysis (measured in one more process, each stage timed where ``pipeline`` calls it),
``orjson.loads`` of the file, and Holistic Trace Analysis's parse + idle-time + temporal
breakdown. Wall time, CPU time and peak RSS (``os.wait4`` of each child, see big_trace.py).

    python benchmarks/matrix.py --hta-python /tmp/htavenv/bin/python

The traces (built in benchmarks/out/, git-ignored, by big_trace.py's method):

- ``5mb``: tests/data/realcode/h200/gpt_small.json.gz, a real H200 trace, decompressed to
  benchmarks/out/gpt_small.json (4.9 MB);
- ``79mb``, ``0.86gb``, ``4gb``: tests/data/realcode/h200/gpt_medium.json.gz (a real
  with-stack H200 training trace, 30 k events, 7.7 MB as compact JSON) repeated 11, 112 and
  ~520 times, shifted in time, ids offset.

``orjson.loads`` and HTA need 7-9x the file in memory: on a 23 GB machine they are left out
for the 4 GB trace (``--baselines-up-to-gb``), where brrr-trace is measured alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from big_trace import _HTA, _ORJSON, hta_folder, measure, warm_page_cache

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
REAL = ROOT / "tests" / "data" / "realcode" / "h200"
SOURCE = REAL / "gpt_medium.json.gz"
SIZES = {"5mb": None, "79mb": 0.079, "0.86gb": 0.86, "4gb": 4.0}

# Each stage timed where the pipeline calls it: the functions ``pipeline`` imported are
# wrapped in its namespace, so nothing in the package changes for the measurement.
_STAGES = """
import sys, time, json
t0 = time.perf_counter()
import brrr_trace.pipeline as p
from brrr_trace.options import AnalysisOptions
imported = time.perf_counter() - t0
spent = {}
def timed(stage, fn):
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - t
    return run
for stage, names in {
    'load': ['load'],
    'source index + attribution': ['PathMapper', 'Locator', 'attribute_ops'],
    'timeline': ['build_timeline'],
    'regimes': ['classify_ops', 'line_costs'],
    'rules': ['find_findings'],
    'steps': ['measure_steps'],
}.items():
    for name in names:
        setattr(p, name, timed(stage, getattr(p, name)))
t = time.perf_counter()
report = p.analyze(sys.argv[1], AnalysisOptions())
from brrr_trace.render import json as render_json
render_json.render(report)
total = time.perf_counter() - t
spent['report + JSON'] = total - sum(spent.values())
print(json.dumps({'imports_s': imported, 'total_s': total, 'stages_s': spent, 'hwm_mb': hwm()}))
"""


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    error: str | None = None


def run_cli(trace: Path, timeout_s: float) -> Run:
    """``brrr-trace analyze TRACE --format json`` in a fresh process, from the repository."""
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    command = [sys.executable, "-m", "brrr_trace", "analyze", str(trace), "--format", "json"]
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        _, status, usage = os.wait4(child.pid, 0)
    finally:
        if child.poll() is None:
            child.kill()
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    error = None if code == 0 else f"exit {code}"
    if wall > timeout_s:
        error = "timed out"
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, error)


def build(size: str, out_dir: Path) -> Path:
    gb = SIZES[size]
    if gb is None:
        # Uncompressed, so that orjson.loads reads it as it reads the others.
        plain = out_dir / "gpt_small.json"
        if not plain.exists():
            import gzip

            out_dir.mkdir(parents=True, exist_ok=True)
            with gzip.open(REAL / "gpt_small.json.gz", "rb") as handle:
                plain.write_bytes(handle.read())
        return plain
    trace = out_dir / f"big_{SOURCE.name.split('.')[0]}_{gb:g}gb.json"
    if not trace.exists():
        command = [sys.executable, str(ROOT / "benchmarks" / "big_trace.py"), "--build-only"]
        command += ["--source", str(SOURCE), "--size-gb", str(gb), "--out-dir", str(out_dir)]
        subprocess.run(command, check=True)
    return trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis 0.5.0")
    parser.add_argument("--baselines-up-to-gb", type=float, default=1.0)
    parser.add_argument(
        "--hta-up-to-gb",
        type=float,
        default=None,
        help="HTA for these only (default: as --baselines-up-to-gb); HTA 0.5.0 did not finish "
        "the 0.86 GB trace in 600 s or 900 s",
    )
    parser.add_argument(
        "--stages-up-to-gb", type=float, default=1.0, help="the per-stage run, for these only"
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--out-dir", type=Path, default=OUT)
    args = parser.parse_args()
    # Absolute, links kept: benchmarks/out may be a link to a folder outside the repository
    # (a shared copy of the big traces), and the rows still name the trace under the repository.
    args.out_dir = args.out_dir.absolute()
    results = []
    for size in args.sizes:
        trace = build(size, args.out_dir)
        file_bytes = trace.stat().st_size
        json_bytes = file_bytes
        if trace.name.endswith(".gz"):
            import gzip

            with gzip.open(trace, "rb") as handle:
                json_bytes = len(handle.read())
        warm_page_cache(trace)
        row: dict[str, object] = {
            "size": size,
            "trace": _shown(trace),
            "file_bytes": file_bytes,
            "json_bytes": json_bytes,
            "load_before": os.getloadavg()[0],
        }
        cli = run_cli(trace, args.timeout_s)
        row["brrr_cli"] = asdict(cli)
        print(
            f"{size}: brrr-trace analyze {cli.wall_s:.2f} s, {cli.peak_rss_mb:.0f} MB",
            file=sys.stderr,
        )
        if json_bytes <= args.stages_up_to_gb * 1e9:
            stages = measure("stages", sys.executable, _STAGES, str(trace), args.timeout_s)
            row["brrr_stages"] = stages.result
        baselines = json_bytes <= args.baselines_up_to_gb * 1e9
        if baselines:
            base = measure("orjson.loads", sys.executable, _ORJSON, str(trace), args.timeout_s)
            row["orjson"] = asdict(base)
            print(f"{size}: orjson {base.wall_s:.2f} s, {base.peak_rss_mb:.0f} MB", file=sys.stderr)
            hta_limit = args.baselines_up_to_gb if args.hta_up_to_gb is None else args.hta_up_to_gb
            if args.hta_python and json_bytes <= hta_limit * 1e9:
                hta = measure("HTA", args.hta_python, _HTA, str(hta_folder(trace)), args.timeout_s)
                row["hta"] = asdict(hta)
                print(f"{size}: HTA {hta.wall_s:.2f} s, {hta.peak_rss_mb:.0f} MB", file=sys.stderr)
        row["load_after"] = os.getloadavg()[0]
        results.append(row)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        (args.out_dir / "matrix.json").write_text(json.dumps(results, indent=1))
    machine = f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    text = table(results, machine)
    (args.out_dir / "matrix.md").write_text(text)
    print(text)
    return 0


def _shown(trace: Path) -> str:
    """The trace's path relative to the repository where it lies under it, else absolute."""
    try:
        return str(trace.relative_to(ROOT))
    except ValueError:
        return str(trace)


def table(results: list[dict[str, object]], machine: str) -> str:
    lines = [
        f"Machine: {machine}.",
        "",
        "| trace | JSON MB | brrr-trace analyze s (CPU s) | peak MB (/ file) | orjson.loads s "
        "| orjson peak MB | HTA s (CPU s) | HTA peak MB | HTA / brrr | brrr / orjson | load 1m |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in results:
        cli = row["brrr_cli"]
        assert isinstance(cli, dict)
        mb = int(row["json_bytes"]) / 1e6  # type: ignore[call-overload]
        base = row.get("orjson")
        hta = row.get("hta")
        brrr_s = cli["wall_s"]
        cells = [
            f"{row['size']}",
            f"{mb:.1f}",
            f"{brrr_s:.2f} ({cli['cpu_s']:.2f})",
            f"{cli['peak_rss_mb']:.0f} ({cli['peak_rss_mb'] / (mb / 1.048576):.2f})",
        ]
        if isinstance(base, dict):
            cells += [f"{base['wall_s']:.2f}", f"{base['peak_rss_mb']:.0f}"]
        else:
            cells += ["–", "–"]
        if isinstance(hta, dict) and hta.get("error") is None:
            cells += [f"{hta['wall_s']:.2f} ({hta['cpu_s']:.2f})", f"{hta['peak_rss_mb']:.0f}"]
            cells.append(f"{hta['wall_s'] / brrr_s:.1f}x")
        else:
            cells += ["–", "–", "–"]
        cells.append(f"{brrr_s / base['wall_s']:.2f}" if isinstance(base, dict) else "–")
        cells.append(f"{row['load_before']:.1f}→{row['load_after']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Share of each stage (in-process, seconds and % of the analysis):", ""]
    for row in results:
        stages = row.get("brrr_stages")
        if not isinstance(stages, dict):
            continue
        total = stages["total_s"]
        parts = ", ".join(
            f"{name} {seconds:.2f} s ({100 * seconds / total:.0f} %)"
            for name, seconds in stages["stages_s"].items()
        )
        lines.append(f"- {row['size']}: imports {stages['imports_s']:.2f} s; {parts}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
