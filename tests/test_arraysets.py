"""`arraysets.distinct` and `member` answer what `np.unique` and `np.isin` answer (the values
sorted and distinct; membership), for the arrays the analysis gives them: ids of any width,
wide ranges, empty arrays, names."""

from __future__ import annotations

import numpy as np
import pytest

from brrr_trace.arraysets import distinct, distinct_rows, member


def test_distinct_worked_by_hand() -> None:
    assert distinct(np.array([5, -1, 5, 3, -1, 7])).tolist() == [-1, 3, 5, 7]
    assert distinct(np.array([2])).tolist() == [2]
    assert distinct(np.zeros(0, dtype=np.int64)).tolist() == []
    assert distinct(np.array([[3, 1], [1, 2]])).tolist() == [1, 2, 3]


def test_member_worked_by_hand() -> None:
    values = np.array([4, 9, -1, 4, 10**12, 0])
    assert member(values, [4, 10**12]).tolist() == [True, False, False, True, True, False]
    assert member(values, set()).tolist() == [False] * 6
    assert member(values, np.array([100])).tolist() == [False] * 6
    assert member(np.zeros(0, dtype=np.int32), [1, 2]).tolist() == []
    assert member(np.array(["ab", "c"]), np.array(["c", "d"])).tolist() == [False, True]


@pytest.mark.parametrize("seed", range(40))
def test_the_answers_of_numpy_on_random_ids(seed: int) -> None:
    rng = np.random.default_rng(seed)
    dtype = (np.int32, np.int64, np.int8)[seed % 3]
    # Narrow ranges take isin's table path, wide ones its sorting path.
    high = (5, 1_000, 2**30)[seed % 3 if dtype != np.int8 else 0]
    values = rng.integers(-high, high, size=int(rng.integers(0, 300))).astype(dtype)
    pool = rng.integers(-high, high, size=int(rng.integers(0, 50))).astype(np.int64)
    assert distinct(values).tolist() == np.unique(values).tolist()
    assert distinct(values).dtype == np.unique(values).dtype
    assert member(values, pool).tolist() == np.isin(values, pool).tolist()
    assert member(values, pool.tolist()).tolist() == np.isin(values, pool).tolist()


def test_distinct_rows_worked_by_hand() -> None:
    rows = np.array([[2, -1, 7], [1, 5, 0], [2, -1, 7], [1, 5, -3], [2, -2, 9]])
    found, inverse = distinct_rows(rows)
    assert found.tolist() == [[1, 5, -3], [1, 5, 0], [2, -2, 9], [2, -1, 7]]
    assert inverse.tolist() == [3, 1, 3, 0, 2]
    empty, none = distinct_rows(np.zeros((0, 2), dtype=np.int64))
    assert empty.shape == (0, 2) and none.tolist() == []


@pytest.mark.parametrize("seed", range(20))
def test_distinct_rows_answers_as_numpy_on_random_ids(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, width = int(rng.integers(1, 400)), int(rng.integers(1, 4))
    rows = rng.integers(-2, int(rng.choice([3, 50, 10**15])), size=(n, width))
    found, inverse = distinct_rows(rows)
    want, want_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert found.tolist() == want.tolist()
    assert inverse.tolist() == want_inverse.reshape(-1).tolist()
