"""Property-based checks over random event lists (docs/architecture.md §10)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brrr_trace.errors import NotATraceError
from brrr_trace.pipeline import analyze
from brrr_trace.render.json import render as render_json
from brrr_trace.traces import load
from tests.tracebuilder import frame, kernel, launch, runtime

spans = st.lists(
    st.tuples(
        st.integers(0, 5_000),  # start µs
        st.integers(0, 300),  # duration µs
        st.integers(0, 2),  # stream
        st.integers(-50, 50),  # launch offset from start; some launches come after the kernel
        st.booleans(),  # has a launch in the trace
        st.booleans(),  # the host waits for it (cudaStreamSynchronize after the launch)
    ),
    min_size=1,
    max_size=40,
)
# The host thread runs one user function after another (each its own line), with gaps between
# them where no frame can take the time.
functions = st.lists(st.tuples(st.integers(50, 1500), st.booleans()), min_size=1, max_size=8)


def naive_union(intervals: list[tuple[int, int]]) -> int:
    covered: set[int] = set()
    for start, dur in intervals:
        covered.update(range(start, start + dur))
    return len(covered)


def random_trace(
    events: list[tuple[int, int, int, int, bool, bool]], calls: list[tuple[int, bool]]
) -> list[dict]:
    trace, t = [], -100.0
    for k, (length, runs) in enumerate(calls):
        if runs:
            trace.append(frame(f"train.py({10 * k + 1}): step_{k}", t, float(length)))
        t += float(length)
    for corr, (start, dur, stream, offset, launched, waits) in enumerate(events, start=1):
        trace.append(kernel("void at::elementwise_kernel", float(start), float(dur), corr, stream))
        if launched:
            at = float(max(start + offset, -99))
            trace.append(launch(at, corr))
            if waits:
                trace.append(runtime("cudaStreamSynchronize", at + 2.0, start + dur - at))
    return trace


def negative_times(value: object, where: str = "") -> list[str]:
    """Every number of the JSON report under a time, count or size key that is below zero."""
    if isinstance(value, dict):
        return [bad for key, v in value.items() for bad in negative_times(v, f"{where}.{key}")]
    if isinstance(value, list):
        return [bad for k, v in enumerate(value) for bad in negative_times(v, f"{where}[{k}]")]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return [f"{where} = {value}"]
    return []


@settings(max_examples=60, deadline=None)
@given(spans, functions)
def test_busy_is_the_union_and_everything_adds_up(
    events: list[tuple[int, int, int, int, bool, bool]], calls: list[tuple[int, bool]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        path.write_text(json.dumps({"traceEvents": random_trace(events, calls)}))
        report = analyze(path)
    s = report.summary
    first = min(e[0] for e in events)
    last = max(e[0] + e[1] for e in events)
    span = 1000 * (last - first)
    assert report.trace.span_ns == span
    assert s.gpu_busy_ns == 1000 * naive_union([(e[0], e[1]) for e in events])
    assert s.gpu_busy_ns + s.gpu_idle_ns == span
    if span:
        assert s.gpu_utilization == s.gpu_busy_ns / span
        assert 0.0 <= s.gpu_utilization <= 1.0
    else:
        assert s.gpu_utilization is None
    assert sum(s.idle_by_cause_ns.values()) == s.gpu_idle_ns
    assert sum(s.time_by_regime_ns.values()) == span
    # Every ns of the span is on exactly one line or in the unattributed rest: nothing is
    # counted twice, nothing lost.
    assert sum(line.gpu_ns for line in report.lines) + s.unattributed_gpu_ns == s.gpu_busy_ns
    assert sum(line.idle_ns for line in report.lines) + s.unattributed_idle_ns == s.gpu_idle_ns
    for line in report.lines:
        assert sum(line.idle_by_cause_ns.values()) == line.idle_ns
        assert sum(line.time_by_regime_ns.values()) == line.total_ns
        assert 0 <= line.profiler_overhead_ns <= line.idle_ns
        assert line.inclusive_gpu_ns >= line.gpu_ns
        assert line.inclusive_ns >= line.total_ns
    assert 0 <= s.profiler_overhead_ns <= s.gpu_idle_ns
    assert not negative_times(json.loads(render_json(report)))


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


# -- the command line over hostile input: exit 0 or 2, one line at most, never a traceback --------

CONTROL_TEXT = st.text(
    st.sampled_from([*"ab.py(1): []/", "\x1b", "\x9b", "\u202e", "\x00", "\n", "é"]),
    max_size=12,
)
hostile_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "M", "B", None]),
        "cat": st.sampled_from(["kernel", "cpu_op", "python_function", "cuda_runtime", "x"]),
        "name": CONTROL_TEXT,
        "pid": st.integers(-2, 2),
        "tid": st.integers(-2, 2),
        "ts": st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(1 << 64), 1 << 64),
            st.sampled_from([9.3e15, 1.7e15 + 0.5, -1.0]),
        ),
        "dur": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-5, 10**18)),
        "args": st.dictionaries(
            st.sampled_from(["correlation", "device", "stream", "Call stack", "grid"]),
            json_values,
            max_size=3,
        ),
    }
)
PREFIXES = [b"", b"\x1f\x8b", b'{"traceEvents": [', b"[", b"PK\x03\x04", b"\xef\xbb\xbf{"]


def run_cli(path: Path, *flags: str) -> tuple[int, str, str]:
    """brrr-trace analyze in-process, with its stdout and stderr."""
    import contextlib
    import io

    from brrr_trace.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", str(path), "--source-root", str(path.parent), *flags])
    return code, out.getvalue(), err.getvalue()


def assert_user_facing(code: int, out: str, err: str) -> None:
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        assert err.count("\n") == 1, err
    for raw in ("\x1b", "\x9b", "\u202e"):
        assert raw not in out and raw not in err


def write_and_run(data: bytes, name: str, *flags: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        return run_cli(path, *flags)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(PREFIXES), st.binary(max_size=200), st.booleans())
def test_any_bytes_get_a_report_or_one_clear_line(prefix: bytes, body: bytes, zipped: bool):
    import gzip

    data = prefix + body
    if zipped:
        data = gzip.compress(data)[: max(2, len(data) // 2)]  # often cut short, too
    assert_user_facing(*write_and_run(data, "t.json.gz" if zipped else "t.json"))


@settings(max_examples=40, deadline=None)
@given(json_values, st.sampled_from(["text", "json"]))
def test_any_json_value_gets_a_report_or_one_clear_line(value, fmt: str) -> None:
    data = json.dumps(value).encode()
    assert_user_facing(*write_and_run(data, "t.json", "--format", fmt))


@settings(max_examples=30, deadline=None)
@given(st.lists(hostile_event, max_size=10), st.sampled_from(["text", "json"]), st.booleans())
def test_any_event_list_gets_a_report_or_one_clear_line(events, fmt: str, twice: bool) -> None:
    doc = json.dumps({"traceEvents": events})
    if twice:  # a repeated traceEvents key
        doc = doc[:-1] + ', "traceEvents": ' + json.dumps(events[::-1]) + "}"
    code, out, err = write_and_run(doc.encode(), "t.json", "--format", fmt, "--max-events", "8")
    assert_user_facing(code, out, err)
    if code == 0 and fmt == "json":
        json.loads(out)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
        b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 9300000000000000.5, "dur": 1}',
        b"PK\x03\x04" + bytes(range(256)),
    ],
)
def test_hostile_bytes_in_a_fresh_process_end_in_bounded_time(tmp_path: Path, data: bytes):
    path = tmp_path / "t.json"
    path.write_bytes(data)
    run_bounded(path, tmp_path)


def test_a_gzip_bomb_ends_in_bounded_time_and_memory(tmp_path: Path) -> None:
    # 3 M identical kernels: about 3 KB of gzip per million events, where a real trace needs
    # 20-40 MB. Only a million are read (gzip-ratio), under the address-space limit.
    import zlib

    event = json.dumps({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1,
                        "dur": 1, "args": {"correlation": 1}}).encode() + b","  # fmt: skip
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunks = [packer.compress(b'{"traceEvents": [')]
    for _ in range(30):
        chunks.append(packer.compress(event * 100_000))
    chunks.append(packer.compress(event[:-1] + b"]}") + packer.flush())
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(b"".join(chunks))
    run_bounded(path, tmp_path)


def run_bounded(path: Path, root: Path) -> None:
    """The CLI in a fresh process, under a 4 GiB address-space limit (Linux) and a timeout
    that only a hang reaches."""
    import subprocess
    import sys

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", str(path), "--source-root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,  # generous: fails only on a hang
        preexec_fn=limit if sys.platform == "linux" else None,
    )
    assert_user_facing(done.returncode, done.stdout, done.stderr)
