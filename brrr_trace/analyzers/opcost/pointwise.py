"""Elementwise ops, copies and casts: every element read and written once, a few FLOPs each.

Unary and binary math, comparisons, ``where``/``masked_fill`` and fills broadcast their operands;
``copy_``, ``_copy_from`` and ``_to_copy`` move (and maybe cast) data without arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

from brrr_trace.analyzers.opcost.args import SCALAR_TYPES, OpArgs, numel, word_set
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost
from brrr_trace.hardware.peaks import Unit

# Extra FLOPs per output element where an op does more than one operation.
_FLOPS_PER_ELEMENT: dict[str, int] = {
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
}
_ZERO_FLOP = frozenset({"copy", "fill", "zero", "masked_fill", "where", "clone"})
_COMPARISONS = word_set(
    "eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_xor logical_not"
)

# The aten names (without namespace and trailing underscore) that are elementwise math.
UNARY: frozenset[str] = word_set(
    "abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal square sigmoid "
    "tanh relu relu6 gelu silu mish elu selu celu softplus hardtanh hardswish "
    "hardsigmoid leaky_relu logit sin cos tan asin acos atan sinh cosh erf erfc "
    "erfinv sign sgn floor ceil round trunc frac clamp clamp_min clamp_max nan_to_num "
    "bitwise_not threshold fill zero isnan isinf isfinite logical_not native_dropout "
    "bernoulli uniform normal exponential random"
)
BINARY: frozenset[str] = word_set(
    "add sub rsub mul div true_divide floor_divide remainder fmod pow maximum minimum "
    "fmax fmin atan2 hypot copysign eq ne lt le gt ge logical_and logical_or "
    "logical_xor bitwise_and bitwise_or bitwise_xor bitwise_left_shift "
    "bitwise_right_shift where masked_fill addcmul addcdiv lerp sigmoid_backward "
    "tanh_backward threshold_backward gelu_backward silu_backward hardswish_backward "
    "hardsigmoid_backward leaky_relu_backward elu_backward softplus_backward "
    "logit_backward native_dropout_backward clamp clamp_min clamp_max xlogy"
)


def _broadcast(shapes: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """Right-aligned broadcast of shapes; None if they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for k in range(1, rank + 1):
        sizes = {s[-k] for s in shapes if len(s) >= k and s[-k] != 1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(reversed(out))


def elementwise(a: OpArgs, base: str) -> OpCost:
    """Op ``base`` (the aten name without namespace or in-place ``_``) over its tensor operands,
    broadcast to the output's shape."""
    tensors = [t for i in range(len(a)) if (t := a.tensor(i)) is not None]
    if not tensors:
        return UNKNOWN_COST
    out_shape = _broadcast([t[0] for t in tensors])
    if out_shape is None:
        return UNKNOWN_COST
    # 0-dim tensors (wrapped Python scalars such as a 'double' [] operand) do not promote.
    sized = [t for t in tensors if t[0]] or tensors
    main = max(sized, key=lambda t: numel(t[0]))
    if base in _COMPARISONS:
        out_bpe = 1
    elif base in ("where", "masked_fill"):
        out_bpe = (
            max(t[2] for t in sized if t[1] != "bool") if any(t[1] != "bool" for t in sized) else 1
        )
    else:
        out_bpe = max(t[2] for t in sized)
    n_out = numel(out_shape)
    reads = 0 if base in ("fill", "zero") else sum(numel(t[0]) * t[2] for t in tensors)
    flops = 0 if base in _ZERO_FLOP else n_out * _FLOPS_PER_ELEMENT.get(base, 1)
    dtype = main[1]
    unit: Unit | None = "simt" if flops else None
    return OpCost(flops, reads + n_out * out_bpe, dtype, unit)


def copy(a: OpArgs) -> OpCost:
    """``copy_(dst, src)``: read src, write dst (a cast when dtypes differ); no arithmetic."""
    td, ts = a.tensor(0), a.tensor(1)
    if td is None or ts is None:
        return UNKNOWN_COST
    n = numel(td[0])
    return OpCost(0, n * (td[2] + ts[2]), ts[1], None)


def copy_from(a: OpArgs) -> OpCost:
    """Legacy ``_copy_from(self, dst, non_blocking)`` (source first)."""
    ts, td = a.tensor(0), a.tensor(1)
    if ts is None or td is None:
        return UNKNOWN_COST
    return OpCost(0, numel(ts[0]) * (ts[2] + td[2]), ts[1], None)


def to_copy(a: OpArgs) -> OpCost:
    """``_to_copy(self, dtype, …)``: the output dtype is a ScalarType code in Concrete Inputs."""
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    code = a.int_value(1)
    out_bpe = SCALAR_TYPES[code][1] if code in SCALAR_TYPES else t[2]
    return OpCost(0, numel(t[0]) * (t[2] + out_bpe), t[1], None)
