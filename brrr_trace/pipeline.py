"""The one entry point: ``analyze(source, options) -> Report``. Nobody else wires analyzers."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from brrr_trace import __version__, units
from brrr_trace.analyzers.attribution import Locator
from brrr_trace.analyzers.collective_lines import place_collectives
from brrr_trace.analyzers.collectives import find_collectives
from brrr_trace.analyzers.intervals import NONE
from brrr_trace.analyzers.kernels import kernel_kind
from brrr_trace.analyzers.op_lines import attribute_ops
from brrr_trace.analyzers.paths import PathMapper
from brrr_trace.analyzers.regimes import REGIMES, LineCost, OpClasses, classify_ops, line_costs
from brrr_trace.analyzers.rules import RawFinding, RuleContext, savings_by_rule, savings_ranges
from brrr_trace.analyzers.rules import find as find_findings
from brrr_trace.analyzers.steps import measure_steps, profiler_steps
from brrr_trace.analyzers.timeline import build_timeline
from brrr_trace.analyzers.timeline_view import timeline_view
from brrr_trace.arraysets import distinct
from brrr_trace.errors import NotATraceError
from brrr_trace.hardware.devices import match_device
from brrr_trace.hardware.peaks import GpuPeak
from brrr_trace.options import AnalysisOptions
from brrr_trace.report import (
    DeviceInfo,
    Finding,
    KernelStat,
    LineReport,
    ProblemReport,
    Report,
    RuleSaving,
    RunInfo,
    StepsReport,
    Summary,
    TraceInfo,
    Track,
    TrackSlice,
    severity_of_saving,
)
from brrr_trace.traces.discovery import (
    RankFile,
    Run,
    find_traces,
    group_runs,
    rank_file,
    trace_urls,
    traces_in,
)
from brrr_trace.traces.loader import load
from brrr_trace.traces.model import NO_ID, LoadResult, Trace
from brrr_trace.traces.reader import ProgressFn
from brrr_trace.traces.urls import is_url, name_of
from brrr_trace.vocabulary import IdleCause, Regime

if TYPE_CHECKING:
    from brrr_trace.analyzers.crossrank import CrossRank, RankPiece, RankTimes
    from brrr_trace.analyzers.op_lines import OpAttribution
    from brrr_trace.analyzers.timeline import Timeline
    from brrr_trace.analyzers.tracks import LineRun, TimelineTracks

# Folders of rank traces only (docs/architecture.md §13): the cross-rank merge, the straggler
# rule and the process pool are imported where a run of several ranks is analyzed, so that
# analyzing one file does not pay for them (multiprocessing and concurrent.futures: ~30 ms).

_INFLATION_NOTE = (
    "Host times come from a profiled run, and recording stacks slows the Python side (a 500-op "
    "loop on an H200: 9.6 ms unprofiled, 14.1 ms profiled). The profiler's own cost inside the "
    "idle gaps is estimated from the events it recorded there (summary.profiler_overhead) and "
    "left out of savings estimates. Overhead time is an upper bound: a batch-size or "
    "before/after run (brrr-trace diff) confirms it."
)

_RANGE_NOTE = (
    "A saving given as a range depends on the host's pace, which the profiler slowed by an "
    "amount estimated per event; in the programs measured the real cost was {low:g}-{high:g}x "
    "that estimate, and it differed from host to host and from one process to the next of the "
    "same program, so the range replays both ends. `brrr-trace record` also times the "
    "program's steps unprofiled and calibrates on them."
)

_CALIBRATED_RANGE_NOTE = (
    "A saving given as a range depends on the host's pace. The profiler's cost was calibrated "
    "on the steps `brrr-trace record` timed unprofiled, and every scale of it from the range's "
    "one end to the other replays those steps within {tolerance:.0%}: near the point where the "
    "host and the GPU take equally long that measurement cannot pin the host's own pace down."
)


def analyze(
    source: str | os.PathLike[str] | Sequence[str],
    options: AnalysisOptions | None = None,
    progress: ProgressFn | None = None,
) -> Report:
    """Load a trace file (or a folder of traces) and analyze it into a ``Report``.

    A folder holds runs, and a run one or several ranks (docs/architecture.md §13): the report
    covers one run (``options.run``, else the oldest) and, of its ranks, ``options.rank`` (else
    the lowest), with what the run's ranks show together. A trace may be a URL (``https://``,
    ``s3://`` ... read where it is analyzed); a URL prefix that its store can list, or several
    traces given together (a sequence of URLs or paths), is read like a folder."""
    options = options or AnalysisOptions()
    if options.source_root and is_url(options.source_root):
        raise NotATraceError(
            f"{options.source_root}: a URL cannot be the source root; source files are read "
            "only from a local folder (--source-root DIR), while a trace may be at a URL."
        )
    remote = _trace_set(source)
    if remote is None:
        folder = Path(cast("str | os.PathLike[str]", source))
        if not folder.is_dir():
            return _analyze_file(str(folder), options, progress)
        label: str | Path = folder
    else:
        label, files = remote
        if len(files) == 1 and files[0] == label:
            return _analyze_file(files[0], options, progress)
    runs = runs_in(source, options)
    index = _pick_run(label, runs, options)
    run = runs[index]
    infos = tuple(_run_info(i, r) for i, r in enumerate(runs))
    chosen = _pick_rank(label, run, options)
    if len(run.files) == 1:
        loaded = load(
            str(chosen.path),
            progress,
            options.max_events,
            options.max_name_chars,
            options.load_workers,
        )
        report = analyze_loaded(loaded, options, run.ranks)
        notes = report.notes + _runs_note(runs, index)
        return dataclasses.replace(report, runs=infos, run=index, notes=notes)
    return _analyze_ranks(run, chosen, options, progress, runs, index, infos)


def analyze_with_its_ranks(
    source: str | os.PathLike[str],
    options: AnalysisOptions | None = None,
    progress: ProgressFn | None = None,
) -> Report:
    """``analyze`` a trace file; a rank's trace with the other ranks of its run beside it (in the
    same folder) is analyzed with them, and the report covers it (the language server: one open
    trace of a folder of ranks shows the spread across ranks)."""
    options = options or AnalysisOptions()
    path = Path(source)
    own = rank_file(path) if path.is_file() else None
    if own is None or own.rank is None or not own.world_size or own.world_size < 2:
        return analyze(path, options, progress)
    beside = [rank_file(f) for f in traces_in(path.parent)]
    runs = group_runs(beside, options.run_start_tolerance_ns)
    for index, run in enumerate(runs):
        chosen = next((f for f in run.files if f.path == path), None)
        if chosen is not None and len(run.files) > 1:
            infos = tuple(_run_info(i, r) for i, r in enumerate(runs))
            return _analyze_ranks(run, chosen, options, progress, runs, index, infos)
    return analyze(path, options, progress)


def _analyze_file(path: str, options: AnalysisOptions, progress: ProgressFn | None) -> Report:
    if options.rank is not None:
        _check_rank_of_file(path, options.rank)
    loaded = load(path, progress, options.max_events, options.max_name_chars, options.load_workers)
    return analyze_loaded(loaded, options)


def _trace_set(source: str | os.PathLike[str] | Sequence[str]) -> tuple[str, list[str]] | None:
    """A URL, URL prefix or several traces: a name for them and their trace files (a URL
    alone: itself); None for a local path."""
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if not is_url(text):
            return None
        return text, trace_urls(text)
    given = [os.fspath(s) for s in source]
    if not given:
        raise NotATraceError("no trace given: pass trace files, folders or URLs.")
    files = [f for g in given for f in (trace_urls(g) if is_url(g) else [g])]
    more = f" and {len(given) - 1} more" if len(given) > 1 else ""
    return given[0] + more, files


def runs_in(folder: str | os.PathLike[str] | Sequence[str], options: AnalysisOptions) -> list[Run]:
    """The runs of a folder of traces (or of a URL prefix, or of several traces given
    together), oldest first; NotATraceError when it holds no trace."""
    remote = _trace_set(folder)
    if remote is not None:
        files: list[Path] | list[str] = remote[1]
    else:
        files = find_traces(cast("str | os.PathLike[str]", folder))
        if not files:
            raise NotATraceError(
                f"{folder}: no trace in it (*.pt.trace.json[.gz], or a .json[.gz] file that "
                "reads like a torch.profiler trace)."
            )
    return group_runs([rank_file(f) for f in files], options.run_start_tolerance_ns)


def _check_rank_of_file(path: str, rank: int) -> None:
    found = rank_file(path).rank
    if found is not None and found != rank:
        raise NotATraceError(
            f"{path}: is the trace of rank {found} only, not of rank {rank}; --rank chooses "
            "among the traces of a folder of rank traces."
        )


def _pick_run(folder: Path | str, runs: list[Run], options: AnalysisOptions) -> int:
    if options.run is not None:
        if options.run >= len(runs):
            raise NotATraceError(
                f"{folder}: has {len(runs)} run(s), numbered 0 to {len(runs) - 1}; there is no "
                f"run {options.run}."
            )
        return options.run
    if options.rank is not None:
        having = [i for i, r in enumerate(runs) if options.rank in r.ranks]
        if having:
            return having[0]
    return 0


def _pick_rank(folder: Path | str, run: Run, options: AnalysisOptions) -> RankFile:
    if options.rank is None:
        return run.files[0]
    for file in run.files:
        if file.rank == options.rank:
            return file
    if not run.ranks:
        raise NotATraceError(
            f"{folder}: its traces have no rank information (no distributedInfo), so --rank "
            "does not apply: each is a run of its own; choose one with --run."
        )
    raise NotATraceError(
        f"{folder}: no trace of rank {options.rank} in it (ranks present: {list(run.ranks)})."
    )


def _file_name(path: Path | str) -> str:
    return name_of(path) if isinstance(path, str) and is_url(path) else os.path.basename(path)


def _run_info(index: int, run: Run) -> RunInfo:
    return RunInfo(
        index=index,
        ranks=run.ranks,
        world_size=run.world_size,
        backend=run.files[0].backend,
        paths=tuple(str(f.path) for f in run.files),
    )


def _runs_note(runs: list[Run], index: int) -> tuple[str, ...]:
    if len(runs) < 2:
        return ()
    kinds = ", ".join(
        f"{i}: " + (f"ranks {list(r.ranks)}" if r.ranks else _file_name(r.files[0].path))
        for i, r in enumerate(runs)
    )
    return (
        f"The folder holds {len(runs)} separate runs ({kinds}); this report covers run {index} "
        "(choose another with --run).",
    )


def summarize_rank(
    path: str, rank: int, options: AnalysisOptions, keep_report: bool
) -> tuple[RankPiece, Report | None]:
    """One rank's worker: read and analyze its trace, send back what the merge needs (and the
    whole report for the rank the report covers)."""
    from brrr_trace.analyzers.crossrank import (
        CallTable,
        LineTime,
        RankPiece,
        issues_collectives,
        step_times,
    )

    loaded = load(path, None, options.max_events, options.max_name_chars)
    report = analyze_loaded(loaded, options)
    calls = CallTable.of(report.collectives)
    piece = RankPiece(
        rank=rank,
        path=path,
        span_ns=report.trace.span_ns,
        steps=step_times(loaded.trace),
        collectives=calls,
        lines=tuple(
            LineTime(
                ln.file,
                ln.path,
                ln.line,
                ln.function,
                ln.total_ns,
                ln.total_ns - ln.time_by_regime_ns.get(Regime.COMMUNICATION, 0),
                issues_collectives(ln.file, ln.path, ln.line, calls.lines),
            )
            for ln in report.lines
        ),
        problems=tuple(p.kind for p in report.problems),
    )
    return piece, report if keep_report else None


def _less_the_wait(
    findings: tuple[Finding, ...],
    own: RankTimes | None,
    cross: CrossRank,
    span_ns: int,
    options: AnalysisOptions,
) -> tuple[Finding, ...]:
    """exposed-communication on the reported rank, less its wait for later ranks: overlap
    cannot hide the time a collective waits for a straggler (the straggler finding has it)."""
    if own is None or not own.wait_by_line:
        return findings
    from brrr_trace.analyzers.crossrank import same_line

    late = ", ".join(str(s.rank) for s in cross.stragglers[:3]) or "the later ranks"
    exposed = [f for f in findings if f.rule == "exposed-communication"]
    lined = {
        id(f): sum(
            ns
            for where, ns in own.wait_by_line
            if where and same_line(where, f.file, f.path, f.line)
        )
        for f in exposed
    }
    # The wait of calls on no source line (traces without stacks) is shared among the findings
    # that no call line names, by their savings.
    unlined = sum(ns for where, ns in own.wait_by_line if not where)
    rest = [f for f in exposed if not lined[id(f)]]
    pool = sum(f.est_savings_ns for f in rest)
    out = []
    for f in findings:
        wait = lined.get(id(f), 0)
        if not wait and pool and any(f is g for g in rest):
            wait = unlined * f.est_savings_ns // pool
        if f.rule != "exposed-communication" or not wait:
            out.append(f)
            continue
        saving = max(0, f.est_savings_ns - wait)
        if saving < options.min_savings_ns or saving < options.min_savings_share * span_ns:
            continue
        out.append(
            dataclasses.replace(
                f,
                est_savings_ns=saving,
                severity=severity_of_saving(
                    saving, span_ns, options.warning_share, options.information_share
                ),
                message=f"{f.message}; {units.duration(wait)} of it is waiting for rank(s) "
                f"{late} (straggler), which overlap cannot hide",
                evidence={**f.evidence, "waiting_for_ranks_us": round(wait / 1e3, 1)},
                est_savings_per_step_ns=None
                if f.est_savings_per_step_ns is None or not f.est_savings_ns
                else f.est_savings_per_step_ns * saving // f.est_savings_ns,
            )
        )
    return tuple(out)


def _with_rules(
    lines: tuple[LineReport, ...], before: tuple[Finding, ...], after: tuple[Finding, ...]
) -> tuple[LineReport, ...]:
    """Each line's ``findings`` once the merge has added and dropped some."""

    def rules(findings: tuple[Finding, ...]) -> dict[tuple[str, int], set[str]]:
        out: dict[tuple[str, int], set[str]] = {}
        for f in findings:
            for number in f.lines or (f.line,):
                out.setdefault((f.file, number), set()).add(f.rule)
        return out

    was, now = rules(before), rules(after)
    if was == now:
        return lines
    changed = []
    for ln in lines:
        key = (ln.file, ln.line)
        gone = was.get(key, set()) - now.get(key, set())
        new = sorted(now.get(key, set()) - was.get(key, set()))
        if gone or new:
            ln = dataclasses.replace(
                ln, findings=tuple(r for r in ln.findings if r not in gone) + tuple(new)
            )
        changed.append(ln)
    return tuple(changed)


