"""Reductions and scans: every input element read once, one FLOP each, the reduced output written.

The element count of the output follows from the reduced dims in Concrete Inputs; a scan's output
is as large as its input.
"""

from __future__ import annotations

import math

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost
from brrr_trace.analyzers.opcost.pointwise import elementwise

# Index of the reduced dims in Concrete Inputs per reduction (keepdim does not change the element
# count); None: a scan, whose output is as large as its input.
REDUCTIONS: dict[str, int | None] = {
    "sum": 1,
    "nansum": 1,
    "mean": 1,
    "nanmean": 1,
    "prod": 1,
    "amax": 1,
    "amin": 1,
    "aminmax": 1,
    "max": 1,
    "min": 1,
    "argmax": 1,
    "argmin": 1,
    "logsumexp": 1,
    "any": 1,
    "all": 1,
    "norm": 2,
    "linalg_vector_norm": 2,
    "linalg_norm": 2,
    "std": 1,
    "var": 1,
    "std_mean": 1,
    "var_mean": 1,
    "count_nonzero": 1,
    "cumsum": None,
    "cumprod": None,
    "logcumsumexp": None,
}
_SCAN = frozenset({"cumsum", "cumprod", "logcumsumexp"})


def reduction(a: OpArgs, base: str) -> OpCost:
    """Reduction or scan ``base`` of tensor 0 over the dims in Concrete Inputs; ``max`` and
    ``min`` of two tensors are elementwise."""
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    if base in ("max", "min") and a.shape(1) is not None:
        return elementwise(a, "maximum")  # max(self, other) is elementwise
    n_in = numel(shape)
    dim_i = REDUCTIONS[base]
    if base in _SCAN:
        n_out = n_in
    else:
        dims = a.int_list(dim_i) if dim_i is not None else None
        if dims is None or not shape:
            n_out = 1
        else:
            rank = len(shape)
            axes = {d % rank for d in dims if -rank <= d < rank}
            n_out = math.prod(s for i, s in enumerate(shape) if i not in axes)
    out_bpe = {"argmax": 8, "argmin": 8, "any": 1, "all": 1, "count_nonzero": 8}.get(base, bpe)
    if base in ("max", "min") and a.value(dim_i or 1) is not None:
        out_bpe = bpe + 8  # values and indices
    return OpCost(n_in, n_in * bpe + n_out * out_bpe, dtype, "simt")
