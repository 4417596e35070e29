"""Many rank traces, built from real ones: wall time and peak memory of `analyze DIR` with 1, 2 and
all cores and through a local Ray cluster, against Holistic Trace Analysis on the same folder.

docs/architecture.md §13: each rank is analyzed in its own process, whose peak memory stays
below its trace's size; the driver keeps only the ranks' small summaries, so its memory does not
grow with the number of ranks.

The rank traces repeat the public 8-rank DLRM set (``facebookresearch-param/dlrm_kineto_8ranks``:
real NCCL all-to-alls and all-reduces, 245 kernels a rank): rank r is rank r mod 8's events,
repeated and shifted in time as ``big_trace.py`` does, until each file is ``--size-mb``, with
``distributedInfo`` saying rank r of ``--ranks``. Every rank is shifted by the same step, so the
k-th collective of every rank is the same call.

Usage (from the repository root; the full configuration needs ~32 GB of disk and, for HTA, far
more memory than this):

    python benchmarks/many_ranks.py --ranks 64 --size-mb 500 --hta-python /tmp/htavenv/bin/python

Each measurement runs in its own child process. The driver's peak is that process's own VmHWM;
each worker writes its VmHWM to a file as it ends (``--probe``), and the largest is reported.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from big_trace import OUT, PUBLIC, _repetition, read_source

DLRM = PUBLIC / "facebookresearch-param" / "dlrm_kineto_8ranks"


def hwm_mb() -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def probe(*args: Any) -> Any:
    """The rank worker, and its own peak memory written beside the traces as it ends."""
    from brrr_trace.pipeline import summarize_rank

    result = summarize_rank(*args)
    folder = os.environ.get("BRRR_BENCH_PROBE")
    if folder:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        seen = {"hwm_mb": hwm_mb(), "cpu_s": usage.ru_utime + usage.ru_stime}
        Path(folder, f"{os.getpid()}.{time.monotonic_ns()}.hwm").write_text(json.dumps(seen))
    return result


def build(folder: Path, ranks: int, size_bytes: int) -> list[Path]:
    sources = sorted(DLRM.glob("*.pt.trace.json.gz"))
    if not sources:
        raise SystemExit(f"{DLRM}: the public DLRM rank traces are not there")
    parsed = [read_source(path) for path in sources]
    shift_us = max(s.span_us for s in parsed) + 1000
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for rank in range(ranks):
        path = folder / f"rank{rank:03d}.pt.trace.json"
        out.append(path)
        if path.exists() and path.stat().st_size >= size_bytes:
            continue
        source = parsed[rank % len(parsed)]
        partial = path.with_suffix(".partial")
        with open(partial, "wb") as handle:
            handle.write(b"{\n")
            for key, value in source.head:
                text = orjson.dumps(value)
                if key == "distributedInfo":
                    # Spaced like Kineto writes it: HTA finds the rank by '"rank":\s+N'.
                    text = json.dumps({**value, "rank": rank, "world_size": ranks}).encode()
                handle.write(orjson.dumps(key) + b": " + text + b",\n")
            twin = out[rank % len(parsed)] if rank >= len(parsed) else None
            if twin is not None:
                # Rank r's events are rank r mod 8's, byte for byte: copy them from its file.
                written = _copy_events(twin, handle)
                repetition = -1
            else:
                written, repetition = _write_events(handle, source, size_bytes, shift_us)
        partial.replace(path)
        how = "copied" if repetition < 0 else f"{repetition} repetitions"
        print(f"wrote {path} ({written / 1e6:.0f} MB, {how})", file=sys.stderr)
    return out


def _write_events(handle: Any, source: Any, size_bytes: int, shift_us: int) -> tuple[int, int]:
    handle.write(b'"traceEvents": [\n' + b",\n".join(source.once))
    separator = b",\n" if source.once else b""
    written, repetition = 0, 0
    while written < size_bytes:
        chunk = separator + b",\n".join(_repetition(source, repetition, shift_us))
        handle.write(chunk)
        written += len(chunk)
        separator = b",\n"
        repetition += 1
    handle.write(b"\n]}\n")
    return written, repetition


def _copy_events(twin: Path, handle: Any) -> int:
    """The twin's bytes from its ``"traceEvents"`` key to the end."""
    with open(twin, "rb") as source:
        head = source.read(1 << 20)
        start = head.find(b'"traceEvents"')
        if start < 0:
            raise SystemExit(f"{twin}: no traceEvents in its first MiB")
        source.seek(start)
        shutil.copyfileobj(source, handle, 16 << 20)
        return source.tell() - start


_BRRR = """
import json, os, sys, time
sys.path.insert(0, {bench!r})
import many_ranks
from brrr_trace import pipeline
from brrr_trace.options import AnalysisOptions
pipeline.summarize_rank_real = pipeline.summarize_rank
pipeline.summarize_rank = many_ranks.probe
t = time.perf_counter()
report = pipeline.analyze(sys.argv[1], AnalysisOptions(jobs={jobs}, ray={ray!r}))
inner = time.perf_counter() - t
late = report.cross_rank.stragglers[0] if report.cross_rank.stragglers else None
print(json.dumps({{'inner_s': inner, 'ranks': len(report.cross_rank.ranks),
                  'matched': report.cross_rank.matched_calls,
                  'straggler': late.rank if late else None,
                  'driver_hwm_mb': many_ranks.hwm_mb()}}))
"""

