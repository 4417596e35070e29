"""Scaled dot-product attention: QKᵀ and PV per head, halved when causal, and its backward.

Flash, memory-efficient and cuDNN internals take Q, K and V at different positions and layouts
([B, H, S, D] or [B, S, H, D]), and their ``is_causal`` argument moved between torch versions;
each overload has an :class:`SdpaLayout`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from brrr_trace.analyzers.opcost.args import OpArgs
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


@dataclass(frozen=True)
class SdpaLayout:
    """Argument positions of one SDPA overload; ``causal`` maps input count → is_causal index
    because the signatures grew between torch versions."""

    q: int
    bshd: bool  # [B, S, H, D] (flash/efficient internals) instead of [B, H, S, D]
    causal: Mapping[int, int]
    backward: bool
    mask_type: bool = False  # is_causal is an int custom_mask_type (0 = none)


LAYOUTS: dict[str, SdpaLayout] = {
    "aten::_scaled_dot_product_flash_attention": SdpaLayout(0, False, {-1: 4}, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": SdpaLayout(0, False, {-1: 4}, False),
    "aten::_scaled_dot_product_efficient_attention": SdpaLayout(0, False, {6: 4, -1: 6}, False),
    "aten::_scaled_dot_product_cudnn_attention": SdpaLayout(0, False, {7: 4, -1: 6}, False),
    "aten::_scaled_dot_product_fused_attention_overrideable": SdpaLayout(0, False, {-1: 5}, False),
    "aten::_cudnn_attention_forward": SdpaLayout(0, False, {-1: 10}, False),
    "aten::_flash_attention_forward": SdpaLayout(0, True, {-1: 8}, False),
    "aten::_efficient_attention_forward": SdpaLayout(0, True, {-1: 9}, False, True),
    "aten::_scaled_dot_product_flash_attention_backward": SdpaLayout(1, False, {-1: 11}, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": SdpaLayout(
        1, False, {-1: 7}, True
    ),
    "aten::_scaled_dot_product_efficient_attention_backward": SdpaLayout(
        1, False, {9: 6, -1: 11}, True
    ),
    "aten::_scaled_dot_product_cudnn_attention_backward": SdpaLayout(
        1, False, {15: 13, -1: 14}, True
    ),
    "aten::_cudnn_attention_backward": SdpaLayout(1, False, {-1: 14}, True),
    "aten::_flash_attention_backward": SdpaLayout(1, True, {-1: 11}, True),
    "aten::_efficient_attention_backward": SdpaLayout(1, True, {-1: 14}, True, True),
}


def sdpa(a: OpArgs, layout: SdpaLayout) -> OpCost:
    """Attention, forward or backward, of the overload whose arguments sit as ``layout`` says."""
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
    return OpCost(flops, elems * bpe, dtype, "tensor")
