"""Roofline arithmetic: GPU peaks, what a kernel is, FLOPs and bytes per op, compute vs memory.

Pure functions over strings and numbers taken from a trace; nothing here knows about the loader,
the timeline or any output format. Formulas, peaks and the kernel-name taxonomy follow
``reference/rules-and-roofline.md`` §3–§6; the peak table is package data
(``brrr_trace/data/gpu_peaks.json``) so that a new GPU is a data change, not a code change.

Contract for op costs: every ATen op that can be the innermost op launching kernels gets a cost,
so the caller charges each kernel to the cost of the *innermost* op that launched it. Never add
the costs of nested ops (``aten::_convolution`` and its child ``aten::cudnn_convolution`` both
have a cost; counting both would double it). Ops that are always composites (``aten::linear``,
``aten::matmul``, ``aten::conv2d``, ``aten::scaled_dot_product_attention``, ``aten::to``, …) have no
cost of their own.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brrr_trace.analyzers.kernels import is_host_copy, kernel_dtype, template_args
from brrr_trace.hardware.peaks import PRECISIONS, GpuPeak, Unit
from brrr_trace.vocabulary import KernelKind, Regime


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ------------------------------------------------------------------------------------------------
# FLOPs and bytes
# ------------------------------------------------------------------------------------------------


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

# "Input type" strings as the profiler writes them; reference §4.1 plus brrr additions.
_DTYPES: dict[str, tuple[str, int]] = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::half": ("fp16", 2),
    "half": ("fp16", 2),
    "c10::bfloat16": ("bf16", 2),
    "bfloat16": ("bf16", 2),
    "c10::float8_e4m3fn": ("fp8", 1),
    "c10::float8_e4m3fnuz": ("fp8", 1),
    "c10::float8_e5m2": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1),
    "c10::float8_e8m0fnu": ("fp8", 1),
    "c10::float4_e2m1fn_x2": ("fp4", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "unsigned short": ("uint16", 2),
    "int": ("int32", 4),
    "unsigned int": ("uint32", 4),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "long long": ("int64", 8),
    "unsigned long": ("uint64", 8),
    "c10::complex<c10::half>": ("complex32", 4),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
}
# Argument kinds that are not tensors (case matters: "Double" is a scalar, "double" a tensor).
_NON_TENSOR = _words(
    "Scalar ScalarList GenericList TensorList Int Bool Double Float Long String "
    "Device Layout ScalarType MemoryFormat None"
) | {""}
# c10::ScalarType codes, as Concrete Inputs write a dtype argument.
_SCALAR_TYPE: dict[int, tuple[str, int]] = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("fp16", 2),
    6: ("fp32", 4),
    7: ("fp64", 8),
    8: ("complex32", 4),
    9: ("complex64", 8),
    10: ("complex128", 16),
    11: ("bool", 1),
    15: ("bf16", 2),
    23: ("fp8", 1),
    24: ("fp8", 1),
    25: ("fp8", 1),
    26: ("fp8", 1),
}
_BPE_OF_DTYPE: dict[str, int] = {d: b for d, b in _DTYPES.values()} | {"tf32": 4}


def dtype_of_type(type_name: object) -> str | None:
    """Normalised dtype of a profiler ``Input type`` string; None for non-tensors or unknowns."""
    if not isinstance(type_name, str) or type_name in _NON_TENSOR:
        return None
    hit = _DTYPES.get(type_name.strip().lower())
    return hit[0] if hit else None


def bytes_per_element(dtype: str | None) -> int | None:
    """Storage bytes of one element of a normalised dtype (fp4 packs two per byte: 1)."""
    return _BPE_OF_DTYPE.get(dtype) if dtype else None


def _is_dim_list(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value
    )


class _Args:
    """Lenient view of one op's Input Dims / Input type / Concrete Inputs.

    Every accessor returns None for anything missing or malformed, so formulas can be written
    as straight arithmetic guarded by one check instead of a try/except around each index.
    """

    def __init__(self, dims: object, types: object, concrete: object) -> None:
        self.dims = list(dims) if isinstance(dims, (list, tuple)) else []
        self.types = list(types) if isinstance(types, (list, tuple)) else []
        self.concrete = list(concrete) if isinstance(concrete, (list, tuple)) else []

    def __len__(self) -> int:
        return max(len(self.dims), len(self.types))

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Shape of tensor argument i (None if it is not a tensor with a valid shape)."""
        if i >= len(self.dims) or not _is_dim_list(self.dims[i]):
            return None
        kind = self.types[i] if i < len(self.types) else None
        if isinstance(kind, str) and kind in _NON_TENSOR:
            return None
        return tuple(self.dims[i])

    def dtype(self, i: int) -> str | None:
        return dtype_of_type(self.types[i]) if i < len(self.types) else None

    def bpe(self, i: int) -> int | None:
        return bytes_per_element(self.dtype(i))

    def tensor(self, i: int) -> tuple[tuple[int, ...], str, int] | None:
        """(shape, dtype, bytes per element) of tensor argument i, or None."""
        shape, dtype = self.shape(i), self.dtype(i)
        if shape is None or dtype is None:
            return None
        return shape, dtype, _BPE_OF_DTYPE[dtype]

    def shape_list(self, i: int) -> list[tuple[int, ...]] | None:
        """Shapes of a TensorList argument (nested dims); None if not a list of shapes."""
        if i >= len(self.dims):
            return None
        v = self.dims[i]
        if not isinstance(v, (list, tuple)) or not v:
            return None
        if not all(_is_dim_list(s) for s in v):
            return None
        return [tuple(s) for s in v]

    def value(self, i: int) -> object:
        """Concrete input i as a value (int, float, bool, list or None); never runs code."""
        if i >= len(self.concrete):
            return None
        return parse_concrete(self.concrete[i])

    def int_list(self, i: int, length: int | None = None) -> list[int] | None:
        v = self.value(i)
        if isinstance(v, bool):
            return None
        if isinstance(v, int):
            v = [v]
        if not isinstance(v, list) or not v:
            return None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return None
        if length is not None:
            if len(v) == 1:
                v = v * length
            if len(v) != length:
                return None
        return v

    def int_value(self, i: int) -> int | None:
        v = self.value(i)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def bool_value(self, i: int) -> bool | None:
        v = self.value(i)
        return v if isinstance(v, bool) else None


