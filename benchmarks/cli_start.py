"""issue #17's start-up target: ``analyze TRACE --format json`` of the 5 MB trace, fresh processes.

    PYTHONDONTWRITEBYTECODE= python benchmarks/cli_start.py --runs 8 --tree . --tree /tmp/bench-main
    PYTHONDONTWRITEBYTECODE= python benchmarks/cli_start.py --importtime 8 --tree .

Each round runs every tree once, in turn (interleaved, so that a change of the machine's load
falls on all of them), from that tree's folder with ``PYTHONPATH`` set to it (``python -m`` puts
the current folder first on ``sys.path``). Wall is from just before the process starts to its
exit; CPU is its user + system time (``os.wait4``). The ``.pyc`` files (and the package's
compiled dataclass methods) are written under ``--pycache`` in a first round that is not
counted, as a pip install has them. ``--importtime N`` instead runs ``-X importtime`` N times
per tree and prints each module's median self and cumulative import time, largest first.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "realcode" / "h200" / "gpt_small.json.gz"
DEFAULT_TRACE = ROOT / "benchmarks" / "out" / "gpt_small.json"


def _trace(path: Path) -> Path:
    if not path.exists() and path == DEFAULT_TRACE:
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(SOURCE, "rb") as source, open(path, "wb") as out:
            shutil.copyfileobj(source, out)
    return path


def _env(tree: Path, pycache: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def _command(trace: Path, out: Path, *extra: str) -> list[str]:
    analyze = ["-m", "brrr_trace", "analyze", str(trace), "--format=json", f"--output={out}"]
    return [sys.executable, *extra, *analyze]


def _once(tree: Path, trace: Path, out: Path, pycache: str) -> tuple[float, float]:
    start = time.perf_counter()
    process = subprocess.Popen(_command(trace, out), cwd=tree, env=_env(tree, pycache))
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{tree}: analyze exited with status {status}")
    return wall, usage.ru_utime + usage.ru_stime


def _timings(trees: list[Path], trace: Path, runs: int, pycache: str) -> None:
    walls: dict[Path, list[float]] = {t: [] for t in trees}
    cpus: dict[Path, list[float]] = {t: [] for t in trees}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "report.json"
        for round_ in range(runs + 1):
            for tree in trees:
                wall, cpu = _once(tree, trace, out, pycache)
                if round_:  # the first round writes the .pyc files
                    walls[tree].append(wall)
                    cpus[tree].append(cpu)
            loads.append(os.getloadavg()[0])
    print(f"{trace} ({trace.stat().st_size / 1e6:.1f} MB), {runs} runs per tree, interleaved")
    print(f"1-minute load average {min(loads):.2f}-{max(loads):.2f}")
    print("| tree | wall s, median (min-max) | CPU s, median (min-max) |")
    print("|---|---|---|")
    for tree in trees:
        w, c = walls[tree], cpus[tree]
        print(
            f"| {tree} | {statistics.median(w):.3f} ({min(w):.3f}-{max(w):.3f}) "
            f"| {statistics.median(c):.3f} ({min(c):.3f}-{max(c):.3f}) |"
        )


def _importtime(trees: list[Path], trace: Path, runs: int, pycache: str, top: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "report.json"
        for tree in trees:
            _once(tree, trace, out, pycache)  # the .pyc files
            own: dict[str, list[int]] = collections.defaultdict(list)
            cumulative: dict[str, list[int]] = collections.defaultdict(list)
            for _ in range(runs):
                done = subprocess.run(
                    _command(trace, out, "-X", "importtime"),
                    cwd=tree,
                    env=_env(tree, pycache),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                seen = set()
                for line in done.stderr.splitlines():
                    if not line.startswith("import time:") or "self [us]" in line:
                        continue
                    self_us, cumulative_us, name = line[len("import time:") :].split("|")
                    name = name.strip()
                    if name not in seen:  # a module imported again (numpy's) counts once
                        seen.add(name)
                        own[name].append(int(self_us))
                        cumulative[name].append(int(cumulative_us))
            median = {name: statistics.median(v) for name, v in own.items()}
            ours = sum(v for name, v in median.items() if name.startswith("brrr_trace"))
            print(f"{tree}: {runs} runs, load {os.getloadavg()[0]:.2f}; median self time, ms:")
            print(f"  all modules {sum(median.values()) / 1e3:.1f}, brrr_trace's {ours / 1e3:.1f}")
            for name in sorted(median, key=median.__getitem__, reverse=True)[:top]:
                total = statistics.median(cumulative[name])
                print(f"  {median[name] / 1e3:7.1f} self {total / 1e3:7.1f} cumulative  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--tree", type=Path, action="append", help="a checkout (repeatable)")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--pycache", default="/tmp/pyc-cli-start")
    parser.add_argument("--importtime", type=int, metavar="N", help="N -X importtime runs")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    trace = _trace(args.trace.resolve())
    if args.importtime:
        _importtime(trees, trace, args.importtime, args.pycache, args.top)
    else:
        _timings(trees, trace, args.runs, args.pycache)


if __name__ == "__main__":
    main()
