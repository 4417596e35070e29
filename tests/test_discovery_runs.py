"""Runs versus ranks from the traces' heads (traces/discovery.py): golden cases."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.traces.discovery import RankFile, group_runs, rank_file
from tests.tracebuilder import kernel, write

S = 1_000_000_000  # one second in ns


def f(name: str, rank: int | None, start_s: float | None, world: int | None = 2) -> RankFile:
    start = None if start_s is None else int(start_s * S)
    return RankFile(Path(name), rank, world if rank is not None else None, "nccl", start)


def names(files: list[RankFile]) -> list[list[str]]:
    return [[str(x.path) for x in run.files] for run in group_runs(files, 120 * S)]


def test_ranks_of_one_job_are_one_run_sorted_by_rank() -> None:
    assert names([f("b", 1, 10.2), f("a", 0, 10.0)]) == [["a", "b"]]


def test_files_without_rank_are_runs_of_their_own() -> None:
    assert names([f("x", None, 5.0), f("y", None, 5.0)]) == [["x"], ["y"]]


def test_the_same_rank_twice_starts_a_second_run() -> None:
    files = [f("a0", 0, 10.0), f("a1", 1, 10.1), f("b0", 0, 10.5), f("b1", 1, 10.6)]
    assert names(files) == [["a0", "a1"], ["b0", "b1"]]


def test_far_apart_in_time_is_another_run() -> None:
    assert names([f("a0", 0, 0.0), f("b1", 1, 3600.0)]) == [["a0"], ["b1"]]


def test_another_world_size_is_another_run() -> None:
    assert names([f("a0", 0, 0.0), f("b1", 1, 0.0, world=4)]) == [["a0"], ["b1"]]


def test_rank_file_reads_the_head(tmp_path: Path) -> None:
    trace = write(
        tmp_path / "t.json",
        [kernel("k", 1500.0, 1.0, 1)],
        distributedInfo={"backend": "gloo", "rank": 3, "world_size": 4, "pg_config": [{"a": 1}]},
        baseTimeNanoseconds=1_000_000,
    )
    assert rank_file(trace) == RankFile(trace, 3, 4, "gloo", 1_000_000 + 1_500_000)
