"""``load``: a trace file's events read into typed columns (docs/architecture.md §3).

``load(path)`` returns a ``LoadResult``: the trace plus the problems met on the way. Only input
that is not a trace at all raises ``NotATraceError``; everything else is loaded leniently.
"""

from __future__ import annotations

import os

import numpy as np

from brrr_trace.arraysets import distinct, member
from brrr_trace.errors import NotATraceError
from brrr_trace.options import AnalysisOptions
from brrr_trace.traces.columns import Columns
from brrr_trace.traces.events import DecodeStats, decode_batch
from brrr_trace.traces.files import trace_size
from brrr_trace.traces.model import (
    GPU_KERNEL,
    NO_ID,
    LoadResult,
    Problem,
    Trace,
)
from brrr_trace.traces.parallel import (
    RunDecoder,
    decode_run,
    give_back_free_memory,
    run_text,
    workers_for,
)
from brrr_trace.traces.reader import ProgressFn, ReadState, iter_event_runs, iter_event_spans


def load(
    path: str | os.PathLike[str],
    progress: ProgressFn | None = None,
    max_events: int = AnalysisOptions.max_events,
    max_name_chars: int = AnalysisOptions.max_name_chars,
    workers: int = 1,
) -> LoadResult:
    """Load one trace file (.json or .json.gz, object or legacy array format).

    At most ``max_events`` events are read and names are cut to ``max_name_chars``: a small
    gzip can inflate to any number of events, and one name to megabytes (README, Security).
    ``workers`` other than 1 decodes a large file's runs in that many processes (0: one per
    core, traces/parallel.py); the trace is the same."""
    path = os.fspath(path)
    name = os.path.basename(path)
    bomb_cap = _gzip_event_cap(path)
    if bomb_cap is not None and bomb_cap < max_events:
        max_events, why = bomb_cap, "gzip-ratio"
    else:
        why = "event-cap"
    state = ReadState()
    stats = DecodeStats()
    columns: Columns | None = None
    capped = False
    workers = workers_for(path, workers)
    # Workers read a plain file's runs from the file themselves (``iter_event_spans``).
    decoder = RunDecoder(workers, path) if workers > 1 else None
    fd = decoder.fd if decoder is not None else None
    try:
        runs = (
            iter_event_spans(path, state, progress, same_as=fd)
            if fd is not None
            else iter_event_runs(path, state, progress)
        )
        # Each run is decoded into columns of its own (by a worker, or here), absorbed in file
        # order; the run that reaches the event cap is decoded again, whole, and cut there.
        parts = (
            decoder.decode(runs, lambda: state.exact_timestamps, max_name_chars)
            if decoder is not None
            else ((run, *decode_run(run, state.exact_timestamps, max_name_chars)) for run in runs)
        )
        for run, part, part_stats in parts:
            if columns is None:
                columns = Columns(exact=state.exact_timestamps, max_name_chars=max_name_chars)
            room = max_events - columns.events
            if part.events < room:
                columns.absorb(part)
                stats.add(part_stats)
                continue
            events = decode_batch(run_text(run, fd), state.exact_timestamps, stats)
            if len(events) >= room:
                capped = len(events) > room
                columns.add(events[:room])
                if capped:
                    break  # closes the file: nothing after the cap is read
            else:
                columns.add(events)
    finally:
        if decoder is not None:
            decoder.close()
    if columns is None:
        columns = Columns(exact=False)
    if columns.events == 0 and stats.unparseable and not state.legacy_array:
        raise NotATraceError(
            f"{name}: none of its events could be read; expected a trace written by torch.profiler."
        )
    tables = columns.finish()
    if decoder is not None:
        give_back_free_memory()
    header = state.header
    devices = header.get("deviceProperties") or header.get("computeProperties") or []
    base = header.get("baseTimeNanoseconds")
    trace = Trace(
        path=path,
        device_properties=tuple(d for d in devices if isinstance(d, dict))
        if isinstance(devices, list)
        else (),
        metadata={k: v for k, v in header.items() if k != "deviceProperties"},
        base_time_ns=base if isinstance(base, int) else 0,
        **tables,
    )
    problems = _reader_problems(state, stats) + columns.problems() + _integrity_problems(trace)
    if capped and why == "gzip-ratio":
        problems.append(
            Problem(
                "gzip-ratio",
                max_events,
                f"the gzip file inflates to more events than a profiler trace of its size holds "
                f"(over {_EVENTS_PER_GZIP_BYTE:g} per compressed byte); only the first "
                f"{max_events:,} were read",
            )
        )
    elif capped:
        problems.append(
            Problem(
                "event-cap",
                max_events,
                f"the trace has more than {max_events:,} events; only the first {max_events:,} "
                "were read (--max-events, AnalysisOptions.max_events, reads more)",
            )
        )
    if columns.events == 0:
        problems.append(Problem("empty-trace", 1, "the trace has no events"))
    return LoadResult(trace=trace, problems=tuple(problems))


