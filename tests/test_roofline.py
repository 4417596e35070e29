"""Roofline verdicts: ceilings by kind, dtype and kernel; compute vs memory; the time bound.

Checked against hand-computed ridges and against the kernels of the project's H200 fixtures.
"""

from __future__ import annotations

import gzip
import json

import pytest
from pytest import approx

from brrr_trace.analyzers.kernels import is_tf32_kernel, kernel_kind
from brrr_trace.analyzers.opcost import op_cost
from brrr_trace.analyzers.roofline import ceilings, classify, roofline_seconds
from brrr_trace.hardware.devices import match_device
from brrr_trace.hardware.peaks import load_peak_table
from brrr_trace.vocabulary import KernelKind, Regime
from tests.conftest import FIXTURES

PEAKS = {p.name: p for p in load_peak_table()}
BF16 = "c10::BFloat16"


# --- the project's H200 fixtures -----------------------------------------------------------------


def _kernels_with_ops(fixture: str):
    """(kernel, launching cpu_op) pairs of an H200 fixture, linked by External id."""
    data = json.loads(gzip.decompress((FIXTURES / f"{fixture}.json.gz").read_bytes()))
    events = data["traceEvents"]
    ops = {
        e["args"]["External id"]: e
        for e in events
        if e.get("cat") == "cpu_op" and "Input Dims" in e.get("args", {})
    }
    peak = match_device(data["deviceProperties"][0])
    pairs = [
        (e, ops[e["args"]["External id"]])
        for e in events
        if e.get("cat") == "kernel" and e["args"].get("External id") in ops
    ]
    return peak, pairs


def _verdicts(fixture: str, op_name: str) -> list[tuple[Regime, float]]:
    """Regime and achieved TFLOP/s of every kernel launched by ``op_name``."""
    peak, pairs = _kernels_with_ops(fixture)
    assert peak is not None and peak.name == "H200 SXM"
    out = []
    for kernel, op in pairs:
        if op["name"] != op_name:
            continue
        args = op["args"]
        cost = op_cost(op_name, args["Input Dims"], args["Input type"], args["Concrete Inputs"])
        kind = kernel_kind(kernel["name"])
        fps, bps = ceilings(peak, kind, cost.dtype, is_tf32_kernel(kernel["name"]))
        regime, _ = classify(cost.flops, cost.bytes, fps, bps, kind)
        out.append((regime, cost.flops / (kernel["dur"] * 1e-6) / 1e12))
    assert out
    return out


def test_h200_bf16_matmul_is_compute_bound_near_the_measured_ceiling() -> None:
    # measured on this H200: bf16 GEMM ~788 TFLOP/s, i.e. ~80 % of the 989.4 datasheet peak
    for regime, tflops in _verdicts("bf16_matmul", "aten::mm"):
        assert regime == Regime.COMPUTE
        assert 0.7 * 989.4 < tflops < 989.4


def test_h200_fp32_matmul_is_bound_by_the_unit_it_ran_on() -> None:
    # TF32 off: SIMT kernels near the 67 TFLOP/s FP32 peak; TF32 on: tensor cores, far above it
    simt = _verdicts("fp32_matmul", "aten::mm")
    tf32 = _verdicts("fp32_matmul_tf32", "aten::mm")
    assert all(r == Regime.COMPUTE and t < 67 for r, t in simt)
    assert all(r == Regime.COMPUTE and 67 < t < 494.7 for r, t in tf32)


def test_h200_manual_attention_bmms_are_memory_bound() -> None:
    # Q·Kᵀ and P·V with head dim 64: intensity ≈ 60 FLOP/byte, below the bf16 ridge of 206
    assert {r for r, _ in _verdicts("manual_attention", "aten::bmm")} == {Regime.MEMORY}


# --- ceilings and verdicts -----------------------------------------------------------------------


