"""misaligned-shape: a half-precision GEMM with a dimension that is not a multiple of 8.

Why it costs: it keeps the GEMM off the tensor cores' fast path. The saving: from the kernel
time against an aligned GEMM's rate (see the rule's page).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np

from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.kernels import kernel_dtype
from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.traces.model import NO_ID
from brrr_trace.vocabulary import KernelKind


def misaligned_shape(ctx: RuleContext) -> Iterator[RawFinding]:
    cpu = ctx.trace.cpu_ops
    strings = ctx.trace.strings
    peak = ctx.peak
    decoded: dict[int, Any] = {}

    def value(vid: int) -> Any:
        if vid == NO_ID:
            return None
        if vid not in decoded:
            try:
                decoded[vid] = msgspec.json.decode(ctx.trace.values[vid])
            except msgspec.DecodeError:
                decoded[vid] = None
        return decoded[vid]

    for cost in ctx.costs:
        bad: list[int] = []
        dims_seen: list[str] = []
        for row in ctx.rows(cost.line_id).tolist():
            op = int(ctx.ops.cpu_op[row])
            if ctx.kind(row) is not KernelKind.GEMM or op == NONE:
                continue
            dtype = kernel_dtype(ctx.name(row))
            if dtype not in ("bf16", "fp16"):
                continue
            mnk = _gemm_dims(strings[cpu.name[op]], value(int(cpu.input_dims[op])))
            if mnk and any(d % 8 for d in mnk):
                bad.append(row)
                dims_seen.append("×".join(map(str, mnk)))
        if not bad:
            continue
        rows = np.asarray(bad)
        spent = float(ctx.duration(rows).sum())
        flops = float(np.nansum(ctx.classes.flops[rows]))
        tensor = peak.tensor_tflops.bf16 if peak else None
        ideal = flops / (0.7 * tensor * 1e12) * 1e9 if tensor else spent
        saving = max(0.0, spent - ideal)
        if not ctx.worth_it(saving):
            continue
        yield RawFinding(
            "misaligned-shape",
            cost.line_id,
            int(saving),
            f"half-precision GEMM with M×N×K = {dims_seen[0]}: a dimension that is not a multiple "
            "of 8 keeps it off the fastest tensor-core kernels",
            "Pad the odd dimension to a multiple of 8 (64 is better), e.g. a vocabulary of "
            "50257 → 50304.",
            {"kernels": len(bad), "shape": dims_seen[0]},
        )


def _gemm_dims(op: str, dims: Any) -> tuple[int, int, int] | None:
    try:
        if op in ("aten::mm", "aten::matmul"):
            (m, k), (_, n) = dims[0], dims[1]
        elif op == "aten::addmm":
            (m, k), (_, n) = dims[1], dims[2]
        elif op in ("aten::bmm", "aten::baddbmm"):
            a, b = (dims[0], dims[1]) if op == "aten::bmm" else (dims[1], dims[2])
            (_, m, k), (_, _, n) = a, b
        elif op == "aten::linear":
            *_, k = dims[0]
            m = int(np.prod(dims[0][:-1]))
            n = dims[1][0]
        else:
            return None
        return int(m), int(n), int(k)
    except (TypeError, ValueError, IndexError):
        return None
