"""The collective calls of one rank's trace (analyzers/collectives.py) on tiny synthetic traces,
and on the public traces with collectives when they are at hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from brrr_trace.analyzers.collectives import CollectiveCall, collectives_of, normalized_name
from brrr_trace.pipeline import analyze
from brrr_trace.traces import load
from brrr_trace.vocabulary import IdleCause, Regime
from tests.conftest import PUBLIC
from tests.tracebuilder import (
    AUTOGRAD,
    MAIN,
    annotation,
    frame,
    kernel,
    launch,
    memcpy,
    op,
    runtime,
    write,
)

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def comms(name: str, nelems: int, group: str = "0", dtype: str = "Float") -> dict:
    return {
        "Collective name": name,
        "In msg nelems": nelems,
        "Out msg nelems": nelems,
        "dtype": dtype,
        "Process Group Name": group,
        "Group size": 2,
    }


def test_a_c10d_call_with_its_metadata_and_kernel(tmp_path: Path) -> None:
    events = [
        annotation("ProfilerStep#7", 0.0, 1000.0),
        op("c10d::allreduce_", 100.0, 50.0, tid=AUTOGRAD),
        op("record_param_comms", 105.0, 40.0, tid=AUTOGRAD, **comms("allreduce", 1000)),
        annotation("nccl:all_reduce", 110.0, 30.0, tid=AUTOGRAD),
        launch(115.0, 1, tid=AUTOGRAD),
        kernel(NCCL, 200.0, 80.0, 1, stream=22),
        # A wait is not a collective of its own.
        op("record_param_comms", 300.0, 5.0, tid=AUTOGRAD, **comms("wait", 0)),
        op("c10d::broadcast_", 400.0, 20.0),
        op("record_param_comms", 401.0, 10.0, **comms("broadcast", 10, group="3", dtype="Long")),
    ]
    trace = write(tmp_path / "t.json", events)
    assert collectives_of(load(trace).trace) == (
        CollectiveCall("0", 0, "allreduce", 4000, 7, 100_000, 150_000, 200_000, 280_000, None),
        CollectiveCall("3", 0, "broadcast", 80, 7, 400_000, 420_000, None, None, None),
    )


def test_names_are_normalized() -> None:
    spelled = {
        "c10d::_allgather_base_": "allgather",
        "nccl:all_gather": "allgather",
        "_reduce_scatter_base": "reduce_scatter",
        "c10d::alltoall_base_": "alltoall",
        "nccl:all_to_all": "alltoall",
        "gloo:all_reduce": "allreduce",
        "c10d::send": "send",
        "c10d::recv_": "recv",
        "c10d::barrier": "barrier",
        "_c10d_functional::all_gather_into_tensor": "allgather",
    }
    assert {k: normalized_name(k) for k in spelled} == spelled


EVALUATE = "autograd::engine::evaluate_function: "
MM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"


def ddp_step() -> list[dict]:
    """layer1 (train.py:20) and layer2 (train.py:30) run a matmul each in forward; step
    (train.py:40) calls backward(). The engine runs layer2's backward (0.3 ms), DDP's hook
    all-reduces bucket 0 on stream 22 (0.2 ms, beside layer1's 0.3 ms backward), then
    bucket 1 (0.4 ms, nothing beside it)."""
    seq = {"Fwd thread id": MAIN}
    return [
        frame("train.py(40): step", 0.0, 2000.0),
        frame("train.py(20): layer1", 10.0, 30.0),
        op("aten::mm", 12.0, 20.0, **{"Sequence number": 1}),
        launch(15.0, 1),
        kernel(MM, 20.0, 100.0, 1),
        frame("train.py(30): layer2", 50.0, 30.0),
        op("aten::mm", 52.0, 20.0, **{"Sequence number": 2}),
        launch(55.0, 2),
        kernel(MM, 125.0, 100.0, 2),
        frame("torch/_tensor.py(570): backward", 100.0, 1800.0),
        op(EVALUATE + "MmBackward0", 110.0, 30.0, tid=AUTOGRAD, **{"Sequence number": 2}, **seq),
        launch(115.0, 3, tid=AUTOGRAD),
        kernel(MM, 230.0, 300.0, 3),
        op("c10d::allreduce_", 150.0, 40.0, tid=AUTOGRAD),
        op("record_param_comms", 152.0, 30.0, tid=AUTOGRAD, **comms("allreduce", 1 << 20)),
        launch(160.0, 4, tid=AUTOGRAD),
        kernel(NCCL, 300.0, 200.0, 4, stream=22),
        op(EVALUATE + "MmBackward0", 200.0, 30.0, tid=AUTOGRAD, **{"Sequence number": 1}, **seq),
        launch(205.0, 5, tid=AUTOGRAD),
        kernel(MM, 530.0, 300.0, 5),
        op("c10d::allreduce_", 250.0, 40.0, tid=AUTOGRAD),
        op("record_param_comms", 252.0, 30.0, tid=AUTOGRAD, **comms("allreduce", 1 << 21)),
        launch(260.0, 6, tid=AUTOGRAD),
        kernel(NCCL, 830.0, 400.0, 6, stream=22),
    ]


def test_ddp_buckets_are_charged_to_the_forward_lines_that_filled_them(tmp_path: Path) -> None:
    report = analyze(write(tmp_path / "t.json", ddp_step()))
    assert [(c.index, c.line, c.kernel_start_ns, c.kernel_end_ns) for c in report.collectives] == [
        (0, "train.py:30", 300_000, 500_000),
        (1, "train.py:20", 830_000, 1_230_000),
    ]
    lines = {(line.file, line.line): line for line in report.lines}
    # layer1: its 0.1 ms forward and 0.3 ms backward matmuls are compute (the GEMMs have no
    # shapes: compute by kind), the 0.4 ms all-reduce of its bucket communication.
    assert lines[("train.py", 20)].time_by_regime_ns == {
        Regime.COMPUTE: 400_000,
        Regime.MEMORY: 0,
        Regime.OVERHEAD: 0,
        Regime.COMMUNICATION: 400_000,
    }
    # layer2's all-reduce runs beside layer1's backward: only what the GEMMs leave (0 ns of it
    # is exclusive time: 300-500 lies inside 230-530).
    assert lines[("train.py", 30)].time_by_regime_ns[Regime.COMMUNICATION] == 0
    assert report.summary.time_by_regime_ns[Regime.COMMUNICATION] == 400_000


def test_exposed_communication_is_on_the_bucket_lines_with_a_replayed_saving(
    tmp_path: Path,
) -> None:
    (finding,) = [
        f
        for f in analyze(write(tmp_path / "t.json", ddp_step())).findings
        if f.rule == "exposed-communication"
    ]
    # Bucket 1's 0.4 ms all-reduce ends the step with nothing beside it; bucket 0's runs
    # beside layer1's backward and exposes nothing, so layer2 (train.py:30) has no finding.
    assert (finding.line, finding.lines, finding.est_savings_ns) == (20, (20,), 400_000)
    assert finding.message == (
        "1 collective call(s) (allreduce ×1) run 0.40 ms with no computation beside them"
    )
    assert finding.evidence["kernel_exposed_us"] == 400.0


def gloo_step() -> list[dict]:
    """forward (train.py:10) runs a 90 µs kernel; sync_grads (train.py:20) all-reduces on the
    host with gloo for 330 µs (no kernel) while the GPU idles; update (train.py:30) launches
    the next kernel as soon as it returns."""
    return [
        frame("train.py(10): forward", 0.0, 100.0),
        launch(5.0, 1),
        kernel(MM, 10.0, 90.0, 1),
        frame("train.py(20): sync_grads", 100.0, 350.0),
        op("c10d::allreduce_", 110.0, 330.0),
        op("record_param_comms", 112.0, 326.0, **comms("allreduce", 1 << 20)),
        annotation("gloo:all_reduce", 115.0, 320.0),
        frame("train.py(30): update", 450.0, 50.0),
        launch(455.0, 2),
        kernel(MM, 460.0, 40.0, 2),
    ]


def test_a_gloo_collective_blocking_the_host_is_waiting_on_its_line(tmp_path: Path) -> None:
    report = analyze(write(tmp_path / "t.json", gloo_step()))
    (call,) = report.collectives
    assert (call.name, call.bytes, call.line, call.kernel_start_ns) == (
        "allreduce",
        4 << 20,
        "train.py:20",
        None,
    )
    # The GPU idles 100-460 µs: the host sat in the all-reduce 110-440 (330 µs, on its line);
    # the other 30 µs go to the line whose launch ended the gap.
    assert report.summary.idle_by_cause_ns[IdleCause.COLLECTIVE] == 360_000
    lines = {(line.file, line.line): line for line in report.lines}
    assert lines[("train.py", 20)].idle_by_cause_ns[IdleCause.COLLECTIVE] == 330_000
    assert lines[("train.py", 30)].idle_by_cause_ns[IdleCause.COLLECTIVE] == 30_000
    assert lines[("train.py", 20)].regime is Regime.COMMUNICATION
    assert report.summary.time_by_regime_ns[Regime.COMMUNICATION] == 360_000
    (finding,) = [f for f in report.findings if f.rule == "exposed-communication"]
    assert finding.line == 20
    assert finding.message == (
        "1 collective call(s) (allreduce ×1) run 0.33 ms with no computation beside them, "
        "0.33 ms of it the GPU idle, waiting for a collective the host carries out (gloo)"
    )
    # The replay takes the host's work inside the call away: the 448 µs between the two
    # launches less the profiler's estimated 5 µs there (2 frames, 2 ops) is 443 µs of work,
    # 330/448 of it inside the call.
    assert finding.est_savings_ns == 330 * 443_000 // 448


def public(name: str) -> Path:
    path = PUBLIC / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


def test_the_eight_dlrm_ranks_issue_the_same_collectives_in_the_same_order() -> None:
    # 2023 traces: no collective metadata, External ids equal to correlations; the calls come
    # from the c10d ops and the nccl: regions, their sizes from the regions' Input Dims.
    folder = public("facebookresearch-param/dlrm_kineto_8ranks")
    by_rank = {}
    for path in sorted(folder.glob("*.json.gz")):
        trace = load(path).trace
        by_rank[trace.rank] = collectives_of(trace)
    assert sorted(by_rank) == list(range(8))
    names = ["alltoall"] * 4 + ["allreduce", "alltoall", "allreduce", "allreduce"]
    for calls in by_rank.values():
        assert [(c.group, c.index, c.name) for c in calls] == [
            ("default", k, name) for k, name in enumerate(names)
        ]
        assert all(c.kernel_start_ns is not None for c in calls)
        # All-reduces move the same buffer on every rank: 394,241 floats, then 112, 226,960.
        assert [c.bytes for c in calls if c.name == "allreduce"] == [1_576_964, 448, 907_840]


def test_ddp_rank_0_of_the_mi300_trace() -> None:
    trace = load(public("AMD-AGI-TraceLens/mi300__resnet_act_checkpoint.json.gz")).trace
    calls = collectives_of(trace)
    # Per step: DDP's two broadcasts of buffers (forward), two bucket all-reduces (backward,
    # on the autograd thread); record_param_comms "wait" ops are not calls.
    assert [c.name for c in calls] == ["broadcast", "broadcast", "allreduce", "allreduce"] * 3
    assert [c.index for c in calls] == list(range(12))
    assert {c.group for c in calls} == {"0"}
    assert [c.bytes for c in calls[:4]] == [9600 * 2, 20 * 8, 2_873_320 * 2, 8_816_192 * 2]
    assert [c.step for c in calls] == [15] * 4 + [16] * 4 + [17] * 4
    assert all(c.kernel_end_ns is not None for c in calls)


def test_the_b200_all_gather_with_metadata_on_its_kernel() -> None:
    trace = load(public("AMD-AGI-TraceLens/b200__eager_trace.json.gz")).trace
    calls = collectives_of(trace)
    (gather,) = [c for c in calls if c.name == "allgather"]
    # Process group "3"; 25,136 bf16 in, 201,088 out (8 ranks): the larger buffer.
    assert (gather.group, gather.index, gather.bytes) == ("3", 0, 201_088 * 2)
    assert (gather.kernel_start_ns, gather.kernel_end_ns) == (
        1_365_627_949_863_953,
        1_365_627_949_885_906,
    )
    # vLLM's symmetric-memory all-reduces (symm_mem::multimem_all_reduce_) have no group name.
    assert sum(c.name == "allreduce" and c.group == "default" for c in calls) == 73


def test_a_collective_issued_by_user_code_after_backward_is_on_its_own_line(
    tmp_path: Path,
) -> None:
    # CPU backward runs on the calling thread: the main thread runs engine nodes too, but the
    # all-reduce at train.py:50 comes after backward() returned.
    events = [
        frame("train.py(40): step", 0.0, 300.0),
        frame("torch/_tensor.py(570): backward", 10.0, 100.0),
        op(EVALUATE + "MmBackward0", 20.0, 50.0, **{"Sequence number": 1}),
        launch(25.0, 1),
        kernel(MM, 30.0, 60.0, 1),
        frame("train.py(50): log_loss", 150.0, 100.0),
        op("c10d::allreduce_", 160.0, 50.0),
        op("record_param_comms", 162.0, 40.0, **comms("allreduce", 1)),
        launch(170.0, 2),
        kernel(NCCL, 175.0, 20.0, 2, stream=22),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert [c.line for c in report.collectives] == ["train.py:50"]
    lines = {(line.file, line.line): line for line in report.lines}
    assert lines[("train.py", 50)].time_by_regime_ns[Regime.COMMUNICATION] == 20_000


def test_an_all_gather_from_a_pre_forward_hook_is_on_the_module_call_line(tmp_path: Path) -> None:
    # FSDP's hook runs in library frames inside the call of the module at train.py:60.
    events = [
        frame("train.py(60): forward_layer", 0.0, 200.0),
        frame("torch/nn/modules/module.py(1750): _call_impl", 5.0, 190.0),
        frame("torch/distributed/fsdp/_runtime_utils.py(400): _pre_forward", 10.0, 60.0),
        op("c10d::_allgather_base_", 20.0, 40.0),
        op("record_param_comms", 22.0, 30.0, **comms("_allgather_base", 1 << 10)),
        launch(30.0, 1),
        kernel(NCCL.replace("AllReduce", "AllGather"), 35.0, 50.0, 1, stream=22),
        launch(100.0, 2),
        kernel(MM, 105.0, 50.0, 2),
    ]
    report = analyze(write(tmp_path / "t.json", events))
    assert [(c.name, c.line) for c in report.collectives] == [("allgather", "train.py:60")]


def test_an_asynchronous_gloo_call_runs_on_a_worker_thread(tmp_path: Path) -> None:
    # Issued from the autograd thread (DDP's hook returns at once); gloo runs it on its own
    # thread from 130 to 400 µs. One call, from the issue to the end of its run; an NCCL call
    # with its own region (at 500) is not a run waiting for a match.
    worker = 300
    events = [
        op("c10d::allreduce_", 100.0, 20.0, tid=AUTOGRAD),
        op("record_param_comms", 102.0, 16.0, tid=AUTOGRAD, **comms("allreduce", 256)),
        annotation("gloo:all_reduce", 130.0, 270.0, tid=worker),
        op("c10d::allreduce_", 500.0, 20.0, tid=AUTOGRAD),
        annotation("nccl:all_reduce", 505.0, 10.0, tid=AUTOGRAD),
        annotation("gloo:all_reduce", 600.0, 50.0, tid=worker),
    ]
    calls = collectives_of(load(write(tmp_path / "t.json", events)).trace)
    assert [(c.group, c.index, c.host_start_ns, c.host_end_ns, c.bytes) for c in calls] == [
        ("0", 0, 100_000, 400_000, 1024),
        ("default", 0, 500_000, 520_000, None),
        # A run with no call issued before it: a call of its own.
        ("default", 1, 600_000, 650_000, None),
    ]


def test_the_gloo_runs_of_a_cpu_only_trace_are_its_calls() -> None:
    path = "hta/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    calls = collectives_of(load(public(path)).trace)
    # Five steps of two buckets (321,271 and 2,082,411 floats), each run on a gloo thread.
    assert [c.bytes for c in calls] == [321_271 * 4, 2_082_411 * 4] * 5
    assert [c.index for c in calls] == list(range(10))
    assert all(c.kernel_start_ns is None for c in calls)


def test_gloo_staging_copies_and_the_wait_are_the_buckets_communication(tmp_path: Path) -> None:
    """DDP with gloo on CUDA tensors: the hook issues the all-reduce of layer1's bucket
    (train.py:20) at 100 µs; gloo's thread copies the gradients to the host (140-150), waits
    for the other rank, and copies the sum back (395-420). The GPU idles 200-395 meanwhile."""
    worker = 300
    events = [
        frame("train.py(40): step", 0.0, 1000.0),
        frame("train.py(20): layer1", 1.0, 8.0),
        op("aten::mm", 2.0, 5.0, **{"Sequence number": 1}),
        frame("torch/_tensor.py(570): backward", 10.0, 500.0),
        op(EVALUATE + "MmBackward0", 20.0, 40.0, tid=AUTOGRAD, **{"Sequence number": 1}),
        launch(30.0, 1, tid=AUTOGRAD),
        kernel(MM, 40.0, 160.0, 1),
        op("c10d::allreduce_", 100.0, 20.0, tid=AUTOGRAD),
        op("record_param_comms", 102.0, 16.0, tid=AUTOGRAD, **comms("allreduce", 256)),
        annotation("gloo:all_reduce", 130.0, 270.0, tid=worker),
        runtime("cudaMemcpyAsync", 135.0, 2.0, 2, tid=worker),
        memcpy("Memcpy DtoH (Device -> Pinned)", 140.0, 10.0, 2),
        runtime("cudaMemcpyAsync", 390.0, 2.0, 3, tid=worker),
        memcpy("Memcpy HtoD (Pinned -> Device)", 395.0, 25.0, 3),
    ]
    events[4]["args"]["Fwd thread id"] = MAIN
    report = analyze(write(tmp_path / "t.json", events))
    assert [(c.line, c.kernel_start_ns, c.host_end_ns) for c in report.collectives] == [
        ("train.py:20", None, 400_000)
    ]
    lines = {(line.file, line.line): line for line in report.lines}
    # The copies' 25 µs of exclusive time (the first lies under the GEMM) and the 195 µs gap.
    assert lines[("train.py", 20)].time_by_regime_ns == {
        Regime.COMPUTE: 160_000,
        Regime.MEMORY: 0,
        Regime.OVERHEAD: 0,
        Regime.COMMUNICATION: 25_000 + 195_000,
    }
    assert report.summary.unattributed_gpu_ns == 0