def _analyze_ranks(
    run: Run,
    chosen: RankFile,
    options: AnalysisOptions,
    progress: ProgressFn | None,
    runs: list[Run],
    index: int,
    infos: tuple[RunInfo, ...],
) -> Report:
    from brrr_trace import fanout
    from brrr_trace.analyzers.crossrank import merge
    from brrr_trace.analyzers.rules.straggler import RULE as STRAGGLER
    from brrr_trace.analyzers.rules.straggler import straggler

    args = [
        (str(f.path), f.rank if f.rank is not None else i, options, f is chosen)
        for i, f in enumerate(run.files)
    ]
    done = (lambda n: progress(n, len(args))) if progress else None
    if options.ray is not None:
        results = fanout.on_ray(summarize_rank, args, options.ray, done)
    else:
        results = fanout.in_processes(summarize_rank, args, options.jobs, done)
    report = next(r for _, r in results if r is not None)
    pieces = [p for p, _ in results]
    cross = merge(pieces, options.min_savings_ns)
    span = report.trace.span_ns
    mapper = PathMapper(options.source_root or os.getcwd(), options.path_mappings)
    late = [
        _graded(
            STRAGGLER,
            (f.file, f.path, f.line, f.function, f.lines),
            (f.message, f.fix, f.est_savings_ns, f.evidence),
            span,
            options,
            mapper,
            report.steps,
        )
        for f in straggler(cross, span, options)
    ]
    covered = chosen.rank if chosen.rank is not None else 0
    own = next((r for r in cross.ranks if r.rank == covered), None)
    kept = _less_the_wait(report.findings, own, cross, span, options)
    findings = tuple(sorted(kept + tuple(late), key=lambda f: -f.est_savings_ns))
    lines = _with_rules(report.lines, report.findings, findings)
    notes = (
        *report.notes,
        f"The run has ranks {list(run.ranks)}; this report covers rank {covered} (choose "
        "another with --rank), and across ranks (cross_rank) the time each rank waits in "
        "collectives and each line's spread.",
        *_runs_note(runs, index),
    )
    others = [p for p in pieces if p.problems and p.rank != covered]
    problems = report.problems
    if others:
        shown = "; ".join(f"rank {p.rank}: {', '.join(p.problems)}" for p in others[:4])
        problems += (
            ProblemReport(
                "rank-problems",
                len(others),
                f"the traces of other ranks of the run have problems ({shown}"
                + (" …" if len(others) > 4 else "")
                + "); --rank N shows them",
            ),
        )
    return dataclasses.replace(
        report,
        trace=dataclasses.replace(report.trace, ranks=run.ranks),
        problems=problems,
        findings=findings,
        lines=lines,
        notes=notes,
        runs=infos,
        run=index,
        cross_rank=cross,
    )


