"""Innermost-interval lookups (analyzers/intervals.py) against their definition: at time t on a
thread, the interval that contains t (start <= t < end) and lies deepest, for random nested
intervals on a few threads (touching, repeated and empty ones included); and a child that
outlives its parent (clock rounding) counts as ending with it."""

from __future__ import annotations

import random

import numpy as np

from brrr_trace.analyzers import intervals
from brrr_trace.analyzers.intervals import NONE, Innermost


def nested(rng: random.Random, a: int, b: int, depth: int) -> list[tuple[int, int]]:
    """Intervals inside [a, b): siblings one after another (touching or not), each with its
    own nested children; some repeated, some empty."""
    out: list[tuple[int, int]] = []
    t = a
    while depth and t < b and rng.random() < 0.8:
        s = rng.randint(t, min(b, t + 6))
        e = rng.randint(s, min(b, s + 12))
        out.append((s, e))
        if rng.random() < 0.15:
            out.append((s, e))  # the same span twice: the later one is inside
        out += nested(rng, s, e, depth - 1)
        t = e if rng.random() < 0.5 else e + 1
    return out


def deepest(spans: list[tuple[int, int, int, int]], thread: int, t: int) -> int:
    """By the definition: of the intervals containing t, the last in (start, -end, row) order,
    which for nested intervals is the innermost."""
    holding = [(s, -e, row) for row, h, s, e in spans if h == thread and s <= t < e]
    return max(holding)[2] if holding else NONE


def test_innermost_is_the_deepest_interval_holding_the_time() -> None:
    rng = random.Random(5)
    for _ in range(150):
        spans: list[tuple[int, int, int, int]] = []
        for h in rng.sample([0, 1, 4], rng.randint(1, 3)):
            for s, e in nested(rng, 0, 60, 4):
                spans.append((len(spans), h, s, e))
        rng.shuffle(spans)
        spans = [(row, h, s, e) for row, (_, h, s, e) in enumerate(spans)]
        thread = np.array([h for _, h, _, _ in spans], dtype=np.int64)
        start = np.array([s for _, _, s, _ in spans], dtype=np.int64)
        end = np.array([e for _, _, _, e in spans], dtype=np.int64)
        index = Innermost(thread, start, end)
        queries = [(h, t) for h in (0, 1, 4, 9) for t in range(-1, 63)]
        got = index.at_many(
            np.array([h for h, _ in queries], dtype=np.int64),
            np.array([t for _, t in queries], dtype=np.int64),
        )
        want = [deepest(spans, h, t) for h, t in queries]
        assert got.tolist() == want, spans
        assert [index.at(h, t) for h, t in queries] == want


def test_a_child_that_outlives_its_parent_ends_with_it() -> None:
    # Parent 0-10, child 5-12 (rounded separately), then nothing: at 11 no interval is open.
    index = Innermost(
        np.zeros(2, dtype=np.int64), np.array([0, 5], dtype=np.int64), np.array([10, 12])
    )
    assert [index.at(0, t) for t in (0, 4, 5, 9, 10, 11, 12)] == [0, 0, 1, 1, NONE, NONE, NONE]


def test_the_array_flattening_gives_the_stack_loops_segments() -> None:
    """``_flatten_nested`` (arrays) against ``_flatten_stack`` (the loop that defines the
    segments): the same arrays for nested intervals, and None where a child outlives its
    parent, which only the loop clips."""
    rng = random.Random(7)
    nested_runs = 0
    for trial in range(200):
        spans = nested(rng, 0, rng.randint(5, 400), 6)
        if not spans:
            continue
        if trial % 4 == 0:
            k = rng.randrange(len(spans))
            spans[k] = (spans[k][0], spans[k][1] + rng.randint(1, 5))
        start = np.array([s for s, _ in spans], dtype=np.int64)
        end = np.array([e for _, e in spans], dtype=np.int64)
        order = np.lexsort((-end, start))
        loop = intervals._flatten_stack(order, start, end)
        arrays = intervals._flatten_nested(order, start, end)
        if arrays is None:
            continue
        nested_runs += 1
        for got, want in zip(arrays, loop, strict=True):
            assert got.dtype == want.dtype
            assert got.tolist() == want.tolist()
    assert nested_runs > 100
