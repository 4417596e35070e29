"""Data movement by index: embedding, index_select, gather, scatter and index_add, cat and stack.

No arithmetic beyond an add in the scatter-adds: the bytes are the indices read and the rows
read and written.
"""

from __future__ import annotations

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


def embedding(a: OpArgs) -> OpCost:
    """``embedding(W[V, D], idx)``: a gather, no FLOPs; read indices, read and write rows."""
    tw, ti = a.tensor(0), a.tensor(1)
    if tw is None or ti is None or len(tw[0]) != 2:
        return UNKNOWN_COST
    n_idx, d = numel(ti[0]), tw[0][1]
    return OpCost(0, n_idx * ti[2] + 2 * n_idx * d * tw[2], tw[1], None)


def embedding_backward(a: OpArgs) -> OpCost:
    """``embedding_dense_backward(grad_output, indices, num_weights, …)``: zero the weight
    gradient, then scatter-add every grad row into it."""
    tg, ti = a.tensor(0), a.tensor(1)
    v = a.int_value(2)
    if tg is None or ti is None or not tg[0] or v is None or v < 0:
        return UNKNOWN_COST
    n, d = numel(tg[0]), tg[0][-1]
    return OpCost(n, 2 * n * tg[2] + numel(ti[0]) * ti[2] + v * d * tg[2], tg[1], "simt")


def index_select(a: OpArgs) -> OpCost:
    """``index_select(self, dim, index)``: the selected rows read and written."""
    tw, ti = a.tensor(0), a.tensor(2)
    dim = a.int_value(1)
    if tw is None or ti is None or dim is None or not tw[0] or not -len(tw[0]) <= dim < len(tw[0]):
        return UNKNOWN_COST
    shape = list(tw[0])
    shape[dim % len(shape)] = numel(ti[0])
    n_out = numel(shape)
    return OpCost(0, numel(ti[0]) * ti[2] + 2 * n_out * tw[2], tw[1], None)


def gather(a: OpArgs) -> OpCost:
    """``gather(self, dim, index)``: output has the index's shape."""
    ts, ti = a.tensor(0), a.tensor(2)
    if ts is None or ti is None:
        return UNKNOWN_COST
    n = numel(ti[0])
    return OpCost(0, n * ti[2] + 2 * n * ts[2], ts[1], None)


def scatter(a: OpArgs, base: str) -> OpCost:
    """``scatter(_add)(self, dim, index, src)``, ``index_add/index_copy(self, dim, index, src)``:
    read index and src, read-modify-write the touched rows of self."""
    ts, ti, tsrc = a.tensor(0), a.tensor(2), a.tensor(3)
    if ts is None or ti is None:
        return UNKNOWN_COST
    n_src = numel(tsrc[0]) if tsrc is not None else numel(ti[0])
    nbytes = numel(ti[0]) * ti[2] + n_src * (tsrc[2] if tsrc is not None else 0) + 2 * n_src * ts[2]
    flops = n_src if base in ("scatter_add", "index_add", "scatter_reduce") else 0
    return OpCost(flops, nbytes, ts[1], "simt" if flops else None)


def cat(a: OpArgs) -> OpCost:
    """``cat/stack(tensors, dim)``: every input read once and written once; no FLOPs. TensorList
    arguments carry no element type in traces, so bytes need an assumed one
    (:meth:`OpArgs.list_dtype`)."""
    shapes = a.shape_list(0)
    if shapes is None:
        return UNKNOWN_COST
    dtype, bpe = a.list_dtype(0)
    n = sum(numel(s) for s in shapes)
    return OpCost(0, 2 * n * bpe if bpe else None, dtype, None)
