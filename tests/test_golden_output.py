"""The whole text and the whole JSON output of `analyze` and `diff`, on one tiny synthetic step:
a matmul, an add whose line then waits for the GPU (cudaStreamSynchronize), and a logging
function that launches one more add after 125 µs of Python. The GPU idles from 260 to 395 µs:
the 5 µs until the sync returned are the waiting line's, the 130 µs after are the logging
line's (the host ran it). The after trace drops the wait, so host-sync is resolved and the lines
keep their time. Its saving, 128.5 µs, has the log frame's 1.5 µs of estimated profiler cost
taken out; with that cost scaled 0.75x and 3x it is 128.875 and 125.5 µs (the JSON's range; the
text leaves out a range within 10% of the saving).

Expected outputs are verbatim (rich's padding at the ends of lines stripped): a change to any
number, word or field shows here first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brrr_trace.diff import compare
from brrr_trace.pipeline import analyze
from brrr_trace.render import json as render_json
from brrr_trace.render import text as render_text
from tests.tracebuilder import frame, kernel, launch, runtime, write

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def step(waits: bool) -> list[dict]:
    """forward: a 200 µs GEMM; update: a 50 µs add, then (waits) a sync until it is done;
    log: 125 µs of Python, then a 20 µs add."""
    events = [
        frame("train.py(10): forward", 0.0, 20.0),
        launch(5.0, 1),
        kernel(GEMM, 10.0, 200.0, 1),
        frame("train.py(20): update", 30.0, 235.0),
        launch(35.0, 2),
        kernel(ADD, 210.0, 50.0, 2),
        frame("train.py(30): log", 265.0, 140.0),
        launch(390.0, 3),
        kernel(ADD, 395.0, 20.0, 3),
    ]
    if waits:
        events.append(runtime("cudaStreamSynchronize", 40.0, 225.0))
    return events


@pytest.fixture
def traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.chdir(tmp_path)  # the reports name the traces as given; train.py is not here
    write(tmp_path / "t.json", step(waits=True))
    write(tmp_path / "u.json", step(waits=False))
    return "t.json", "u.json"


def plain(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines())


def test_the_whole_text_report(traces: tuple[str, str]) -> None:
    out = render_text.render(analyze(traces[0]), color=False, width=100)
    assert plain(out) == TEXT


def test_the_whole_json_report(traces: tuple[str, str]) -> None:
    assert render_json.render(analyze(traces[0])) == JSON


def test_the_whole_diff_as_text_and_as_json(traces: tuple[str, str]) -> None:
    diff = compare(analyze(traces[0]), analyze(traces[1]))
    assert plain(render_text.render_diff(diff, color=False, width=100)) == DIFF_TEXT
    assert render_json.render_diff(diff) == DIFF_JSON


TEXT = r"""brrr-trace 0.1.0 · t.json
GPU 0: NVIDIA H200
Span 405.0 µs · busy 270.0 µs · idle 135.0 µs · utilization 66.7% · 3 GPU ops
Idle by cause: sync 135.0 µs
  of which ~2.5 µs is the profiler's own cost (estimated; left out of savings)
Time by regime: compute 200.0 µs (49.4%) · memory 70.0 µs (17.3%) · overhead 135.0 µs (33.3%)
Lines by time (3 of 3)
#  line                       regime       total  share       GPU      idle  kernels  evidence
1  train.py:10 forward (def)  compute   200.0 µs  49.4%  200.0 µs      0 ns        1
2  train.py:30 log (def)      overhead  150.0 µs  37.0%   20.0 µs  130.0 µs        1  idle sync
                                                                                      130.0 µs