_CONCRETE_WORDS = {
    "True": "True",
    "False": "False",
    "None": "None",
    "true": "True",
    "false": "False",
}


def parse_concrete(text: object) -> object:
    """A ``Concrete Inputs`` string as a value: "[16, 16]" → [16, 16], "True" → True, "0." → 0.0.

    Only literals are accepted (``ast.literal_eval``); "" (a tensor) and anything else → None.
    """
    if not isinstance(text, str):
        return None
    s = text.strip()
    if not s or len(s) > 10_000:
        return None
    s = _CONCRETE_WORDS.get(s, s)
    try:
        value = ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, tuple):
        value = list(value)
    return value if isinstance(value, (int, float, bool, list)) or value is None else None


def _n(shape: Sequence[int]) -> int:
    return math.prod(shape)


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


def _cost(flops: int | None, nbytes: int | None, dtype: str | None, unit: Unit | None) -> OpCost:
    return OpCost(flops, nbytes, dtype, unit)


# --- matrix multiplies ---------------------------------------------------------------------------


def _mm(a: _Args, ia: int, ib: int, bias: int | None, batched: bool) -> OpCost:
    ta, tb = a.tensor(ia), a.tensor(ib)
    if ta is None or tb is None:
        return UNKNOWN_COST
    (sa, dtype, bpe), (sb, _, _) = ta, tb
    if batched:
        if len(sa) != 3 or len(sb) != 3 or sa[0] != sb[0]:
            return UNKNOWN_COST
        batch, (m, k), (k2, n) = sa[0], sa[1:], sb[1:]
    else:
        if len(sa) != 2 or len(sb) != 2:
            return UNKNOWN_COST
        batch, (m, k), (k2, n) = 1, sa, sb
    if k != k2:
        return UNKNOWN_COST
    flops = batch * 2 * m * n * k
    elems = batch * (m * k + k * n + m * n)
    if bias is not None:
        tc = a.shape(bias)
        flops += batch * m * n  # TraceLens counts the bias add (reference §4.2)
        elems += _n(tc) if tc is not None else 0
    return _cost(flops, elems * bpe, dtype, "tensor")


def _scaled_mm(a: _Args) -> OpCost:
    ta, tb = a.tensor(0), a.tensor(1)
    if ta is None or tb is None or len(ta[0]) != 2 or len(tb[0]) != 2 or ta[0][1] != tb[0][0]:
        return UNKNOWN_COST
    (m, k), (_, n) = ta[0], tb[0]
    out_bpe = 2  # reference §4.2: output assumed fp16/bf16 unless out_dtype says otherwise
    code = a.int_value(6)
    if code is not None and code in _SCALAR_TYPE:
        out_bpe = _SCALAR_TYPE[code][1]
    bias = a.shape(4)
    nbytes = m * k * ta[2] + k * n * tb[2] + m * n * out_bpe
    if bias is not None:
        nbytes += _n(bias) * (a.bpe(4) or out_bpe)
    return _cost(2 * m * n * k, nbytes, ta[1], "tensor")


def _int_mm(a: _Args) -> OpCost:
    ta, tb = a.tensor(0), a.tensor(1)
    if ta is None or tb is None or len(ta[0]) != 2 or len(tb[0]) != 2 or ta[0][1] != tb[0][0]:
        return UNKNOWN_COST
    (m, k), (_, n) = ta[0], tb[0]
    return _cost(2 * m * n * k, (m * k + k * n) * ta[2] + m * n * 4, ta[1], "tensor")


def _mv(a: _Args, bias: int | None) -> OpCost:
    i0 = 0 if bias is None else 1
    tm, tv = a.tensor(i0), a.tensor(i0 + 1)
    if tm is None or tv is None or len(tm[0]) != 2 or len(tv[0]) != 1 or tm[0][1] != tv[0][0]:
        return UNKNOWN_COST
    m, n = tm[0]
    flops = 2 * m * n + (m if bias is not None else 0)
    elems = m * n + n + m + (m if bias is not None else 0)
    return _cost(flops, elems * tm[2], tm[1], "tensor")


def _dot(a: _Args) -> OpCost:
    t0, t1 = a.tensor(0), a.tensor(1)
    if t0 is None or t1 is None or len(t0[0]) != 1 or t0[0] != t1[0]:
        return UNKNOWN_COST
    n = t0[0][0]
    return _cost(2 * n, (2 * n + 1) * t0[2], t0[1], "simt")


