"""Normalisations: softmax and the layer, RMS, batch and group norms, forward and backward.

Each reads its input, writes its output and touches per-channel statistics and affine weights;
the FLOPs per element follow TraceLens (reference ``rules-and-roofline.md`` §4.2).
"""

from __future__ import annotations

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


def softmax(a: OpArgs, backward: bool) -> OpCost:
    """``_softmax(x, dim, half_to_float)``: exp, sum, divide ≈ 3 FLOPs/element (TraceLens
    Softmax class), backward twice that; bytes are the tensors read and written."""
    if backward:
        tg, to = a.tensor(0), a.tensor(1)
        if tg is None or to is None:
            return UNKNOWN_COST
        n = numel(tg[0])
        return OpCost(6 * n, n * (tg[2] + to[2] + tg[2]), tg[1], "simt")
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    n = numel(t[0])
    out_bpe = 4 if a.bool_value(2) else t[2]
    return OpCost(3 * n, n * (t[2] + out_bpe), t[1], "simt")


def _norm_width(a: OpArgs, shape_index: int, fallback_tensor: int | None) -> int | None:
    size = a.int_list(shape_index)
    if size and all(s >= 0 for s in size):
        return numel(size)
    if fallback_tensor is not None:
        w = a.shape(fallback_tensor)
        if w:
            return numel(w)
    return None


def layer_norm(a: OpArgs) -> OpCost:
    """Forward layer norm: ``5N + 6C`` FLOPs and ``N·(in+out) + k·C`` bytes, k = mean, var,
    weight, bias and the two saved training statistics (reference §4.2, TraceLens)."""
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    c = _norm_width(a, 1, 2)
    if c is None:
        return UNKNOWN_COST
    n = numel(shape)
    k = 2 + (a.shape(2) is not None) + (a.shape(3) is not None) + 2
    return OpCost(5 * n + 6 * c, n * 2 * bpe + k * c * bpe, dtype, "simt")


def layer_norm_backward(a: OpArgs) -> OpCost:
    """``native_layer_norm_backward(gO, x, normalized_shape, mean, rstd, w, b, mask)``: about
    twice the forward arithmetic; reads gO, x and the statistics, writes the masked grads."""
    tg, tx = a.tensor(0), a.tensor(1)
    if tg is None or tx is None:
        return UNKNOWN_COST
    (_, dtype, bpe), (x, _, _) = tg, tx
    n = numel(x)
    c = _norm_width(a, 2, 5)
    stats = a.shape(3)
    if c is None and stats is not None and numel(stats):
        c = n // numel(stats)
    if c is None or c == 0:
        return UNKNOWN_COST
    rows = n // c
    mask = a.value(7)
    if not (isinstance(mask, list) and len(mask) == 3 and all(isinstance(m, bool) for m in mask)):
        mask = [True, a.shape(5) is not None, a.shape(6) is not None]
    stat_bpe = a.bpe(3) or 4
    nbytes = 2 * n * bpe + 2 * rows * stat_bpe + c * bpe
    nbytes += n * bpe * mask[0] + c * bpe * (mask[1] + mask[2])
    return OpCost(2 * (5 * n + 6 * c), nbytes, dtype, "simt")


def rms_norm(
    a: OpArgs, x_index: int, width_index: int, weight_index: int, extra_tensors: int = 0
) -> OpCost:
    """RMS norm: square, mean, rsqrt, scale, weight ≈ 4 FLOPs/element; x read, y written
    (``extra_tensors`` more full-size passes for fused residual adds)."""
    t = a.tensor(x_index)
    if t is None:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    c = _norm_width(a, width_index, weight_index) if width_index >= 0 else None
    if c is None:
        w = a.shape(weight_index)
        c = numel(w) if w else (shape[-1] if shape else None)
    if not c:
        return UNKNOWN_COST
    n = numel(shape)
    return OpCost(4 * n, (2 + extra_tensors) * n * bpe + c * bpe, dtype, "simt")


def rms_norm_backward(a: OpArgs) -> OpCost:
    """``_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, mask)``."""
    tg, tx = a.tensor(0), a.tensor(1)
    if tg is None or tx is None:
        return UNKNOWN_COST
    n = numel(tx[0])
    c = _norm_width(a, 2, 4) or (tx[0][-1] if tx[0] else None)
    if not c:
        return UNKNOWN_COST
    return OpCost(8 * n, 3 * n * tx[2] + 2 * c * tx[2], tx[1], "simt")


def batch_norm(a: OpArgs, backward: bool, x_index: int) -> OpCost:
    """Batch norm over channels C = x[1]: the layer-norm formula with C channels (training).

    ``x_index`` is where the input is: backward overloads put it first (cuDNN, MIOpen) or after
    the output gradient (``native_batch_norm_backward``)."""
    t = a.tensor(x_index)
    if t is None or len(t[0]) < 2:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    n, c = numel(shape), shape[1]
    if backward:
        return OpCost(2 * (5 * n + 6 * c), 3 * n * bpe + 4 * c * bpe, dtype, "simt")
    return OpCost(5 * n + 6 * c, 2 * n * bpe + 6 * c * bpe, dtype, "simt")


def group_norm(a: OpArgs) -> OpCost:
    """``native_group_norm(x, weight, bias, …)``: the layer-norm FLOPs with C = x[1] channels."""
    t = a.tensor(0)
    if t is None or len(t[0]) < 2:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    n, c = numel(shape), shape[1]
    return OpCost(5 * n + 6 * c, 2 * n * bpe + 2 * c * bpe, dtype, "simt")
