"""Estimated savings against the measured gains of the real-code fixes, per step.

    python benchmarks/savings_real.py

Each before/after pair of ``tests/data/realcode/record_real.py`` was timed unprofiled on the
H200 by ``time_pairs.py`` (``h200/pairs.json``: the two sides in alternating processes, each
warmed up for 20 steps, then 5 timed regions of 25 steps; a side's time is the median of all its
regions); the estimate is what brrr-trace says the fix saves, from the profiled trace of the
unfixed program (2 steps), per step. Also printed: the replay's prediction of the unprofiled
step time from the profiled trace (the profiler's own cost taken out) against the measured one,
for every program timed.

    python benchmarks/savings_real.py --record-timed

estimates from the ``brrr-trace record`` traces of ``h200/record-timed/`` instead: each carries
the program's own step time, timed over its unprofiled wait steps, which the replay's
profiler-cost estimate is scaled to match (``steps.profiler_cost_scale``).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "realcode"

# fix -> the rules whose findings are that fix
RULES_OF_FIX = {
    "tf32": ("fp32-matmul",),
    "fused-adamw": ("unfused-optimizer",),
    "sdpa": ("manual-attention",),
    "sdpa-in-library": ("manual-attention",),
    "no-item-each-step": ("host-sync",),
    "dataloader-workers": ("dataloader-stall", "pageable-memcpy"),
    "cuda-graphs": ("launch-overhead",),
}


def per_step_ms(bench: dict) -> float:  # type: ignore[type-arg]
    return statistics.median(bench["seconds"]) / bench["steps"] * 1e3


def side_ms(pair: dict, side: str) -> float:  # type: ignore[type-arg]
    """A side of an interleaved pair: the median of all its timed regions, ms a step."""
    return statistics.median(s for run in pair[side] for s in run) * 1e3


def main() -> int:
    timed = "--record-timed" in sys.argv[1:]
    folder = REAL / "h200" / ("record-timed" if timed else "")
    sys.path.insert(0, str(REPO))
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.pipeline import analyze

    measured = json.loads((REAL / "h200" / "measurements.json").read_text())
    options = AnalysisOptions(source_root=str(REAL))
    reports = {}

    def report(program: str):  # type: ignore[no-untyped-def]
        if program not in reports:
            reports[program] = analyze(folder / f"{program}.json.gz", options)
        return reports[program]

    print("| program | fix | measured gain, ms/step | estimated, ms/step | ratio |")
    print("|---|---|---:|---:|---:|")
    interleaved = json.loads((REAL / "h200" / "pairs.json").read_text())["rounds"]
    for pair in interleaved:
        before, after = side_ms(pair, "before"), side_ms(pair, "after")
        rep = report(pair["program"])
        steps = rep.steps.count if rep.steps else 1
        rules = RULES_OF_FIX[pair["fix"]]
        together = {r.rule: r.est_savings_ns for r in rep.rule_savings}
        estimate = (
            sum(
                together.get(rule, sum(f.est_savings_ns for f in rep.findings if f.rule == rule))
                for rule in rules
            )
            / steps
            / 1e6
        )
        gain = before - after
        ratio = f"{estimate / gain:.2f}" if gain > 0 else "n/a"
        print(
            f"| {pair['program']} | {pair['fix']} | {gain:.2f} ({before:.2f} → {after:.2f}) "
            f"| {estimate:.2f} | {ratio} |"
        )
    print()
    print(
        "| program | profiled step, ms | replay's unprofiled step, ms | measured unprofiled |"
        + (" timed by record, ms | cost scale |" if timed else "")
    )
    print("|---|---:|---:|---:|" + ("---:|---:|" if timed else ""))
    timed: dict[str, list[float]] = {}
    for pair in interleaved:
        timed.setdefault(pair["program"], []).append(side_ms(pair, "before"))
    for alone in measured["unprofiled"]:
        timed.setdefault(alone["program"], []).append(per_step_ms(alone["bench"]))
    for program, times in timed.items():
        steps = report(program).steps
        if steps is None:
            continue
        recorded = steps.recorded_unprofiled_ns
        extra = (
            f" {recorded / 1e6:.2f} | {steps.profiler_cost_scale:.2f} |"
            if timed and recorded is not None
            else (" | |" if timed else "")
        )
        print(
            f"| {program} | {steps.median_ns / 1e6:.2f} | {steps.replayed_ns / 1e6:.2f} "
            f"| {', '.join(f'{t:.2f}' for t in times)} |{extra}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
