"""Record the real-code accuracy set, and time each program's fixes unprofiled.

    python3 record_real.py --out DIR [--device cuda|cpu] [--only gpt,cnn]
                           [--no-timing | --timing-only]

Per program, three processes of the same deterministic run (8 steps; the profiler keeps steps 3
and 4): a plain ``torch.profiler`` trace (``--profile``: shapes + stacks), the same run under
``line_truth.py`` (its trace is reduced to one truth row per GPU op, ``P.truth.json.gz``, by
``benchmarks/line_accuracy.py``, then deleted), and ``brrr-trace record``. The library program
imports ``tinyvit`` from a ``site-packages`` folder on ``PYTHONPATH`` (laid out as
``pip install --target`` does), into which ``../realcode_site/tinyvit`` is copied. Then each
before/after pair is timed with ``--time`` (``--repeats`` timed regions), the fixed programs are
profiled too, and the rest are timed unprofiled. Everything measured goes to
``DIR/measurements.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
LIBRARY = HERE.parent / "realcode_site" / "tinyvit"
STEPS = ["--steps", "8"]

# name -> (script, args)
PROGRAMS: dict[str, tuple[str, list[str]]] = {
    "gpt_small": ("gpt.py", ["--size", "small"]),
    "cnn": ("cnn.py", []),
    "rnn": ("rnn.py", []),
    "amp_transformer": ("amp_transformer.py", []),
    "hooks": ("hooks.py", []),
    "use_library": ("use_library.py", []),
    "tiny_mlp": ("tiny_mlp.py", []),
    "gpt_medium": ("gpt.py", ["--size", "medium"]),
}
# (program, before args, after args, what the fix is)
PAIRS: list[tuple[str, list[str], list[str], str]] = [
    ("gpt_small", [], ["--tf32"], "tf32"),
    ("gpt_small", [], ["--fused"], "fused-adamw"),
    ("gpt_small", [], ["--sdpa"], "sdpa"),
    ("cnn", [], ["--log-every", "50"], "no-item-each-step"),
    ("cnn", [], ["--workers", "4", "--pin-memory"], "dataloader-workers"),
    ("use_library", [], ["--sdpa"], "sdpa-in-library"),
    ("tiny_mlp", [], ["--graphs"], "cuda-graphs"),
    ("amp_transformer", [], ["--fused"], "fused-adamw"),
    ("rnn", [], ["--fused"], "fused-adam"),
    ("rnn", [], ["--tf32"], "tf32"),
]


# Timed unprofiled too (the pairs time the others): profiled vs unprofiled step times.
TIMED_ALONE = ["gpt_medium", "rnn", "amp_transformer", "hooks"]


def install_library(work: Path) -> Path:
    """A ``site-packages`` folder holding tinyvit, as ``pip install --target`` lays it out."""
    site = work / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    target = site / "tinyvit"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(LIBRARY, target, ignore=shutil.ignore_patterns("__pycache__"))
    return site


_STARTED = time.perf_counter()
BUDGET_S = 1e9


def run(cmd: list[str], log: list[dict], timeout: float, env: dict[str, str]) -> str:
    if time.perf_counter() - _STARTED > BUDGET_S:
        log.append({"cmd": cmd[1:], "rc": -1, "skipped": "over the time budget"})
        return ""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, cwd=HERE, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        log.append({"cmd": cmd[1:], "rc": -9, "seconds": timeout, "stderr": "timed out"})
        return ""
    entry = {
        "cmd": cmd[1:],
        "rc": done.returncode,
        "seconds": round(time.perf_counter() - start, 2),
    }
    if done.returncode:
        entry["stderr"] = done.stderr[-3000:]
    log.append(entry)
    print(json.dumps(entry)[:400], file=sys.stderr, flush=True)
    return done.stdout


def pack(folder: Path, target: str | None) -> None:
    """The results so far as one archive (a run cut short still returns what it recorded)."""
    if not target:
        return
    partial = Path(target + ".part")
    with tarfile.open(partial, "w:gz") as archive:
        archive.add(folder, arcname=folder.name)
    partial.replace(target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument(
        "--timing-only",
        action="store_true",
        help="keep the traces there are; time and profile fixes",
    )
    parser.add_argument(
        "--truth-only",
        action="store_true",
        help="record only the truth runs, keeping each truth trace (P.truth-trace.json.gz) for "
        "the idle-ownership check; no timing",
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--budget-s", type=float, default=1e9, help="start no run after this")
    parser.add_argument("--pack", help="after every program, write DIR into this .tgz")
    args = parser.parse_args()
    global BUDGET_S
    BUDGET_S = args.budget_s
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(REPO))
    from benchmarks.line_accuracy import read_events, truth_rows

    python = sys.executable
    site = install_library(out.parent / "work")
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{site}", PYTHONUNBUFFERED="1")
    small = ["--small"] if args.device == "cpu" else []
    common = ["--device", args.device, *STEPS, *small]
    only = {n for n in args.only.split(",") if n}
    log: list[dict] = []
    measurements: dict = {"platform": platform.platform(), "python": sys.version, "runs": log}
    try:
        import torch

        measurements["torch"] = torch.__version__
        if torch.cuda.is_available():
            measurements["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    for name, (script, extra) in PROGRAMS.items():
        if (only and name not in only) or args.timing_only:
            continue
        plain = out / f"{name}.json.gz"
        if not args.truth_only:
            run([python, script, *common, *extra, "--profile", str(plain)], log, args.timeout, env)
        truth_trace = out.parent / "work" / f"{name}.truth-trace.json"
        nodes = out.parent / "work" / f"{name}.nodes.json"
        run(
            [python, "line_truth.py", str(nodes), "--", script, *common, *extra,
             "--profile", str(truth_trace)],
            log, args.timeout, env,
        )  # fmt: skip
        if truth_trace.exists() and nodes.exists():
            rows = truth_rows(read_events(truth_trace), json.loads(nodes.read_text()))
            with gzip.open(out / f"{name}.truth.json.gz", "wt", encoding="utf-8") as handle:
                json.dump({"program": name, "script": script, "args": extra, "ops": rows}, handle)
            if args.truth_only:
                with (
                    truth_trace.open("rb") as raw,
                    gzip.open(out / f"{name}.truth-trace.json.gz", "wb", compresslevel=9) as packed,
                ):
                    shutil.copyfileobj(raw, packed)
            truth_trace.unlink()
        if args.truth_only:
            (out / "measurements.json").write_text(json.dumps(measurements, indent=1))
            pack(out, args.pack)
            continue
        record = out / f"{name}.record.json.gz"
        run(
            [python, "-m", "brrr_trace", "record", "-o", str(record), "--wait", "1",
             "--steps", "2", "--", script, *common, *extra],
            log, args.timeout, env,
        )  # fmt: skip
        (out / "measurements.json").write_text(json.dumps(measurements, indent=1))
        pack(out, args.pack)
    if not args.no_timing and not args.truth_only:
        timings: list[dict] = []
        measurements["pairs"] = timings
        for name, before, after, fix in PAIRS:
            if only and name not in only:
                continue
            script, extra = PROGRAMS[name]
            entry: dict = {"program": name, "fix": fix, "before": before, "after": after}
            for side, flags in (("before", before), ("after", after)):
                stdout = run(
                    [python, script, "--device", args.device, *small, *extra, *flags, "--time",
                     "--steps", "30", "--warmup", "5", "--repeats", str(args.repeats)],
                    log, args.timeout, env,
                )  # fmt: skip
                bench = [line for line in stdout.splitlines() if line.startswith("BENCH ")]
                if bench:
                    entry[f"{side}_bench"] = json.loads(bench[-1][len("BENCH ") :])
            timings.append(entry)
            (out / "measurements.json").write_text(json.dumps(measurements, indent=1))
            pack(out, args.pack)
        # Traces of the fixed programs, for before/after checks of the savings estimates.
        for name, _, after, fix in PAIRS:
            if only and name not in only:
                continue
            script, extra = PROGRAMS[name]
            trace = out / f"{name}.after-{fix}.json.gz"
            run([python, script, *common, *extra, *after, "--profile", str(trace)], log,
                args.timeout, env)  # fmt: skip
        alone: list[dict] = []
        measurements["unprofiled"] = alone
        for name in TIMED_ALONE:
            if only and name not in only:
                continue
            script, extra = PROGRAMS[name]
            stdout = run(
                [python, script, "--device", args.device, *small, *extra, "--time", "--steps",
                 "30", "--warmup", "5", "--repeats", str(args.repeats)],
                log, args.timeout, env,
            )  # fmt: skip
            bench = [line for line in stdout.splitlines() if line.startswith("BENCH ")]
            if bench:
                alone.append({"program": name, "bench": json.loads(bench[-1][len("BENCH ") :])})
    (out / "measurements.json").write_text(json.dumps(measurements, indent=1))
    pack(out, args.pack)
    failed = [e for e in log if e["rc"]]
    print(f"{len(log)} runs, {len(failed)} failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