# --- convolutions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ConvLayout:
    """Where one convolution overload keeps its arguments (they differ between overloads)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    transposed: int | None  # index of a bool flag
    output_padding: int | None
    groups: int | None
    always_transposed: bool = False


_CONV_LAYOUTS: dict[str, _ConvLayout] = {
    "aten::convolution": _ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": _ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::convolution_overrideable": _ConvLayout(2, 3, 4, 5, 6, 7, 8),
    "aten::cudnn_convolution": _ConvLayout(None, 3, 2, 4, None, None, 5),
    "aten::cudnn_convolution_transpose": _ConvLayout(None, 4, 2, 5, None, 3, 6, True),
    "aten::miopen_convolution": _ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::miopen_depthwise_convolution": _ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::miopen_convolution_transpose": _ConvLayout(2, 5, 3, 6, None, 4, 7, True),
    "aten::mkldnn_convolution": _ConvLayout(2, 4, 3, 5, None, None, 6),
    "aten::_conv_depthwise2d": _ConvLayout(3, 4, 5, 6, None, None, None),
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


def _conv(a: _Args, layout: _ConvLayout) -> OpCost:
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
    macs = (_n(x) if transposed else _n(out)) * _n(w[1:])
    flops = 2 * macs
    elems = _n(x) + _n(w) + _n(out)
    bias = a.shape(layout.bias) if layout.bias is not None else None
    if bias is not None:
        flops += _n(out)
        elems += _n(bias)
    return _cost(flops, elems * bpe, dtype, "tensor")


def _conv_backward(a: _Args, mask_index: int, transposed_index: int | None) -> OpCost:
    """``convolution_backward(grad_out, input, weight, …, output_mask)``: dX and dW are each a
    convolution as large as the forward one; the bias gradient is a reduction of grad_out."""
    tg, tx, tw = a.tensor(0), a.tensor(1), a.tensor(2)
    if tg is None or tx is None or tw is None:
        return UNKNOWN_COST
    (g, dtype, bpe), (x, _, _), (w, _, _) = tg, tx, tw
    if len(g) != len(x) or len(w) != len(x) or len(x) < 3:
        return UNKNOWN_COST
    transposed = a.bool_value(transposed_index) if transposed_index is not None else None
    fwd_macs = (_n(x) if transposed else _n(g)) * _n(w[1:])
    mask = a.value(mask_index)
    if not (isinstance(mask, list) and len(mask) >= 2 and all(isinstance(m, bool) for m in mask)):
        mask = [True, True, False]
    want_dx, want_dw = mask[0], mask[1]
    want_db = len(mask) > 2 and mask[2]
    flops = 0
    elems = 0
    if want_dx:
        flops += 2 * fwd_macs
        elems += _n(g) + _n(w) + _n(x)
    if want_dw:
        flops += 2 * fwd_macs
        elems += _n(g) + _n(x) + _n(w)
    if want_db:
        flops += _n(g)
        elems += _n(g) + g[1]
    return _cost(flops, elems * bpe, dtype, "tensor")


def _cudnn_conv_backward_input(a: _Args) -> OpCost:
    """Legacy ``cudnn_convolution_backward_input(self_size, grad_output, weight, …)``: the input
    size is only in Concrete Inputs, which old traces do not have, so bytes may stay unknown."""
    tg, tw = a.tensor(1), a.tensor(2)
    if tg is None or tw is None:
        return UNKNOWN_COST
    (g, dtype, bpe), (w, _, _) = tg, tw
    flops = 2 * _n(g) * _n(w[1:])
    size = a.int_list(0)
    nbytes = (_n(g) + _n(w) + _n(size)) * bpe if size and all(s >= 0 for s in size) else None
    return _cost(flops, nbytes, dtype, "tensor")


def _cudnn_conv_backward_weight(a: _Args) -> OpCost:
    """Legacy ``cudnn_convolution_backward_weight(weight_size, grad_output, self, …)``."""
    tg, tx = a.tensor(1), a.tensor(2)
    size = a.int_list(0)
    if tg is None or tx is None or not size or any(s < 0 for s in size):
        return UNKNOWN_COST
    (g, dtype, bpe), (x, _, _) = tg, tx
    flops = 2 * _n(g) * _n(size[1:])
    return _cost(flops, (_n(g) + _n(x) + _n(size)) * bpe, dtype, "tensor")


# --- attention ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SdpaLayout:
    """Argument positions of one SDPA overload; ``causal`` maps input count → is_causal index
    because the signatures grew between torch versions."""

    q: int
    bshd: bool  # [B, S, H, D] (flash/efficient internals) instead of [B, H, S, D]
    causal: Mapping[int, int]
    backward: bool
    mask_type: bool = False  # is_causal is an int custom_mask_type (0 = none)


_SDPA: dict[str, _SdpaLayout] = {
    "aten::_scaled_dot_product_flash_attention": _SdpaLayout(0, False, {-1: 4}, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _SdpaLayout(0, False, {-1: 4}, False),
    "aten::_scaled_dot_product_efficient_attention": _SdpaLayout(0, False, {6: 4, -1: 6}, False),
    "aten::_scaled_dot_product_cudnn_attention": _SdpaLayout(0, False, {7: 4, -1: 6}, False),
    "aten::_scaled_dot_product_fused_attention_overrideable": _SdpaLayout(0, False, {-1: 5}, False),
    "aten::_cudnn_attention_forward": _SdpaLayout(0, False, {-1: 10}, False),
    "aten::_flash_attention_forward": _SdpaLayout(0, True, {-1: 8}, False),
    "aten::_efficient_attention_forward": _SdpaLayout(0, True, {-1: 9}, False, True),
    "aten::_scaled_dot_product_flash_attention_backward": _SdpaLayout(1, False, {-1: 11}, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _SdpaLayout(
        1, False, {-1: 7}, True
    ),
    "aten::_scaled_dot_product_efficient_attention_backward": _SdpaLayout(
        1, False, {9: 6, -1: 11}, True
    ),
    "aten::_scaled_dot_product_cudnn_attention_backward": _SdpaLayout(
        1, False, {15: 13, -1: 14}, True
    ),
    "aten::_cudnn_attention_backward": _SdpaLayout(1, False, {-1: 14}, True),
    "aten::_flash_attention_backward": _SdpaLayout(1, True, {-1: 11}, True),
    "aten::_efficient_attention_backward": _SdpaLayout(1, True, {-1: 14}, True, True),
}


def _sdpa(a: _Args, layout: _SdpaLayout) -> OpCost:
    tq, tk, tv = a.tensor(layout.q), a.tensor(layout.q + 1), a.tensor(layout.q + 2)
    if tq is None or tk is None or tv is None:
        return UNKNOWN_COST
    (q, dtype, bpe), (k, _, _), (v, _, _) = tq, tk, tv
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return UNKNOWN_COST  # varlen (packed 3-D) inputs: per-sequence lengths are not in the trace
    if layout.bshd:
        (b, sq, hq, d), (_, skv, hkv, _), dv = q, k, v[3]
    else:
        (b, hq, sq, d), (_, hkv, skv, _), dv = q, k, v[3]
    if k[0] != b or v[0] != b or k[3] != d:
        return UNKNOWN_COST
    idx = layout.causal.get(len(a), layout.causal[-1])
    flag = a.value(idx)
    if layout.mask_type:
        causal = isinstance(flag, int) and not isinstance(flag, bool) and flag != 0
    else:
        causal = flag is True
    pairs = b * hq * sq * skv
    if layout.backward:
        # recompute QKᵀ, dV, dP, dQ, dK (reference §4.2, FC): 2·pairs·(3D + 2Dv)
        flops = 2 * pairs * (3 * d + 2 * dv)
        elems = 2 * (b * sq * hq * d + b * skv * hkv * d + b * skv * hkv * dv) + b * sq * hq * dv
    else:
        flops = 2 * pairs * (d + dv)
        elems = b * sq * hq * d + b * skv * hkv * d + b * skv * hkv * dv + b * sq * hq * dv
    if causal and sq == skv:
        flops //= 2
    return _cost(flops, elems * bpe, dtype, "tensor")


# --- elementwise, reductions, norms -------------------------------------------------------------

# Extra FLOPs per output element where an op does more than one operation.
_FLOPS_PER_ELEMENT: dict[str, int] = {
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
}
_ZERO_FLOP = frozenset({"copy", "fill", "zero", "masked_fill", "where", "clone"})
_COMPARISONS = _words(
    "eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_xor logical_not"
)

_UNARY = _words(
    "abs neg exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal square sigmoid "
    "tanh relu relu6 gelu silu mish elu selu celu softplus hardtanh hardswish "
    "hardsigmoid leaky_relu logit sin cos tan asin acos atan sinh cosh erf erfc "
    "erfinv sign sgn floor ceil round trunc frac clamp clamp_min clamp_max nan_to_num "
    "bitwise_not threshold fill zero isnan isinf isfinite logical_not native_dropout "
    "bernoulli uniform normal exponential random"
)
_BINARY = _words(
    "add sub rsub mul div true_divide floor_divide remainder fmod pow maximum minimum "
    "fmax fmin atan2 hypot copysign eq ne lt le gt ge logical_and logical_or "
    "logical_xor bitwise_and bitwise_or bitwise_xor bitwise_left_shift "
    "bitwise_right_shift where masked_fill addcmul addcdiv lerp sigmoid_backward "
    "tanh_backward threshold_backward gelu_backward silu_backward hardswish_backward "
    "hardsigmoid_backward leaky_relu_backward elu_backward softplus_backward "
    "logit_backward native_dropout_backward clamp clamp_min clamp_max xlogy"
)


def _base(op: str) -> str:
    """``aten::add_`` → ``add``; in-place and namespace spellings share a formula."""
    name = op.split("::", 1)[1] if "::" in op else op
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def _elementwise(a: _Args, base: str) -> OpCost:
    tensors = [t for i in range(len(a)) if (t := a.tensor(i)) is not None]
    if not tensors:
        return UNKNOWN_COST
    out_shape = _broadcast([t[0] for t in tensors])
    if out_shape is None:
        return UNKNOWN_COST
    # 0-dim tensors (wrapped Python scalars such as a 'double' [] operand) do not promote.
    sized = [t for t in tensors if t[0]] or tensors
    main = max(sized, key=lambda t: _n(t[0]))
    if base in _COMPARISONS:
        out_bpe = 1
    elif base in ("where", "masked_fill"):
        out_bpe = (
            max(t[2] for t in sized if t[1] != "bool") if any(t[1] != "bool" for t in sized) else 1
        )
    else:
        out_bpe = max(t[2] for t in sized)
    n_out = _n(out_shape)
    reads = 0 if base in ("fill", "zero") else sum(_n(t[0]) * t[2] for t in tensors)
    flops = 0 if base in _ZERO_FLOP else n_out * _FLOPS_PER_ELEMENT.get(base, 1)
    dtype = main[1]
    unit: Unit | None = "simt" if flops else None
    return _cost(flops, reads + n_out * out_bpe, dtype, unit)


def _copy(a: _Args) -> OpCost:
    """``copy_(dst, src)``: read src, write dst (a cast when dtypes differ); no arithmetic."""
    td, ts = a.tensor(0), a.tensor(1)
    if td is None or ts is None:
        return UNKNOWN_COST
    n = _n(td[0])
    return _cost(0, n * (td[2] + ts[2]), ts[1], None)


def _to_copy(a: _Args) -> OpCost:
    """``_to_copy(self, dtype, …)``: the output dtype is a ScalarType code in Concrete Inputs."""
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    code = a.int_value(1)
    out_bpe = _SCALAR_TYPE[code][1] if code in _SCALAR_TYPE else t[2]
    return _cost(0, _n(t[0]) * (t[2] + out_bpe), t[1], None)


# Index of the reduced dims in Concrete Inputs per reduction (keepdim does not change the element
# count); None: a scan, whose output is as large as its input.
_REDUCTIONS: dict[str, int | None] = {
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


def _reduction(a: _Args, base: str) -> OpCost:
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    if base in ("max", "min") and a.shape(1) is not None:
        return _elementwise(a, "maximum")  # max(self, other) is elementwise
    n_in = _n(shape)
    dim_i = _REDUCTIONS[base]
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
    return _cost(n_in, n_in * bpe + n_out * out_bpe, dtype, "simt")


def _softmax(a: _Args, backward: bool) -> OpCost:
    """``_softmax(x, dim, half_to_float)``: exp, sum, divide ≈ 3 FLOPs/element (TraceLens
    Softmax class), backward twice that; bytes are the tensors read and written."""
    if backward:
        tg, to = a.tensor(0), a.tensor(1)
        if tg is None or to is None:
            return UNKNOWN_COST
        n = _n(tg[0])
        return _cost(6 * n, n * (tg[2] + to[2] + tg[2]), tg[1], "simt")
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    n = _n(t[0])
    out_bpe = 4 if a.bool_value(2) else t[2]
    return _cost(3 * n, n * (t[2] + out_bpe), t[1], "simt")


def _norm_width(a: _Args, shape_index: int, fallback_tensor: int | None) -> int | None:
    size = a.int_list(shape_index)
    if size and all(s >= 0 for s in size):
        return _n(size)
    if fallback_tensor is not None:
        w = a.shape(fallback_tensor)
        if w:
            return _n(w)
    return None


def _layer_norm(a: _Args) -> OpCost:
    """Forward layer norm: ``5N + 6C`` FLOPs and ``N·(in+out) + k·C`` bytes, k = mean, var,
    weight, bias and the two saved training statistics (reference §4.2, TraceLens)."""
    t = a.tensor(0)
    if t is None:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    c = _norm_width(a, 1, 2)
    if c is None:
        return UNKNOWN_COST
    n = _n(shape)
    k = 2 + (a.shape(2) is not None) + (a.shape(3) is not None) + 2
    return _cost(5 * n + 6 * c, n * 2 * bpe + k * c * bpe, dtype, "simt")


def _layer_norm_backward(a: _Args) -> OpCost:
    """``native_layer_norm_backward(gO, x, normalized_shape, mean, rstd, w, b, mask)``: about
    twice the forward arithmetic; reads gO, x and the statistics, writes the masked grads."""
    tg, tx = a.tensor(0), a.tensor(1)
    if tg is None or tx is None:
        return UNKNOWN_COST
    (_, dtype, bpe), (x, _, _) = tg, tx
    n = _n(x)
    c = _norm_width(a, 2, 5)
    stats = a.shape(3)
    if c is None and stats is not None and _n(stats):
        c = n // _n(stats)
    if c is None or c == 0:
        return UNKNOWN_COST
    rows = n // c
    mask = a.value(7)
    if not (isinstance(mask, list) and len(mask) == 3 and all(isinstance(m, bool) for m in mask)):
        mask = [True, a.shape(5) is not None, a.shape(6) is not None]
    stat_bpe = a.bpe(3) or 4
    nbytes = 2 * n * bpe + 2 * rows * stat_bpe + c * bpe
    nbytes += n * bpe * mask[0] + c * bpe * (mask[1] + mask[2])
    return _cost(2 * (5 * n + 6 * c), nbytes, dtype, "simt")


def _rms_norm(
    a: _Args, x_index: int, width_index: int, weight_index: int, extra_tensors: int = 0
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
        c = _n(w) if w else (shape[-1] if shape else None)
    if not c:
        return UNKNOWN_COST
    n = _n(shape)
    return _cost(4 * n, (2 + extra_tensors) * n * bpe + c * bpe, dtype, "simt")


def _batch_norm(a: _Args, backward: bool) -> OpCost:
    """Batch norm over channels C = x[1]: the layer-norm formula with C channels (training)."""
    t = a.tensor(1 if backward else 0)
    if t is None or len(t[0]) < 2:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    n, c = _n(shape), shape[1]
    if backward:
        return _cost(2 * (5 * n + 6 * c), 3 * n * bpe + 4 * c * bpe, dtype, "simt")
    return _cost(5 * n + 6 * c, 2 * n * bpe + 6 * c * bpe, dtype, "simt")


def _group_norm(a: _Args) -> OpCost:
    t = a.tensor(0)
    if t is None or len(t[0]) < 2:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    n, c = _n(shape), shape[1]
    return _cost(5 * n + 6 * c, 2 * n * bpe + 2 * c * bpe, dtype, "simt")


# --- data movement ------------------------------------------------------------------------------


def _embedding(a: _Args) -> OpCost:
    """``embedding(W[V, D], idx)``: a gather, no FLOPs; read indices, read and write rows."""
    tw, ti = a.tensor(0), a.tensor(1)
    if tw is None or ti is None or len(tw[0]) != 2:
        return UNKNOWN_COST
    n_idx, d = _n(ti[0]), tw[0][1]
    return _cost(0, n_idx * ti[2] + 2 * n_idx * d * tw[2], tw[1], None)


def _index_select(a: _Args) -> OpCost:
    tw, ti = a.tensor(0), a.tensor(2)
    dim = a.int_value(1)
    if tw is None or ti is None or dim is None or not tw[0] or not -len(tw[0]) <= dim < len(tw[0]):
        return UNKNOWN_COST
    shape = list(tw[0])
    shape[dim % len(shape)] = _n(ti[0])
    n_out = _n(shape)
    return _cost(0, _n(ti[0]) * ti[2] + 2 * n_out * tw[2], tw[1], None)


def _gather(a: _Args) -> OpCost:
    """``gather(self, dim, index)``: output has the index's shape."""
    ts, ti = a.tensor(0), a.tensor(2)
    if ts is None or ti is None:
        return UNKNOWN_COST
    n = _n(ti[0])
    return _cost(0, n * ti[2] + 2 * n * ts[2], ts[1], None)


