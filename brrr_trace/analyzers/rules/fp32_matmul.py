"""fp32-matmul: FP32 GEMMs and convolutions on CUDA cores where TF32 tensor cores exist.

Why it costs: the tensor cores are several times faster. The saving: the replay with each of
those kernels taking its FLOPs at the share of the TF32 peak that real GEMMs reach, plus a
kernel's fixed time (``AnalysisOptions.tensor_core_efficiency``, ``matrix_kernel_latency_ns``),
never longer than it took; a kernel whose FLOPs are unknown is scaled by the FP32/TF32 peak
ratio. The ratio alone made small GEMMs as fast as the peak allows, which they are not.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.kernels import is_tf32_kernel, kernel_dtype
from brrr_trace.analyzers.replay import Fix
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.arraysets import distinct
from brrr_trace.vocabulary import KernelKind


def fp32_matmul(ctx: RuleContext) -> Iterator[RawFinding]:
    peak = ctx.peak
    if peak is None or not peak.tensor_tflops.tf32 or not peak.simt_tflops.fp32:
        return
    ratio = peak.simt_tflops.fp32 / peak.tensor_tflops.tf32
    if ratio >= 1:
        return
    names, strings = ctx.trace.gpu.name, ctx.trace.strings
    fp32 = np.zeros(len(strings), dtype=bool)
    for sid in distinct(names).tolist():
        fp32[sid] = kernel_dtype(strings[sid]) == "fp32" and not is_tf32_kernel(strings[sid])
    eligible = ctx.of_kind(KernelKind.GEMM, KernelKind.CONV) & fp32[names]
    for cost in ctx.costs:
        line_rows = ctx.rows(cost.line_id)
        rows = line_rows[eligible[line_rows]].tolist()
        if not rows:
            continue
        fix = Fix(
            "the FP32 matrix kernels on TF32 tensor cores",
            durations=_on_tensor_cores(ctx, rows, ratio),
        )
        saving, evidence = ctx.replayed(fix)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "fp32-matmul",
            cost.line_id,
            int(saving),
            f"{len(rows)} FP32 matrix kernels run on CUDA cores ({peak.simt_tflops.fp32:.0f} "
            f"TFLOP/s peak) instead of TF32 tensor cores ({peak.tensor_tflops.tf32:.0f})",
            'Allow TF32: torch.set_float32_matmul_precision("high") at start-up, or run the '
            'region under torch.autocast("cuda", dtype=torch.bfloat16).',
            {"kernels": len(rows), "fp32_tflops": peak.simt_tflops.fp32, **evidence},
        )


def _on_tensor_cores(ctx: RuleContext, rows: list[int], ratio: float) -> dict[int, int]:
    """Each kernel's time on TF32 tensor cores, ns."""
    assert ctx.peak is not None and ctx.peak.tensor_tflops.tf32
    rate = ctx.options.tensor_core_efficiency * ctx.peak.tensor_tflops.tf32 * 1e12
    latency = ctx.options.matrix_kernel_latency_ns
    times: dict[int, int] = {}
    for row in rows:
        took = int(ctx.graph.duration[row])
        flops = float(ctx.classes.flops[row])
        if math.isfinite(flops) and flops > 0:
            times[row] = min(took, int(flops / rate * 1e9) + latency)
        else:
            times[row] = int(took * ratio)
    return times
