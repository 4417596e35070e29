"""small-grid: a long kernel launched with fewer blocks than the GPU has SMs.

Why it costs: most of the chip sits idle while it runs. The saving: the share of SMs left idle.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from brrr_trace.analyzers.rules.context import RawFinding, RuleContext
from brrr_trace.vocabulary import KernelKind

_NOT_SM_BOUND = frozenset({KernelKind.MEMCPY, KernelKind.COMMUNICATION})


def small_grid(ctx: RuleContext) -> Iterator[RawFinding]:
    if not ctx.sms:
        return
    gpu = ctx.trace.gpu
    for cost in ctx.costs:
        rows = ctx.rows(cost.line_id)
        if not len(rows):
            continue
        blocks = np.prod(np.maximum(gpu.grid[rows], 1), axis=1)
        known = gpu.grid[rows][:, 0] > 0
        dur = ctx.duration(rows)
        small = known & (blocks < ctx.sms) & (dur >= ctx.options.small_grid_min_ns)
        # Copies have no grid to speak of; collectives use few blocks on purpose (NCCL channels)
        # and are bound by the links, not the SMs.
        small &= np.array([ctx.kind(r) not in _NOT_SM_BOUND for r in rows.tolist()])
        if not small.any():
            continue
        saving = float((dur[small] * (1 - blocks[small] / ctx.sms)).sum())
        if not ctx.worth_it(saving):
            continue
        fewest = int(blocks[small].min())
        yield RawFinding(
            "small-grid",
            cost.line_id,
            int(saving),
            f"{int(small.sum())} kernels launch as few as {fewest} blocks on a GPU with "
            f"{ctx.sms} SMs: most of the chip sits idle while they run",
            "Give the kernel more parallel work: a larger batch, fusing with neighbours "
            "(torch.compile), or a different split of the problem.",
            {"kernels": int(small.sum()), "min_blocks": fewest, "sms": ctx.sms},
        )