def analyze_loaded(
    loaded: LoadResult, options: AnalysisOptions, ranks: tuple[int, ...] = ()
) -> Report:
    trace = loaded.trace
    devices_present = distinct(trace.gpu.device).tolist()
    device = _pick_device(trace, options)
    if device is not None and len(devices_present) > 1:
        trace = _only_device(trace, device)
    mapper = PathMapper(options.source_root or os.getcwd(), options.path_mappings)
    locator = Locator(trace, options, mapper)
    ops = attribute_ops(trace, locator)
    collectives, ops = place_collectives(find_collectives(trace), trace, ops, locator)
    timeline = build_timeline(trace, ops, locator, options, collectives)
    locator.let_go(cut_points=True)  # only the timeline cuts windows at calls
    devices = _devices(trace, devices_present)
    peak = _peak_of(trace, device)
    classes = classify_ops(trace, ops, peak, options, collectives.launched_rows())
    costs = line_costs(trace, ops, classes, timeline, locator)
    locator.let_go(thread_events=True)  # the rules look up a few more call sites at most

    sms = _device_props(trace, device) or {}
    context = RuleContext(
        trace=trace,
        ops=ops,
        classes=classes,
        timeline=timeline,
        locator=locator,
        costs=costs,
        peak=peak,
        options=options,
        span_ns=next((d.span_ns for d in timeline.devices if d.device == device), 0),
        sms=_sm_count(sms, peak),
        collectives=collectives,
    )
    raw_findings = find_findings(context)
    rules_of_line: dict[int, list[str]] = {}
    for raw in raw_findings:
        for line_id in raw.covers or (raw.line_id,):
            rules_of_line.setdefault(line_id, []).append(raw.rule)

    lines = []
    for cost in costs:
        key = cost.key
        local = mapper.map(key.file)
        lines.append(
            LineReport(
                file=key.file,
                path=local,
                relative_path=mapper.relative(local),
                line=key.line,
                function=key.function,
                precision=key.precision,
                regime=cost.regime if len(trace.gpu) else None,
                gpu_ns=cost.gpu_ns,
                idle_ns=cost.idle_ns,
                cpu_ns=cost.cpu_ns,
                kernels=cost.kernels,
                backward_gpu_ns=cost.backward_gpu_ns,
                time_by_regime_ns=cost.by_regime,
                idle_by_cause_ns=cost.idle_by_cause,
                flops=int(cost.flops) if cost.flops is not None else None,
                bytes=int(cost.nbytes) if cost.nbytes is not None else None,
                achieved_tflops=_scaled(cost.achieved_flops_per_s, 1e-12),
                achieved_gbps=_scaled(cost.achieved_bytes_per_s, 1e-9),
                peak_fraction=cost.roof_fraction,
                intensity=cost.flops / cost.nbytes if cost.flops and cost.nbytes else None,
                ridge=cost.ridge,
                profiler_overhead_ns=cost.profiler_ns,
                inclusive_gpu_ns=cost.inclusive_gpu_ns,
                inclusive_by_regime_ns=cost.inclusive_by_regime,
                findings=tuple(dict.fromkeys(rules_of_line.get(cost.line_id, []))),
                top_kernels=tuple(
                    KernelStat(
                        name=trace.strings[name],
                        kind=str(kernel_kind(trace.strings[name])),
                        count=count,
                        total_ns=total,
                    )
                    for name, count, total in cost.top_kernels
                ),
            )
        )
    lines.sort(key=lambda r: (-r.total_ns, -r.cpu_ns, r.file, r.line))
    measured = measure_steps(trace, context.graph) if len(trace.gpu) else None
    locator.let_go(traced=True)  # the replay graph, built by now, holds the profiler's cost
    steps = (
        StepsReport(
            durations_ns=measured.durations_ns,
            median_ns=measured.median_ns,
            spread_ns=measured.spread_ns,
            replayed_ns=measured.replayed_ns,
            recorded_unprofiled_ns=measured.recorded_unprofiled_ns,
            profiler_cost_scale=measured.profiler_cost_scale,
            optimizer_profiler_cost_scale=measured.optimizer_cost_scale,
            backward_profiler_cost_scale=measured.backward_cost_scale,
        )
        if measured is not None
        else None
    )
    findings = tuple(
        dataclasses.replace(
            _finding(raw, locator, mapper, context.span_ns, options, steps),
            est_savings_range_ns=bounds,
        )
        for raw, bounds in zip(raw_findings, savings_ranges(context, raw_findings), strict=True)
    )
    rule_savings = tuple(
        RuleSaving(
            rule=rule,
            findings=sum(1 for f in raw_findings if f.rule == rule),
            est_savings_ns=ns,
            est_savings_per_step_ns=ns // steps.count if steps and steps.count else None,
            est_savings_range_ns=bounds,
        )
        for rule, (ns, bounds) in savings_by_rule(context, raw_findings).items()
    )
    # The rules' replay graphs (~120 MB on the 0.86 GB benchmark trace) are done with: what
    # is built from here on reuses their memory instead of adding to the peak.
    del context

    dev = next((d for d in timeline.devices if d.device == device), None)
    busy = dev.busy_ns if dev else 0
    idle = dev.idle_ns if dev else 0
    idle_by_cause = dev.idle_by_cause() if dev else {c: 0 for c in IdleCause}
    excl = timeline.exclusive_ns
    by_regime = {
        regime: int(excl[classes.regime == code].sum()) for code, regime in enumerate(REGIMES)
    }
    # Idle while the host sat in a collective is communication; the rest of the idle overhead.
    waited = idle_by_cause.get(IdleCause.COLLECTIVE, 0)
    by_regime[Regime.OVERHEAD] += idle - waited
    by_regime[Regime.COMMUNICATION] += waited
    placed_idle = sum(ns for (line, _), ns in timeline.idle_charges.items() if line != NONE)
    summary = Summary(
        gpu_busy_ns=busy,
        gpu_idle_ns=idle,
        gpu_utilization=dev.utilization if dev else None,
        idle_by_cause_ns=idle_by_cause,
        time_by_regime_ns=by_regime,
        kernels=len(trace.gpu),
        unattributed_gpu_ns=int(excl[ops.line == NONE].sum()),
        unattributed_idle_ns=max(0, idle - placed_idle),
        profiler_overhead_ns=sum(timeline.profiler_charges.values()),
    )
    info = TraceInfo(
        path=trace.path,
        torch_version=_torch_version(trace),
        devices=devices,
        span_ns=dev.span_ns if dev else 0,
        ranks=ranks or ((trace.rank,) if trace.rank is not None else ()),
        has_python_stacks=len(trace.frames) > 0 or bool((trace.cpu_ops.call_stack != NO_ID).any()),
        has_shapes=bool((trace.cpu_ops.input_dims != NO_ID).any()),
    )
    notes = []
    if info.has_python_stacks and summary.gpu_idle_ns:
        notes.append(_INFLATION_NOTE)
    ranged: list[tuple[int, tuple[int, int] | None]] = [
        *((f.est_savings_ns, f.est_savings_range_ns) for f in findings),
        *((r.est_savings_ns, r.est_savings_range_ns) for r in rule_savings),
    ]
    if any(units.saving_range(ns, bounds) for ns, bounds in ranged):
        notes.append(
            _CALIBRATED_RANGE_NOTE.format(tolerance=options.profiler_cost_calibration_tolerance)
            if steps is not None and steps.recorded_unprofiled_ns is not None
            else _RANGE_NOTE.format(
                low=options.profiler_cost_scale_low, high=options.profiler_cost_scale_high
            )
        )
    if len(ranks) > 1:
        notes.append(
            f"The folder holds the traces of ranks {list(ranks)}; this report covers rank "
            f"{trace.rank if trace.rank is not None else ranks[0]} (choose another with --rank)."
        )
    if len(devices_present) > 1:
        notes.append(
            f"The trace has GPU activity on devices {devices_present}; this report covers device "
            f"{device} (choose another with --device)."
        )
    if not info.has_python_stacks and len(trace.gpu):
        notes.append(
            "The trace has no Python stacks, so GPU time cannot be placed on source lines; "
            "record with with_stack=True (or `brrr-trace record`)."
        )
    unmapped = tuple(sorted({ln.file for ln in lines if ln.path is None and ln.total_ns}))
    if unmapped and info.has_python_stacks:
        shown = ", ".join(unmapped[:3]) + (" …" if len(unmapped) > 3 else "")
        notes.append(
            f"{len(unmapped)} source file(s) of the trace were not found under the source root "
            f"({shown}); their lines stay at the precision the trace alone gives. "
            "Pass --source-root (or path mappings in the editor)."
        )
    return Report(
        tool_version=__version__,
        unmapped_files=unmapped,
        trace=info,
        summary=summary,
        lines=tuple(lines),
        findings=findings,
        problems=tuple(ProblemReport(p.kind, p.count, p.detail) for p in loaded.problems)
        + _roofline_problems(classes)
        + _source_problems({**mapper.refused, **locator.skipped_sources}, options),
        notes=tuple(notes),
        steps=steps,
        collectives=collectives.calls,
        rule_savings=rule_savings,
        tracks=_tracks(trace, _timeline_tracks(trace, ops, timeline), locator, costs)
        if options.timeline_tracks
        else (),
        timeline=timeline_view(
            trace,
            ops,
            timeline,
            locator.lines,
            mapper,
            options.timeline_segments,
            profiler_steps(trace) if steps is not None else (),
        ),
    )


