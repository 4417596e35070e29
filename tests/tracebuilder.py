"""Tiny synthetic Kineto traces for golden tests: a few events, written like the real thing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAIN = 100  # host thread id of the training loop
AUTOGRAD = 200  # host thread id of the autograd engine
PID = 1


def kernel(
    name: str, ts: float, dur: float, corr: int, stream: int = 7, device: int = 0, **args: Any
) -> dict:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": device, "stream": stream, "correlation": corr, **args},
    }


def memcpy(name: str, ts: float, dur: float, corr: int, nbytes: int = 1 << 20) -> dict:
    event = kernel(name, ts, dur, corr, bytes=nbytes)
    event["cat"] = "gpu_memcpy"
    return event


def runtime(name: str, ts: float, dur: float, corr: int = -1, tid: int = MAIN) -> dict:
    args = {"correlation": corr} if corr >= 0 else {}
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def launch(ts: float, corr: int, dur: float = 2.0, tid: int = MAIN) -> dict:
    return runtime("cudaLaunchKernel", ts, dur, corr, tid)


def op(name: str, ts: float, dur: float, tid: int = MAIN, **args: Any) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def annotation(name: str, ts: float, dur: float, tid: int = MAIN) -> dict:
    """A ``record_function`` region (ProfilerStep#N, nccl:all_reduce, ...)."""
    return {**op(name, ts, dur, tid), "cat": "user_annotation"}


def frame(name: str, ts: float, dur: float, tid: int = MAIN) -> dict:
    return {
        "ph": "X",
        "cat": "python_function",
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {},
    }


def write(path: Path, events: list[dict], **header: Any) -> Path:
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H200",
                "computeMajor": 9,
                "computeMinor": 0,
                "numSms": 132,
                "totalGlobalMem": 150754820096,
            }
        ],
    }
    doc.update(header)
    doc["traceEvents"] = events
    path.write_text(json.dumps(doc, indent=1))
    return path