def _scatter(a: _Args, base: str) -> OpCost:
    """``scatter(_add)(self, dim, index, src)``, ``index_add/index_copy(self, dim, index, src)``:
    read index and src, read-modify-write the touched rows of self."""
    ts, ti, tsrc = a.tensor(0), a.tensor(2), a.tensor(3)
    if ts is None or ti is None:
        return UNKNOWN_COST
    n_src = _n(tsrc[0]) if tsrc is not None else _n(ti[0])
    nbytes = _n(ti[0]) * ti[2] + n_src * (tsrc[2] if tsrc is not None else 0) + 2 * n_src * ts[2]
    flops = n_src if base in ("scatter_add", "index_add", "scatter_reduce") else 0
    return _cost(flops, nbytes, ts[1], "simt" if flops else None)


def _embedding_backward(a: _Args) -> OpCost:
    """``embedding_dense_backward(grad_output, indices, num_weights, …)``: zero the weight
    gradient, then scatter-add every grad row into it."""
    tg, ti = a.tensor(0), a.tensor(1)
    v = a.int_value(2)
    if tg is None or ti is None or not tg[0] or v is None or v < 0:
        return UNKNOWN_COST
    n, d = _n(tg[0]), tg[0][-1]
    return _cost(n, 2 * n * tg[2] + _n(ti[0]) * ti[2] + v * d * tg[2], tg[1], "simt")


