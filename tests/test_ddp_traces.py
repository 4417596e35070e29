"""Two-rank DDP with gloo on one H200 (tests/data/ddp/README.md): what one rank's report says
about its collectives, when the ranks are balanced and when one of them is late."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.render.json import to_dict
from brrr_trace.report import Report
from brrr_trace.vocabulary import IdleCause, Regime
from tests.report_checks import assert_the_sums_add_up

DDP = Path(__file__).resolve().parent / "data" / "ddp"
MS = 1_000_000


@cache
def report(run: str, rank: int) -> Report:
    found = sorted((DDP / "h200-gloo" / run).glob(f"rank{rank}.*.pt.trace.json.gz"))
    if not found:
        pytest.skip(f"no rank {rank} trace in {DDP / 'h200-gloo' / run}")
    return analyze(found[0], AnalysisOptions(source_root=str(DDP)))


def line(report: Report, number: int):  # type: ignore[no-untyped-def]
    (found,) = [x for x in report.lines if x.file == "ddp_train.py" and x.line == number]
    return found


RUNS = ("balanced", "rank1-late-15ms", "rank0-late-8ms")


@pytest.mark.parametrize("run", RUNS)
def test_each_step_issues_the_same_seven_collectives_on_both_ranks(run: str) -> None:
    # Per step: DDP's broadcast of the buffers in forward (the model call, line 125), its five
    # gradient buckets in backward, and the loss all-reduce for the log line (line 132).
    calls = [report(run, rank).collectives for rank in (0, 1)]
    assert [(c.group, c.index, c.name) for c in calls[0]] == [
        (c.group, c.index, c.name) for c in calls[1]
    ]
    per_step = ["broadcast"] + ["allreduce"] * 6
    assert [c.name for c in calls[0]] == per_step * 3
    assert [c.step for c in calls[0]] == [3] * 7 + [4] * 7 + [5] * 7
    for rank_calls in calls:
        assert {c.line for c in rank_calls[::7]} == {"ddp_train.py:125"}
        assert {c.line for c in rank_calls[6::7]} == {"ddp_train.py:132"}
        # Buckets go to the forward lines whose backward filled them (Block.forward and
        # TinyLM.forward), never to loss.backward() (line 128).
        buckets = {c.line for k, c in enumerate(rank_calls) if k % 7 not in (0, 6)}
        assert buckets <= {f"ddp_train.py:{n}" for n in (41, 42, 43, 59, 62)}
        # gloo: no kernels; 4 MB buckets of fp32 gradients
        assert all(c.kernel_start_ns is None for c in rank_calls)
        assert all(c.bytes is not None and c.bytes > 4_000_000 for c in rank_calls[1:6])


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("rank", (0, 1))
def test_waiting_is_communication_and_the_sums_add_up(run: str, rank: int) -> None:
    r = report(run, rank)
    assert_the_sums_add_up(to_dict(r))
    regimes = r.summary.time_by_regime_ns
    # gloo moves the gradients through host memory: the copies are the collectives', and the
    # GPU's wait for them is communication, not memory-bound work.
    assert regimes[Regime.MEMORY] < 0.03 * sum(regimes.values())
    assert regimes[Regime.COMMUNICATION] >= r.summary.idle_by_cause_ns[IdleCause.COLLECTIVE]


def test_the_waiting_rank_waits_in_the_forward_broadcast_for_the_late_one() -> None:
    # Rank 1 sleeps 15 ms a step before its forward; rank 0's DDP forward broadcast of the
    # buffers (the first collective of the step) waits for it. The GPU idles meanwhile.
    waiter, late = report("rank1-late-15ms", 0), report("rank1-late-15ms", 1)
    waited = line(waiter, 125).idle_by_cause_ns[IdleCause.COLLECTIVE]
    assert 3 * 14 * MS <= waited <= 3 * 17 * MS
    assert line(late, 125).idle_by_cause_ns[IdleCause.COLLECTIVE] < 3 * 3 * MS
    assert line(waiter, 125).regime is Regime.COMMUNICATION
    (finding,) = [f for f in waiter.findings if f.rule == "exposed-communication" and f.line == 125]
    assert 0.9 * waited <= finding.est_savings_ns <= finding.evidence["exposed_us"] * 1000
    assert finding.message.startswith("3 collective call(s) (broadcast ×3) run")
    assert "broadcast_buffers=False" in finding.fix
    # Balanced ranks barely wait there.
    for rank in (0, 1):
        assert line(report("balanced", rank), 125).idle_by_cause_ns[IdleCause.COLLECTIVE] < 6 * MS


def test_the_other_late_rank_makes_the_other_wait() -> None:
    waiter, late = report("rank0-late-8ms", 1), report("rank0-late-8ms", 0)
    waited = line(waiter, 125).idle_by_cause_ns[IdleCause.COLLECTIVE]
    assert waited >= 3 * 7 * MS
    assert line(late, 125).idle_by_cause_ns[IdleCause.COLLECTIVE] < 3 * MS
