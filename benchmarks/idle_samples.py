"""Idle on its owner, against an outside sample of which line was running in each gap.

    python benchmarks/idle_samples.py [--traces DIR] [--verbose] [--loo]

Each real-code program was profiled as usual while ``tests/data/realcode/line_samples.py``
sampled, every 100 µs, the line its main thread was running (the innermost frame in the
program's files, ``f_lineno``). From the raw trace and the samples alone, sharing no code with
brrr-trace, every GPU idle gap (between the union of the device's kernels, copies and sets) is
split among the samples, and each piece belongs to its sample's line (or, where no sample can
say, to the function that ran). A piece the main thread
spent inside a ``backward()`` call belongs to what the autograd engine's thread was running
then: a node (the forward line of the op that created it, by the node's sequence number: the
line whose backward launched late), or a function of the program itself (a hook, a custom
``backward``), which that function owns.

What the check assumes, and why (each made it more faithful to what ran, never closer to
brrr-trace by construction; ``--loo`` measures the sample rules):

- Clocks. The sampler wraps ``profile.step`` and reads its clock as the wrapper's first
  statement; the profiler traces that wrapper too, so the wrapper's frames pair the two clocks
  to within the microsecond or two the tracer takes to enter a call. (``ProfilerStep#N`` begins
  only after ``step()`` has done its work, 70 to 125 µs later on these traces: pairing by it put
  every sample that much late.) The call that started the trace is left out: it began before
  the tracer, which records it as beginning when tracing began.
- What a sample covers. The sampled frame's line cannot change while a call it made runs, so
  the call (or op) in progress at the sample, as the trace records it, ran on that line from its
  start to its end, except where it ran the program's own code (frames with lines of their own).
- Whose time a sample shares. A sample names the line of the innermost frame of the program's
  files; while another frame of the program runs innermost (the trace records each frame), that
  line is not the one running. So each frame's samples share out the time in which that frame
  ran innermost, and only that time. Where a frame has no sample within 1 ms (a short call
  between two samples), the samples cannot say which of its lines ran: that time is checked by
  function (``file:first-last``), and brrr-trace's charges to any line of that function agree
  with it. The column ``checked by function`` says how much of the idle that is.
- Between samples. The samples come about 165 µs apart, more while the main thread holds the
  GIL; the stretch between what two neighbours cover is split in the middle (the switch is as
  likely early as late). Holding each line until the next sample, as this check first did, put
  every switch at the later sample. Predicting each sample inside a gap from its two neighbours
  (``--loo``): the line before is right for 71.6% of the 1343 samples, the nearer sample for
  75.9%, the nearer of what they cover for 77.2%.
- Backward. The engine works for a ``backward()`` call while the main thread is inside
  ``run_backward``; between two nodes the GPU waits for the next one. After the call returned
  the main thread's own line is the owner again (this check once gave that time to the first
  node of the next step's backward). The pieces are cut wherever the engine starts or ends a
  node or a function, so that each has one owner.
- The engine's Python. The samples are of the main thread, so which statement of a hook ran is
  not known: such time is checked by function too.

brrr-trace's per-line idle charges on the same trace are compared with these: the agreement is
the sum over lines of the smaller of the two, over all idle time. Gaps more than 1 ms from
anything a sample covers are left out and counted. ``idle on no line`` is the idle brrr-trace
charges to no line at all (``summary.unattributed_idle_us`` of the report), as a share of the
span.
"""

from __future__ import annotations

