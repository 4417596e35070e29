"""Share of GPU time that brrr-trace puts on the true source line, on real training programs.

    python benchmarks/line_accuracy.py [FOLDER]      (default: tests/data/realcode/h200)

The folder holds, per program ``P`` of ``tests/data/realcode``, three files recorded by
``tests/data/realcode/record_real.py`` on one GPU:

* ``P.truth.json.gz``: the truth, one row per GPU op in launch order (name, duration, file, line,
  how the line was known), read out of a run under ``line_truth.py`` by ``truth_rows`` below,
  without brrr-trace;
* ``P.json.gz``: a plain ``torch.profiler`` trace of the same program (shapes and stacks on);
* ``P.record.json.gz``: the same program recorded with ``brrr-trace record``.

The runs are separate processes of one deterministic program, so their GPU ops are the same
sequence: ops are matched by kernel name in launch order (``difflib``), and an op is right when
brrr-trace's line for it (file name and line number) is the truth's.
"""

from __future__ import annotations

import argparse
import bisect
import difflib
import gzip
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "data" / "realcode"
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
EVALUATE = "autograd::engine::evaluate_function: "


# -- the truth, from a run under line_truth.py (no brrr-trace code) --------------------------------


def _ns(value: object) -> int:
    return round(float(value) * 1000)  # type: ignore[arg-type]


def read_events(path: str | os.PathLike[str]) -> list[dict]:  # type: ignore[type-arg]
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        data = json.load(handle)
    return data["traceEvents"] if isinstance(data, dict) else data


@dataclass
class _Span:
    start: int
    end: int
    kind: str  # "call", "backward-call", "node"
    where: tuple[str, int] | None = None
    node: str = ""
    seq: int | None = None


def truth_rows(events: list[dict], nodes: dict[str, list]) -> list[list]:  # type: ignore[type-arg]
    """One row per GPU op, in launch (correlation) order: [name, dur_ns, file, line, how].

    The innermost of the truth annotations and autograd nodes around an op's launch decides:
    an annotation gives its line (a torch call, also one made by a hook or a custom backward);
    a node gives the line whose call created it (its sequence number in ``nodes``);
    AccumulateGrad and unknown nodes give the line that called ``backward()``.
    """
    launches: dict[int, tuple[object, int]] = {}
    spans: dict[object, list[_Span]] = {}
    gpu = []
    for event in events:
        if event.get("ph") != "X":
            continue
        cat, name, args = event.get("cat"), event.get("name", ""), event.get("args") or {}
        if cat in GPU_CATEGORIES:
            gpu.append(event)
        elif cat in LAUNCH_CATEGORIES and "correlation" in args:
            launches[int(args["correlation"])] = (event.get("tid"), _ns(event["ts"]))
        start = _ns(event.get("ts", 0))
        end = start + _ns(event.get("dur", 0))
        if cat == "user_annotation" and name.startswith(("truth:", "truth-backward:")):
            prefix, file, line = name.rsplit(":", 2)
            kind = "backward-call" if prefix == "truth-backward" else "call"
            spans.setdefault(event.get("tid"), []).append(
                _Span(start, end, kind, (file, int(line)))
            )
        elif cat == "cpu_op" and name.startswith(EVALUATE):
            seq = args.get("Sequence number")
            node = name[len(EVALUATE) :]
            span = _Span(start, end, "node", node=node, seq=seq)
            spans.setdefault(event.get("tid"), []).append(span)
        elif cat == "cpu_op" and "Sequence number" in args:
            # A node's own op carries its number even when the engine's event does not (hooks).
            spans.setdefault(event.get("tid"), []).append(
                _Span(start, end, "node-op", node=name, seq=args["Sequence number"])
            )
    backward_calls = sorted(
        (s.start, s.end, s.where) for ss in spans.values() for s in ss if s.kind == "backward-call"
    )
    items = work_items(events)
    queries: dict[object, list[tuple[int, int]]] = {}
    points: list[tuple[object, int] | None] = []
    for index, (_, _, key) in enumerate(items):
        point = launches.get(key) if isinstance(key, int) else key  # type: ignore[arg-type]
        points.append(point)
        if point is not None:
            queries.setdefault(point[0], []).append((point[1], index))
    verdict: list[tuple[str | None, int | None, str]] = [(None, None, "no-launch")] * len(items)
    for tid, wanted in queries.items():
        for index, innermost in _innermost(spans.get(tid, []), wanted):
            verdict[index] = _decide(innermost, nodes, backward_calls, points[index][1])  # type: ignore[index]
    return [[name, dur, *verdict[k]] for k, (name, dur, _) in enumerate(items)]