def _list_dtype(a: _Args, index: int, assumed: str | None) -> tuple[str | None, int | None]:
    dtype = a.dtype(index) or assumed
    return dtype, bytes_per_element(dtype)


def _cat(a: _Args, list_dtype: str | None) -> OpCost:
    """``cat/stack(tensors, dim)``: every input read once and written once; no FLOPs. TensorList
    arguments carry no element type in traces, so bytes need ``list_dtype``."""
    shapes = a.shape_list(0)
    if shapes is None:
        return UNKNOWN_COST
    dtype, bpe = _list_dtype(a, 0, list_dtype)
    n = sum(_n(s) for s in shapes)
    return _cost(0, 2 * n * bpe if bpe else None, dtype, None)


# _foreach ops: (FLOPs per element, tensors read per element, tensors written per element)
# given the number of TensorList operands; in-place ops write their first list.
_FOREACH_FLOPS: dict[str, int] = {
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
    "copy": 0,
    "zero": 0,
    "fill": 0,
}


def _foreach(a: _Args, base: str, list_dtype: str | None) -> OpCost:
    op = base.removeprefix("_foreach_")
    lists = [s for i in range(len(a)) if (s := a.shape_list(i)) is not None]
    if not lists:
        return UNKNOWN_COST
    first = lists[0]
    if any(len(lst) != len(first) for lst in lists):
        return UNKNOWN_COST
    n = sum(_n(s) for s in first)
    dtype, bpe = _list_dtype(a, 0, list_dtype)
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
    return _cost(flops, nbytes, dtype, "simt" if flops else None)


