"""Idle on its owner, against an outside sample of which line was running in each gap.

    python benchmarks/idle_samples.py [--traces DIR] [--verbose]

Each real-code program was profiled as usual while ``tests/data/realcode/line_samples.py``
sampled, every 100 µs, the line its main thread was running (the innermost frame in the
program's files, ``f_lineno``). From the raw trace and the samples alone, sharing no code with
brrr-trace, every GPU idle gap (between the union of the device's kernels, copies and sets) is
split at the samples: each piece belongs to the line the last sample saw running. A piece the
main thread spent inside a ``backward()`` call belongs to the forward line of the autograd node
the engine thread was running then (the node's sequence number names the forward op that created
it; the line running when that op ran is the owner), because that is the line whose backward
launched late.

brrr-trace's per-line idle charges on the same trace are compared with these: the agreement is
the sum over lines of the smaller of the two, over all idle time. Gaps more than 1 ms from any
sample are left out and counted.
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "realcode"
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
EVALUATE = "autograd::engine::evaluate_function: "
_NEAR_NS = 1_000_000


def _ns(us: float) -> int:
    return round(float(us) * 1000)


def _gaps(events: list[dict]) -> list[tuple[int, int]]:  # type: ignore[type-arg]
    by_device: dict[object, list[tuple[int, int]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in GPU:
            start = _ns(e["ts"])
            by_device.setdefault(e.get("pid"), []).append((start, start + _ns(e.get("dur", 0))))
    spans = sorted(max(by_device.values(), key=len)) if by_device else []
    gaps, reach = [], spans[0][1] if spans else 0
    for start, end in spans[1:]:
        if start > reach:
            gaps.append((reach, start))
        reach = max(reach, end)
    return gaps


def _offset(events: list[dict], steps_ns: list[int]) -> int:  # type: ignore[type-arg]
    """trace ns minus sample-clock ns: ProfilerStep#N begins inside the Nth step() call, so the
    smallest difference has the least of that call's own time in it."""
    found = []
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") == "user_annotation" and name.startswith("ProfilerStep#"):
            n = int(name.split("#", 1)[1])
            if 0 < n <= len(steps_ns):
                found.append(_ns(e["ts"]) - steps_ns[n - 1])
    return min(found)


class _Backward:
    """The forward line behind the engine thread's work at a time."""

    def __init__(self, events: list[dict], line_at) -> None:  # type: ignore[no-untyped-def,type-arg]
        # (start, end, seq) of the engine's node evaluations, or of the node's own op where
        # the evaluation event has no number (Python hooks on the node)
        self.nodes: list[tuple[int, int, int]] = []
        created: dict[int, int] = {}  # seq -> start of the last forward op that read it
        numbered = [
            e
            for e in events
            if e.get("ph") == "X"
            and e.get("cat") == "cpu_op"
            and isinstance((e.get("args") or {}).get("Sequence number"), int)
        ]
        engine = {e.get("tid") for e in events if str(e.get("name", "")).startswith(EVALUATE)}
        for e in numbered:
            seq, start = e["args"]["Sequence number"], _ns(e["ts"])
            if e.get("tid") in engine:
                self.nodes.append((start, start + _ns(e.get("dur", 0)), seq))
            else:
                created[seq] = max(created.get(seq, start), start)
        self.nodes.sort()
        self.starts = [n[0] for n in self.nodes]
        self.created = created
        self.line_at = line_at

    def owner(self, t: int) -> str | None:
        k = bisect.bisect_right(self.starts, t) - 1
        if k < 0 or self.nodes[k][1] <= t:  # between nodes: the next one to run
            k += 1
        if k >= len(self.nodes):
            return None
        created = self.created.get(self.nodes[k][2])
        return self.line_at(created) if created is not None else None


def checked(trace: Path, samples_path: Path) -> tuple[dict[str, int], int]:
    with gzip.open(trace, "rt", encoding="utf-8") as handle:
        events = json.load(handle)["traceEvents"]
    with gzip.open(samples_path, "rt", encoding="utf-8") as handle:
        sampled = json.load(handle)
    offset = _offset(events, sampled["steps_ns"])
    times = [t + offset for t, _, _ in sampled["samples"]]
    lines = [f"{os.path.basename(f)}:{n}" for _, f, n in sampled["samples"]]
    sources: dict[str, list[str]] = {}

    def text(line: str) -> str:
        file, number = line.rsplit(":", 1)
        if file not in sources:
            path = REAL / file
            sources[file] = path.read_text().splitlines() if path.exists() else []
        rows = sources[file]
        return rows[int(number) - 1] if int(number) <= len(rows) else ""

    def line_at(t: int) -> str | None:
        k = bisect.bisect_right(times, t) - 1
        return lines[k] if k >= 0 and t - times[k] <= _NEAR_NS else None

    backward = _Backward(events, line_at)
    owners: dict[str, int] = {}
    left_out = 0
    for g0, g1 in _gaps(events):
        k = bisect.bisect_right(times, g0) - 1
        if k < 0 or g0 - times[k] > _NEAR_NS:
            left_out += g1 - g0
            continue
        t = g0
        while t < g1:
            nxt = times[k + 1] if k + 1 < len(times) else g1
            piece_end = min(max(nxt, t), g1)
            line = lines[k]
            if ".backward(" in text(line):
                line = backward.owner(t) or line
            owners[line] = owners.get(line, 0) + piece_end - t
            t = piece_end
            k += 1
    return owners, left_out


def brrr(trace: Path) -> dict[str, int]:
    sys.path.insert(0, str(REPO))
    from brrr_trace.analyzers.attribution import Locator, attribute_ops
    from brrr_trace.analyzers.intervals import NONE
    from brrr_trace.analyzers.paths import PathMapper
    from brrr_trace.analyzers.timeline import build_timeline
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.traces import load

    options = AnalysisOptions(source_root=str(REAL))
    loaded = load(trace).trace
    locator = Locator(loaded, options, PathMapper(str(REAL)))
    ops = attribute_ops(loaded, locator)
    timeline = build_timeline(loaded, ops, locator, options)
    ours: dict[str, int] = {}
    for (line_id, _cause), ns in timeline.idle_charges.items():
        key = locator.lines[line_id] if line_id != NONE else None
        where = f"{os.path.basename(key.file)}:{key.line}" if key else "-"
        ours[where] = ours.get(where, 0) + ns
    return ours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--traces", default=str(REAL / "h200" / "samples"))
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    folder = Path(args.traces)
    print("| program | idle, ms | left out, ms | same line |")
    print("|---|---:|---:|---:|")
    weighted = total_ns = 0.0
    for samples in sorted(folder.glob("*.samples.json.gz")):
        program = samples.name.removesuffix(".samples.json.gz")
        trace = folder / f"{program}.json.gz"
        check, left = checked(trace, samples)
        ours = brrr(trace)
        total = sum(check.values())
        share = sum(min(ns, ours.get(line, 0)) for line, ns in check.items()) / max(1, total)
        weighted += share * total
        total_ns += total
        print(f"| {program} | {total / 1e6:.2f} | {left / 1e6:.2f} | {100 * share:.1f}% |")
        if args.verbose:
            pairs = [(n, check.get(n, 0), ours.get(n, 0)) for n in set(check) | set(ours)]
            for line, a, b in sorted(pairs, key=lambda p: -abs(p[1] - p[2]))[:4]:
                print(f"|   {line} | check {a / 1e6:.2f} | brrr {b / 1e6:.2f} | |")
    print(f"| all | {total_ns / 1e6:.2f} | | {100 * weighted / max(1, total_ns):.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
