"""A finding's replayed fix kept as arrays while the findings wait for their savings ranges.

A fix's edits are dicts of ints (event or GPU op row -> ns). The rules keep each finding's fix
until ``savings_ranges`` and ``savings_by_rule`` replay it again; on the 0.86 GB benchmark trace
12 findings held 279 k such entries, ~28 MB of dicts alive through the rules' stage, the peak
of the analysis. Packed, an entry is two int64s; unpacked, the fix is the one the rule made,
the edits in the same order, with the same key and value types (a rule may hand in the
graph's own numpy ints), so that replaying it gives the same result.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from brrr_trace.analyzers.replay import Fix

# Fewer entries are kept as they are: packing them saves nothing worth an array's header.
_MIN_ENTRIES = 64


@dataclass(frozen=True)
class PackedEdits:
    keys: np.ndarray  # int64, in the dict's order
    values: np.ndarray  # int64
    numpy_values: bool  # the values were numpy int64 scalars, and are given back as such


Edits = dict[int, int] | PackedEdits


@dataclass(frozen=True)
class PackedFix:
    """A ``Fix`` with its large edits packed (``pack``); ``unpack`` gives the fix back."""

    fix: Fix  # the fix with the packed edits left empty
    host_saved: Edits
    durations: Edits
    own: Edits


def pack(fix: Fix) -> PackedFix:
    host_saved, durations, own = (_pack(e) for e in (fix.host_saved, fix.durations, fix.own))
    rest = replace(
        fix,
        host_saved={} if isinstance(host_saved, PackedEdits) else fix.host_saved,
        durations={} if isinstance(durations, PackedEdits) else fix.durations,
        own={} if isinstance(own, PackedEdits) else fix.own,
    )
    return PackedFix(rest, host_saved, durations, own)


def unpack(fix: Fix | PackedFix) -> Fix:
    if isinstance(fix, Fix):
        return fix
    return replace(
        fix.fix,
        host_saved=_unpack(fix.host_saved),
        durations=_unpack(fix.durations),
        own=_unpack(fix.own),
    )


def _pack(edits: dict[int, int]) -> Edits:
    """The edits as two arrays, where every key is a Python int and every value one int type
    (Python ints or numpy int64 scalars) that int64 holds; else the dict as it is."""
    if len(edits) < _MIN_ENTRIES or not all(type(k) is int for k in edits):
        return edits
    values = list(edits.values())
    if all(type(v) is int for v in values):
        numpy_values = False
    elif all(type(v) is np.int64 for v in values):
        numpy_values = True
    else:
        return edits
    try:
        keys = np.fromiter(edits, dtype=np.int64, count=len(edits))
        packed = np.array(values, dtype=np.int64)
    except OverflowError:
        return edits
    return PackedEdits(keys, packed, numpy_values)


def _unpack(edits: Edits) -> dict[int, int]:
    if isinstance(edits, dict):
        return edits
    values = list(edits.values) if edits.numpy_values else edits.values.tolist()
    return dict(zip(edits.keys.tolist(), values, strict=True))