_HTA = """
import json, sys, time, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
parsed = time.perf_counter()
temporal = analysis.get_temporal_breakdown(visualize=False)
comm = analysis.get_comm_comp_overlap(visualize=False)
inner = time.perf_counter() - t
print(json.dumps({'inner_s': inner, 'parse_s': parsed - t, 'ranks': len(temporal)}))
"""


def measure(
    name: str, python: str, code: str, folder: Path, probe_dir: Path | None, timeout: float
):
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if probe_dir is not None:
        shutil.rmtree(probe_dir, ignore_errors=True)
        probe_dir.mkdir(parents=True)
        env["BRRR_BENCH_PROBE"] = str(probe_dir)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen([python, "-c", code, str(folder)], stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, child.kill)
        timer.start()
        try:
            # wait4: on Linux its ru_maxrss is the largest of the child and every process below
            # it that was waited for (the largest single process, not a sum).
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    lines = stdout.strip().splitlines()
    row: dict[str, Any] = {
        "name": name,
        "wall_s": round(wall, 2),
        "largest_process_rss_mb": round(usage.ru_maxrss / 1024, 1),
        # The child and the processes below it that it waited for: the driver (and HTA's one
        # process), not the rank workers, which the fork server or Ray's raylet reaps; their
        # CPU time is workers_cpu_s, from the probes.
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
    }
    if child.returncode != 0 or not lines:
        row["error"] = f"exit {child.returncode}: {(stderr.strip().splitlines() or [''])[-1][:200]}"
    else:
        row.update(json.loads(lines[-1]))
    if probe_dir is not None:
        # Also for a row stopped by the timeout: the ranks that were done by then.
        seen = [json.loads(p.read_text()) for p in probe_dir.glob("*.hwm")]
        row["workers_seen"] = len(seen)
        row["worker_hwm_mb_max"] = round(max(s["hwm_mb"] for s in seen), 1) if seen else None
        row["worker_hwm_mb_min"] = round(min(s["hwm_mb"] for s in seen), 1) if seen else None
        row["workers_cpu_s"] = round(sum(s["cpu_s"] for s in seen), 1)
    return row


def _first_ranks(folder: Path, files: list[Path], count: int) -> Path:
    """A folder beside ``folder`` of links to its first ``count`` rank traces."""
    subset = folder.parent / f"{folder.name}-first{count}"
    shutil.rmtree(subset, ignore_errors=True)
    subset.mkdir(parents=True)
    for path in files[:count]:
        (subset / path.name).symlink_to(path.resolve())
    return subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--size-mb", type=float, default=500.0, help="size of each rank trace")
    parser.add_argument("--out-dir", type=Path, default=OUT / "many_ranks")
    parser.add_argument("--jobs", type=int, nargs="*", default=[1, 2, 0], help="0: all cores")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis 0.5.0")
    parser.add_argument(
        "--hta-ranks",
        type=int,
        nargs="*",
        default=[0],
        help="HTA on the first N ranks only (a folder of links to them), per N; 0: all ranks",
    )
    parser.add_argument("--timeout-s", type=float, default=3600.0)
    parser.add_argument("--tag", default="", help="added to the results file's name")
    args = parser.parse_args(argv)
    folder = args.out_dir / f"{args.ranks}x{args.size_mb:g}MB"
    files = build(folder, args.ranks, int(args.size_mb * 1e6))
    total = sum(f.stat().st_size for f in files)
    bench = str(Path(__file__).resolve().parent)
    rows = []
    python = sys.executable
    for jobs in args.jobs:
        code = _BRRR.format(bench=bench, jobs=jobs, ray=None)
        label = f"brrr analyze --jobs {jobs or 'all'}" + (" (all cores)" if jobs == 0 else "")
        rows.append(measure(label, python, code, folder, folder / "probe", args.timeout_s))
        print(rows[-1], file=sys.stderr)
    if not args.no_ray:
        code = _BRRR.format(bench=bench, jobs=0, ray="local")
        rows.append(
            measure("brrr analyze --ray", python, code, folder, folder / "probe", args.timeout_s)
        )
        print(rows[-1], file=sys.stderr)
    for count in args.hta_ranks if args.hta_python else ():
        where = folder if count in (0, len(files)) else _first_ranks(folder, files, count)
        label = "HTA temporal + comm overlap" + (f" ({count} ranks)" if where != folder else "")
        rows.append(measure(label, args.hta_python, _HTA, where, None, args.timeout_s))
        print(rows[-1], file=sys.stderr)
    machine = f"{platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    report = {
        "ranks": args.ranks,
        "size_mb_each": round(total / len(files) / 1e6, 1),
        "total_gb": round(total / 1e9, 2),
        "machine": machine,
        "rows": rows,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.ranks}x{args.size_mb:g}MB{args.tag}.json").write_text(
        json.dumps(report, indent=2)
    )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