3  train.py:20 update (def)   memory     55.0 µs  13.6%   50.0 µs    5.0 µs        1
(def): only the function is known, shown on its def line; pass --source-root to place time on
statements
Top fixes
  train.py:20 host-sync saves ~128.5 µs: the host waits for the GPU on this line (.item(), .cpu(),
print, synchronize) 1 time, 0.23 ms in all; the queue drains, and the GPU then idles 0.14 ms until
the host's next launch. Fix: Keep the value on the GPU (accumulate a tensor) and read it once per
step or every N steps; torch.cuda.set_sync_debug_mode("warn") finds hidden syncs.
Note: Host times come from a profiled run, and recording stacks slows the Python side (a 500-op loop
on an H200: 9.6 ms unprofiled, 14.1 ms profiled). The profiler's own cost inside the idle gaps is
estimated from the events it recorded there (summary.profiler_overhead) and left out of savings
estimates. Overhead time is an upper bound: a batch-size or before/after run (brrr-trace diff)
confirms it.
Note: 1 source file(s) of the trace were not found under the source root (train.py); their lines
stay at the precision the trace alone gives. Pass --source-root (or path mappings in the editor)."""

DIFF_TEXT = r"""brrr-trace diff · t.json → u.json
Span 405.0 µs → 405.0 µs (+0.0%)
Lines by change (3 of 3)
line                   before     after  change  regime               work ×  batch-size test
train.py:10 forward  200.0 µs  200.0 µs    0 ns  compute → compute
train.py:20 update    55.0 µs   55.0 µs    0 ns  memory → memory
train.py:30 log      150.0 µs  150.0 µs    0 ns  overhead → overhead
Resolved host-sync at train.py:20 (estimated 128.5 µs)"""

JSON = r"""{
  "schema_version": 1,
  "tool": {
    "name": "brrr-trace",
    "version": "0.1.0"
  },
  "trace": {
    "path": "t.json",
    "torch_version": null,
    "devices": [
      {
        "id": 0,
        "name": "NVIDIA H200",
        "peak": {
          "name": "H200 SXM",
          "vendor": "nvidia",
          "compute_capability": [
            9,
            0
          ],
          "sms": 132,
          "memory_gib": [
            139.8
          ],
          "tensor_tflops": {
            "fp64": 67.0,
            "fp32": null,
            "tf32": 494.7,
            "fp16": 989.4,
            "bf16": 989.4,
            "fp8": 1978.9,
            "int8": 1978.9,
            "fp4": null
          },
          "simt_tflops": {
            "fp64": 34.0,
            "fp32": 67.0,
            "tf32": null,
            "fp16": 133.8,
            "bf16": 133.8,
            "fp8": null,
            "int8": null,
            "fp4": null
          },
          "hbm_gbps": 4800.0,
          "link_gbps": 64.0,
          "link": "PCIe Gen5 x16",
          "source": "NVIDIA H200 datasheet, SXM column: H100 SXM compute, 141 GB HBM3e, 4.8 TB/s (S8); measured on an H200 SXM: bf16 GEMM ~788 TFLOP/s, D2D copy ~4.3 TB/s"
        }
      }
    ],
    "span_us": 405.0,
    "ranks": [],
    "has_python_stacks": true,
    "has_shapes": false
  },
  "summary": {
    "gpu_busy_us": 270.0,
    "gpu_idle_us": 135.0,
    "gpu_utilization": 0.666667,
    "idle_by_cause_us": {
      "sync": 135.0,
      "dataloader": 0.0,
      "host": 0.0,
      "launch": 0.0,
      "other": 0.0,
      "collective": 0.0
    },
    "time_by_regime_us": {
      "compute": 200.0,
      "memory": 70.0,
      "overhead": 135.0,
      "communication": 0.0
    },
    "kernels": 3,
    "unattributed_gpu_us": 0.0,
    "unattributed_idle_us": 0.0,
    "profiler_overhead_us": 2.5
  },
  "lines": [
    {
      "file": "train.py",
      "path": null,
      "line": 10,
      "function": "forward",
      "precision": "function",
      "regime": "compute",
      "gpu_us": 200.0,
      "idle_us": 0.0,
      "cpu_us": 0.0,
      "kernels": 1,
      "backward_gpu_us": 0.0,
      "inclusive_gpu_us": 200.0,
      "inclusive_us": 200.0,
      "inclusive_by_regime_us": {
        "compute": 200.0,
        "memory": 0.0,
        "overhead": 0.0,
        "communication": 0.0
      },
      "flops": null,
      "bytes": null,
      "achieved_tflops": null,
      "achieved_gbps": null,
      "peak_fraction": null,
      "intensity": null,
      "ridge": 206.125,
      "findings": [],
      "time_by_regime_us": {
        "compute": 200.0,
        "memory": 0.0,
        "overhead": 0.0,
        "communication": 0.0
      },
      "idle_by_cause_us": {
        "sync": 0.0,
        "dataloader": 0.0,
        "host": 0.0,
        "launch": 0.0,
        "other": 0.0,
        "collective": 0.0
      },
      "profiler_overhead_us": 0.0,
      "relative_path": null,
      "top_kernels": [
        {
          "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1",
          "kind": "gemm",
          "count": 1,
          "total_us": 200.0
        }
      ]
    },
    {
      "file": "train.py",
      "path": null,
      "line": 30,
      "function": "log",
      "precision": "function",
      "regime": "overhead",
      "gpu_us": 20.0,
      "idle_us": 130.0,
      "cpu_us": 0.0,
      "kernels": 1,
      "backward_gpu_us": 0.0,
      "inclusive_gpu_us": 20.0,
      "inclusive_us": 150.0,
      "inclusive_by_regime_us": {
        "compute": 0.0,
        "memory": 20.0,
        "overhead": 130.0,
        "communication": 0.0
      },
      "flops": null,
      "bytes": null,
      "achieved_tflops": null,
      "achieved_gbps": null,
      "peak_fraction": null,
      "intensity": null,
      "ridge": 13.958333333333334,
      "findings": [],
      "time_by_regime_us": {
        "compute": 0.0,
        "memory": 20.0,
        "overhead": 130.0,
        "communication": 0.0
      },
      "idle_by_cause_us": {
        "sync": 130.0,
        "dataloader": 0.0,
        "host": 0.0,
        "launch": 0.0,
        "other": 0.0,
        "collective": 0.0
      },
      "profiler_overhead_us": 2.5,
      "relative_path": null,
      "top_kernels": [
        {
          "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
          "kind": "elementwise",
          "count": 1,
          "total_us": 20.0
        }
      ]
    },
    {
      "file": "train.py",
      "path": null,
      "line": 20,
      "function": "update",
      "precision": "function",
      "regime": "memory",
      "gpu_us": 50.0,
      "idle_us": 5.0,
      "cpu_us": 0.0,
      "kernels": 1,
      "backward_gpu_us": 0.0,
      "inclusive_gpu_us": 70.0,
      "inclusive_us": 205.0,
      "inclusive_by_regime_us": {
        "compute": 0.0,
        "memory": 70.0,
        "overhead": 135.0,
        "communication": 0.0
      },
      "flops": null,
      "bytes": null,
      "achieved_tflops": null,
      "achieved_gbps": null,
      "peak_fraction": null,
      "intensity": null,
      "ridge": 13.958333333333334,
      "findings": [
        "host-sync"
      ],
      "time_by_regime_us": {
        "compute": 0.0,
        "memory": 50.0,
        "overhead": 5.0,
        "communication": 0.0
      },
      "idle_by_cause_us": {
        "sync": 5.0,
        "dataloader": 0.0,
        "host": 0.0,
        "launch": 0.0,
        "other": 0.0,
        "collective": 0.0
      },
      "profiler_overhead_us": 0.0,
      "relative_path": null,
      "top_kernels": [
        {
          "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
          "kind": "elementwise",
          "count": 1,
          "total_us": 50.0
        }
      ]
    }
  ],
  "findings": [
    {
      "rule": "host-sync",
      "severity": "warning",
      "file": "train.py",
      "path": null,
      "line": 20,
      "message": "the host waits for the GPU on this line (.item(), .cpu(), print, synchronize) 1 time, 0.23 ms in all; the queue drains, and the GPU then idles 0.14 ms until the host's next launch",
      "fix": "Keep the value on the GPU (accumulate a tensor) and read it once per step or every N steps; torch.cuda.set_sync_debug_mode(\"warn\") finds hidden syncs.",
      "est_savings_us": 128.5,
      "function": "update",
      "evidence": {
        "sync_idle_us": 135.0,
        "blocked_us": 225.0,
        "replayed_wait_us": 222.5,
        "replayed": "the line's waits removed"
      },
      "doc": "docs/rules/host-sync.md",
      "lines": [
        20
      ],
      "est_savings_per_step_us": null,
      "relative_path": null,
      "est_savings_range_us": [
        125.5,
        128.875
      ]
    }
  ],
  "problems": [],
  "notes": [
    "Host times come from a profiled run, and recording stacks slows the Python side (a 500-op loop on an H200: 9.6 ms unprofiled, 14.1 ms profiled). The profiler's own cost inside the idle gaps is estimated from the events it recorded there (summary.profiler_overhead) and left out of savings estimates. Overhead time is an upper bound: a batch-size or before/after run (brrr-trace diff) confirms it.",
    "1 source file(s) of the trace were not found under the source root (train.py); their lines stay at the precision the trace alone gives. Pass --source-root (or path mappings in the editor)."
  ],
  "unmapped_files": [
    "train.py"
  ],
  "steps": null,
  "collectives": [],
  "rule_savings": [],
  "runs": [],
  "run": null,
  "cross_rank": null
}
"""

DIFF_JSON = r"""{
  "schema_version": 1,
  "kind": "diff",
  "before": {
    "path": "t.json",
    "span_us": 405.0
  },
  "after": {
    "path": "u.json",
    "span_us": 405.0
  },
  "lines": [
    {
      "file": "train.py",
      "line": 10,
      "function": "forward",
      "before": {
        "total_us": 200.0,
        "gpu_us": 200.0,
        "idle_us": 0.0,
        "regime": "compute"
      },
      "after": {
        "total_us": 200.0,
        "gpu_us": 200.0,
        "idle_us": 0.0,
        "regime": "compute"
      },
      "delta_us": 0.0,
      "work_ratio": null,
      "scaling_exponent": null,
      "verdict": null,
      "why_no_verdict": null
    },
    {
      "file": "train.py",
      "line": 20,
      "function": "update",
      "before": {
        "total_us": 55.0,
        "gpu_us": 50.0,
        "idle_us": 5.0,
        "regime": "memory"
      },
      "after": {
        "total_us": 55.0,
        "gpu_us": 50.0,
        "idle_us": 5.0,
        "regime": "memory"
      },
      "delta_us": 0.0,
      "work_ratio": null,
      "scaling_exponent": null,
      "verdict": null,
      "why_no_verdict": null
    },
    {
      "file": "train.py",
      "line": 30,
      "function": "log",
      "before": {
        "total_us": 150.0,
        "gpu_us": 20.0,
        "idle_us": 130.0,
        "regime": "overhead"
      },
      "after": {
        "total_us": 150.0,
        "gpu_us": 20.0,
        "idle_us": 130.0,
        "regime": "overhead"
      },
      "delta_us": 0.0,
      "work_ratio": null,
      "scaling_exponent": null,
      "verdict": null,
      "why_no_verdict": null
    }
  ],
  "resolved": [
    {
      "rule": "host-sync",
      "file": "train.py",
      "line": 20,
      "function": "update",
      "est_savings_us": 128.5
    }
  ],
  "new": []
}
"""
