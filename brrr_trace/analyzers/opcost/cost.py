"""What an op costs: FLOPs, bytes, the precision it computes in and the unit that bounds it.

The one record every cost formula returns (op formulas, kernel launches, memcpys); a None field
is unknown, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from brrr_trace.hardware.peaks import Unit


@dataclass(frozen=True)
class OpCost:
    """FLOPs and bytes of one op, the precision it computes in and the unit that bounds it.

    ``unit`` is the unit the op is meant for: "tensor" for matrix ops (the ceiling still falls
    back to SIMT where the GPU has no such tensor path), "simt" for vector math, "link" for
    host transfers, None for pure data movement where no arithmetic unit matters.
    """

    flops: int | None
    bytes: int | None
    dtype: str | None
    unit: Unit | None


UNKNOWN_COST = OpCost(None, None, None, None)