def _timeline_tracks(trace: Trace, ops: OpAttribution, timeline: Timeline) -> TimelineTracks:
    # Only ``--format perfetto`` asks for the tracks: other reports do not import them.
    from brrr_trace.analyzers.tracks import timeline_tracks

    return timeline_tracks(trace, ops, timeline)


def _tracks(
    trace: Trace, found: TimelineTracks, locator: Locator, costs: list[LineCost]
) -> tuple[Track, ...]:
    """The analysis as timeline rows: launches by line per host thread, GPU work by line per
    stream, and the idle gaps by cause per device (the line's regime in each slice's args)."""
    regime = {cost.line_id: str(cost.regime) for cost in costs}

    def line_slice(run: LineRun, what: str) -> TrackSlice:
        line_id = run.line_id
        if line_id == NONE:
            return TrackSlice(run.start_ns, run.end_ns, "(no source line)", {what: run.count})
        key = locator.lines[line_id]
        return TrackSlice(
            run.start_ns,
            run.end_ns,
            f"{key.file}:{key.line} {key.function}",
            {
                "file": key.file,
                "line": key.line,
                "function": key.function,
                "precision": str(key.precision),
                "regime": regime.get(line_id),
                what: run.count,
            },
        )

    tracks = []
    for thread, runs in sorted(found.launches.items()):
        who = trace.threads[thread] if 0 <= thread < len(trace.threads) else None
        label = (who.name or f"pid {who.pid}, tid {who.tid}") if who else f"thread {thread}"
        tracks.append(
            Track(
                "brrr-trace: launches by line (host)",
                label,
                tuple(line_slice(run, "launches") for run in runs),
            )
        )
    for (device, stream), runs in sorted(found.gpu_work.items()):
        tracks.append(
            Track(
                f"brrr-trace: GPU {device} work by line",
                f"stream {stream}",
                tuple(line_slice(run, "gpu_ops") for run in runs),
            )
        )
    for device, gaps in sorted(found.idle.items()):
        slices = []
        for gap in gaps:
            key = locator.lines[gap.next_line_id] if gap.next_line_id != NONE else None
            slices.append(
                TrackSlice(
                    gap.start_ns,
                    gap.end_ns,
                    f"idle: {gap.cause}",
                    {
                        "cause": str(gap.cause),
                        "next_op_line": f"{key.file}:{key.line} {key.function}" if key else None,
                    },
                )
            )
        tracks.append(Track(f"brrr-trace: GPU {device} idle by cause", "idle", tuple(slices)))
    return tuple(tracks)