import argparse
import ast
import bisect
import gzip
import itertools
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL = REPO / "tests" / "data" / "realcode"
GPU = {"kernel", "gpu_memcpy", "gpu_memset"}
EVALUATE = "autograd::engine::evaluate_function: "
_NEAR_NS = 1_000_000
_CALLS = {"python_function", "cpu_op"}
_SAMPLER = "line_samples.py("
_RUN_BACKWARD = "<built-in method run_backward"


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
    """trace ns minus sample-clock ns, from the frames of the sampler's ``step`` wrapper, which
    reads the sample clock first thing: each call's frame start pairs with that reading."""
    steps: dict[int, int] = {}  # N -> start of ProfilerStep#N
    for e in events:
        name = str(e.get("name", ""))
        if e.get("cat") == "user_annotation" and name.startswith("ProfilerStep#"):
            steps[int(name.split("#", 1)[1])] = _ns(e["ts"])
    # ProfilerStep#N begins inside the Nth step() call, after that call's own work: roughly
    # paired (to within a fraction of a millisecond), enough to tell which reading is which call.
    rough = min(start - steps_ns[n - 1] for n, start in steps.items() if 0 < n <= len(steps_ns))
    wrappers = [
        _ns(e["ts"])
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") == "python_function"
        and str(e.get("name", "")).startswith("line_samples.py(")
        and str(e.get("name", "")).endswith("): step")
    ]
    # The call that started the trace began before the tracer: its recorded start is not its own.
    wrappers = [w for w in wrappers if w > min(steps.values())]
    if not wrappers:
        return rough
    # The readings are a step apart (tens of ms): the one nearest to a call's start is its own.
    # The frame starts a little before its reading, so the latest pairing is the tightest bound.
    return max(w - min(steps_ns, key=lambda s, w=w: abs(w - rough - s)) for w in wrappers)


def _thread_of(events: list[dict], suffix: str) -> object:  # type: ignore[type-arg]
    """The thread of the sampler's own frame named ``line_samples.py(N)<suffix>``."""
    for e in events:
        name = str(e.get("name", ""))
        if (
            e.get("cat") == "python_function"
            and name.startswith(_SAMPLER)
            and name.endswith(suffix)
        ):
            return e.get("tid")
    return None


def _calls(events: list[dict], thread: object) -> list[tuple[int, int, str]]:  # type: ignore[type-arg]
    """(start, end, name) of the Python calls and ops a thread ran, outer first on a tie."""
    found = [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), str(e.get("name", "")))
        for e in events
        if e.get("ph") == "X" and e.get("tid") == thread and e.get("cat") in _CALLS
    ]
    return sorted(found, key=lambda c: (c[0], -c[1]))


def _file_of(call: str) -> str:
    return call.split("(", 1)[0]


def _known(
    calls: list[tuple[int, int, str]], samples: list[tuple[int, str]]
) -> list[tuple[int, int]]:
    """For each (time, file) sample: the stretch known to have run its line. The sampled frame's
    line cannot change while a call it made (a Python call or an op, as the trace has them)
    runs, so the call in progress at the sample ran on that line from its start to its end,
    except where it ran code of the program's own files (their frames have lines of their own).
    Nothing in progress: only the sample's instant."""
    files = {file for _, file in samples}
    own = [(a, b) for a, b, name in calls if _file_of(name) in files]
    own_starts = [a for a, _ in own]
    own_ends = sorted(b for _, b in own)
    out: list[tuple[int, int]] = []
    stack: list[tuple[int, int, str]] = []
    i = 0
    for t, file in samples:  # in time order
        while i < len(calls) and calls[i][0] <= t:
            stack.append(calls[i])
            i += 1
        stack = [c for c in stack if c[1] > t]
        inner = next(
            (j for j in range(len(stack) - 1, -1, -1) if _file_of(stack[j][2]) == file), None
        )
        if inner is None or inner + 1 >= len(stack):
            out.append((t, t))
            continue
        a, b, _ = stack[inner + 1]
        j = bisect.bisect_right(own_ends, t) - 1
        if j >= 0 and own_ends[j] > a:
            a = own_ends[j]
        j = bisect.bisect_left(own_starts, t)
        if j < len(own_starts) and own_starts[j] < b:
            b = own_starts[j]
        out.append((min(a, t), max(b, t)))
    return out


