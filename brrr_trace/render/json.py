"""The report as JSON: the contract of docs/architecture.md §8 (microsecond fields,
schema_version 1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from brrr_trace.analyzers.collectives import CollectiveCall
from brrr_trace.report import Finding, LineReport, Report
from brrr_trace.safe_text import json_safe

if TYPE_CHECKING:  # annotations only: one report's JSON needs neither module
    from brrr_trace.analyzers.crossrank import CrossRank
    from brrr_trace.diff import Diff


def _us(ns: int) -> float:
    return round(ns / 1000, 3)


def _line(line: LineReport) -> dict[str, Any]:
    return {
        "file": line.file,
        "path": line.path,
        "line": line.line,
        "function": line.function,
        "precision": str(line.precision),
        "regime": str(line.regime) if line.regime is not None else None,
        "gpu_us": _us(line.gpu_ns),
        "idle_us": _us(line.idle_ns),
        "cpu_us": _us(line.cpu_ns),
        "kernels": line.kernels,
        "backward_gpu_us": _us(line.backward_gpu_ns),
        "inclusive_gpu_us": _us(line.inclusive_gpu_ns),
        "inclusive_us": _us(line.inclusive_ns),
        "inclusive_by_regime_us": {str(k): _us(v) for k, v in line.inclusive_by_regime_ns.items()},
        "flops": line.flops,
        "bytes": line.bytes,
        "achieved_tflops": line.achieved_tflops,
        "achieved_gbps": line.achieved_gbps,
        "peak_fraction": line.peak_fraction,
        "intensity": line.intensity,
        "ridge": line.ridge,
        "findings": list(line.findings),
        "time_by_regime_us": {str(k): _us(v) for k, v in line.time_by_regime_ns.items()},
        "idle_by_cause_us": {str(k): _us(v) for k, v in line.idle_by_cause_ns.items()},
        "profiler_overhead_us": _us(line.profiler_overhead_ns),
        "relative_path": line.relative_path,
        "top_kernels": [
            {"name": k.name, "kind": k.kind, "count": k.count, "total_us": _us(k.total_ns)}
            for k in line.top_kernels
        ],
    }


def to_dict(report: Report) -> dict[str, Any]:
    s, t = report.summary, report.trace
    return {
        "schema_version": report.schema_version,
        "tool": {"name": "brrr-trace", "version": report.tool_version},
        "trace": {
            "path": t.path,
            "torch_version": t.torch_version,
            "devices": [{"id": d.id, "name": d.name, "peak": d.peak} for d in t.devices],
            "span_us": _us(t.span_ns),
            "ranks": list(t.ranks),
            "has_python_stacks": t.has_python_stacks,
            "has_shapes": t.has_shapes,
        },
        "summary": {
            "gpu_busy_us": _us(s.gpu_busy_ns),
            "gpu_idle_us": _us(s.gpu_idle_ns),
            "gpu_utilization": None if s.gpu_utilization is None else round(s.gpu_utilization, 6),
            "idle_by_cause_us": {str(k): _us(v) for k, v in s.idle_by_cause_ns.items()},
            "time_by_regime_us": {str(k): _us(v) for k, v in s.time_by_regime_ns.items()},
            "kernels": s.kernels,
            "unattributed_gpu_us": _us(s.unattributed_gpu_ns),
            "unattributed_idle_us": _us(s.unattributed_idle_ns),
            "profiler_overhead_us": _us(s.profiler_overhead_ns),
        },
        "lines": [_line(line) for line in report.lines],
        "findings": [
            {
                "rule": f.rule,
                "severity": f.severity,
                "file": f.file,
                "path": f.path,
                "line": f.line,
                "message": f.message,
                "fix": f.fix,
                "est_savings_us": _us(f.est_savings_ns),
                "function": f.function,
                "evidence": f.evidence,
                "doc": f.doc,
                "lines": list(f.lines or (f.line,)),
                "est_savings_per_step_us": (
                    None if f.est_savings_per_step_ns is None else _us(f.est_savings_per_step_ns)
                ),
                "relative_path": f.relative_path,
                "est_savings_range_us": (
                    None
                    if f.est_savings_range_ns is None
                    else [_us(ns) for ns in f.est_savings_range_ns]
                ),
            }
            for f in report.findings
        ],
        "problems": [
            {"kind": p.kind, "count": p.count, "detail": p.detail} for p in report.problems
        ],
        "notes": list(report.notes),
        "unmapped_files": list(report.unmapped_files),
        "steps": _steps(report),
        "collectives": [_collective(c) for c in report.collectives],
        "rule_savings": [
            {
                "rule": r.rule,
                "findings": r.findings,
                "est_savings_us": _us(r.est_savings_ns),
                "est_savings_per_step_us": (
                    None if r.est_savings_per_step_ns is None else _us(r.est_savings_per_step_ns)
                ),
                "est_savings_range_us": (
                    None
                    if r.est_savings_range_ns is None
                    else [_us(ns) for ns in r.est_savings_range_ns]
                ),
            }
            for r in report.rule_savings
        ],
        "runs": [
            {
                "index": r.index,
                "ranks": list(r.ranks),
                "world_size": r.world_size,
                "backend": r.backend,
                "paths": list(r.paths),
            }
            for r in report.runs
        ],
        "run": report.run,
        "cross_rank": _cross_rank(report.cross_rank),
    }


def _cross_rank(cross: CrossRank | None) -> dict[str, Any] | None:
    if cross is None:
        return None
    return {
        "matched_calls": cross.matched_calls,
        "unmatched_calls": cross.unmatched_calls,
        "ranks": [
            {
                "rank": r.rank,
                "path": r.path,
                "compute_us": _us(r.compute_ns),
                "wait_us": _us(r.wait_ns),
                "transfer_us": _us(r.transfer_ns),
                "late_calls": r.late_calls,
                "steps": [
                    {
                        "step": s.step,
                        "compute_us": _us(s.compute_ns),
                        "wait_us": _us(s.wait_ns),
                        "transfer_us": _us(s.transfer_ns),
                    }
                    for s in r.steps
                ],
            }
            for r in cross.ranks
        ],
        "stragglers": [
            {
                "rank": s.rank,
                "late_us": _us(s.late_ns),
                "others_wait_us": _us(s.others_wait_ns),
                "calls": s.calls,
                "per_call_late_us": _us(s.per_call_late_ns),
                "per_step_late_us": _us(s.per_step_late_ns),
                "steady_late_us": _us(s.steady_late_ns),
                "started_last_by_clock": s.agrees_with_clock,
                "lines": [
                    {
                        "file": ln.file,
                        "path": ln.path,
                        "line": ln.line,
                        "function": ln.function,
                        "excess_us": _us(ln.excess_ns),
                    }
                    for ln in s.lines
                ],
                "collective_lines": list(s.collective_lines),
            }
            for s in cross.stragglers
        ],
        "line_spread": [
            {
                "file": ln.file,
                "path": ln.path,
                "line": ln.line,
                "function": ln.function,
                "p50_us": _us(ln.p50_ns),
                "max_us": _us(ln.max_ns),
                "max_rank": ln.max_rank,
                "ranks": ln.ranks,
            }
            for ln in cross.line_spread
        ],
    }


def _collective(call: CollectiveCall) -> dict[str, Any]:
    def us(ns: int | None) -> float | None:
        return None if ns is None else _us(ns)

    return {
        "group": call.group,
        "index": call.index,
        "name": call.name,
        "bytes": call.bytes,
        "step": call.step,
        "host_start_us": _us(call.host_start_ns),
        "host_end_us": _us(call.host_end_ns),
        "kernel_start_us": us(call.kernel_start_ns),
        "kernel_end_us": us(call.kernel_end_ns),
        "line": call.line,
    }


def _steps(report: Report) -> dict[str, Any] | None:
    steps = report.steps
    if steps is None:
        return None
    return {
        "count": steps.count,
        "durations_us": [_us(ns) for ns in steps.durations_ns],
        "median_us": _us(steps.median_ns),
        "spread_us": _us(steps.spread_ns),
        "replayed_unprofiled_us": None if steps.replayed_ns is None else _us(steps.replayed_ns),
        "recorded_unprofiled_us": (
            None if steps.recorded_unprofiled_ns is None else _us(steps.recorded_unprofiled_ns)
        ),
        "profiler_cost_scale": steps.profiler_cost_scale,
        "optimizer_profiler_cost_scale": steps.optimizer_profiler_cost_scale,
        "backward_profiler_cost_scale": steps.backward_profiler_cost_scale,
    }


def diff_to_dict(diff: Diff) -> dict[str, Any]:
    def side(line: LineReport | None) -> dict[str, Any] | None:
        if line is None:
            return None
        return {
            "total_us": _us(line.total_ns),
            "gpu_us": _us(line.gpu_ns),
            "idle_us": _us(line.idle_ns),
            "regime": str(line.regime) if line.regime is not None else None,
        }

    def finding(f: Finding) -> dict[str, Any]:
        return {
            "rule": f.rule,
            "file": f.file,
            "line": f.line,
            "function": f.function,
            "est_savings_us": _us(f.est_savings_ns),
        }

    return {
        "schema_version": 1,
        "kind": "diff",
        "before": {"path": diff.before.trace.path, "span_us": _us(diff.span_before_ns)},
        "after": {"path": diff.after.trace.path, "span_us": _us(diff.span_after_ns)},
        "lines": [
            {
                "file": c.file,
                "line": c.line,
                "function": c.function,
                "before": side(c.before),
                "after": side(c.after),
                "delta_us": _us(c.delta_ns),
                "work_ratio": c.work_ratio,
                "scaling_exponent": c.scaling,
                "verdict": c.verdict,
                "why_no_verdict": c.why_no_verdict,
            }
            for c in diff.lines
        ],
        "resolved": [finding(f) for f in diff.resolved],
        "new": [finding(f) for f in diff.new],
    }


def _dump(doc: dict[str, Any]) -> str:
    # The encoder escapes C0 controls; C1 and bidi controls it leaves raw, and this JSON may
    # well be printed to a terminal.
    return json_safe(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode()) + "\n"


def render_diff(diff: Diff) -> str:
    return _dump(diff_to_dict(diff))


def render(report: Report) -> str:
    return _dump(to_dict(report))


def render_many(reports: list[Report]) -> str:
    """One trace: its report. Several: the same shape, the first trace's report at the top
    level, and every trace's report (the first among them) in ``reports``, in the order given
    (docs/architecture.md §8)."""
    if len(reports) == 1:
        return render(reports[0])
    doc = to_dict(reports[0])
    doc["reports"] = [to_dict(report) for report in reports]
    return _dump(doc)
