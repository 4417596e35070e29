"""Losses: MSE and negative log-likelihood, forward and backward."""

from __future__ import annotations

from brrr_trace.analyzers.opcost.args import OpArgs, numel
from brrr_trace.analyzers.opcost.cost import UNKNOWN_COST, OpCost


def mse_loss(a: OpArgs, backward: bool) -> OpCost:
    """``mse_loss(self, target, reduction)``; the backward takes grad_output first."""
    off = 1 if backward else 0
    ts, tt = a.tensor(off), a.tensor(off + 1)
    if ts is None or tt is None:
        return UNKNOWN_COST
    n = numel(ts[0])
    reduction = a.int_value(off + 2)
    n_out = n if backward or reduction == 0 else 1
    nbytes = 2 * n * ts[2] + n_out * ts[2]
    if backward:
        tg = a.tensor(0)
        nbytes += (numel(tg[0]) if tg is not None else 1) * ts[2]
    return OpCost(3 * n, nbytes, ts[1], "simt")


def nll_loss(a: OpArgs, backward: bool) -> OpCost:
    """``nll_loss_forward(self, target, weight, reduction, ignore_index)``; the backward takes
    grad_output first."""
    off = 1 if backward else 0
    ts, tt = a.tensor(off), a.tensor(off + 1)
    if ts is None or tt is None:
        return UNKNOWN_COST
    n_t = numel(tt[0])
    if backward:  # zero the input gradient, then write one element per target
        return OpCost(n_t, numel(ts[0]) * ts[2] + n_t * (tt[2] + ts[2]), ts[1], "simt")
    return OpCost(n_t, n_t * (tt[2] + ts[2]) + ts[2], ts[1], "simt")
