"""Command line: ``brrr-trace analyze``. Exit codes: 0 ok, 2 bad input, 1 internal error."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from importlib import resources
from pathlib import Path

from brrr_trace import __version__
from brrr_trace.errors import BrrrError
from brrr_trace.options import DEFAULT_EXCLUDED_FILES, AnalysisOptions
from brrr_trace.output import report_output
from brrr_trace.safe_text import terminal_safe

log = logging.getLogger("brrr_trace")

SAMPLE_NAME = "sample_trace.json.gz"
_PROGRESS_MIN_BYTES = 32 << 20


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum`` (``--top -1`` printed "(-1 of 2)")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brrr-trace",
        description="Where your GPU time goes, line by line: compute-, memory- or overhead-bound.",
    )
    parser.add_argument("--version", action="version", version=f"brrr-trace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser("analyze", help="analyze torch.profiler traces")
    analyze.add_argument(
        "traces",
        nargs="*",
        help="trace files (.json, .json.gz) or folders; default: the traces in the current "
        "folder, else a bundled sample",
    )
    analyze.add_argument("--format", choices=("text", "json"), default="text")
    analyze.add_argument("-o", "--output", help="write the report to this file")
    analyze.add_argument("--top", type=_count(1), default=20, help="lines to show (text format)")
    analyze.add_argument(
        "--source-root", help="folder the trace's source paths map onto (default: current folder)"
    )
    analyze.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="trace paths that are your code even outside the source root (repeatable)",
    )
    analyze.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="trace paths that are never your line, added to torch and the standard library "
        "(repeatable); their time goes to the line of yours that called them",
    )
    analyze.add_argument("--device", type=_count(0), help="GPU to report on (default: the busiest)")
    analyze.add_argument(
        "--rank", type=_count(0), help="rank to report on, for a folder of rank traces"
    )
    analyze.add_argument(
        "--run",
        type=_count(0),
        help="run to report on, for a folder of several runs (0: the oldest; default: each)",
    )
    analyze.add_argument(
        "--jobs",
        type=_count(1),
        help="processes analyzing the ranks of a run at once (default: one per core)",
    )
    analyze.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="analyze each rank as a Ray task (pip install 'brrr-trace[ray]'): on the cluster at "
        "ADDRESS (ray://host:10001, or auto), else on a local one started for the run; the "
        "traces must be readable where the tasks run",
    )
    _add_max_events(analyze)
    analyze.add_argument("--debug", action="store_true", help="print tracebacks of internal errors")
    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    transport = serve.add_mutually_exclusive_group()
    transport.add_argument(
        "--stdio", action="store_true", help="talk LSP on stdin/stdout (the default)"
    )
    transport.add_argument("--tcp", type=int, metavar="PORT", help="listen on a TCP port instead")
    serve.add_argument("--host", default="127.0.0.1", help="address for --tcp (default 127.0.0.1)")
    serve.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more to stderr (-vv: pygls too)"
    )
    diff = sub.add_parser(
        "diff", help="compare two traces line by line (before/after a fix, or two batch sizes)"
    )
    diff.add_argument("before", help="the trace before")
    diff.add_argument("after", help="the trace after")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.add_argument("-o", "--output", help="write the comparison to this file")
    diff.add_argument("--top", type=_count(1), default=20, help="lines to show (text format)")
    diff.add_argument("--source-root", help="folder the traces' source paths map onto")
    _add_max_events(diff)
    diff.add_argument("--debug", action="store_true", help="print tracebacks of internal errors")
    record = sub.add_parser(
        "record",
        help="run a program in-process under torch.profiler, with exact call-site lines",
        usage="brrr-trace record [-o TRACE] [--steps N] [--wait N] [--no-exact-ops] "
        "-- [python] (script.py | -m module) [args ...]",
    )
    record.add_argument(
        "-o", "--output", default="trace.json.gz", help="trace file (default trace.json.gz)"
    )
    record.add_argument(
        "--steps", type=int, help="record N optimizer steps (after --wait steps and one warm-up)"
    )
    record.add_argument("--wait", type=int, default=0, help="steps to skip first (with --steps)")
    record.add_argument(
        "--no-exact-ops",
        dest="exact_ops",
        action="store_false",
        help="no brrr.line annotations around operators (less overhead, coarser lines)",
    )
    record.add_argument("program", nargs=argparse.REMAINDER, help="-- python train.py [args ...]")
    return parser


def _add_max_events(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-events",
        type=_count(1),
        default=AnalysisOptions.max_events,
        metavar="N",
        help=f"read at most N events of a trace (default {AnalysisOptions.max_events:,}); "
        "a bound against inputs that inflate without end",
    )


def sample_trace() -> Path:
    return Path(str(resources.files("brrr_trace") / "data" / SAMPLE_NAME))


def _default_traces() -> tuple[list[Path], bool]:
    """The traces in the current folder itself (not below it), else the bundled sample."""
    from brrr_trace.traces.discovery import traces_in

    here = traces_in(Path.cwd())
    if here:
        return here, False
    return [sample_trace()], True


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "record":
        return _record(args)
    if args.command == "serve":
        from brrr_trace.server import serve  # pygls is imported only for the server

        return serve(tcp_port=args.tcp, host=args.host, verbose=args.verbose)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="brrr-trace: %(message)s")
    try:
        return _diff(args) if args.command == "diff" else _analyze(args)
    except BrrrError as error:
        _say(str(error))
        return 2
    except KeyboardInterrupt:
        return 130
    except OSError as error:  # the machine's, not ours: a file vanished, a disk failed or filled
        if args.debug or os.environ.get("BRRR_TRACE_DEBUG"):
            traceback.print_exc()
        where = f"{error.filename}: " if error.filename else ""
        _say(f"{where}{error.strerror or error}.")
        return 2
    except Exception as error:  # the last line of defence: one sentence, never a traceback
        if args.debug or os.environ.get("BRRR_TRACE_DEBUG"):
            traceback.print_exc()
        _say(
            f"internal error ({type(error).__name__}: {error}). Please report it with "
            "the trace if you can; rerun with --debug for details."
        )
        return 1


def _say(message: str) -> None:
    """One line on stderr; the message may quote a trace or a file name, so it is neutralised."""
    print(f"brrr-trace: {terminal_safe(message)}", file=sys.stderr)


def _analyze(args: argparse.Namespace) -> int:
    from brrr_trace.pipeline import analyze, runs_in
    from brrr_trace.render import json as render_json
    from brrr_trace.render import text as render_text

    traces = [Path(t) for t in args.traces]
    if args.ray is not None and args.ray != "local" and Path(args.ray).exists():
        traces.insert(0, Path(args.ray))  # `--ray DIR`: DIR is a trace, not an address
        args.ray = "local"
    used_sample = False
    if not traces:
        traces, used_sample = _default_traces()
    for trace in traces:
        _check_input(trace)
    # The bundled sample was recorded from workloads.py, shipped beside it: its lines resolve.
    source_root = args.source_root or (str(sample_trace().parent) if used_sample else None)
    options = AnalysisOptions(
        source_root=source_root,
        device=args.device,
        rank=args.rank,
        # The same semantics as the editor's excludeFiles / includeFiles settings.
        excluded_files=DEFAULT_EXCLUDED_FILES + tuple(args.exclude),
        included_files=tuple(args.include),
        max_events=args.max_events,
        run=args.run,
        jobs=args.jobs or 0,
        ray=args.ray,
    )
    with report_output(args.output, sys.stdout.write) as emit:
        reports = []
        for trace in traces:
            # A folder of several runs: one report per run (ranks are merged within a run only).
            count = len(runs_in(trace, options)) if trace.is_dir() and args.run is None else 1
            for run in range(count):
                each = dataclasses.replace(options, run=run) if count > 1 else options
                with _progress(trace) as progress:
                    reports.append(analyze(trace, each, progress))
        if args.format == "json":
            if len(reports) == 1:
                out = render_json.render(reports[0])
            else:
                out = "[\n" + ",\n".join(render_json.render(r).rstrip() for r in reports) + "\n]\n"
        else:
            color = args.output is None and sys.stdout.isatty()
            out = "\n".join(render_text.render(r, top=args.top, color=color) for r in reports)
        if used_sample:
            print(
                "brrr-trace: no trace in the current folder (no .json or .json.gz file that "
                "reads like a torch.profiler trace); analyzing the bundled sample trace "
                f"({SAMPLE_NAME}, recorded on an NVIDIA H200). Pass a trace file to analyze it.",
                file=sys.stderr,
            )
        emit(out)
    return 0


def _check_input(path: Path) -> None:
    """A missing or unreadable input said in one line before anything is analyzed."""
    try:
        path.stat()
    except FileNotFoundError:
        raise BrrrError(f"{path}: no such file or folder.") from None
    except OSError as error:
        raise BrrrError(f"{path}: cannot be read ({error.strerror}).") from None
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise BrrrError(f"{path}: cannot be read (permission denied).")


def _diff(args: argparse.Namespace) -> int:
    from brrr_trace.diff import compare
    from brrr_trace.pipeline import analyze
    from brrr_trace.render import json as render_json
    from brrr_trace.render import text as render_text

    paths = [Path(args.before), Path(args.after)]
    for path in paths:
        _check_input(path)
    options = AnalysisOptions(source_root=args.source_root, max_events=args.max_events)
    with report_output(args.output, sys.stdout.write) as emit:
        reports = []
        for path in paths:
            with _progress(path) as progress:
                reports.append(analyze(path, options, progress))
        result = compare(*reports)
        if args.format == "json":
            out = render_json.render_diff(result)
        else:
            color = args.output is None and sys.stdout.isatty()
            out = render_text.render_diff(result, top=args.top, color=color)
        emit(out)
    return 0


def _record(args: argparse.Namespace) -> int:
    """Exit code: the program's own; 2 for a bad command line or a missing torch."""
    if (args.steps is not None and args.steps < 1) or args.wait < 0:
        print("brrr-trace: --steps must be at least 1 and --wait at least 0", file=sys.stderr)
        return 2
    if args.wait and args.steps is None:
        print("brrr-trace: --wait needs --steps", file=sys.stderr)
        return 2
    from brrr_trace.recording.runner import UsageError, check_runnable, run_program

    try:
        check_runnable(args.program)
    except UsageError as error:
        print(f"brrr-trace record: {error}", file=sys.stderr)
        return 2
    return run_program(
        args.program,
        path=args.output,
        steps=args.steps,
        wait=args.wait,
        exact_ops=args.exact_ops,
    )


class _BarProgress:
    def __init__(self, name: str) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            transient=True,
            console=None,
        )
        self._progress.console.file = sys.stderr
        self._task = self._progress.add_task(f"reading {name}", total=None)

    def __enter__(self) -> _BarProgress:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def __call__(self, done: int, total: int) -> None:
        self._progress.update(self._task, completed=done, total=total)


def _progress(trace: Path) -> _BarProgress | nullcontext[None]:
    try:
        big = trace.is_file() and trace.stat().st_size >= _PROGRESS_MIN_BYTES
    except OSError:
        big = False
    if big and sys.stderr.isatty():
        return _BarProgress(trace.name)
    return nullcontext(None)


if __name__ == "__main__":
    raise SystemExit(main())
