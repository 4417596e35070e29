"""Golden tests of the cross-rank merge: ranks' collectives in, waits and stragglers out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from brrr_trace.analyzers.crossrank import (
    CallTable,
    LateLine,
    LineTime,
    RankPiece,
    RankStep,
    StepTime,
    merge,
)

MS = 1_000_000


@dataclass(frozen=True, slots=True)
class Call:  # the fields of analyzers.collectives.CollectiveCall
    group: str
    index: int
    name: str
    bytes: int | None
    step: int | None
    host_start_ns: int
    host_end_ns: int
    kernel_start_ns: int | None
    kernel_end_ns: int | None
    line: str | None


def allreduce(index: int, step: int, start_ms: float, end_ms: float, nbytes: int = 4096) -> Call:
    return Call(
        "0", index, "allreduce", nbytes, step, int(start_ms * MS), int(start_ms * MS) + 10_000,
        int(start_ms * MS), int(end_ms * MS), "train.py:40",
    )  # fmt: skip


def piece(rank: int, calls: list[Call], lines: dict[int, float]) -> RankPiece:
    return RankPiece(
        rank=rank,
        path=f"rank{rank}.json",
        span_ns=40 * MS,
        steps=(StepTime(1, 0, 20 * MS, 8 * MS), StepTime(2, 20 * MS, 40 * MS, 8 * MS)),
        collectives=tuple(calls),
        lines=tuple(
            LineTime("train.py", None, n, "f", int(ms * MS), int(ms * MS))
            for n, ms in lines.items()
        ),
    )


def test_rank_one_late_by_5ms_at_each_allreduce() -> None:
    # Rank 0 enters each all-reduce at 10 ms into the step and waits for rank 1, which enters at
    # 15 ms; both finish at 16 ms. Rank 1 spends the extra 5 ms on line 30.
    rank0 = [allreduce(0, 1, 10, 16), allreduce(1, 2, 30, 36)]
    rank1 = [allreduce(0, 1, 15, 16), allreduce(1, 2, 35, 36)]
    result = merge(
        [piece(1, rank1, {30: 15, 40: 2}), piece(0, rank0, {30: 5, 40: 12})], min_wait_ns=MS
    )
    assert result.matched_calls == 2 and result.unmatched_calls == 0
    rank0_times, rank1_times = result.ranks
    assert rank0_times.steps == (
        RankStep(step=1, compute_ns=8 * MS, wait_ns=5 * MS, transfer_ns=1 * MS),
        RankStep(step=2, compute_ns=8 * MS, wait_ns=5 * MS, transfer_ns=1 * MS),
    )
    assert (rank1_times.wait_ns, rank1_times.transfer_ns, rank1_times.late_calls) == (0, 2 * MS, 2)
    (straggler,) = result.stragglers
    assert (straggler.rank, straggler.late_ns, straggler.others_wait_ns, straggler.calls) == (
        1, 10 * MS, 10 * MS, 2,
    )  # fmt: skip
    assert straggler.per_call_late_ns == 5 * MS
    assert straggler.agrees_with_clock == 1.0
    assert straggler.lines == (LateLine("train.py", None, 30, "f", 10 * MS),)
    assert straggler.collective_lines == ("train.py:40",)
    spread = {s.line: (s.p50_ns, s.max_ns, s.max_rank) for s in result.line_spread}
    assert spread == {30: (10 * MS, 15 * MS, 1), 40: (7 * MS, 12 * MS, 0)}


def test_balanced_ranks_have_no_straggler() -> None:
    calls = [allreduce(0, 1, 10, 11), allreduce(1, 2, 30, 31)]
    skewed = [allreduce(0, 1, 10.2, 11), allreduce(1, 2, 30, 31.1)]
    result = merge([piece(0, calls, {}), piece(1, skewed, {})], min_wait_ns=MS)
    assert result.stragglers == ()
    assert result.matched_calls == 2


def test_calls_with_another_name_or_size_or_missing_are_not_matched() -> None:
    rank0 = [allreduce(0, 1, 10, 16), allreduce(1, 2, 30, 36, nbytes=8), allreduce(2, 2, 37, 38)]
    rank1 = [allreduce(0, 1, 15, 16), allreduce(1, 2, 35, 36, nbytes=16)]
    result = merge([piece(0, rank0, {}), piece(1, rank1, {})], min_wait_ns=MS)
    assert (result.matched_calls, result.unmatched_calls) == (1, 3)
    assert result.ranks[0].wait_ns == 5 * MS


def test_a_call_table_is_what_a_worker_sends_and_merges_as_its_calls_do() -> None:
    # The first test's ranks, one with its calls as columns: the same result, field for field.
    rank0 = [allreduce(0, 1, 10, 16), allreduce(1, 2, 30, 36)]
    rank1 = [allreduce(0, 1, 15, 16), allreduce(1, 2, 35, 36)]
    pieces = [piece(1, rank1, {30: 15, 40: 2}), piece(0, rank0, {30: 5, 40: 12})]
    as_table = [dataclasses.replace(pieces[0], collectives=CallTable.of(rank1)), pieces[1]]
    table = as_table[0].collectives
    assert isinstance(table, CallTable) and len(table) == 2
    assert (table.groups, table.names, table.lines) == (("0",), ("allreduce",), ("train.py:40",))
    assert table.ns.tolist() == [1 * MS, 1 * MS]  # its kernel's time in each call
    assert merge(as_table, min_wait_ns=MS) == merge(pieces, min_wait_ns=MS)