def test_ceilings_pick_the_unit_by_kind_dtype_and_kernel() -> None:
    h100 = PEAKS["H100 SXM5 80GB"]
    assert ceilings(h100, KernelKind.GEMM, "bf16", False) == approx((989.4e12, 3350e9))
    assert ceilings(h100, KernelKind.GEMM, "fp32", False) == approx((67e12, 3350e9))
    assert ceilings(h100, KernelKind.CONV, "fp32", True) == approx((494.7e12, 3350e9))
    assert ceilings(h100, KernelKind.ATTENTION, "fp8", False)[0] == approx(1978.9e12)
    assert ceilings(h100, KernelKind.ELEMENTWISE, "bf16", False) == approx((133.8e12, 3350e9))
    assert ceilings(h100, KernelKind.REDUCTION, "fp32", False)[0] == approx(67e12)
    assert ceilings(h100, KernelKind.GEMM, None, False) == approx((None, 3350e9))
    assert ceilings(h100, KernelKind.MEMCPY, None, False, host_link=True) == approx((None, 64e9))
    assert ceilings(h100, KernelKind.MEMCPY, None, False) == approx((None, 3350e9))
    assert ceilings(h100, KernelKind.MEMSET, None, False) == approx((None, 3350e9))
    assert ceilings(h100, KernelKind.COMMUNICATION, "bf16", False) == approx((None, None))
    # V100 has no bf16 tensor cores and no TF32: fall back to the FP32 CUDA cores
    v100 = PEAKS["V100 SXM2"]
    assert ceilings(v100, KernelKind.GEMM, "bf16", False)[0] == approx(15.7e12)
    assert ceilings(v100, KernelKind.GEMM, "fp32", True)[0] == approx(15.7e12)
    # AMD runs fp32 GEMMs on its matrix cores
    assert ceilings(PEAKS["MI300X"], KernelKind.GEMM, "fp32", False)[0] == approx(163.4e12)


def test_classify_on_both_sides_of_the_ridge() -> None:
    fps, bps = ceilings(PEAKS["H100 SXM5 80GB"], KernelKind.GEMM, "bf16", False)
    ridge = 989.4e12 / 3350e9  # ≈ 295.3 FLOP/byte
    regime, got = classify(300e9, 1e9, fps, bps, KernelKind.GEMM)
    assert regime == Regime.COMPUTE and got == pytest.approx(ridge)
    assert classify(290e9, 1e9, fps, bps, KernelKind.GEMM)[0] == Regime.MEMORY
    # the roofline beats the kind: a huge-intensity "elementwise" op is still compute-bound
    assert classify(300e9, 1e9, fps, bps, KernelKind.ELEMENTWISE)[0] == Regime.COMPUTE


def test_classify_real_gemm_shapes() -> None:
    h100 = PEAKS["H100 SXM5 80GB"]
    fps, bps = ceilings(h100, KernelKind.GEMM, "bf16", False)
    prefill = op_cost("aten::mm", [[8944, 1024], [1024, 1024]], [BF16, BF16], None)
    decode = op_cost("aten::mm", [[1, 2880], [2880, 25136]], [BF16, BF16], None)  # b200 trace
    assert classify(prefill.flops, prefill.bytes, fps, bps, KernelKind.GEMM)[0] == Regime.COMPUTE
    assert classify(decode.flops, decode.bytes, fps, bps, KernelKind.GEMM)[0] == Regime.MEMORY


def test_classify_without_numbers_or_without_a_peak() -> None:
    assert classify(None, None, None, None, KernelKind.GEMM) == (Regime.COMPUTE, None)
    assert classify(None, None, None, None, KernelKind.ATTENTION)[0] == Regime.COMPUTE
    assert classify(None, None, None, None, KernelKind.ELEMENTWISE) == (Regime.MEMORY, None)
    assert classify(None, 100, 1e12, 1e9, KernelKind.MEMCPY) == (Regime.MEMORY, 1000.0)
    # unknown GPU: matrix kinds against the default ridge (200), the rest memory
    assert classify(250e9, 1e9, None, None, KernelKind.GEMM) == (Regime.COMPUTE, 200.0)
    assert classify(150e9, 1e9, None, None, KernelKind.CONV) == (Regime.MEMORY, 200.0)
    assert classify(1000e9, 1e9, None, None, KernelKind.ELEMENTWISE)[0] == Regime.MEMORY
    assert classify(250e9, 1e9, None, None, KernelKind.GEMM, default_ridge=300)[0] == Regime.MEMORY
    # no FLOPs at all: pure data movement
    assert classify(0, 1e9, 1e12, 1e9, KernelKind.GEMM)[0] == Regime.MEMORY
    # nonsense numbers fall back to the kind
    assert classify(float("nan"), 1e9, 1e12, 1e9, KernelKind.GEMM)[0] == Regime.COMPUTE
    assert classify(1e9, 0, 1e12, 1e9, KernelKind.SOFTMAX)[0] == Regime.MEMORY
    # a nonsense peak is an unknown peak: the default ridge decides
    assert classify(1e9, 1e9, -1.0, 1e9, KernelKind.GEMM) == (Regime.MEMORY, 200.0)


def test_roofline_seconds_is_the_larger_of_the_two_times() -> None:
    assert roofline_seconds(2e12, 1e9, 1e12, 1e12) == 2.0
    assert roofline_seconds(1e12, 4e12, 1e12, 1e12) == 4.0
    assert roofline_seconds(None, 4e12, None, 2e12) == 2.0
    assert roofline_seconds(None, None, 1e12, 1e12) is None