def _fused_optimizer(a: _Args, list_dtype: str | None) -> OpCost:
    """``_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, …)``: reads
    params, grads and both moments (and max moments with amsgrad), writes params and moments.
    FLOPs are left unknown: the update is memory-bound and its op count depends on options."""
    lists = [a.shape_list(i) for i in range(5)]
    if lists[0] is None:
        return UNKNOWN_COST
    n = sum(_n(s) for s in lists[0])
    present = sum(1 for lst in lists if lst)
    dtype, bpe = _list_dtype(a, 0, list_dtype)
    tensors = present + max(0, present - 1)  # read each list, write all but grads
    return _cost(None, tensors * n * bpe if bpe else None, dtype, None)


def _mse_loss(a: _Args, backward: bool) -> OpCost:
    off = 1 if backward else 0
    ts, tt = a.tensor(off), a.tensor(off + 1)
    if ts is None or tt is None:
        return UNKNOWN_COST
    n = _n(ts[0])
    reduction = a.int_value(off + 2)
    n_out = n if backward or reduction == 0 else 1
    nbytes = 2 * n * ts[2] + n_out * ts[2]
    if backward:
        tg = a.tensor(0)
        nbytes += (_n(tg[0]) if tg is not None else 1) * ts[2]
    return _cost(3 * n, nbytes, ts[1], "simt")


def _nll_loss(a: _Args, backward: bool) -> OpCost:
    off = 1 if backward else 0
    ts, tt = a.tensor(off), a.tensor(off + 1)
    if ts is None or tt is None:
        return UNKNOWN_COST
    n_t = _n(tt[0])
    if backward:  # zero the input gradient, then write one element per target
        return _cost(n_t, _n(ts[0]) * ts[2] + n_t * (tt[2] + ts[2]), ts[1], "simt")
    return _cost(n_t, n_t * (tt[2] + ts[2]) + ts[2], ts[1], "simt")


# Always composites in eager PyTorch: their children launch the kernels and carry the cost.
COMPOSITE_OPS: frozenset[str] = _words(
    "aten::linear aten::matmul aten::einsum aten::tensordot aten::conv1d aten::conv2d "
    "aten::conv3d aten::conv_transpose1d aten::conv_transpose2d "
    "aten::conv_transpose3d aten::scaled_dot_product_attention aten::to aten::type_as "
    "aten::contiguous aten::clone aten::softmax aten::log_softmax aten::layer_norm "
    "aten::group_norm aten::batch_norm aten::rms_norm aten::cross_entropy_loss "
    "aten::nll_loss aten::nll_loss_nd aten::dropout aten::embedding_backward"
)


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
    the dtype of the ``multi_tensor_apply_kernel`` the op launched (:func:`kernel_dtype`).
    Never raises on malformed input: anything that does not fit a formula gives None fields.
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
    a = _Args(input_dims, input_types, concrete_inputs)
    name = op_name.strip()
    base = _base(name)
    if name in _CONV_LAYOUTS:
        return _conv(a, _CONV_LAYOUTS[name])
    if name in _SDPA:
        return _sdpa(a, _SDPA[name])
    simple = _SIMPLE.get(base) if name.startswith("aten::") else None
    if simple is not None:
        return simple(a)
    if name.startswith("aten::_foreach_"):
        return _foreach(a, base, list_dtype)
    if name in (
        "aten::_fused_adam_",
        "aten::_fused_adamw_",
        "aten::_fused_adam",
        "aten::_fused_adamw",
    ):
        return _fused_optimizer(a, list_dtype)
    if name in ("aten::cat", "aten::_cat", "aten::concat", "aten::stack"):
        return _cat(a, list_dtype)
    if name == "_C::rms_norm":  # vLLM: rms_norm(out, input, weight, eps)
        return _rms_norm(a, 1, -1, 2)
    if name == "_C::fused_add_rms_norm":  # vLLM, in place: (input, residual, weight, eps)
        return _rms_norm(a, 0, -1, 2, extra_tensors=2)
    if not name.startswith("aten::"):
        return UNKNOWN_COST
    if base in _REDUCTIONS:
        return _reduction(a, base)
    if base in _BINARY or base in _UNARY:
        return _elementwise(a, base)
    return UNKNOWN_COST


_SIMPLE: dict[str, Any] = {
    "mm": lambda a: _mm(a, 0, 1, None, False),
    "addmm": lambda a: _mm(a, 1, 2, 0, False),
    "bmm": lambda a: _mm(a, 0, 1, None, True),
    "baddbmm": lambda a: _mm(a, 1, 2, 0, True),
    "_scaled_mm": _scaled_mm,
    "_int_mm": _int_mm,
    "mv": lambda a: _mv(a, None),
    "addmv": lambda a: _mv(a, 0),
    "dot": _dot,
    "vdot": _dot,
    "convolution_backward": lambda a: _conv_backward(a, 10, 7),
    "convolution_backward_overrideable": lambda a: _conv_backward(a, 9, 6),
    "cudnn_convolution_backward": lambda a: _conv_backward_legacy(a),
    "cudnn_convolution_backward_input": _cudnn_conv_backward_input,
    "cudnn_convolution_backward_weight": _cudnn_conv_backward_weight,
    "copy": _copy,
    "_copy_from": lambda a: _copy_from(a),
    "_to_copy": _to_copy,
    "_softmax": lambda a: _softmax(a, False),
    "_log_softmax": lambda a: _softmax(a, False),
    "_softmax_backward_data": lambda a: _softmax(a, True),
    "_log_softmax_backward_data": lambda a: _softmax(a, True),
    "native_layer_norm": _layer_norm,
    "native_layer_norm_backward": _layer_norm_backward,
    "_fused_rms_norm": lambda a: _rms_norm(a, 0, 1, 2),
    "_fused_rms_norm_backward": lambda a: _rms_norm_backward(a),
    "native_batch_norm": lambda a: _batch_norm(a, False),
    "_native_batch_norm_legit": lambda a: _batch_norm(a, False),
    "_native_batch_norm_legit_no_training": lambda a: _batch_norm(a, False),
    "_batch_norm_with_update": lambda a: _batch_norm(a, False),
    "_batch_norm_impl_index": lambda a: _batch_norm(a, False),
    "cudnn_batch_norm": lambda a: _batch_norm(a, False),
    "miopen_batch_norm": lambda a: _batch_norm(a, False),
    "native_batch_norm_backward": lambda a: _batch_norm(a, True),
    "cudnn_batch_norm_backward": lambda a: _batch_norm_backward_cudnn(a),
    "miopen_batch_norm_backward": lambda a: _batch_norm_backward_cudnn(a),
    "native_group_norm": _group_norm,
    "embedding": _embedding,
    "index_select": _index_select,
    "gather": _gather,
    "scatter": lambda a: _scatter(a, "scatter"),
    "scatter_add": lambda a: _scatter(a, "scatter_add"),
    "scatter_reduce": lambda a: _scatter(a, "scatter_reduce"),
    "index_add": lambda a: _scatter(a, "index_add"),
    "index_copy": lambda a: _scatter(a, "index_copy"),
    "embedding_dense_backward": _embedding_backward,
    "mse_loss": lambda a: _mse_loss(a, False),
    "mse_loss_backward": lambda a: _mse_loss(a, True),
    "nll_loss_forward": lambda a: _nll_loss(a, False),
    "nll_loss2d_forward": lambda a: _nll_loss(a, False),
    "nll_loss_backward": lambda a: _nll_loss(a, True),
    "nll_loss2d_backward": lambda a: _nll_loss(a, True),
}


