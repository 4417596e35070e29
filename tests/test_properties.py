"""Property-based checks over random event lists (DESIGN §10)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from brrr_trace.errors import NotATraceError
from brrr_trace.pipeline import analyze
from brrr_trace.traces import load
from tests.tracebuilder import frame, kernel, launch

spans = st.lists(
    st.tuples(
        st.integers(0, 5_000),  # start µs
        st.integers(0, 300),  # duration µs
        st.integers(0, 2),  # stream
        st.integers(-50, 50),  # launch offset from start; some launches come after the kernel
        st.booleans(),  # has a launch in the trace
    ),
    min_size=1,
    max_size=40,
)


def naive_union(intervals: list[tuple[int, int]]) -> int:
    covered: set[int] = set()
    for start, dur in intervals:
        covered.update(range(start, start + dur))
    return len(covered)


@settings(max_examples=60, deadline=None)
@given(spans)
def test_busy_is_the_union_and_everything_adds_up(
    events: list[tuple[int, int, int, int, bool]],
) -> None:
    trace = [frame("train.py(1): main", -100.0, 6_000.0)]
    for corr, (start, dur, stream, offset, launched) in enumerate(events, start=1):
        trace.append(kernel("void at::elementwise_kernel", float(start), float(dur), corr, stream))
        if launched:
            trace.append(launch(float(max(start + offset, -99)), corr))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        path.write_text(json.dumps({"traceEvents": trace}))
        report = analyze(path)
    s = report.summary
    first = min(e[0] for e in events)
    last = max(e[0] + e[1] for e in events)
    assert s.gpu_busy_ns == 1000 * naive_union([(e[0], e[1]) for e in events])
    assert s.gpu_busy_ns + s.gpu_idle_ns == 1000 * (last - first)
    assert sum(s.idle_by_cause_ns.values()) == s.gpu_idle_ns
    assert sum(s.time_by_regime_ns.values()) == s.gpu_busy_ns + s.gpu_idle_ns
    on_lines = sum(line.gpu_ns + line.idle_ns for line in report.lines)
    assert (
        on_lines + s.unattributed_gpu_ns + s.unattributed_idle_ns == s.gpu_busy_ns + s.gpu_idle_ns
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
event_like = st.dictionaries(
    st.sampled_from(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"]),
    json_values,
    max_size=8,
)


@settings(max_examples=80, deadline=None)
@given(st.lists(event_like, max_size=12))
def test_any_list_of_event_like_objects_loads_without_raising(events: list[dict]) -> None:
    """A report, or, when not one event could be read, the loader's one clear sentence."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        path.write_text(json.dumps({"traceEvents": events}))
        try:
            result = load(path)
        except NotATraceError as error:
            assert "none of its events could be read" in str(error)
            return
    assert len(result.trace.gpu) <= len(events)