def _innermost(frames: list[tuple[int, int, str]]) -> list[tuple[int, int, int]]:
    """(start, end, k): the stretches in which frames[k] runs innermost, in time order (the
    frames nested, sorted by start, outer first on a tie)."""
    out: list[tuple[int, int, int]] = []
    stack: list[int] = []
    cursor = frames[0][0] if frames else 0

    def until(t: int) -> None:
        nonlocal cursor
        if stack and t > cursor:
            out.append((cursor, t, stack[-1]))
        cursor = max(cursor, t)

    for k, (a, _, _) in enumerate(frames):
        while stack and frames[stack[-1]][1] <= a:
            until(frames[stack[-1]][1])
            stack.pop()
        until(a)
        stack.append(k)
    while stack:
        until(frames[stack[-1]][1])
        stack.pop()
    return out


def _bounds(times: list[int], known: list[tuple[int, int]]) -> list[int]:
    """Sample k stands for [bounds[k], bounds[k + 1]): what it is known to cover, and half of the
    unknown stretch on either side (all of it nearer to it than to its neighbour)."""
    bounds = [known[0][0]]
    for k in range(len(times) - 1):
        b, a = known[k][1], known[k + 1][0]
        bounds.append((b + a) // 2 if b <= a else (times[k] + times[k + 1]) // 2)
    bounds.append(times[-1] + _NEAR_NS)
    return bounds


def _functions(file: str) -> dict[int, tuple[int, int]]:
    """First line (a decorator's, as in a frame's name) -> (first, last line) of each function."""
    path = REAL / file
    if not path.exists():
        return {}
    out: dict[int, tuple[int, int]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            decorators = getattr(node, "decorator_list", [])
            first = min([node.lineno, *(d.lineno for d in decorators)])
            out.setdefault(first, (first, node.end_lineno or node.lineno))
    return out


class _Backward:
    """What the engine thread was running for a ``backward()`` call of the main thread: a node
    (its forward line), or the program's own Python (a hook, a custom backward: its function)."""

    def __init__(self, events: list[dict], line_at, files: set[str]) -> None:  # type: ignore[no-untyped-def,type-arg]
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
        # The engine works for a backward() call while the main thread is inside run_backward.
        main = _thread_of(events, "): main")
        self.runs = sorted(
            (a, b) for a, b, name in _calls(events, main) if name.startswith(_RUN_BACKWARD)
        )
        # The program's own functions the engine ran, as (start, end, "file:first-last").
        self.python: list[tuple[int, int, str]] = []
        for thread in engine:
            for a, b, name in _calls(events, thread):
                file = _file_of(name)
                if file in files and "): " in name:
                    first = int(name.split("(", 1)[1].split(")", 1)[0])
                    lo, hi = _functions(file).get(first, (first, first))
                    self.python.append((a, b, f"{file}:{lo}-{hi}"))
        self.python.sort()
        self.python_starts = [p[0] for p in self.python]
        # Where the owner can change: the engine starts or ends a node or a function, a call ends.
        self.edges = sorted(
            {x for a, b, _ in self.nodes for x in (a, b)}
            | {x for a, b, _ in self.python for x in (a, b)}
            | {b for _, b in self.runs}
        )

    def pieces(self, a: int, b: int) -> list[tuple[int, int, str | None]]:
        """[a, b) cut where the engine's work changes, each piece with its owner (None: not the
        engine's)."""
        inside = self.edges[bisect.bisect_right(self.edges, a) : bisect.bisect_left(self.edges, b)]
        cuts = [a, *inside, b]
        return [(x, y, self.owner((x + y) // 2)) for x, y in itertools.pairwise(cuts)]

    def owner(self, t: int) -> str | None:
        r = bisect.bisect_right(self.runs, (t, 1 << 62)) - 1
        if r < 0 or self.runs[r][1] <= t:
            return None  # the call has returned: the main thread runs its own line again
        # Innermost program function the engine is in at t (the latest one begun, still running).
        p = bisect.bisect_right(self.python_starts, t) - 1
        while p >= 0 and self.python[p][1] <= t and self.python[p][0] >= self.runs[r][0]:
            p -= 1
        if p >= 0 and self.python[p][0] <= t < self.python[p][1]:
            return self.python[p][2]
        k = bisect.bisect_right(self.starts, t) - 1
        if k < 0 or self.nodes[k][1] <= t:  # between nodes: the next one to run
            k += 1
        if k >= len(self.nodes) or self.nodes[k][0] >= self.runs[r][1]:
            return None
        created = self.created.get(self.nodes[k][2])
        return self.line_at(created) if created is not None else None


def _placed(
    trace: Path, samples_path: Path
) -> tuple[list[dict], list[int], list[str], list[tuple[int, int]]]:  # type: ignore[type-arg]
    """The trace's events, and the samples on its clock: times, lines, what each covers."""
    with gzip.open(trace, "rt", encoding="utf-8") as handle:
        events = json.load(handle)["traceEvents"]
    with gzip.open(samples_path, "rt", encoding="utf-8") as handle:
        sampled = json.load(handle)
    offset = _offset(events, sampled["steps_ns"])
    times = [t + offset for t, _, _ in sampled["samples"]]
    lines = [f"{os.path.basename(f)}:{n}" for _, f, n in sampled["samples"]]
    main = _thread_of(events, "): main")
    known = _known(
        _calls(events, main),
        [(t, line.rsplit(":", 1)[0]) for t, line in zip(times, lines, strict=True)],
    )
    return events, times, lines, known


def leave_one_out(trace: Path, samples_path: Path) -> tuple[int, int, int, int]:
    """Each sample inside a gap predicted from its two neighbours (at most 2 ms apart): how
    many there are, and how many the line before, the nearer sample and the nearer of what the
    two cover get right."""
    events, times, lines, known = _placed(trace, samples_path)
    gaps = _gaps(events)
    starts = [g[0] for g in gaps]
    n = before = nearer = covered = 0
    for k in range(1, len(times) - 1):
        t = times[k]
        g = bisect.bisect_right(starts, t) - 1
        if g < 0 or t >= gaps[g][1] or times[k + 1] - times[k - 1] > 2 * _NEAR_NS:
            continue
        n += 1
        before += lines[k - 1] == lines[k]
        near = k - 1 if t - times[k - 1] <= times[k + 1] - t else k + 1
        nearer += lines[near] == lines[k]
        reach, back = known[k - 1][1], known[k + 1][0]
        if t <= reach or t >= back:
            guess = k - 1 if t <= reach else k + 1
        else:
            guess = k - 1 if t - reach <= back - t else k + 1
        covered += lines[guess] == lines[k]
    return n, before, nearer, covered


def checked(
    trace: Path, samples_path: Path, pieces: list[tuple[int, int, str]] | None = None
) -> tuple[dict[str, int], int]:
    """The check's idle per line (ns) and the idle left out; ``pieces`` collects each owned
    stretch as (start, end, owner), for a closer look at one gap."""
    events, times, lines, known = _placed(trace, samples_path)
    files = {line.rsplit(":", 1)[0] for line in lines}
    sources: dict[str, list[str]] = {}

    def text(line: str) -> str:
        file, number = line.rsplit(":", 1)
        if file not in sources:
            path = REAL / file
            sources[file] = path.read_text().splitlines() if path.exists() else []
        rows = sources[file]
        return rows[int(number) - 1] if int(number) <= len(rows) else ""

    bounds = _bounds(times, known)

    def near(k: int, t: int) -> bool:
        """Whether sample k says anything about t: it covers t, or was taken within 1 ms."""
        return known[k][0] - _NEAR_NS <= t <= known[k][1] + _NEAR_NS

    def nearest(t: int) -> int:
        return min(len(times) - 1, max(0, bisect.bisect_right(bounds, t) - 1))

    def line_at(t: int) -> str | None:
        k = nearest(t)
        return lines[k] if near(k, t) else None

    backward = _Backward(events, line_at, files)
    owners: dict[str, int] = {}

    def own(a: int, b: int, line: str) -> None:
        """[a, b) ran ``line``; inside a backward() call, the engine's work owns it."""
        sampled = line.rsplit(":", 1)[1].isdigit()
        parts = backward.pieces(a, b) if sampled and ".backward(" in text(line) else [(a, b, None)]
        for x, y, owner in parts:
            owners[owner or line] = owners.get(owner or line, 0) + y - x
            if pieces is not None:
                pieces.append((x, y, owner or line))

    # A sample speaks for its own frame only: while another frame of the program runs innermost,
    # the sampled line is not the one running. Each frame's samples share out its own time.
    calls = _calls(events, _thread_of(events, "): main"))
    frames = [c for c in calls if _file_of(c[2]) in files and "): " in c[2]]
    turns = _innermost(frames)
    turn_starts = [a for a, _, _ in turns]

    def function(frame: int) -> str:
        name = frames[frame][2]
        file, first = _file_of(name), int(name.split("(", 1)[1].split(")", 1)[0])
        lo, hi = _functions(file).get(first, (first, first))
        return f"{file}:{lo}-{hi}"

    def of_frame(line: str, frame: int) -> bool:
        """Whether a sampled line is one of the frame's function (the same file is not enough:
        a call between two functions of one file)."""
        file, span = function(frame).rsplit(":", 1)
        lo, hi = (int(x) for x in span.split("-"))
        sampled_file, number = line.rsplit(":", 1)
        return sampled_file == file and (lo == hi or lo <= int(number) <= hi)

    by_frame: dict[int, list[int]] = {}
    for k, t in enumerate(times):
        j = bisect.bisect_right(turn_starts, t) - 1
        if j >= 0 and t < turns[j][1] and of_frame(lines[k], turns[j][2]):
            by_frame.setdefault(turns[j][2], []).append(k)
    frame_bounds = {
        frame: _bounds([times[k] for k in ks], [known[k] for k in ks])
        for frame, ks in by_frame.items()
    }

    def share(a: int, b: int, frame: int) -> None:
        """[a, b), in which ``frame`` ran innermost, among that frame's samples; where none of
        them is within 1 ms of what it covers, the frame's function (which line, unknown)."""
        ks = by_frame.get(frame)
        if not ks:
            own(a, b, function(frame))
            return
        fb = frame_bounds[frame]
        m = min(len(ks) - 1, max(0, bisect.bisect_right(fb, a) - 1))
        t = a
        while t < b:
            end = b if m + 1 == len(ks) else min(max(fb[m + 1], t), b)
            k = ks[m]
            lo, hi = max(t, known[k][0] - _NEAR_NS), min(end, known[k][1] + _NEAR_NS)
            if lo < hi:
                if t < lo:
                    own(t, lo, function(frame))
                own(lo, hi, lines[k])
                if hi < end:
                    own(hi, end, function(frame))
            elif t < end:
                own(t, end, function(frame))
            t = end
            m += 1

    left_out = 0
    for g0, g1 in _gaps(events):
        t = g0
        j = max(0, bisect.bisect_right(turn_starts, g0) - 1)
        while t < g1:
            while j < len(turns) and turns[j][1] <= t:
                j += 1
            if j < len(turns) and turns[j][0] <= t:
                end = min(turns[j][1], g1)
                share(t, end, turns[j][2])
            else:  # no frame of the program runs: the nearest sample, if one is near
                end = min(turns[j][0], g1) if j < len(turns) else g1
                k = nearest(t)
                if near(k, t):
                    own(t, end, lines[k])
                else:
                    left_out += end - t
            t = end
    return owners, left_out


def brrr(trace: Path) -> tuple[dict[str, int], int, int]:
    """brrr-trace's idle per line, the idle it puts on no line (the report's
    ``summary.unattributed_idle_us``) and the GPU span, in ns."""
    sys.path.insert(0, str(REPO))
    from brrr_trace.analyzers.attribution import Locator
    from brrr_trace.analyzers.intervals import NONE
    from brrr_trace.analyzers.op_lines import attribute_ops
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
    device = max(timeline.devices, key=lambda d: d.busy_ns)
    no_line = device.idle_ns - sum(ns for where, ns in ours.items() if where != "-")
    return ours, max(0, no_line), device.span_ns


def _is_function(where: str) -> bool:
    """A check key ``file:first-last``: a function of the program, not one of its lines."""
    return not where.rsplit(":", 1)[-1].isdigit()


def _agreement(check: dict[str, int], ours: dict[str, int]) -> int:
    """ns on which brrr-trace and the check name the same line. A check key ``file:a-b`` (the
    engine ran that function of the program; which of its lines, the samples cannot say) agrees
    with brrr-trace's charges to any line from a to b, after the single lines took theirs."""
    left = dict(ours)
    same = 0
    for where, ns in check.items():
        if "-" not in where.rsplit(":", 1)[-1]:
            took = min(ns, left.get(where, 0))
            same += took
            left[where] = left.get(where, 0) - took
    for where, ns in check.items():
        file, span = where.rsplit(":", 1)
        if "-" not in span:
            continue
        lo, hi = (int(x) for x in span.split("-"))
        for line in [
            w for w in left if w.rsplit(":", 1)[0] == file and w.rsplit(":", 1)[1].isdigit()
        ]:
            if lo <= int(line.rsplit(":", 1)[1]) <= hi and ns > 0:
                took = min(ns, left[line])
                same += took
                left[line] -= took
                ns -= took
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--traces", default=str(REAL / "h200" / "samples"))
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--loo", action="store_true", help="how well each sample rule predicts")
    args = parser.parse_args()
    folder = Path(args.traces)
    if args.loo:
        print("| program | samples in gaps | line before | nearer sample | nearer cover |")
        print("|---|---:|---:|---:|---:|")
        sums = [0, 0, 0, 0]
        for samples in sorted(folder.glob("*.samples.json.gz")):
            program = samples.name.removesuffix(".samples.json.gz")
            counts = leave_one_out(folder / f"{program}.json.gz", samples)
            sums = [a + b for a, b in zip(sums, counts, strict=True)]
            n = max(1, counts[0])
            shares = " | ".join(f"{100 * c / n:.1f}%" for c in counts[1:])
            print(f"| {program} | {counts[0]} | {shares} |")
        n = max(1, sums[0])
        print(f"| all | {sums[0]} | " + " | ".join(f"{100 * c / n:.1f}%" for c in sums[1:]) + " |")
        return 0
    print(
        "| program | idle, ms | left out, ms | checked by function, % | same line "
        "| idle on no line, % of span |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    weighted = total_ns = 0.0
    no_line_ns = span_ns = function_ns = 0
    for samples in sorted(folder.glob("*.samples.json.gz")):
        program = samples.name.removesuffix(".samples.json.gz")
        trace = folder / f"{program}.json.gz"
        check, left = checked(trace, samples)
        ours, no_line, span = brrr(trace)
        total = sum(check.values())
        share = _agreement(check, ours) / max(1, total)
        weighted += share * total
        total_ns += total
        no_line_ns += no_line
        span_ns += span
        by_function = sum(ns for where, ns in check.items() if _is_function(where))
        function_ns += by_function
        print(
            f"| {program} | {total / 1e6:.2f} | {left / 1e6:.2f} "
            f"| {100 * by_function / max(1, total):.1f}% | {100 * share:.1f}% "
            f"| {100 * no_line / max(1, span):.2f}% |"
        )
        if args.verbose:
            pairs = [(n, check.get(n, 0), ours.get(n, 0)) for n in set(check) | set(ours)]
            for line, a, b in sorted(pairs, key=lambda p: -abs(p[1] - p[2]))[:4]:
                print(f"|   {line} | check {a / 1e6:.2f} | brrr {b / 1e6:.2f} | |")
    print(
        f"| all | {total_ns / 1e6:.2f} | | {100 * function_ns / max(1, total_ns):.1f}% "
        f"| {100 * weighted / max(1, total_ns):.1f}% | {100 * no_line_ns / max(1, span_ns):.2f}% |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
