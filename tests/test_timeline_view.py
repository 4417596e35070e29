"""The drawn timeline (analyzers/timeline_view.py): segments that tile each device's span, merged
beyond the budget. Golden traces on one screen each; a real trace for the bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from brrr_trace.analyzers.timeline_view import DeviceSegments
from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.vocabulary import IdleCause
from tests.tracebuilder import frame, kernel, launch, runtime, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
REALCODE = Path(__file__).parent / "data" / "realcode"


def rows(d: DeviceSegments) -> list[tuple]:
    return [
        (d.seg_kind[i], d.seg_start_ns[i], d.seg_end_ns[i], d.seg_busy_ns[i], d.seg_ops[i],
         d.seg_gaps[i], d.seg_place[i], d.seg_name[i], d.seg_cause[i])
        for i in range(len(d))
    ]  # fmt: skip


def sync_step(tmp_path: Path) -> Path:
    # tests/test_golden_output.py's step: a GEMM, an add whose line then blocks in a sync, and
    # a logging line that launches one more add after 125 µs of Python.
    return write(
        tmp_path / "t.json",
        [
            frame("train.py(10): forward", 0.0, 20.0),
            launch(5.0, 1),
            kernel(GEMM, 10.0, 200.0, 1),
            frame("train.py(20): update", 30.0, 235.0),
            launch(35.0, 2),
            kernel(ADD, 210.0, 50.0, 2),
            runtime("cudaStreamSynchronize", 40.0, 225.0),
            frame("train.py(30): log", 265.0, 140.0),
            launch(390.0, 3),
            kernel(ADD, 395.0, 20.0, 3),
        ],
    )


def test_every_kernel_and_gap_within_the_budget(tmp_path: Path) -> None:
    view = analyze(sync_step(tmp_path)).timeline
    assert view is not None
    (dev,) = view.devices
    assert (dev.device, dev.start_ns, dev.span_ns, dev.ops, dev.gaps) == (0, 10_000, 405_000, 3, 1)
    assert rows(dev) == [
        ("kernel", 0, 200_000, 200_000, 1, 0, 0, 0, ""),
        ("kernel", 200_000, 250_000, 50_000, 1, 0, 1, 1, ""),
        # the sync gap is shown on the line that blocked
        ("gap", 250_000, 385_000, 0, 0, 1, 1, -1, "sync"),
        ("kernel", 385_000, 405_000, 20_000, 1, 0, 2, 1, ""),
    ]
    assert [(p.file, p.line, p.function) for p in view.places] == [
        ("train.py", 10, "forward"),
        ("train.py", 20, "update"),
        ("train.py", 30, "log"),
    ]
    assert view.names == (GEMM, ADD)
    assert not dev.merged


def test_beyond_the_budget_short_pieces_merge_into_what_dominates(tmp_path: Path) -> None:
    options = AnalysisOptions(timeline_segments=3)
    (dev,) = analyze(sync_step(tmp_path), options).timeline.devices  # type: ignore[union-attr]
    # 4 pieces > 3. The finest merge resolution that fits (halved from 3 × 405 µs while 3
    # segments are enough) is 152 µs: the 200 µs GEMM stays whole, the add and the sync gap
    # after it share a bucket and merge (on the line of the longest piece, the gap's: update;
    # the add's name; the sync cause), the last add starts the next bucket.
    assert rows(dev) == [
        ("kernel", 0, 200_000, 200_000, 1, 0, 0, 0, ""),
        ("mixed", 200_000, 385_000, 50_000, 1, 1, 1, 1, "sync"),
        ("kernel", 385_000, 405_000, 20_000, 1, 0, 2, 1, ""),
    ]
    assert dev.merged


def test_short_runs_merge_around_a_long_gap_that_stays_whole(tmp_path: Path) -> None:
    # Ten 1 µs kernels 1 µs apart (all launched at once: launch gaps), a 100 µs host gap while
    # line 6 runs Python, ten more kernels: 39 segments, a budget of 3 (the finest resolution
    # that fits is 51.75 µs: the gap is longer, each run shorter).
    events = [frame("train.py(5): a", 0.0, 19.2), frame("train.py(6): b", 19.5, 121.0)]
    for k in range(10):
        events += [launch(0.1 * k, k + 1, dur=0.05), kernel(ADD, 2.0 * k, 1.0, k + 1)]
        events += [
            launch(118.0 + 0.1 * k, k + 11, dur=0.05),
            kernel(ADD, 119.0 + 2.0 * k, 1.0, k + 11),
        ]
    path = write(tmp_path / "t.json", events)
    (dev,) = analyze(path, AnalysisOptions(timeline_segments=3)).timeline.devices  # type: ignore[union-attr]
    assert rows(dev) == [
        ("mixed", 0, 19_000, 10_000, 10, 9, 0, 0, "launch"),
        ("gap", 19_000, 119_000, 0, 0, 1, 1, -1, "host"),
        ("mixed", 119_000, 138_000, 10_000, 10, 9, 1, 0, "launch"),
    ]
    (full,) = analyze(path, AnalysisOptions(timeline_segments=39)).timeline.devices  # type: ignore[union-attr]
    assert len(full) == 39 and not full.merged


@pytest.mark.parametrize("budget", [3, 10, 57, 400, 5_000])
def test_segments_tile_the_span_within_the_budget(budget: int) -> None:
    report = analyze(
        REALCODE / "h200" / "gpt_small.json.gz",
        AnalysisOptions(source_root=str(REALCODE), timeline_segments=budget),
    )
    assert report.timeline is not None
    (dev,) = report.timeline.devices
    assert 1 <= len(dev) <= budget
    assert dev.seg_start_ns[0] == 0 and dev.seg_end_ns[-1] == report.trace.span_ns
    assert dev.seg_start_ns[1:] == dev.seg_end_ns[:-1]  # no overlap, no hole
    assert sum(dev.seg_busy_ns) == report.summary.gpu_busy_ns
    assert (sum(dev.seg_ops), sum(dev.seg_gaps)) == (dev.ops, dev.gaps) == (726, 725)
    idle_of_gaps = sum(
        e - s
        for s, e, k in zip(dev.seg_start_ns, dev.seg_end_ns, dev.seg_kind, strict=True)
        if k == "gap"
    )
    assert idle_of_gaps <= report.summary.gpu_idle_ns
    assert dev.merged == (budget < 726 + 725)


def test_step_windows_split_busy_and_idle_like_the_summary() -> None:
    report = analyze(
        REALCODE / "h200" / "gpt_small.json.gz", AnalysisOptions(source_root=str(REALCODE))
    )
    assert report.timeline is not None and report.steps is not None
    windows = report.timeline.steps
    assert [w.end_ns - w.start_ns for w in windows] == list(report.steps.durations_ns)
    span = report.trace.span_ns
    # Busy and idle tile the GPU span, so inside a step they add up to its part of the span
    # (step 1 begins 0.59 ms before the first kernel, step 2 ends after the last one).
    assert [w.busy_ns + sum(w.idle_by_cause_ns.values()) for w in windows] == [
        min(w.end_ns, span) - max(w.start_ns, 0) for w in windows
    ]
    # All the GPU time falls inside the steps; 105 µs of host idle lies between them.
    assert sum(w.busy_ns for w in windows) == report.summary.gpu_busy_ns
    between = windows[1].start_ns - windows[0].end_ns
    assert between == 105_088
    host = report.summary.idle_by_cause_ns[IdleCause.HOST]
    assert sum(w.idle_by_cause_ns["host"] for w in windows) == host - between
