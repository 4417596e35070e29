"""Matrix multiplies: 2·M·N·K FLOPs, the operands read once and the output written once.

``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``, ``_int_mm``, ``mv``, ``addmv``, ``dot``
(reference ``rules-and-roofline.md`` §4.2; a bias add is counted as TraceLens counts it).
"""

from __future__ import annotations

from brrr_trace.analyzers.opcost.args import SCALAR_TYPES, OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


def mm(a: OpArgs, ia: int, ib: int, bias: int | None, batched: bool) -> OpCost:
    """The product of the tensors at ``ia`` and ``ib`` (plus the bias at index ``bias``);
    ``batched`` for ``bmm``'s [B, M, K]·[B, K, N]."""
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
        elems += numel(tc) if tc is not None else 0
    return OpCost(flops, elems * bpe, dtype, "tensor")


def scaled_mm(a: OpArgs) -> OpCost:
    """``_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, …)``: low-precision
    operands, an output of ``out_dtype``."""
    ta, tb = a.tensor(0), a.tensor(1)
    if ta is None or tb is None or len(ta[0]) != 2 or len(tb[0]) != 2 or ta[0][1] != tb[0][0]:
        return UNKNOWN_COST
    (m, k), (_, n) = ta[0], tb[0]
    out_bpe = 2  # reference §4.2: output assumed fp16/bf16 unless out_dtype says otherwise
    code = a.int_value(6)
    if code is not None and code in SCALAR_TYPES:
        out_bpe = SCALAR_TYPES[code][1]
    bias = a.shape(4)
    nbytes = m * k * ta[2] + k * n * tb[2] + m * n * out_bpe
    if bias is not None:
        nbytes += numel(bias) * (a.bpe(4) or out_bpe)
    return OpCost(2 * m * n * k, nbytes, ta[1], "tensor")


def int_mm(a: OpArgs) -> OpCost:
    """``_int_mm(a, b)``: int8 operands, an int32 output."""
    ta, tb = a.tensor(0), a.tensor(1)
    if ta is None or tb is None or len(ta[0]) != 2 or len(tb[0]) != 2 or ta[0][1] != tb[0][0]:
        return UNKNOWN_COST
    (m, k), (_, n) = ta[0], tb[0]
    return OpCost(2 * m * n * k, (m * k + k * n) * ta[2] + m * n * 4, ta[1], "tensor")


def mv(a: OpArgs, bias: int | None) -> OpCost:
    """``mv(mat, vec)``, or ``addmv(bias, mat, vec)`` when ``bias`` is the bias's index."""
    i0 = 0 if bias is None else 1
    tm, tv = a.tensor(i0), a.tensor(i0 + 1)
    if tm is None or tv is None or len(tm[0]) != 2 or len(tv[0]) != 1 or tm[0][1] != tv[0][0]:
        return UNKNOWN_COST
    m, n = tm[0]
    flops = 2 * m * n + (m if bias is not None else 0)
    elems = m * n + n + m + (m if bias is not None else 0)
    return OpCost(flops, elems * tm[2], tm[1], "tensor")


def dot(a: OpArgs) -> OpCost:
    """``dot``/``vdot`` of two vectors: a multiply-add per element, on the vector units."""
    t0, t1 = a.tensor(0), a.tensor(1)
    if t0 is None or t1 is None or len(t0[0]) != 1 or t0[0] != t1[0]:
        return UNKNOWN_COST
    n = t0[0][0]
    return OpCost(2 * n, (2 * n + 1) * t0[2], t0[1], "simt")
