"""fp32-matmul: FP32 GEMMs and convolutions on CUDA cores where TF32 tensor cores exist.

Why it costs: the tensor cores are several times faster. The saving: the replay with those
kernels scaled by the FP32/TF32 peak ratio.
"""

from __future__ import annotations

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
            durations={r: int(ctx.graph.duration[r] * ratio) for r in rows},
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
