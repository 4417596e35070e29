"""A packed fix unpacks to the fix the rule made: the same edits in the same order and types."""

from __future__ import annotations

import numpy as np

from brrr_trace.analyzers.packed_fix import PackedEdits, pack, unpack
from brrr_trace.analyzers.replay import Fix


def test_a_fix_unpacks_to_itself_with_its_types() -> None:
    work = np.arange(1000, dtype=np.int64) * 7
    fix = Fix(
        "a fix",
        host_saved={e: work[e] for e in range(999, 0, -3)},  # the graph's own numpy ints
        unblocked=frozenset({1, 2}),
        durations={r: r * 2 - 500 for r in range(300)},
        own={5: 1, 9: 0},  # too few to pack
    )
    packed = pack(fix)
    assert isinstance(packed.host_saved, PackedEdits)
    assert isinstance(packed.durations, PackedEdits)
    assert packed.own is fix.own
    back = unpack(packed)
    assert back == fix
    for edits, again in ((fix.host_saved, back.host_saved), (fix.durations, back.durations)):
        assert list(again.items()) == list(edits.items())
        assert [type(v) for v in again.values()] == [type(v) for v in edits.values()]
    assert unpack(fix) is fix


def test_edits_that_int64_cannot_hold_or_of_mixed_types_stay_a_dict() -> None:
    huge = {k: 1 << 70 if k == 3 else k for k in range(100)}
    mixed = {k: np.int64(k) if k % 2 else k for k in range(100)}
    packed = pack(Fix("odd", host_saved=huge, durations=mixed))
    assert packed.host_saved is huge
    assert packed.durations is mixed
    assert unpack(packed) == Fix("odd", host_saved=huge, durations=mixed)