def _copy_from(a: _Args) -> OpCost:
    """Legacy ``_copy_from(self, dst, non_blocking)`` (source first)."""
    ts, td = a.tensor(0), a.tensor(1)
    if ts is None or td is None:
        return UNKNOWN_COST
    return _cost(0, _n(ts[0]) * (ts[2] + td[2]), ts[1], None)


def _conv_backward_legacy(a: _Args) -> OpCost:
    """Legacy ``cudnn_convolution_backward(self, grad_output, weight, padding, …, output_mask)``:
    input first and the mask last; reordered into the ``convolution_backward`` layout."""
    order = (1, 0, 2)
    swapped = _Args(
        [a.dims[i] if i < len(a.dims) else [] for i in order] + a.dims[3:],
        [a.types[i] if i < len(a.types) else "" for i in order] + a.types[3:],
        a.concrete,
    )
    return _conv_backward(swapped, len(a) - 1, None)


def _rms_norm_backward(a: _Args) -> OpCost:
    """``_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, mask)``."""
    tg, tx = a.tensor(0), a.tensor(1)
    if tg is None or tx is None:
        return UNKNOWN_COST
    n = _n(tx[0])
    c = _norm_width(a, 2, 4) or (tx[0][-1] if tx[0] else None)
    if not c:
        return UNKNOWN_COST
    return _cost(8 * n, 3 * n * tx[2] + 2 * c * tx[2], tx[1], "simt")


def _batch_norm_backward_cudnn(a: _Args) -> OpCost:
    """``cudnn_batch_norm_backward(input, grad_output, weight, …)``: input first."""
    t = a.tensor(0)
    if t is None or len(t[0]) < 2:
        return UNKNOWN_COST
    shape, dtype, bpe = t
    n, c = _n(shape), shape[1]
    return _cost(2 * (5 * n + 6 * c), 3 * n * bpe + 4 * c * bpe, dtype, "simt")


# --- shape-free fallback ------------------------------------------------------------------------


_ATEN_ELEMENTWISE = re.compile(
    r"(?<![A-Za-z0-9_])(vectorized_elementwise_kernel|unrolled_elementwise_kernel"
    r"|elementwise_kernel_manual_unroll|elementwise_kernel)<"
)
_TENSOR_COUNT = re.compile(r"(?:Array|array)<char\s*\*,\s*(\d+)(?:ul|u)?>")


def _int_arg(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)(?:ul|u|l)?", text.strip(), re.I)
    return int(m.group(1)) if m else None


def kernel_cost_from_launch(
    name: str, grid: Sequence[int] | None, block: Sequence[int] | None
) -> OpCost:
    """Shape-free cost of a PyTorch elementwise kernel from its launch configuration.

    Without ``record_shapes`` the element count of ATen's elementwise kernels is still
    recoverable: ``numel ≈ grid.x · block.x · N`` (reference §3 item 5; exact for large
    tensors, the last block is partial), with N the elements per thread. Measured on the public
    traces: ``elementwise_kernel<nt, vt>`` and ``…_manual_unroll<nt, vt>`` → vt;
    ``vectorized_elementwise_kernel<v>`` → max(v, 4) (older PyTorch keeps 4 per thread for v=2,
    newer uses 8 for 16-bit types and says so in v); ``unrolled_elementwise_kernel`` → its third
    template argument when it is a number, else 4. Bytes assume every tensor of the
    ``Array<char*, K>`` has the kernel's dtype. Other kernels give all-None.
    """
    if not isinstance(name, str):
        return UNKNOWN_COST
    m = _ATEN_ELEMENTWISE.search(name)
    if m is None:
        return UNKNOWN_COST
    gx = _launch_product(grid)
    bx = _launch_x(block)
    if gx is None or bx is None:
        return UNKNOWN_COST
    args = template_args(name, m.end() - 1) or []
    family = m.group(1)
    per_thread: int | None
    if family == "vectorized_elementwise_kernel":
        v = _int_arg(args[0]) if args else None
        per_thread = max(v, 4) if v else None
    elif family == "unrolled_elementwise_kernel":
        per_thread = (_int_arg(args[2]) if len(args) > 2 else None) or 4
    else:
        per_thread = _int_arg(args[1]) if len(args) > 1 else None
    if not per_thread:
        return UNKNOWN_COST
    numel = gx * bx * per_thread
    dtype = kernel_dtype(name)
    tensors_m = _TENSOR_COUNT.search(name)
    if tensors_m:
        tensors = int(tensors_m.group(1))
    else:  # the strided path names no Array<char*, K>; a binary functor reads two tensors
        tensors = 3 if re.search(r"(?<![AB]Unary)BinaryFunctor|CUDAFunctor_", name) else 2
    low = name.lower()
    is_fill = "fillfunctor" in low
    is_copy = "copy_kernel" in low or "copy_device_to_device" in low
    if is_fill:
        tensors = 1
    flops = 0 if (is_fill or is_copy) else numel
    bpe = bytes_per_element(dtype)
    nbytes = numel * bpe * tensors if bpe else None
    return _cost(flops, nbytes, dtype, "simt" if flops else None)