def _roofline_problems(classes: OpClasses) -> tuple[ProblemReport, ...]:
    count, ns = classes.unexplained
    if not count:
        return ()
    return (
        ProblemReport(
            "roofline-unexplained",
            count,
            f"{count} GPU op(s), {ns / 1e6:.2f} ms in all, ran faster than the device's peak "
            "allows for the FLOPs and bytes their shapes imply (data served from cache, or a "
            "byte count the model overestimates); their rates are left out of the lines",
        ),
    )


def _source_problems(
    skipped: dict[str, str], options: AnalysisOptions
) -> tuple[ProblemReport, ...]:
    if not skipped:
        return ()
    shown = ", ".join(f"{path} ({why})" for path, why in sorted(skipped.items())[:3])
    more = " …" if len(skipped) > 3 else ""
    return (
        ProblemReport(
            "source-skipped",
            len(skipped),
            f"source files not read: {shown}{more}; only regular files of at most "
            f"{options.max_source_bytes >> 20} MiB inside the source root are read, so their "
            "lines stay at the precision the trace alone gives",
        ),
    )


def _finding(
    raw: RawFinding,
    locator: Locator,
    mapper: PathMapper,
    span_ns: int,
    options: AnalysisOptions,
    steps: StepsReport | None,
) -> Finding:
    key = locator.lines[raw.line_id]
    covered = [locator.lines[k] for k in raw.covers or (raw.line_id,)]
    lines = tuple(sorted({c.line for c in covered if c.file == key.file} | {key.line}))
    where = (key.file, mapper.map(key.file), key.line, key.function, lines)
    told = (raw.message, raw.fix, raw.est_savings_ns, raw.evidence)
    return _graded(raw.rule, where, told, span_ns, options, mapper, steps)