# Kineto's events take 20-40 bytes each once gzipped (the public and H200 traces); a gzip that
# inflates to several events per byte is a bomb, not a profile. Below the floor, nothing is cut.
_EVENTS_PER_GZIP_BYTE = 0.25
_GZIP_CAP_FLOOR = 1_000_000


def _gzip_event_cap(path: str) -> int | None:
    if not path.endswith(".gz"):
        return None
    size = trace_size(path)
    if size is None:
        return None
    return max(_GZIP_CAP_FLOOR, int(size * _EVENTS_PER_GZIP_BYTE))


def _reader_problems(state: ReadState, stats: DecodeStats) -> list[Problem]:
    found = []
    if state.truncated:
        found.append(
            Problem(
                "truncated",
                1,
                f"{state.damage}; events up to the last whole one before it were read"
                if state.damage
                else "the file ends in the middle of an event (the profiled process was "
                "probably killed); events up to the last whole one were read",
            )
        )
    if state.repeated_events_keys:
        found.append(
            Problem(
                "repeated-key",
                state.repeated_events_keys,
                '"traceEvents" appears more than once (a JSON reader keeps only the last list); '
                "the events of every list were read",
            )
        )
    if state.header_unreadable:
        found.append(Problem("bad-header", 1, "the keys before traceEvents could not be read"))
    if stats.bad_utf8:
        found.append(Problem("bad-utf8", stats.bad_utf8, "events with invalid UTF-8 were repaired"))
    if stats.unescaped_quotes:
        found.append(
            Problem(
                "unescaped-quotes",
                stats.unescaped_quotes,
                "event names with raw quotes (a Kineto bug before 2026-07) were repaired",
            )
        )
    if stats.wrong_types:
        found.append(
            Problem(
                "wrong-types",
                stats.wrong_types,
                "events with fields of an unexpected type were read without those fields",
            )
        )
    if stats.unparseable:
        found.append(
            Problem(
                "unparseable", stats.unparseable, "pieces that are not JSON events were skipped"
            )
        )
    return found


def _integrity_problems(trace: Trace) -> list[Problem]:
    found = []
    gpu = trace.gpu
    if len(gpu) == 0:
        if len(trace.host_calls):
            found.append(
                Problem(
                    "no-gpu-activity",
                    len(trace.host_calls),
                    "CUDA/HIP API calls but no kernels, copies or memsets: the trace was probably "
                    "recorded without ProfilerActivity.CUDA (or CUPTI could not collect); "
                    "GPU time cannot be analyzed",
                )
            )
        else:
            found.append(Problem("cpu-only", 1, "the trace has no GPU activity"))
        return found
    launched = member(
        gpu.correlation, trace.host_calls.correlation[trace.host_calls.correlation != NO_ID]
    )
    unlinked = int(np.count_nonzero(~launched))
    if unlinked:
        found.append(
            Problem(
                "gpu-op-without-launch",
                unlinked,
                "GPU ops whose launching API call is not in the trace (launched before the "
                "profiling window, dropped records, or graph replays); their time counts as busy "
                "but cannot be placed on a source line",
            )
        )
    overlaps = 0
    for device in distinct(gpu.device):
        for stream in distinct(gpu.stream[gpu.device == device]):
            sel = (gpu.device == device) & (gpu.stream == stream) & (gpu.kind == GPU_KERNEL)
            ends = np.maximum.accumulate(gpu.end_ns[sel]) if sel.any() else gpu.end_ns[sel]
            overlaps += int(np.count_nonzero(gpu.start_ns[sel][1:] < ends[:-1]))
    if overlaps:
        found.append(
            Problem(
                "overlapping-kernels",
                overlaps,
                "kernels that overlap an earlier kernel on the same stream (programmatic "
                "dependent launch or clock skew); busy time counts the overlap once",
            )
        )
    return found