def _launch_x(dims: object) -> int | None:
    if not isinstance(dims, (list, tuple)) or not dims:
        return None
    x = dims[0]
    if isinstance(x, bool) or not isinstance(x, int) or x <= 0:
        return None
    return x


def _launch_product(dims: object) -> int | None:
    if _launch_x(dims) is None:
        return None
    total = 1
    for v in dims:  # type: ignore[union-attr]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            return None
        total *= v
    return total


def memcpy_cost(name: str, nbytes: int | None) -> OpCost:
    """Cost of a ``gpu_memcpy`` event from its ``bytes`` arg: a host copy moves the bytes over
    the link once; a device-to-device copy reads and writes them (twice the traffic)."""
    if nbytes is None or isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        return UNKNOWN_COST
    if is_host_copy(name):
        return _cost(0, nbytes, None, "link")
    return _cost(0, 2 * nbytes, None, None)


# ------------------------------------------------------------------------------------------------
# Ceilings and the roofline verdict
# ------------------------------------------------------------------------------------------------

MATRIX_KINDS: frozenset[KernelKind] = frozenset(
    {KernelKind.GEMM, KernelKind.CONV, KernelKind.ATTENTION}
)


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def ceilings(
    peak: GpuPeak,
    kind: KernelKind,
    dtype: str | None,
    tf32_kernel: bool,
    *,
    host_link: bool = False,
) -> tuple[float | None, float | None]:
    """(FLOP/s, bytes/s) ceilings for a kernel of ``kind`` computing in ``dtype`` (reference §3).

    Matrix kinds use the matrix unit of their dtype; fp32 uses the TF32 peak only when the
    kernel is a TF32 tensor-op kernel (``tf32_kernel``), else the FP32 peak of the matrix unit
    (AMD) or of the CUDA cores (NVIDIA). A dtype the unit lacks (bf16 on a V100) falls back to
    the vector peak, then FP32 SIMT. Vector kinds use the SIMT peak of their dtype (FP32 SIMT
    as a proxy for others); unknown dtypes of matrix kinds give no FLOP ceiling. Copies have
    only a bandwidth: the host link when ``host_link`` (H2D/D2H), else HBM. Collectives are
    bound by the interconnect, which the table does not model: (None, None).
    """
    hbm = peak.hbm_gbps * 1e9 if peak.hbm_gbps is not None else None
    link = peak.link_gbps * 1e9 if peak.link_gbps is not None else None
    if kind == KernelKind.MEMCPY:
        return None, (link if host_link else hbm)
    if kind == KernelKind.MEMSET:
        return None, hbm
    if kind == KernelKind.COMMUNICATION:
        return None, None
    t, s = peak.tensor_tflops, peak.simt_tflops
    tflops: float | None
    if kind in MATRIX_KINDS:
        if dtype in ("fp32", "tf32"):
            if tf32_kernel or dtype == "tf32":
                tflops = _first(t.tf32, t.fp32, s.fp32)
            else:
                tflops = _first(t.fp32, s.fp32)
        elif dtype == "fp64":
            tflops = _first(t.fp64, s.fp64)
        elif dtype in PRECISIONS:
            tflops = _first(t.get(dtype), s.get(dtype), s.fp32)
        else:
            tflops = None
    else:
        tflops = _first(s.get(dtype), s.fp32) if dtype != "fp64" else s.fp64
    return (tflops * 1e12 if tflops is not None else None), hbm


def classify(
    flops: float | None,
    nbytes: float | None,
    flops_per_s: float | None,
    bytes_per_s: float | None,
    kind: KernelKind,
    *,
    default_ridge: float = 200.0,
) -> tuple[Regime, float | None]:
    """Compute- or memory-bound, and the ridge intensity (FLOP/byte) the verdict used.

    With FLOPs and bytes and both ceilings, arithmetic intensity is compared with the ridge
    ``flops_per_s / bytes_per_s`` (equivalent to comparing ``F/peak`` with ``Bytes/BW``). With
    FLOPs and bytes but no peak (unknown GPU), matrix kinds at or above ``default_ridge`` are
    compute-bound and everything else memory-bound. Without numbers the kind decides: GEMM,
    CONV and ATTENTION are compute, the rest memory (reference §3 item 5).

    ``default_ridge`` = 200 FLOP/byte: the median of the BF16 ridges in the reference peak table
    (§5.1, 21 GPUs, 76–419, median 203) and TraceLens's "compute-bound above 200" GEMM rule.
    """
    known_peak = _positive(flops_per_s) and _positive(bytes_per_s)
    ridge = flops_per_s / bytes_per_s if known_peak else None  # type: ignore[operator]
    if not _finite(flops) or not _finite(nbytes) or nbytes <= 0:  # type: ignore[operator]
        regime = Regime.COMPUTE if kind in MATRIX_KINDS else Regime.MEMORY
        return regime, ridge
    if flops <= 0:  # type: ignore[operator]
        return Regime.MEMORY, ridge
    intensity = flops / nbytes  # type: ignore[operator]
    if ridge is not None:
        return (Regime.COMPUTE if intensity >= ridge else Regime.MEMORY), ridge
    if kind in MATRIX_KINDS and intensity >= default_ridge:
        return Regime.COMPUTE, default_ridge
    return Regime.MEMORY, default_ridge


def roofline_seconds(
    flops: float | None,
    nbytes: float | None,
    flops_per_s: float | None,
    bytes_per_s: float | None,
) -> float | None:
    """The roofline's lower bound on run time, ``max(F/peak, Bytes/BW)`` over what is known.

    Achieved fraction of the roof is this divided by the measured time (TraceLens "Pct
    Roofline"); None when neither term is known.
    """
    terms = []
    if _finite(flops) and _positive(flops_per_s):
        terms.append(flops / flops_per_s)  # type: ignore[operator]
    if _finite(nbytes) and _positive(bytes_per_s):
        terms.append(nbytes / bytes_per_s)  # type: ignore[operator]
    return max(terms) if terms else None


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: object) -> bool:
    return _finite(v) and v > 0  # type: ignore[operator]