def _graded(
    rule: str,
    where: tuple[str, str | None, int, str, tuple[int, ...]],  # file, path, line, function, lines
    told: tuple[str, str, int, dict[str, float | int | str]],  # message, fix, saving, evidence
    span_ns: int,
    options: AnalysisOptions,
    mapper: PathMapper,
    steps: StepsReport | None,
) -> Finding:
    """A finding as the report holds it: graded by its saving against the span, with its rule's
    page, its path relative to the source root and, with steps, its saving per step."""
    file, path, line, function, lines = where
    message, fix, saving, evidence = told
    return Finding(
        rule=rule,
        severity=severity_of_saving(
            saving, span_ns, options.warning_share, options.information_share
        ),
        file=file,
        path=path,
        relative_path=mapper.relative(path),
        line=line,
        message=message,
        fix=fix,
        est_savings_ns=saving,
        function=function,
        evidence=evidence,
        doc=f"docs/rules/{rule}.md",
        lines=lines,
        est_savings_per_step_ns=saving // steps.count if steps else None,
    )


def _sm_count(props: dict[str, Any], peak: GpuPeak | None) -> int | None:
    for key in ("numSms", "multiProcessorCount"):
        value = props.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return peak.sms if peak is not None else None


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _device_props(trace: Trace, device: int | None) -> dict[str, Any] | None:
    props = {p.get("id"): p for p in trace.device_properties if isinstance(p.get("id"), int)}
    prop = props.get(device)
    if prop is None and len(trace.device_properties) == 1:
        prop = trace.device_properties[0]
    return prop


