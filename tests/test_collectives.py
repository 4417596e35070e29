"""The collective calls of one rank's trace (analyzers/collectives.py) on tiny synthetic traces,
and on the public traces with collectives when they are at hand."""

from __future__ import annotations

from pathlib import Path

from brrr_trace.analyzers.collectives import CollectiveCall, collectives_of, normalized_name
from brrr_trace.traces import load
from tests.tracebuilder import AUTOGRAD, annotation, kernel, launch, op, write

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
