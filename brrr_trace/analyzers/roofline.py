"""The roofline verdict: a device's ceilings for a kernel, compute- or memory-bound, the bound.

Given an op's FLOPs and bytes (:mod:`brrr_trace.analyzers.opcost`), what the kernel is
(:mod:`brrr_trace.analyzers.kernels`) and the device's peaks (:mod:`brrr_trace.hardware`), this
picks the FLOP/s and bytes/s ceilings that bind the kernel, compares its arithmetic intensity
with the ridge between them and gives the lower bound on its run time (reference
``rules-and-roofline.md`` §3). Pure functions over numbers; nothing here reads a trace.
"""

from __future__ import annotations

import math

from brrr_trace.hardware.peaks import PRECISIONS, GpuPeak
from brrr_trace.vocabulary import KernelKind, Regime

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
