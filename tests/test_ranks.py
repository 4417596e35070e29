"""A folder of traces: runs told from ranks, each rank analyzed in its own process, the ranks
merged (cross_rank, straggler); on tiny synthetic two-rank runs and the public 8-rank DLRM set.

The synthetic run: two steps of 10 ms on two ranks with the gloo backend. Each step runs a 1 ms
GEMM (train.py:10), then the gradient all-reduce (train.py:30), then a 50 µs add (train.py:40).
Rank 1 first spends 5 ms in train.py:20 (loading its shard), so it enters the all-reduce 5 ms
after rank 0, which waits for it there; the all-reduce itself takes 100 µs once both are in.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brrr_trace.cli import main
from brrr_trace.errors import NotATraceError
from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.render import json as render_json
from brrr_trace.render import text as render_text
from brrr_trace.vocabulary import Regime
from tests.tracebuilder import annotation, frame, kernel, launch, op, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
MS = 1_000_000


def comms(nelems: int) -> dict:
    return {
        "Collective name": "allreduce",
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "dtype": "Float",
        "Process Group Name": "0",
        "Group size": 2,
    }


def rank_events(rank: int, late_us: float = 5000.0, steps: int = 2) -> list[dict]:
    events = []
    for k in range(steps):
        base = k * 10_000.0
        enter = base + 1010.0 + (late_us if rank == 1 else 0.0)
        end = base + 1110.0 + late_us
        events += [
            annotation(f"ProfilerStep#{k}", base, 10_000.0),
            frame("train.py(10): forward", base, 20.0),
            launch(base + 5.0, 10 * k + 1),
            kernel(GEMM, base + 10.0, 1000.0, 10 * k + 1),
            frame("train.py(30): sync_grads", enter - 2.0, end - enter + 4.0),
            op("c10d::allreduce_", enter, end - enter),
            op("record_param_comms", enter + 1.0, end - enter - 2.0, **comms(1 << 20)),
            frame("train.py(40): update", end + 10.0, 20.0),
            launch(end + 15.0, 10 * k + 2),
            kernel(ADD, end + 20.0, 50.0, 10 * k + 2),
        ]
        if rank == 1 and late_us:
            events.append(frame("train.py(20): load_shard", base + 1010.0, late_us))
    return events


def write_run(folder: Path, late_us: float = 5000.0, world: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(world):
        write(
            folder / f"host_{rank}.1700000000000.pt.trace.json",
            rank_events(rank, late_us),
            distributedInfo={"backend": "gloo", "rank": rank, "world_size": world},
        )
    return folder


@pytest.fixture
def run(tmp_path: Path) -> str:
    # An absolute path: the rank workers import brrr_trace as the tests do, from any folder.
    return str(write_run(tmp_path / "run"))


def test_rank_one_late_by_5ms_is_the_straggler(run: str) -> None:
    report = analyze(run, AnalysisOptions(jobs=2))
    cross = report.cross_rank
    assert cross is not None
    assert report.trace.ranks == (0, 1) and report.run == 0 and len(report.runs) == 1
    assert (cross.matched_calls, cross.unmatched_calls) == (2, 0)
    waits = [(r.rank, r.wait_ns, r.transfer_ns, r.late_calls) for r in cross.ranks]
    assert waits == [(0, 10 * MS, MS // 5, 0), (1, 0, MS // 5, 2)]
    assert [(s.step, s.compute_ns, s.wait_ns) for s in cross.ranks[0].steps] == [
        (0, 1_050_000, 5 * MS),
        (1, 1_050_000, 5 * MS),
    ]
    (late,) = cross.stragglers
    assert (late.rank, late.late_ns, late.per_call_late_ns, late.calls) == (1, 10 * MS, 5 * MS, 2)
    assert late.lines[0].file == "train.py" and late.lines[0].line == 20
    straggler = next(f for f in report.findings if f.rule == "straggler")
    assert (straggler.file, straggler.line, straggler.est_savings_ns) == ("train.py", 20, 10 * MS)
    assert straggler.severity == "warning"
    assert straggler.evidence["rank"] == 1 and straggler.evidence["per_call_late_us"] == 5000.0
    assert straggler.evidence["steady_late_us"] == 5000.0
    assert (late.per_step_late_ns, late.steady_late_ns) == (5 * MS, 5 * MS)
    # Rank 0's all-reduce is exposed for 10.2 ms, 10 ms of it waiting for rank 1: overlap can
    # hide only the 200 µs the all-reduces themselves take.
    (exposed,) = [f for f in report.findings if f.rule == "exposed-communication"]
    assert exposed.evidence["waiting_for_ranks_us"] == 10_000.0
    assert exposed.est_savings_ns <= 200_000
    assert "waiting for rank(s) 1" in exposed.message


def test_the_text_view_across_ranks(run: str) -> None:
    out = render_text.render(analyze(run, AnalysisOptions(jobs=1)), color=False, width=100)
    section = out[out.index("Across") : out.index("Top fixes")]
    assert "\n".join(line.rstrip() for line in section.splitlines()) == ACROSS


ACROSS = """\
Across 2 ranks (2 collectives matched)
rank  compute  waiting  moving data  came last  waiting by step
   0   2.1 ms  10.0 ms     200.0 µs          0  5.0 ms 5.0 ms
   1   2.1 ms     0 ns     200.0 µs          2  0 ns 0 ns
  Straggler: rank 1 came last to 2 collectives, late by 5.0 ms a step (median; at least 5.0 ms in
every step); the others waited 10.0 ms for it; its late lines: train.py:20 +10.0 ms
  Line spread across ranks (p50 / max, rank of the max):
    train.py:30  5.1 ms / 10.2 ms (rank 0)
    train.py:20  5.0 ms / 10.0 ms (rank 1)
    train.py:10  5.8 ms / 5.8 ms (rank 0)
    train.py:40  240.0 µs / 340.0 µs (rank 1)"""


def test_json_cross_rank_fields(run: str) -> None:
    doc = render_json.to_dict(analyze(run))
    assert doc["run"] == 0
    assert doc["runs"][0]["ranks"] == [0, 1] and doc["runs"][0]["backend"] == "gloo"
    ranks = doc["cross_rank"]["ranks"]
    assert [(r["rank"], r["wait_us"], r["transfer_us"]) for r in ranks] == [
        (0, 10_000.0, 200.0),
        (1, 0.0, 200.0),
    ]
    assert ranks[0]["steps"][0] == {
        "step": 0,
        "compute_us": 1050.0,
        "wait_us": 5000.0,
        "transfer_us": 100.0,
    }
    assert doc["cross_rank"]["stragglers"][0]["rank"] == 1


def test_balanced_ranks_name_no_straggler(tmp_path: Path) -> None:
    report = analyze(write_run(tmp_path / "run", late_us=0.0))
    assert report.cross_rank is not None and report.cross_rank.stragglers == ()
    assert not [f for f in report.findings if f.rule == "straggler"]


def test_any_rank_can_be_the_one_reported(run: str) -> None:
    report = analyze(run, AnalysisOptions(rank=1))
    assert report.trace.path.endswith("host_1.1700000000000.pt.trace.json")
    assert report.cross_rank is not None and len(report.cross_rank.ranks) == 2
    # The straggler's own report has its late line, and the finding on it.
    assert "straggler" in next(ln for ln in report.lines if ln.line == 20).findings


def two_separate_runs(folder: Path) -> Path:
    """A TensorBoard folder of two experiments: no distributedInfo, started an hour apart."""
    folder.mkdir()
    write(folder / "a.1700000000000.pt.trace.json", rank_events(0, 0.0, steps=1))
    events = [{**e, "ts": e["ts"] + 3.6e9} for e in rank_events(0, 0.0, steps=1)]
    write(folder / "b.1700003600000.pt.trace.json", events)
    return folder


def test_separate_runs_are_not_ranks(tmp_path: Path) -> None:
    folder = two_separate_runs(tmp_path / "tb")
    report = analyze(folder)
    assert report.trace.ranks == () and report.cross_rank is None
    assert [r.paths[0].rsplit("/", 1)[-1][0] for r in report.runs] == ["a", "b"]
    assert any("2 separate runs" in note and "--run" in note for note in report.notes)
    second = analyze(folder, AnalysisOptions(run=1))
    assert second.trace.path.endswith("b.1700003600000.pt.trace.json") and second.run == 1
    with pytest.raises(NotATraceError, match="no rank information"):
        analyze(folder, AnalysisOptions(rank=1))


def test_the_cli_reports_each_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = two_separate_runs(tmp_path / "tb")
    assert main(["analyze", str(folder), "--format", "json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert [d["run"] for d in doc["reports"]] == [0, 1]


def test_the_same_rank_twice_is_two_runs(tmp_path: Path) -> None:
    """Two jobs of the same world size in one folder, an hour apart."""
    write_run(tmp_path / "f")
    for rank in range(2):
        events = [{**e, "ts": e["ts"] + 3.6e9} for e in rank_events(rank)]
        write(
            tmp_path / "f" / f"later_{rank}.pt.trace.json",
            events,
            distributedInfo={"backend": "gloo", "rank": rank, "world_size": 2},
        )
    report = analyze(tmp_path / "f")
    assert [r.ranks for r in report.runs] == [(0, 1), (0, 1)]
    assert report.cross_rank is not None and report.cross_rank.matched_calls == 2


def test_on_a_local_ray_cluster(run: str) -> None:
    pytest.importorskip("ray")
    by_ray = analyze(run, AnalysisOptions(ray="local"))
    by_pool = analyze(run, AnalysisOptions(jobs=2))
    assert by_ray.cross_rank == by_pool.cross_rank
    assert by_ray.cross_rank is not None and by_ray.cross_rank.stragglers[0].rank == 1


def test_dlrm_8_ranks_rank_7_is_late_as_the_clock_says(public_traces: Path) -> None:
    """The 8 DLRM ranks ran on one host, so their clocks agree: the rank whose collective kernel
    starts last is the straggler, and how much later it starts than the first rank is the wait
    it caused. The merge never reads those start times for the wait; it must agree within 10%."""
    folder = public_traces / "facebookresearch-param" / "dlrm_kineto_8ranks"
    report = analyze(folder, AnalysisOptions(jobs=2))
    cross = report.cross_rank
    assert cross is not None and len(cross.ranks) == 8 and cross.matched_calls == 8
    top = cross.stragglers[0]
    assert top.rank == 7
    per_rank = [analyze(f).collectives for f in sorted(folder.iterdir())]
    by_clock = 0
    for calls in zip(*per_rank, strict=True):
        starts = [c.kernel_start_ns for c in calls]
        if starts.index(max(starts)) == 7:
            by_clock += max(starts) - min(starts)
    assert by_clock > 0
    assert abs(top.late_ns - by_clock) <= 0.1 * by_clock
    finding = next(f for f in report.findings if f.rule == "straggler")
    assert finding.evidence["rank"] == 7
    # Rank 1 waited longest: its time in the collectives is waiting, not work.
    waits = {r.rank: r.wait_ns for r in cross.ranks}
    assert max(waits, key=lambda r: waits[r]) == 1 and waits[7] < waits[1] / 5


def test_the_server_shows_the_spread_and_the_straggler_of_a_rank_file(run: str) -> None:
    """The editor opens one rank's trace; the other ranks beside it are analyzed with it."""
    from brrr_trace.server.analysis import default_analyze
    from brrr_trace.server.convert import hover_markdown

    report = default_analyze(f"{run}/host_1.1700000000000.pt.trace.json", AnalysisOptions(), print)
    assert report.trace.path.endswith("host_1.1700000000000.pt.trace.json")
    line = next(ln for ln in report.lines if ln.line == 20)
    findings = [f for f in report.findings if f.line == 20]
    assert [f.rule for f in findings] == ["straggler"]
    text = hover_markdown(line, report, report.trace.span_ns, findings, "t")
    assert "**Across 2 ranks:** p50 5.0 ms · max 10.0 ms (rank 1) · on 1 of 2 ranks" in text
    assert "`straggler` (saves ~10.0 ms)" in text


