"""Loading: every layout and every kind of dirt gives a trace with problems, or one clear error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from brrr_trace.errors import NotATraceError
from brrr_trace.traces import load, reader
from tests.tracebuilder import frame, kernel, launch, op, write

GOOD = [frame("train.py(3): step", 0.0, 100.0), launch(1.0, corr=1), kernel("k", 10.0, 5.0, corr=1)]


def kinds(result) -> dict[str, int]:
    return {p.kind: p.count for p in result.problems}


def test_object_and_gzip_and_legacy_array_give_the_same_tables(tmp_path: Path) -> None:
    plain = write(tmp_path / "a.json", GOOD)
    gz = tmp_path / "a.json.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(GOOD))
    for path in (plain, gz, bare):
        trace = load(path).trace
        assert (len(trace.gpu), len(trace.host_calls), len(trace.frames)) == (1, 1, 1)
        assert trace.gpu.start_ns.tolist() == [10_000]


def test_torch_1_8_names_and_string_stream_ids(tmp_path: Path) -> None:
    events = [
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "k",
            "pid": 0,
            "tid": "stream 7",
            "ts": 10,
            "dur": 5,
            "args": {"correlation": 1, "external id": 3},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 5,
            "tid": "5",
            "ts": 2,
            "dur": 1,
            "args": {"correlation": 1},
        },
        {
            "ph": "X",
            "cat": "Operator",
            "name": "aten::add",
            "pid": 5,
            "tid": "5",
            "ts": 1,
            "dur": 3,
        },
    ]
    trace = load(write(tmp_path / "old.json", events)).trace
    assert trace.gpu.stream.tolist() == [7]
    assert (len(trace.host_calls), len(trace.cpu_ops)) == (1, 1)


def test_epoch_microseconds_with_a_fraction_keep_their_nanoseconds(tmp_path: Path) -> None:
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1712195495519689.047, "dur": 1.001, "args": {"correlation": 1}}]}'
    )
    (tmp_path / "ns.json").write_text(text)
    gpu = load(tmp_path / "ns.json").trace.gpu
    assert gpu.start_ns.tolist() == [1712195495519689047]
    assert gpu.end_ns.tolist() == [1712195495519690048]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"hello world", "not JSON"),
        (b'{"schemaVersion": 1, "foo": []}', "traceEvents"),
        (b"\x1f\x8b\x08\x00garbage-not-gzip", "gzip"),
    ],
)
def test_not_a_trace_is_one_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(NotATraceError) as error:
        load(path)
    assert "bad.json" in str(error.value)
    assert message in str(error.value)


def test_gzip_bomb_of_zeros_stops_at_the_first_chunk(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        block = b"\0" * (1 << 20)
        for _ in range(1024):  # 1 GiB uncompressed, ~1 MB on disk
            out.write(block)
    with pytest.raises(NotATraceError):
        load(path)


def test_gzip_bomb_of_whitespace_inside_the_array_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "spaces.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(b'{"traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(200):
            out.write(block)
        out.write(b"]}")
    result = load(path)
    assert len(result.trace.gpu) == 0


def test_whitespace_longer_than_an_event_then_the_arrays_end_is_no_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run that holds the array's "]" is more than MAX_EVENT_BYTES long, all spaces before
    # it: that is the end of the events, not one event too large.
    monkeypatch.setattr(reader, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(reader, "MAX_EVENT_BYTES", 4096)
    path = tmp_path / "spaces.json"
    # 17 bytes of head, then spaces: the fifth 1 KiB read holds the "]" and takes the pending
    # bytes past 4 KiB.
    path.write_text('{"traceEvents": [' + " " * 4500 + "]}")
    result = load(path)
    assert "empty-trace" in kinds(result)


def test_truncated_file_keeps_the_whole_events(tmp_path: Path) -> None:
    text = write(tmp_path / "full.json", GOOD * 50).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: int(len(text) * 0.7)])
    result = load(cut)
    assert "truncated" in kinds(result)
    assert 0 < len(result.trace.frames) + len(result.trace.gpu) < 100


def test_dirty_events_are_repaired_or_dropped_and_counted(tmp_path: Path) -> None:
    good = json.dumps(kernel("k", 10.0, 5.0, corr=1))
    events = [
        good,
        '{"ph": "X", "cat": "python_function", "name": "x.py(1): say "hi"", "pid": 1, "tid": 1, '
        '"ts": 1, "dur": 2, "args": {}}',  # unescaped quotes (Kineto before 2026-07)
        '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": "30.5", "dur": 1, '
        '"args": [1, 2]}',  # wrong types: string ts, list args
        '{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 1e400, "dur": 1}',
        '{"ph": "X", "cat": "kernel", "name": "k4", "pid": 0, "tid": 7, "ts": 50, "dur": -3, '
        '"args": {"correlation": 123456789012345678901234567890}}',
        '{"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "dur": 1, '
        '"args": {"Input Dims": ' + "[" * 5000 + "]" * 5000 + "}}",
        "42",
    ]
    raw = ('{"traceEvents": [' + ",\n".join(events) + "]}").encode()
    raw = raw.replace(b'"name": "k2"', b'"name": "k2\xff\xfe"')  # bad UTF-8
    path = tmp_path / "dirty.json"
    path.write_bytes(raw)
    result = load(path)
    found = kinds(result)
    assert {"unescaped-quotes", "wrong-types", "bad-utf8", "negative-duration"} <= set(found)
    names = [result.trace.strings[i] for i in result.trace.gpu.name]
    assert "k" in names and "k4" in names and any(n.startswith("k2") for n in names)
    assert result.trace.frames.name.size == 1


def test_cpu_only_and_launches_without_kernels_are_problems_not_errors(tmp_path: Path) -> None:
    cpu_only = load(write(tmp_path / "cpu.json", [frame("a.py(1): f", 0.0, 1.0)]))
    assert "cpu-only" in kinds(cpu_only)
    no_gpu = load(write(tmp_path / "nogpu.json", [launch(1.0, corr=1)]))
    assert "no-gpu-activity" in kinds(no_gpu)
    empty = load(write(tmp_path / "empty.json", []))
    assert "empty-trace" in kinds(empty)


def test_kernels_without_launch_and_overlaps_are_reported(tmp_path: Path) -> None:
    events = [kernel("a", 0.0, 10.0, corr=1), kernel("b", 5.0, 10.0, corr=2), launch(0.0, corr=1)]
    found = kinds(load(write(tmp_path / "t.json", events)))
    assert found["gpu-op-without-launch"] == 1
    assert found["overlapping-kernels"] == 1


def test_big_file_is_read_in_runs_across_chunk_boundaries(tmp_path: Path, monkeypatch) -> None:
    from brrr_trace.traces import reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", 1024)
    events = []
    for i in range(300):
        events += [launch(i * 100.0, corr=i), kernel(f"k{i % 7}", i * 100.0 + 5, 10.0, corr=i)]
    result = load(write(tmp_path / "big.json", events, traceName="x"))
    assert len(result.trace.gpu) == 300 and not result.problems
    assert result.trace.metadata["traceName"] == "x"


def test_ids_are_int16_and_times_int64(tmp_path: Path) -> None:
    # The columns are alive through the whole analysis: ids (names, threads, values) of a
    # table with fewer than 2**15 entries fit in 16 bits, times need 64 (ns since the epoch).
    events = [*GOOD, op("aten::mm", 2.0, 3.0, **{"Input Dims": [[2, 2]]})]
    trace = load(write(tmp_path / "a.json", events)).trace
    ids = [
        trace.gpu.name,
        trace.host_calls.thread,
        trace.host_calls.name,
        trace.cpu_ops.thread,
        trace.cpu_ops.name,
        trace.cpu_ops.input_dims,
        trace.cpu_ops.input_types,
        trace.cpu_ops.concrete_inputs,
        trace.cpu_ops.call_stack,
        trace.cpu_ops.collective,
        trace.frames.thread,
        trace.frames.name,
        trace.gpu_annotations.name,
    ]
    assert {str(column.dtype) for column in ids} == {"int16"}
    assert trace.strings[int(trace.cpu_ops.name[0])] == "aten::mm"
    assert json.loads(trace.values[int(trace.cpu_ops.input_dims[0])]) == [[2, 2]]
    times = [t.start_ns for t in (trace.gpu, trace.host_calls, trace.cpu_ops, trace.frames)]
    assert {str(column.dtype) for column in times} == {"int64"}


def test_sequence_numbers_call_lines_and_grids_are_int32_unless_a_value_does_not_fit(
    tmp_path: Path,
) -> None:
    # They are narrowed to int32 once sorted (the columns live through the whole analysis),
    # but their values come from the trace: one past 2**31 keeps the column at int64 instead
    # of wrapping (2**32 + 7 in 32 bits is 7, another op's number).
    small = [
        *GOOD,
        op("aten::mm", 2.0, 3.0, **{"Sequence number": 7, "Fwd thread id": 1}),
    ]
    trace = load(write(tmp_path / "small.json", small)).trace
    narrow = [trace.cpu_ops.sequence, trace.cpu_ops.fwd_thread, trace.frames.call_line]
    assert {str(c.dtype) for c in [*narrow, trace.gpu.grid, trace.gpu.block]} == {"int32"}
    assert trace.cpu_ops.sequence.tolist() == [7]

    huge = [
        {**frame("train.py(3): step", 0.0, 100.0), "args": {"brrr call line": 2**33 + 3}},
        launch(1.0, corr=1),
        kernel("k", 10.0, 5.0, corr=1, grid=[2**31 + 5, 1, 1], block=[128, 1, 1]),
        op("aten::mm", 2.0, 3.0, **{"Sequence number": 2**32 + 7, "Fwd thread id": 2**35}),
        op("aten::add", 6.0, 1.0, **{"Sequence number": 7, "Fwd thread id": 1}),
    ]
    trace = load(write(tmp_path / "huge.json", huge)).trace
    assert trace.cpu_ops.sequence.tolist() == [2**32 + 7, 7]
    assert trace.cpu_ops.fwd_thread.tolist() == [2**35, 1]
    assert trace.frames.call_line.tolist() == [2**33 + 3]
    assert trace.gpu.grid.tolist() == [[2**31 + 5, 1, 1]]
    assert str(trace.gpu.block.dtype) == "int32"  # each column on its own values


def test_a_column_of_one_value_takes_no_memory_per_row(tmp_path: Path) -> None:
    # No legacy call stacks, no collectives, no recorder's call lines: each column all NO_ID,
    # held as one value seen through a view; a column with two values is an array of its own.
    events = [
        *GOOD,
        op("aten::mm", 2.0, 3.0),
        op("aten::add", 6.0, 1.0, **{"Call stack": "train.py(7): step"}),
        frame("train.py(9): inner", 20.0, 5.0),
    ]
    trace = load(write(tmp_path / "a.json", events)).trace
    assert trace.frames.call_line.tolist() == [-1, -1]
    assert trace.frames.call_line.strides == (0,)
    assert trace.cpu_ops.collective.tolist() == [-1, -1]
    assert trace.cpu_ops.collective.strides == (0,)
    stacks = trace.cpu_ops.call_stack
    assert stacks.strides == (stacks.itemsize,)
    assert stacks[0] == -1 and trace.strings[int(stacks[1])] == "train.py(7): step"


def test_names_are_int32_once_there_are_2_to_the_15_of_them(tmp_path: Path) -> None:
    # Ids are sized by their table, not by the rows a column holds: int16 would wrap name
    # 40000 into -25536.
    count = (1 << 15) + 10
    events = [*GOOD, *(op(f"op{k}", 2.0 + k * 0.001, 0.0005) for k in range(count))]
    trace = load(write(tmp_path / "names.json", events)).trace
    assert str(trace.cpu_ops.name.dtype) == "int32"
    assert str(trace.frames.name.dtype) == "int32"  # its one name has a small id, all the same
    names = [trace.strings[int(i)] for i in trace.cpu_ops.name[-3:]]
    assert names == [f"op{k}" for k in range(count - 3, count)]
    assert str(trace.cpu_ops.input_dims.dtype) == "int16"  # few values: still narrow