def work_items(events: list[dict]) -> list[tuple[str, int, object]]:  # type: ignore[type-arg]
    """What the program ran, in order: GPU ops (keyed by correlation id), or on a trace without
    GPU ops the leaf CPU ops (keyed by (thread, start)): (name, duration ns, key)."""
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES]
    if gpu:
        gpu.sort(key=lambda e: int((e.get("args") or {}).get("correlation", -1)))
        return [
            (e["name"], _ns(e.get("dur", 0)), int((e.get("args") or {}).get("correlation", -1)))
            for e in gpu
        ]
    ops = sorted(
        (
            (e.get("tid"), _ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), e["name"])
            for e in events
            if e.get("ph") == "X" and e.get("cat") == "cpu_op"
        ),
        key=lambda o: (str(o[0]), o[1], -o[2]),
    )
    leaves = []
    for k, (tid, start, end, name) in enumerate(ops):
        nxt = ops[k + 1] if k + 1 < len(ops) else None
        has_child = nxt is not None and nxt[0] == tid and nxt[1] < end
        if not has_child and not name.startswith(EVALUATE):
            leaves.append((start, name, end - start, (tid, start)))
    leaves.sort(key=lambda leaf: leaf[0])
    return [(name, dur, key) for _, name, dur, key in leaves]


def _innermost(spans: list[_Span], queries: list[tuple[int, int]]) -> Iterable[tuple[int, list]]:
    """For each (t, id): the stack of spans open at t, outermost first (a sweep over time)."""
    spans = sorted(spans, key=lambda s: (s.start, -s.end))
    stack: list[_Span] = []
    k = 0
    for t, ident in sorted(queries):
        while k < len(spans) and spans[k].start <= t:
            while stack and stack[-1].end < spans[k].start:
                stack.pop()
            stack.append(spans[k])
            k += 1
        while stack and stack[-1].end < t:
            stack.pop()
        yield ident, [s for s in stack if s.end >= t]


def _decide(
    stack: list[_Span],
    nodes: dict[str, list],
    backward_calls: list,
    t: int,  # type: ignore[type-arg]
) -> tuple[str | None, int | None, str]:
    # Node ops nested in their engine event only supply its missing sequence number.
    for position in range(len(stack) - 1, -1, -1):
        span = stack[position]
        if span.kind == "call":
            return span.where[0], span.where[1], "call"  # type: ignore[index]
        if span.kind == "node":
            seq = span.seq
            if seq is None:
                seq = next(
                    (
                        s.seq
                        for s in stack[position + 1 :]
                        if s.kind == "node-op" and s.node == span.node
                    ),
                    None,
                )
            known = nodes.get(str(seq)) if seq is not None else None
            if known is not None and "AccumulateGrad" not in span.node:
                return known[0], int(known[1]), "node"
            return _backward_call(backward_calls, t)
    return _backward_call(backward_calls, t) if stack else (None, None, "unknown")


def _backward_call(calls: list, t: int) -> tuple[str | None, int | None, str]:  # type: ignore[type-arg]
    k = bisect.bisect_right(calls, (t, float("inf"), None)) - 1
    while k >= 0:
        start, end, where = calls[k]
        if start <= t <= end:
            return where[0], where[1], "backward-call"
        k -= 1
    return None, None, "unknown"


# -- brrr-trace's lines, and the score ----------------------------------------------------------


@dataclass
class Score:
    program: str
    trace: str
    gpu_ns: int  # GPU time of ops matched to a truth row with a known line
    right_ns: int
    unmatched_ns: int  # ops of the analyzed trace with no truth row
    unknown_ns: int  # matched ops whose truth is unknown
    wrong: dict[tuple[str, str], int]  # (brrr line, true line) -> ns

    @property
    def accuracy(self) -> float:
        return self.right_ns / self.gpu_ns if self.gpu_ns else 0.0


