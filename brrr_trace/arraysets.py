"""Distinct values of an array and membership in a set of values, by sorting.

numpy 2.4's ``np.unique(a)`` (no index, inverse or counts asked for) hashes, which is slower
than a sort on arrays of ids, and asks ``np.ma.is_masked`` first: the first such call imports
``numpy.ma`` and ``inspect``'s signature parser (~40-80 ms of a 5 MB trace's run). ``np.isin``
falls back to that ``np.unique`` when its values' range is wide. These two never touch either.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values`` (flattened), sorted: ``np.unique(values)``."""
    flat = np.sort(np.asarray(values), axis=None)
    if len(flat) < 2:
        return flat
    keep = np.empty(len(flat), dtype=bool)
    keep[0] = True
    np.not_equal(flat[1:], flat[:-1], out=keep[1:])
    return flat[keep]


def member(values: np.ndarray, of: np.ndarray | Iterable[int]) -> np.ndarray:
    """Whether each of ``values`` is one of ``of``: ``np.isin(values, of)`` for ids and names."""
    values = np.asarray(values)
    pool = distinct(np.asarray(of if isinstance(of, np.ndarray) else list(of)))
    if len(pool) == 0 or len(values) == 0:
        return np.zeros(values.shape, dtype=bool)
    at = np.searchsorted(pool, values)
    at[at == len(pool)] = 0
    found: np.ndarray = pool[at] == values
    return found
