"""Convolutions, forward and backward, over every overload's argument layout.

A convolution's output size follows from stride, padding and dilation in Concrete Inputs; each
multiply-accumulate pairs one input-side element with one weight slice. Overloads keep those
arguments at different positions, so each has a :class:`ConvLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


@dataclass(frozen=True)
class ConvLayout:
    """Where one convolution overload keeps its arguments (they differ between overloads)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    transposed: int | None  # index of a bool flag
    output_padding: int | None
    groups: int | None
    always_transposed: bool = False


LAYOUTS: dict[str, ConvLayout] = {
    "aten::convolution": ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::convolution_overrideable": ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::cudnn_convolution": ConvLayout(None, 3, 2, 4, None, None, 5),
    "aten::cudnn_convolution_transpose": ConvLayout(None, 4, 2, 5, None, 3, 6, True),
    "aten::miopen_convolution": ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::miopen_depthwise_convolution": ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::miopen_convolution_transpose": ConvLayout(2, 5, 3, 6, None, 4, 7, True),
    "aten::mkldnn_convolution": ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::_conv_depthwise2d": ConvLayout(3, 4, 5, 6, None, None, None),
}


def _conv_out(
    x: tuple[int, ...],
    w: tuple[int, ...],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
) -> tuple[int, ...] | None:
    spatial = []
    for i in range(len(x) - 2):
        size, k, s, p, d = x[2 + i], w[2 + i], stride[i], padding[i], dilation[i]
        if s <= 0 or d <= 0 or p < 0:
            return None
        if transposed:
            out = (size - 1) * s - 2 * p + d * (k - 1) + output_padding[i] + 1
        else:
            out = (size + 2 * p - d * (k - 1) - 1) // s + 1
        if out <= 0:
            return None
        spatial.append(out)
    cout = w[1] * groups if transposed else w[0]
    return (x[0], cout, *spatial)


def convolution(a: OpArgs, layout: ConvLayout) -> OpCost:
    """Forward convolution of the overload whose arguments sit as ``layout`` says."""
    tx, tw = a.tensor(0), a.tensor(1)
    if tx is None or tw is None:
        return UNKNOWN_COST
    (x, dtype, bpe), (w, _, _) = tx, tw
    nsp = len(x) - 2
    if nsp < 1 or len(w) != len(x):
        return UNKNOWN_COST
    stride = a.int_list(layout.stride, nsp)
    padding = a.int_list(layout.padding, nsp)
    dilation = a.int_list(layout.dilation, nsp)
    if stride is None or padding is None or dilation is None:
        return UNKNOWN_COST
    transposed = layout.always_transposed
    if layout.transposed is not None:
        flag = a.bool_value(layout.transposed)
        transposed = bool(flag) if flag is not None else transposed
    output_padding = [0] * nsp
    if transposed and layout.output_padding is not None:
        output_padding = a.int_list(layout.output_padding, nsp) or output_padding
    groups = a.int_value(layout.groups) if layout.groups is not None else None
    if groups is None:
        if w[1] <= 0 or x[1] % w[1]:
            return UNKNOWN_COST
        groups = x[1] // w[1] if not transposed else 1
    if groups <= 0:
        return UNKNOWN_COST
    if (transposed and x[1] != w[0]) or (not transposed and x[1] != w[1] * groups):
        return UNKNOWN_COST
    out = _conv_out(x, w, stride, padding, dilation, transposed, output_padding, groups)
    if out is None:
        return UNKNOWN_COST
    # Each MAC pairs one input-side element with one weight slice w[1:] (reference §4.2).
    macs = (numel(x) if transposed else numel(out)) * numel(w[1:])
    flops = 2 * macs
    elems = numel(x) + numel(w) + numel(out)
    bias = a.shape(layout.bias) if layout.bias is not None else None
    if bias is not None:
        flops += numel(out)
        elems += numel(bias)
    return OpCost(flops, elems * bpe, dtype, "tensor")


def convolution_backward(a: OpArgs, mask_index: int, transposed_index: int | None) -> OpCost:
    """``convolution_backward(grad_out, input, weight, …, output_mask)``: dX and dW are each a
    convolution as large as the forward one; the bias gradient is a reduction of grad_out."""
    tg, tx, tw = a.tensor(0), a.tensor(1), a.tensor(2)
    if tg is None or tx is None or tw is None:
        return UNKNOWN_COST
    (g, dtype, bpe), (x, _, _), (w, _, _) = tg, tx, tw
    if len(g) != len(x) or len(w) != len(x) or len(x) < 3:
        return UNKNOWN_COST
    transposed = a.bool_value(transposed_index) if transposed_index is not None else None
    fwd_macs = (numel(x) if transposed else numel(g)) * numel(w[1:])
    mask = a.value(mask_index)
    if not (isinstance(mask, list) and len(mask) >= 2 and all(isinstance(m, bool) for m in mask)):
        mask = [True, True, False]
    want_dx, want_dw = mask[0], mask[1]
    want_db = len(mask) > 2 and mask[2]
    flops = 0
    elems = 0
    if want_dx:
        flops += 2 * fwd_macs
        elems += numel(g) + numel(w) + numel(x)
    if want_dw:
        flops += 2 * fwd_macs
        elems += numel(g) + numel(x) + numel(w)
    if want_db:
        flops += numel(g)
        elems += numel(g) + g[1]
    return OpCost(flops, elems * bpe, dtype, "tensor")


def cudnn_convolution_backward(a: OpArgs) -> OpCost:
    """Legacy ``cudnn_convolution_backward(self, grad_output, weight, padding, …, output_mask)``:
    input first and the mask last; reordered into the ``convolution_backward`` layout."""
    order = (1, 0, 2)
    swapped = OpArgs(
        [a.dims[i] if i < len(a.dims) else [] for i in order] + a.dims[3:],
        [a.types[i] if i < len(a.types) else "" for i in order] + a.types[3:],
        a.concrete,
    )
    return convolution_backward(swapped, len(a) - 1, None)


def cudnn_convolution_backward_input(a: OpArgs) -> OpCost:
    """Legacy ``cudnn_convolution_backward_input(self_size, grad_output, weight, …)``: the input
    size is only in Concrete Inputs, which old traces do not have, so bytes may stay unknown."""
    tg, tw = a.tensor(1), a.tensor(2)
    if tg is None or tw is None:
        return UNKNOWN_COST
    (g, dtype, bpe), (w, _, _) = tg, tw
    flops = 2 * numel(g) * numel(w[1:])
    size = a.int_list(0)
    nbytes = (
        (numel(g) + numel(w) + numel(size)) * bpe if size and all(s >= 0 for s in size) else None
    )
    return OpCost(flops, nbytes, dtype, "tensor")


def cudnn_convolution_backward_weight(a: OpArgs) -> OpCost:
    """Legacy ``cudnn_convolution_backward_weight(weight_size, grad_output, self, …)``."""
    tg, tx = a.tensor(1), a.tensor(2)
    size = a.int_list(0)
    if tg is None or tx is None or not size or any(s < 0 for s in size):
        return UNKNOWN_COST
    (g, dtype, bpe), (x, _, _) = tg, tx
    flops = 2 * numel(g) * numel(size[1:])
    return OpCost(flops, (numel(g) + numel(x) + numel(size)) * bpe, dtype, "tensor")
