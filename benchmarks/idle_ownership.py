"""Idle on its owner: brrr-trace's charges against a check that does not use its line recovery.

    python benchmarks/idle_ownership.py

For each real-code program (tests/data/realcode/h200), every GPU idle gap of the plain trace is
given an owner from the truth rows (line_truth.py: the line of the user's torch call behind
each GPU op, matched by kernel name in launch order, as benchmarks/line_accuracy.py does):

- the part of a gap during which the host sat in a blocking call (a call the trace shows
  spanning the gap's start, up to its return) belongs to the line of the GPU op the host was
  waiting on: the last op to finish before the gap (the device-to-host copy of an ``.item()``);
- the rest belongs to the line of the GPU op that ends the gap: the launch the GPU waited for.

The agreement is the share of idle time on the same line in both: the sum over lines of the
smaller of the two charges, over all idle. Gaps before ops with no truth (launched before the
profiler's window) are left out of both sides and counted.
"""

from __future__ import annotations

import difflib
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "realcode"


def agreement(program: str) -> tuple[float, int, int]:
    """(share of idle on the same line, idle ns compared, idle ns left out)."""
    sys.path.insert(0, str(REPO))
    from benchmarks.line_accuracy import load_truth
    from brrr_trace.analyzers.attribution import Locator
    from brrr_trace.analyzers.intervals import NONE
    from brrr_trace.analyzers.op_lines import attribute_ops
    from brrr_trace.analyzers.paths import PathMapper
    from brrr_trace.analyzers.timeline import build_timeline
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.traces import load

    options = AnalysisOptions(source_root=str(REAL))
    trace = load(REAL / "h200" / f"{program}.json.gz").trace
    locator = Locator(trace, options, PathMapper(str(REAL)))
    ops = attribute_ops(trace, locator)
    timeline = build_timeline(trace, ops, locator, options)
    gpu, host = trace.gpu, trace.host_calls
    truth = load_truth(REAL / "h200" / f"{program}.truth.json.gz")
    order = sorted(range(len(gpu)), key=lambda k: int(gpu.correlation[k]))
    names = [trace.strings[int(gpu.name[k])] for k in order]
    true_line: dict[int, str] = {}
    matcher = difflib.SequenceMatcher(None, names, [r[0] for r in truth], autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            file, line = truth[block.b + offset][2], truth[block.b + offset][3]
            if file is not None:
                true_line[order[block.a + offset]] = f"{os.path.basename(file)}:{line}"

    def where(line_id: int) -> str:
        key = locator.lines[line_id] if line_id != NONE else None
        return f"{os.path.basename(key.file)}:{key.line}" if key else "-"

    blocking = timeline.blocking_rows
    b_start, b_end = host.start_ns[blocking], host.end_ns[blocking]
    by_end = np.argsort(gpu.end_ns, kind="stable")
    ends_sorted = gpu.end_ns[by_end]
    checker: dict[str, int] = {}
    left_out = 0
    for dev in timeline.devices:
        for g0, g1, nxt in zip(
            dev.gap_start.tolist(), dev.gap_end.tolist(), dev.gap_next_op.tolist(), strict=True
        ):
            owner = true_line.get(nxt)
            if owner is None:
                left_out += g1 - g0
                continue
            inside = np.flatnonzero((b_start <= g0) & (b_end > g0))
            blocked_until = min(int(b_end[inside].max()), g1) if len(inside) else g0
            if blocked_until > g0:
                k = int(np.searchsorted(ends_sorted, g0, side="right")) - 1
                waited = true_line.get(int(by_end[k])) if k >= 0 else None
                checker[waited or owner] = checker.get(waited or owner, 0) + blocked_until - g0
            checker[owner] = checker.get(owner, 0) + g1 - blocked_until
    ours: dict[str, int] = {}
    for (line_id, _cause), ns in timeline.idle_charges.items():
        ours[where(line_id)] = ours.get(where(line_id), 0) + ns
    total = sum(checker.values())
    # What brrr-trace charged for the left-out gaps cannot be told apart per gap; it is taken
    # out of the comparison by scaling its charges to the compared idle.
    scale = total / max(1, sum(ours.values()))
    same = sum(min(ns, ours.get(line, 0) * scale) for line, ns in checker.items())
    return same / max(1, total), total, left_out


def main() -> int:
    programs = sorted(
        p.name.removesuffix(".truth.json.gz") for p in (REAL / "h200").glob("*.truth.json.gz")
    )
    print("| program | idle compared, ms | left out, ms | same line |")
    print("|---|---:|---:|---:|")
    weighted = total_ns = 0.0
    for program in programs:
        share, total, left = agreement(program)
        weighted += share * total
        total_ns += total
        print(f"| {program} | {total / 1e6:.2f} | {left / 1e6:.2f} | {100 * share:.1f}% |")
    print(f"| all | {total_ns / 1e6:.2f} | | {100 * weighted / max(1, total_ns):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