def brrr_lines(path: Path, source_root: Path) -> list[tuple[str, int, str]]:
    """(kernel name, duration ns, 'file:line' or '') per GPU op, in correlation order."""
    import numpy as np

    from brrr_trace.analyzers.attribution import Locator
    from brrr_trace.analyzers.intervals import NONE
    from brrr_trace.analyzers.op_lines import attribute_ops
    from brrr_trace.analyzers.paths import PathMapper
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.traces import load

    options = AnalysisOptions(source_root=str(source_root))
    trace = load(path).trace
    locator = Locator(trace, options, PathMapper(str(source_root)))

    def where(line: int) -> str:
        if line == NONE:
            return ""
        key = locator.lines[line]
        return f"{os.path.basename(key.file)}:{key.line}"

    if len(trace.gpu):
        gpu = trace.gpu
        ops = attribute_ops(trace, locator)
        order = sorted(range(len(gpu)), key=lambda k: int(gpu.correlation[k]))
        return [
            (
                trace.strings[int(gpu.name[k])],
                int(gpu.end_ns[k] - gpu.start_ns[k]),
                where(int(ops.line[k])),
            )
            for k in order
        ]
    # CPU-only: the same leaf ops as work_items picks, each at its start.
    items = work_items(read_events(path))
    index_of = {th.tid: k for k, th in enumerate(trace.threads)}
    thread = np.array([index_of.get(key[0], NONE) for _, _, key in items], dtype=np.int64)
    start = np.array([key[1] for _, _, key in items], dtype=np.int64)
    lines = locator.work_lines(thread, start).line
    return [
        (name, dur, where(int(line)))
        for (name, dur, _), line in zip(items, lines.tolist(), strict=True)
    ]


def score(program: str, trace: Path, truth: list[list], source_root: Path) -> Score:  # type: ignore[type-arg]
    ours = brrr_lines(trace, source_root)
    matcher = difflib.SequenceMatcher(
        None, [r[0] for r in ours], [r[0] for r in truth], autojunk=False
    )
    matched = [False] * len(ours)
    gpu_ns = right_ns = unknown_ns = 0
    wrong: dict[tuple[str, str], int] = {}
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            _, dur, where = ours[block.a + offset]
            _, _, file, line, _how = truth[block.b + offset]
            matched[block.a + offset] = True
            if file is None:
                unknown_ns += dur
                continue
            gpu_ns += dur
            true_where = f"{os.path.basename(file)}:{line}"
            if where == true_where:
                right_ns += dur
            else:
                wrong[(where or "-", true_where)] = wrong.get((where or "-", true_where), 0) + dur
    unmatched = sum(r[1] for r, m in zip(ours, matched, strict=True) if not m)
    return Score(program, trace.name, gpu_ns, right_ns, unmatched, unknown_ns, wrong)


def load_truth(path: Path) -> list[list]:  # type: ignore[type-arg]
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)["ops"]


def programs_in(folder: Path) -> list[str]:
    return sorted(p.name[: -len(".truth.json.gz")] for p in folder.glob("*.truth.json.gz"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("folder", nargs="?", default=str(PROGRAMS / "h200"))
    parser.add_argument("--wrong", type=int, default=3, help="worst misplacements to list")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    totals: dict[str, list[int]] = {}
    for program in programs_in(folder):
        truth = load_truth(folder / f"{program}.truth.json.gz")
        for suffix in (".json.gz", ".record.json.gz"):
            trace = folder / f"{program}{suffix}"
            if not trace.exists():
                continue
            s = score(program, trace, truth, PROGRAMS)
            kind = "record" if "record" in suffix else "plain"
            total = totals.setdefault(kind, [0, 0])
            total[0] += s.gpu_ns
            total[1] += s.right_ns
            print(
                f"{kind:6} {program:24} {100 * s.accuracy:6.2f}%  of {s.gpu_ns / 1e6:8.2f} ms"
                f"  (unmatched {s.unmatched_ns / 1e6:.2f} ms, truth unknown"
                f" {s.unknown_ns / 1e6:.2f} ms)"
            )
            for (got, want), ns in sorted(s.wrong.items(), key=lambda kv: -kv[1])[: args.wrong]:
                print(f"         {ns / 1e6:8.2f} ms on {got or '-'} instead of {want}")
    for kind, (gpu_ns, right_ns) in totals.items():
        print(f"{kind:6} {'all':24} {100 * right_ns / max(gpu_ns, 1):6.2f}%")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
