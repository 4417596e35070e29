"""The replay run by run (``replay_runs.replay_runs``, numpy between two blocking calls) gives the
event loop's ints: a graph worked by hand, then random graphs and fixes against the loop, which
still replays the graphs the runs do not take (ops waiting on other streams, frequent blocking
calls)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from brrr_trace.analyzers import replay_runs
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.replay import Fix, Launches, StepGraph
from brrr_trace.analyzers.replay_runs import CALL_NS


def graph(
    work: list[int],
    own: list[int],
    blocks: list[bool],
    launched: list[tuple[int, ...]],
    stream: list[int],
    duration: list[int],
    latency: list[int],
    others: list[tuple[int, int, int]] = (),  # type: ignore[assignment]
    first: int = 1_000,
) -> StepGraph:
    n = len(work)
    event_of_op = np.full(len(stream), NONE, dtype=np.int64)
    for e, ops in enumerate(launched):
        event_of_op[list(ops)] = e
    return StepGraph(
        host_rows=np.arange(n),
        start=np.arange(first, first + n, dtype=np.int64),
        own=np.asarray(own, dtype=np.int64),
        work=np.asarray(work, dtype=np.int64),
        gap_start=np.full(n, first, dtype=np.int64),
        event_start=np.full(n, first, dtype=np.int64),
        event_thread=np.zeros(n, dtype=np.int64),
        blocks=np.asarray(blocks, dtype=bool),
        blocked=np.zeros(n, dtype=np.int64),
        launched=Launches.of(launched),
        event_of_op=event_of_op,
        stream=np.asarray(stream, dtype=np.int64),
        duration=np.asarray(duration, dtype=np.int64),
        latency=np.asarray(latency, dtype=np.int64),
        others=np.asarray(sorted(others), dtype=np.int64).reshape(-1, 3),
    )


def by_loop(g: StepGraph, fix: Fix, passes: int) -> tuple[int, list[int]]:
    return by_loop_with_waits(g, fix, passes)[:2]


def by_runs(g: StepGraph, fix: Fix, passes: int) -> tuple[int, list[int]]:
    return by_runs_with_waits(g, fix, passes)[:2]


def by_loop_with_waits(g: StepGraph, fix: Fix, passes: int) -> tuple[int, list[int], list[int]]:
    g._runs, g._runs_built = None, True
    ends: list[int] = []
    waits = np.zeros(len(g.launched), dtype=np.int64)
    return g._replay(fix, passes=passes, pass_ends=ends, waits=waits), ends, waits.tolist()


def by_runs_with_waits(g: StepGraph, fix: Fix, passes: int) -> tuple[int, list[int], list[int]]:
    runs = replay_runs.Runs.of(g)
    assert runs is not None
    ends: list[int] = []
    waits = np.zeros(len(g.launched), dtype=np.int64)
    return replay_runs.replay_runs(runs, fix, passes, ends, waits), ends, waits.tolist()


@pytest.fixture
def short_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_runs, "MIN_EVENTS_PER_RUN", 0)


def test_a_graph_worked_by_hand(short_runs: None) -> None:
    # e0 launches op 0 (10 000 ns on stream 7, 5 ns after its launch), e1 waits for the GPU, e2
    # launches op 1 (40 ns); an op launched outside the program runs 1050-1200 on stream 7.
    g = graph(
        work=[10, 2, 4],
        own=[3, 50, 3],
        blocks=[False, True, False],
        launched=[(0,), (), (1,)],
        stream=[7, 7, 7],
        duration=[10_000, 40, 150],
        latency=[5, 5, 0],
        others=[(1050, 1200, 7)],
    )
    assert CALL_NS == 2_000
    # Host at 1000 -> 1010: op 0 runs 1015-11015; 1013 -> 1015: the wait returns at 11015
    # (later than 1015 + CALL_NS); 11019: the outside op is past its start (stream 7 stays
    # free at 11015), op 1 runs 11024-11064; the host ends at 11022.
    assert by_runs(g, Fix("baseline"), 1) == (11_064, [11_064])
    # Not waiting: the host is at 3019 when it launches op 1, which waits for op 0: 11015-11055.
    assert by_runs(g, Fix("no wait", unblocked=frozenset({1})), 1) == (11_055, [11_055])
    # Op 0 gone: the wait takes CALL_NS (1015 -> 3015), op 1 runs 3024-3064.
    assert by_runs(g, Fix("op 0 gone", durations={0: 0}), 1) == (3_064, [3_064])
    # 9 ns of host work less before e0: everything 9 ns earlier.
    assert by_runs(g, Fix("less work", host_saved={0: 9}), 1) == (11_055, [11_055])
    # Two passes: the second starts where the first ended (host at 11022, stream 7 at 11064).
    assert by_runs(g, Fix("baseline"), 2) == by_loop(g, Fix("baseline"), 2)
    assert by_loop(g, Fix("baseline"), 1) == (11_064, [11_064])
    # The host waited at e1 from 1015 + CALL_NS until op 0 ended at 11015: 8 000 ns.
    assert by_runs_with_waits(g, Fix("baseline"), 1)[2] == [0, 8_000, 0]
    assert by_loop_with_waits(g, Fix("baseline"), 1)[2] == [0, 8_000, 0]


def random_graph(rng: random.Random) -> StepGraph:
    n = rng.randint(1, 40)
    ops = rng.randint(0, 60)
    streams = [rng.choice([0, 3, 7, 20]) for _ in range(ops)]
    owner = sorted(rng.randrange(n) for _ in range(ops))
    launched = [tuple(r for r in range(ops) if owner[r] == e) for e in range(n)]
    # A few GPU ops more that no event launched (their row exists, the graph never runs them).
    extra = rng.randint(0, 3)
    return graph(
        work=[rng.choice([0, 0, rng.randint(1, 5_000)]) for _ in range(n)],
        own=[rng.randint(0, 3_000) for _ in range(n)],
        blocks=[rng.random() < 0.15 for _ in range(n)],
        launched=launched,
        stream=streams + [0] * extra,
        duration=[rng.choice([0, rng.randint(1, 20_000)]) for _ in range(ops + extra)],
        latency=[rng.choice([0, rng.randint(0, 20_000)]) for _ in range(ops + extra)],
        others=[
            (t, t + rng.randint(0, 30_000), rng.choice([0, 3, 9]))
            for t in (rng.randint(0, 80_000) for _ in range(rng.randint(0, 6)))
        ],
        first=rng.randint(0, 20_000),
    )


def random_fix(rng: random.Random, g: StepGraph) -> Fix:
    n, rows = len(g.launched), len(g.duration)
    events = [rng.randrange(n) for _ in range(rng.randint(0, 4))]
    return Fix(
        "random",
        host_saved={e: rng.randint(0, 8_000) for e in events},
        unblocked=frozenset(rng.randrange(n) for _ in range(rng.randint(0, 3))),
        durations={rng.randrange(rows): rng.choice([0, rng.randint(0, 5_000)]) for _ in range(3)}
        if rows
        else {},
        own={rng.randrange(n): rng.randint(0, 1_000) for _ in range(rng.randint(0, 2))},
    )


def test_random_graphs_and_fixes_replay_as_the_loop_does(short_runs: None) -> None:
    rng = random.Random(17)
    for _ in range(400):
        g = random_graph(rng)
        for fix in [Fix("baseline"), random_fix(rng, g), random_fix(rng, g)]:
            for passes in (1, 2):
                assert by_runs_with_waits(g, fix, passes) == by_loop_with_waits(g, fix, passes), (
                    g,
                    fix,
                    passes,
                )


def test_the_loop_replays_graphs_with_cross_stream_waits_or_frequent_blocking() -> None:
    g = graph(
        work=[1] * 4,
        own=[1] * 4,
        blocks=[False, True, False, False],
        launched=[(0,), (), (1,), ()],
        stream=[0, 1],
        duration=[10, 10],
        latency=[0, 0],
    )
    assert replay_runs.Runs.of(g) is None  # 4 events, one blocking call: runs of 2
    g.after = {1: 0}
    assert replay_runs.Runs.of(g) is None


def test_launches_are_one_ragged_array_per_graph() -> None:
    launches = Launches.of([(4, 7), (), (2,), (0, 1, 3)])
    assert len(launches) == 4
    assert [launches[e] for e in range(4)] == [(4, 7), (), (2,), (0, 1, 3)]
    assert launches.counts().tolist() == [2, 0, 1, 3]
    # Events left out of a pass launch nothing; the others keep their ops, in order.
    gone = launches.without(np.array([True, False, False, True]))
    assert [gone[e] for e in range(4)] == [(), (), (2,), ()]
    assert launches.without(np.zeros(4, dtype=bool)) is launches


def test_a_cost_scaled_graph_replays_its_own_baseline() -> None:
    # One pass: 100 ns of host work (60 of them the profiler's) before a launch of a 10 ns op,
    # which blocks nothing. With the cost taken out once (scale 1) the pass takes 40 + 1 (own
    # time) ns; with none taken out (scale 0), 100 + 1. The scaled graph's baseline is its own,
    # even when the graph it was made from already replayed one.
    g = graph(work=[40], own=[1], blocks=[False], launched=[(0,)], stream=[7], duration=[10],
              latency=[0])  # fmt: skip
    g.gap_ns, g.cost_ns = np.asarray([100]), np.asarray([60])
    g.call_ns, g.launch_cost_ns = np.asarray([1]), np.asarray([0])
    g.periodic = True
    assert g.period() == 41
    assert g.with_cost_scale(0.0).period() == 101
