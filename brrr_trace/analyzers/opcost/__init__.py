"""FLOPs and bytes of one op from its recorded inputs, and which formula each op name takes.

Contract: every ATen op that can be the innermost op launching kernels gets a cost, so the caller
charges each kernel to the cost of the *innermost* op that launched it. Never add the costs of
nested ops (``aten::_convolution`` and its child ``aten::cudnn_convolution`` both have a cost;
counting both would double it). Ops that are always composites (``aten::linear``,
``aten::matmul``, ``aten::conv2d``, ``aten::scaled_dot_product_attention``, ``aten::to``, …) have no
cost of their own. The formulas, one module per op family, follow
``reference/rules-and-roofline.md`` §4; this module holds the one table from op name to formula.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from brrr_trace.analyzers.opcost import (
    attention,
    conv,
    indexing,
    loss,
    matmul,
    norm,
    optimizer,
    pointwise,
    reduction,
)
from brrr_trace.analyzers.opcost.args import OpArgs, word_set
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost

Formula = Callable[[OpArgs], OpCost]

# Always composites in eager PyTorch: their children launch the kernels and carry the cost.
COMPOSITE_OPS: frozenset[str] = word_set(
    "aten::linear aten::matmul aten::einsum aten::tensordot aten::conv1d aten::conv2d "
    "aten::conv3d aten::conv_transpose1d aten::conv_transpose2d "
    "aten::conv_transpose3d aten::scaled_dot_product_attention aten::to aten::type_as "
    "aten::contiguous aten::clone aten::softmax aten::log_softmax aten::layer_norm "
    "aten::group_norm aten::batch_norm aten::rms_norm aten::cross_entropy_loss "
    "aten::nll_loss aten::nll_loss_nd aten::dropout aten::embedding_backward"
)

# By full name: overloads whose arguments sit at their own positions, and ops outside aten.
_BY_NAME: dict[str, Formula] = {
    **{name: partial(conv.convolution, layout=layout) for name, layout in conv.LAYOUTS.items()},
    **{name: partial(attention.sdpa, layout=layout) for name, layout in attention.LAYOUTS.items()},
    **dict.fromkeys(
        ("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_adam", "aten::_fused_adamw"),
        optimizer.fused_optimizer,
    ),
    **dict.fromkeys(("aten::cat", "aten::_cat", "aten::concat", "aten::stack"), indexing.cat),
    "_C::rms_norm": lambda a: norm.rms_norm(a, 1, -1, 2),  # vLLM: (out, input, weight, eps)
    # vLLM, in place: (input, residual, weight, eps)
    "_C::fused_add_rms_norm": lambda a: norm.rms_norm(a, 0, -1, 2, extra_tensors=2),
}

# By the name without ``aten::`` and in-place ``_``. Later entries win: an op's own formula
# over the reduction one over the elementwise one.
_BY_ATEN_BASE: dict[str, Formula] = {
    **{b: partial(pointwise.elementwise, base=b) for b in pointwise.BINARY | pointwise.UNARY},
    **{b: partial(reduction.reduction, base=b) for b in reduction.REDUCTIONS},
    "mm": lambda a: matmul.mm(a, 0, 1, None, False),
    "addmm": lambda a: matmul.mm(a, 1, 2, 0, False),
    "bmm": lambda a: matmul.mm(a, 0, 1, None, True),
    "baddbmm": lambda a: matmul.mm(a, 1, 2, 0, True),
    "_scaled_mm": matmul.scaled_mm,
    "_int_mm": matmul.int_mm,
    "mv": lambda a: matmul.mv(a, None),
    "addmv": lambda a: matmul.mv(a, 0),
    "dot": matmul.dot,
    "vdot": matmul.dot,
    "convolution_backward": lambda a: conv.convolution_backward(a, 10, 7),
    "convolution_backward_overrideable": lambda a: conv.convolution_backward(a, 9, 6),
    "cudnn_convolution_backward": conv.cudnn_convolution_backward,
    "cudnn_convolution_backward_input": conv.cudnn_convolution_backward_input,
    "cudnn_convolution_backward_weight": conv.cudnn_convolution_backward_weight,
    "copy": pointwise.copy,
    "_copy_from": pointwise.copy_from,
    "_to_copy": pointwise.to_copy,
    "_softmax": lambda a: norm.softmax(a, False),
    "_log_softmax": lambda a: norm.softmax(a, False),
    "_softmax_backward_data": lambda a: norm.softmax(a, True),
    "_log_softmax_backward_data": lambda a: norm.softmax(a, True),
    "native_layer_norm": norm.layer_norm,
    "native_layer_norm_backward": norm.layer_norm_backward,
    "_fused_rms_norm": lambda a: norm.rms_norm(a, 0, 1, 2),
    "_fused_rms_norm_backward": norm.rms_norm_backward,
    "native_batch_norm": lambda a: norm.batch_norm(a, False, 0),
    "_native_batch_norm_legit": lambda a: norm.batch_norm(a, False, 0),
    "_native_batch_norm_legit_no_training": lambda a: norm.batch_norm(a, False, 0),
    "_batch_norm_with_update": lambda a: norm.batch_norm(a, False, 0),
    "_batch_norm_impl_index": lambda a: norm.batch_norm(a, False, 0),
    "cudnn_batch_norm": lambda a: norm.batch_norm(a, False, 0),
    "miopen_batch_norm": lambda a: norm.batch_norm(a, False, 0),
    "native_batch_norm_backward": lambda a: norm.batch_norm(a, True, 1),
    "cudnn_batch_norm_backward": lambda a: norm.batch_norm(a, True, 0),
    "miopen_batch_norm_backward": lambda a: norm.batch_norm(a, True, 0),
    "native_group_norm": norm.group_norm,
    "embedding": indexing.embedding,
    "index_select": indexing.index_select,
    "gather": indexing.gather,
    "scatter": lambda a: indexing.scatter(a, "scatter"),
    "scatter_add": lambda a: indexing.scatter(a, "scatter_add"),
    "scatter_reduce": lambda a: indexing.scatter(a, "scatter_reduce"),
    "index_add": lambda a: indexing.scatter(a, "index_add"),
    "index_copy": lambda a: indexing.scatter(a, "index_copy"),
    "embedding_dense_backward": indexing.embedding_backward,
    "mse_loss": lambda a: loss.mse_loss(a, False),
    "mse_loss_backward": lambda a: loss.mse_loss(a, True),
    "nll_loss_forward": lambda a: loss.nll_loss(a, False),
    "nll_loss2d_forward": lambda a: loss.nll_loss(a, False),
    "nll_loss_backward": lambda a: loss.nll_loss(a, True),
    "nll_loss2d_backward": lambda a: loss.nll_loss(a, True),
}


def op_cost(
    op_name: str,
    input_dims: Sequence[Any] | None,
    input_types: Sequence[Any] | None,
    concrete_inputs: Sequence[Any] | None,
    *,
    list_dtype: str | None = None,
) -> OpCost:
    """FLOPs and bytes of one op from the trace's Input Dims, Input type and Concrete Inputs.

    Costs are for the op as the innermost launcher of its kernels (see the module docstring);
    composites and unknown ops give all-None. ``list_dtype`` is the element type to assume for
    TensorList arguments (``_foreach_*``, ``cat``), which traces record without a dtype — e.g.
    the dtype of the ``multi_tensor_apply_kernel`` the op launched
    (:func:`brrr_trace.analyzers.kernels.kernel_dtype`). Never raises on malformed input:
    anything that does not fit a formula gives None fields.
    """
    try:
        return _op_cost(op_name, input_dims, input_types, concrete_inputs, list_dtype)
    except (ArithmeticError, TypeError, ValueError, IndexError, KeyError, RecursionError):
        return UNKNOWN_COST


def _op_cost(
    op_name: object,
    input_dims: object,
    input_types: object,
    concrete_inputs: object,
    list_dtype: str | None,
) -> OpCost:
    if not isinstance(op_name, str) or op_name in COMPOSITE_OPS:
        return UNKNOWN_COST
    a = OpArgs(input_dims, input_types, concrete_inputs, list_dtype)
    name = op_name.strip()
    formula = _BY_NAME.get(name)
    if formula is not None:
        return formula(a)
    if not name.startswith("aten::"):
        return UNKNOWN_COST
    base = _base(name)
    if name.startswith("aten::_foreach_"):
        return optimizer.foreach(a, base)
    formula = _BY_ATEN_BASE.get(base)
    return formula(a) if formula is not None else UNKNOWN_COST


def _base(op: str) -> str:
    """``aten::add_`` → ``add``; in-place and namespace spellings share a formula."""
    name = op.split("::", 1)[1] if "::" in op else op
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name