def _peak_of(trace: Trace, device: int | None) -> GpuPeak | None:
    prop = _device_props(trace, device)
    return match_device(prop) if prop else None


def _pick_device(trace: Trace, options: AnalysisOptions) -> int | None:
    gpu = trace.gpu
    if len(gpu) == 0:
        return options.device
    present = distinct(gpu.device)
    if options.device is not None:
        if options.device not in present.tolist():
            raise NotATraceError(
                f"{os.path.basename(trace.path)}: no GPU activity on device {options.device} "
                f"(devices with activity: {present.tolist()})."
            )
        return options.device
    busy = [(int((gpu.end_ns - gpu.start_ns)[gpu.device == d].sum()), int(d)) for d in present]
    return max(busy)[1]


def _only_device(trace: Trace, device: int) -> Trace:
    keep = trace.gpu.device == device
    gpu = type(trace.gpu)(
        **{f.name: getattr(trace.gpu, f.name)[keep] for f in dataclasses.fields(trace.gpu)}
    )
    spans = trace.gpu_annotations
    keep_spans = spans.where == device
    spans = type(spans)(
        **{f.name: getattr(spans, f.name)[keep_spans] for f in dataclasses.fields(spans)}
    )
    return dataclasses.replace(trace, gpu=gpu, gpu_annotations=spans)


def _torch_version(trace: Trace) -> str | None:
    for key in ("torch_version", "pytorch_version", "brrr_torch_version"):
        value = trace.metadata.get(key)
        if isinstance(value, str):
            return value
    return None


def _devices(trace: Trace, present: list[int]) -> tuple[DeviceInfo, ...]:
    out = []
    for device in present:
        prop = _device_props(trace, device)
        peak = match_device(prop) if prop else None
        out.append(
            DeviceInfo(
                id=int(device),
                name=str(prop.get("name")) if prop and prop.get("name") else None,
                peak=dataclasses.asdict(peak) if peak is not None else None,
            )
        )
    return tuple(out)
