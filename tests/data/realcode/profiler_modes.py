"""What the profiler costs each real-code program: its steps timed unprofiled, under the
profiler with shapes only, and with shapes and stacks (the settings of its traces).

    python3 profiler_modes.py --out FILE.json [--device cuda|cpu] [--only gpt_small,cnn]

Each program runs ``--time`` (30 steps, 5 warm-up, ``--repeats`` timed regions of 25 steps) three
times: plain, ``--time-profiled nostack`` and ``--time-profiled stack``, alternating so that a
drift of the machine touches all three alike. The difference between the modes is what the
profiler adds to a step; the stack mode is how every trace of this folder was recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record_real import PROGRAMS, install_library  # noqa: E402

MODES = {"unprofiled": [], "nostack": ["--time-profiled", "nostack"],
         "stack": ["--time-profiled", "stack"]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="times each mode is run")
    args = parser.parse_args()
    site = install_library(Path(args.out).resolve().parent / "work")
    repo = HERE.parent.parent.parent
    env = dict(os.environ, PYTHONPATH=f"{repo}{os.pathsep}{site}", PYTHONUNBUFFERED="1")
    only = {n for n in args.only.split(",") if n}
    small = ["--small"] if args.device == "cpu" else []
    results: dict = {}
    for name, (script, extra) in PROGRAMS.items():
        if only and name not in only:
            continue
        per_mode: dict[str, list] = {mode: [] for mode in MODES}
        for _ in range(args.rounds):
            for mode, flags in MODES.items():
                timing = ["--time", "--steps", "30", "--warmup", "5"]
                timing += ["--repeats", str(args.repeats)]
                cmd = [sys.executable, script, "--device", args.device, *small, *extra, *timing,
                       *flags]  # fmt: skip
                done = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, env=env,
                                      timeout=300, check=False)  # fmt: skip
                bench = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH ")]
                if bench:
                    b = json.loads(bench[-1][len("BENCH ") :])
                    per_mode[mode].append([s / b["steps"] * 1e3 for s in b["seconds"]])
                else:
                    per_mode[mode].append({"rc": done.returncode, "stderr": done.stderr[-2000:]})
                print(name, mode, per_mode[mode][-1], file=sys.stderr, flush=True)
        results[name] = {"ms_per_step": per_mode, "args": extra}
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
