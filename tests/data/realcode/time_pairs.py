"""Time each before/after pair of record_real.py unprofiled, the two sides interleaved.

    python3 time_pairs.py --out pairs.json [--rounds 3] [--warmup 20] [--budget-s 420] [--only P,Q]
        [--fixes F,G]

One timing process of a program is not one measurement of it: on the H200 the same unfixed
program gave 13.9, 14.4 and 14.8 ms a step in three processes, more than some fixes gain. So
each pair runs before, after, before, after... (``--rounds`` processes a side), each process
warms up ``--warmup`` steps (clocks, allocator, cuBLAS heuristics) and then times 5 regions of
25 steps; a side's step time is the median over all of its regions, and the spread of the
per-process medians says how far a gain can be trusted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record_real import PAIRS, PROGRAMS, install_library  # noqa: E402

REGION_STEPS = 25


def timed(cmd: list[str], env: dict[str, str], timeout: float) -> dict | None:
    try:
        done = subprocess.run(
            cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        print(f"timed out: {cmd}", file=sys.stderr)
        return None
    bench = [line for line in done.stdout.splitlines() if line.startswith("BENCH ")]
    if done.returncode or not bench:
        print(f"failed: {cmd}\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(bench[-1][len("BENCH ") :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=420)
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--only", default="", help="comma-separated programs")
    parser.add_argument("--fixes", default="", help="comma-separated fixes (default: every one)")
    args = parser.parse_args()
    started = time.perf_counter()
    work = Path(args.out).resolve().parent / "work-pairs"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = f"{install_library(work)}:{env.get('PYTHONPATH', '')}"
    steps = args.warmup + REGION_STEPS * args.repeats
    results = []
    for round_ in range(args.rounds):
        for name, before, after, fix in PAIRS:
            if time.perf_counter() - started > args.budget_s:
                break
            if args.only and name not in args.only.split(","):
                continue
            if args.fixes and fix not in args.fixes.split(","):
                continue
            script, extra = PROGRAMS[name]
            entry = next((r for r in results if r["fix"] == fix and r["program"] == name), None)
            if entry is None:
                entry = {"program": name, "fix": fix, "before": [], "after": []}
                results.append(entry)
            for side, flags in (("before", before), ("after", after)):
                bench = timed(
                    [sys.executable, script, "--device", "cuda", *extra, *flags, "--time",
                     "--steps", str(steps), "--warmup", str(args.warmup),
                     "--repeats", str(args.repeats)],
                    env, args.timeout,
                )  # fmt: skip
                if bench:
                    entry[side].append([s / bench["steps"] for s in bench["seconds"]])
            Path(args.out).write_text(json.dumps({"rounds": results}, indent=1))
        print(f"round {round_ + 1} done at {time.perf_counter() - started:.0f} s", flush=True)
    for r in results:
        sides = {
            s: statistics.median(x for run in r[s] for x in run) * 1e3 if r[s] else float("nan")
            for s in ("before", "after")
        }
        print(f"{r['program']} {r['fix']}: {sides['before']:.2f} -> {sides['after']:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
