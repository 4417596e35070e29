"""Optimizer steps: ``_foreach_*`` ops over tensor lists and the fused Adam/AdamW kernels.

Traces record a TensorList's shapes but not its element type, so bytes need the dtype the caller
assumes (:meth:`OpArgs.list_dtype`, e.g. the dtype of the kernel the op launched).
"""

from __future__ import annotations

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost

# FLOPs per element of the _foreach ops that do not do one; every other op reads each of its
# TensorList operands once and writes one list (in place: the first).
_FOREACH_FLOPS: dict[str, int] = {
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
    "copy": 0,
    "zero": 0,
    "fill": 0,
}


def foreach(a: OpArgs, base: str) -> OpCost:
    """``_foreach_<op>(list, …)``, ``base`` the op name without namespace (``_foreach_add``)."""
    op = base.removeprefix("_foreach_")
    lists = [s for i in range(len(a)) if (s := a.shape_list(i)) is not None]
    if not lists:
        return UNKNOWN_COST
    first = lists[0]
    if any(len(lst) != len(first) for lst in lists):
        return UNKNOWN_COST
    n = sum(numel(s) for s in first)
    dtype, bpe = a.list_dtype(0)
    if op == "norm":
        flops, reads, writes = 2 * n, n, 0
    elif op in ("zero", "fill"):
        flops, reads, writes = 0, 0, n
    elif op == "copy":
        flops, reads, writes = 0, n, n
    else:
        flops = n * _FOREACH_FLOPS.get(op, 1)
        reads, writes = n * len(lists), n
    nbytes = (reads + writes) * bpe if bpe else None
    return OpCost(flops, nbytes, dtype, "simt" if flops else None)


def fused_optimizer(a: OpArgs) -> OpCost:
    """``_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, …)``: reads
    params, grads and both moments (and max moments with amsgrad), writes params and moments.
    FLOPs are left unknown: the update is memory-bound and its op count depends on options."""
    lists = [a.shape_list(i) for i in range(5)]
    if lists[0] is None:
        return UNKNOWN_COST
    n = sum(numel(s) for s in lists[0])
    present = sum(1 for lst in lists if lst)
    dtype, bpe = a.list_dtype(0)
    tensors = present + max(0, present - 1)  # read each list, write all but grads
    return OpCost(None, tensors * n * bpe if bpe else None, dtype, None)
