"""brrr-trace's GPU utilization equals a plain, independent union of GPU intervals
(docs/architecture.md §4).

The reference here shares no code with brrr-trace's loader: stdlib ``json`` + ``gzip``, floats
kept as text and converted with ``Decimal`` so that 16-digit epoch-µs timestamps keep their ns,
and a textbook sorted-interval union of kernel / memcpy / memset events per device. Utilization is
union / (last end - first start) on the busiest device (by summed durations), which is the
device brrr-trace reports when a trace has several.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import pytest

from benchmarks.compare_hta import to_ns
from brrr_trace.pipeline import analyze
from tests.conftest import PUBLIC

TOLERANCE_PP = 0.5
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
# A cheap byte test to skip CPU-only traces without parsing them (the MTIA traces are 90 MB).
_GPU_MARKERS = tuple(f'"{c}"'.encode() for c in GPU_CATEGORIES) + tuple(
    f'"{c.capitalize()}"'.encode() for c in ("kernel", "memcpy", "memset")
)

FILES = (
    sorted(p for p in PUBLIC.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    if PUBLIC.is_dir()
    else []
)


def _read(path: Path) -> bytes:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return handle.read()


@functools.cache
def _has_gpu_markers(path: Path) -> bool:
    # Cached: the guard test below asks again about every file, after the parametrized tests.
    raw = _read(path)
    return any(marker in raw for marker in _GPU_MARKERS)


def gpu_intervals(raw: bytes) -> dict[int, list[tuple[int, int]]] | None:
    """Kernel/memcpy/memset intervals in ns per device; None when ``raw`` is not a trace."""
    try:
        data = json.loads(raw, parse_float=str)
    except ValueError:
        return None
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return None
    by_device: dict[int, list[tuple[int, int]]] = {}
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        if str(event.get("cat", "")).lower() not in GPU_CATEGORIES:
            continue
        start, length = to_ns(event.get("ts")), to_ns(event.get("dur", 0))
        if start is None:
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        device = args.get("device", event.get("pid"))
        device = device if isinstance(device, int) else -1
        by_device.setdefault(device, []).append((start, start + max(length or 0, 0)))
    return by_device


def union_utilization(intervals: list[tuple[int, int]]) -> float:
    ordered = sorted(intervals)
    first = ordered[0][0]
    last = max(end for _, end in ordered)
    busy = 0
    cur_start, cur_end = ordered[0]
    for start, end in ordered[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    return busy / (last - first)


def busiest(by_device: dict[int, list[tuple[int, int]]]) -> int:
    return max(by_device, key=lambda d: (sum(end - start for start, end in by_device[d]), d))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(PUBLIC)) for p in FILES])
def test_utilization_matches_plain_union(path: Path, public_traces: Path) -> None:
    if not _has_gpu_markers(path):
        pytest.skip("no GPU activity")
    by_device = gpu_intervals(_read(path))
    if not by_device:
        pytest.skip("not a trace, or no GPU activity")
    device = busiest(by_device)
    expected = union_utilization(by_device[device])
    utilization = analyze(path).summary.gpu_utilization
    assert utilization is not None
    assert abs(100 * (utilization - expected)) <= TOLERANCE_PP, (
        f"device {device}: brrr {100 * utilization:.3f} % vs plain union {100 * expected:.3f} %"
    )


def test_public_folder_has_gpu_traces(public_traces: Path) -> None:
    # Guards against the parametrized test passing by skipping everything.
    with_gpu = [p for p in FILES if _has_gpu_markers(p)]
    assert len(with_gpu) >= 10, with_gpu


def _kernel(ts: str, dur: str, stream: int, device: int = 0, cat: str = "kernel") -> str:
    args = f'{{"device": {device}, "stream": {stream}, "correlation": 1}}'
    return (
        f'{{"ph": "X", "cat": "{cat}", "name": "k", "pid": {device}, "tid": {stream}, '
        f'"ts": {ts}, "dur": {dur}, "args": {args}}}'
    )


def test_reference_and_brrr_on_a_known_timeline(tmp_path: Path) -> None:
    """Runs without the public traces: overlap across streams, copies, ns digits, two devices."""
    base = "1712195495519"  # 16-digit epoch µs once three more digits are added
    events = [
        _kernel(f"{base}000.000", "10.000", 7),  # [0, 10] µs
        _kernel(f"{base}005.000", "10.000", 8),  # [5, 15] overlaps across streams
        _kernel(f"{base}020.001", "4.998", 7, cat="gpu_memcpy"),  # [20.001, 24.999]
        _kernel(f"{base}030.000", "0", 7, cat="gpu_memset"),  # zero length: no busy time
        _kernel(f"{base}030.000", "10.000", 7),  # [30, 40]
        _kernel(f"{base}000.000", "1.000", 7, device=1),  # a second, nearly idle device
        _kernel(f"{base}039.000", "1.000", 7, device=1),
    ]
    path = tmp_path / "known.json"
    path.write_text('{"traceEvents": [' + ",\n".join(events) + "]}")
    by_device = gpu_intervals(path.read_bytes())
    assert by_device is not None and busiest(by_device) == 0
    busy_ns = 15_000 + 4_998 + 10_000
    assert union_utilization(by_device[0]) == pytest.approx(busy_ns / 40_000, abs=1e-12)
    report = analyze(path)
    assert report.summary.gpu_busy_ns == busy_ns
    assert report.trace.span_ns == 40_000
    assert report.summary.gpu_utilization == pytest.approx(busy_ns / 40_000, abs=1e-9)