def test_a_rank_file_alone_is_analyzed_alone(tmp_path: Path) -> None:
    from brrr_trace.pipeline import analyze_with_its_ranks

    trace = write(
        tmp_path / "r0.pt.trace.json",
        rank_events(0),
        distributedInfo={"backend": "gloo", "rank": 0, "world_size": 2},
    )
    report = analyze_with_its_ranks(trace)
    assert report.cross_rank is None and report.trace.ranks == (0,)


def test_the_cli_on_a_run(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["analyze", run, "--jobs", "1", "--rank", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["ranks"] == [0, 1] and doc["run"] == 0
    assert doc["findings"][0]["rule"] == "straggler"
    assert main(["analyze", run, "--run", "3"]) == 2
    assert "has 1 run(s), numbered 0 to 0; there is no run 3" in capsys.readouterr().err


def test_a_broken_rank_is_one_line_and_exit_2(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    Path(run, "host_1.1700000000000.pt.trace.json").write_text(
        '{"distributedInfo": {"backend": "gloo", "rank": 1, "world_size": 2}, '
        '"traceEvents": [{"ph": "X", "name": oops}]}'
    )
    assert main(["analyze", run]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "none of its events could be read" in err


DDP = Path(__file__).parent / "data" / "ddp" / "h200-gloo"


def facts(run: str) -> dict:
    import json

    return {r: json.loads((DDP / run / f"facts.rank{r}.json").read_text()) for r in (0, 1)}


@pytest.mark.parametrize(("run", "late_rank"), [("rank1-late-15ms", 1), ("rank0-late-8ms", 0)])
def test_gloo_ddp_the_late_rank_is_named_with_its_late_time(run: str, late_rank: int) -> None:
    """Two DDP ranks on one H200 (gloo); one sleeps a known time before each forward
    (tests/data/ddp/README.md). It is the straggler, late in every step by that time (10%)."""
    slept = facts(run)[late_rank]["late_ms_per_step"] * 1e6
    report = analyze(DDP / run, AnalysisOptions(jobs=2))
    cross = report.cross_rank
    assert cross is not None and cross.matched_calls == 21 and cross.unmatched_calls == 0
    top = cross.stragglers[0]
    assert top.rank == late_rank
    assert abs(top.steady_late_ns - slept) <= 0.1 * slept
    assert top.agrees_with_clock == 1.0  # one host: the clock says it started last too
    # Its late line is the sleep in make_batch.
    assert top.lines[0].file.endswith("ddp_train.py")
    source = (DDP.parent / "ddp_train.py").read_text().splitlines()
    assert source[top.lines[0].line - 1].strip() == "time.sleep(late_s)"
    # The waiting rank's time in the collectives is waiting, and its lines are communication.
    waiting = next(r for r in cross.ranks if r.rank != late_rank)
    assert waiting.wait_ns >= 3 * 0.9 * slept
    assert report.summary.time_by_regime_ns[Regime.COMMUNICATION] > 0


def test_the_straggler_finding_has_its_repository_relative_path() -> None:
    # What SARIF locates a finding by: the straggler's line under the source root.
    options = AnalysisOptions(jobs=2, source_root=str(DDP.parent))
    report = analyze(DDP / "rank1-late-15ms", options)
    found = next(f for f in report.findings if f.rule == "straggler")
    assert (found.relative_path, found.line) == ("ddp_train.py", 69)


def test_gloo_ddp_balanced_names_no_straggler() -> None:
    report = analyze(DDP / "balanced", AnalysisOptions(jobs=2))
    assert report.cross_rank is not None and report.cross_rank.matched_calls == 21
    assert report.cross_rank.stragglers == ()
    assert not [f for f in report.findings if f.rule == "straggler"]


def test_the_ddp_folder_is_three_runs_not_six_ranks() -> None:
    report = analyze(DDP, AnalysisOptions(jobs=2))
    assert [r.ranks for r in report.runs] == [(0, 1)] * 3
    assert report.cross_rank is not None and len(report.cross_rank.ranks) == 2
