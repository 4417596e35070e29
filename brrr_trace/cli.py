"""Command line: ``brrr-trace analyze``. Exit codes: 0 ok, 2 bad input, 1 internal error; 3 from
``diff --fail-on-regression`` when the step or a line regressed."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import NoReturn

from brrr_trace import __version__, dataclass_code
from brrr_trace.errors import BrrrError
from brrr_trace.options import DEFAULT_EXCLUDED_FILES, AnalysisOptions
from brrr_trace.output import report_output
from brrr_trace.safe_text import terminal_safe

log = logging.getLogger("brrr_trace")

SAMPLE_NAME = "sample_trace.json.gz"
# A load that takes longer than this shows a progress bar (on a terminal, on stderr).
_PROGRESS_AFTER_S = 1.0
# The text report's width when stdout is no terminal (a file, a pipe).
_DEFAULT_WIDTH = 130
REGRESSION_EXIT = 3


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


def _path_map(text: str) -> tuple[str, str]:
    """An argparse type: ``FROM=TO``, a trace path prefix and the local folder it maps onto."""
    source, sep, local = text.partition("=")
    if not sep or not source or not local:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not FROM=TO (a path prefix in the trace = the local folder)"
        )
    return source, local


def _percent(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (a percentage)") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a percentage of at least 0, not {text}")
    return value


def _add_path_map(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path-map",
        action="append",
        default=[],
        type=_path_map,
        metavar="FROM=TO",
        help="trace paths starting with FROM are files under the local folder TO (repeatable; "
        "the editor's pathMappings setting)",
    )


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
    analyze.add_argument(
        "--format",
        choices=("text", "json", "sarif", "perfetto", "html"),
        default="text",
        help="text (default), json (the report contract), sarif (findings for code scanning), "
        "perfetto (the trace with the analysis as extra tracks, for ui.perfetto.dev), "
        "html (one self-contained page to share: summary, timeline, lines with their source, "
        "findings; use it with -o)",
    )
    analyze.add_argument("-o", "--output", help="write the report to this file")
    analyze.add_argument("--top", type=_count(1), default=20, help="lines to show (text format)")
    analyze.add_argument(
        "--source-root", help="folder the trace's source paths map onto (default: current folder)"
    )
    _add_path_map(analyze)
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
    diff.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    diff.add_argument("-o", "--output", help="write the comparison to this file")
    diff.add_argument("--top", type=_count(1), default=20, help="lines to show (text format)")
    diff.add_argument("--source-root", help="folder the traces' source paths map onto")
    _add_path_map(diff)
    diff.add_argument(
        "--fail-on-regression",
        type=_percent,
        metavar="PCT",
        help=f"exit {REGRESSION_EXIT} when the step time or a line grew by more than PCT "
        "percent (a CI gate)",
    )
    diff.add_argument("--sarif", metavar="FILE", help="also write the regressions as SARIF to FILE")
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
    from importlib import resources  # ~12 ms of every start, for this command only

    return Path(str(resources.files("brrr_trace") / "data" / SAMPLE_NAME))


def _default_traces() -> tuple[list[Path], bool]:
    """The traces in the current folder itself (not below it), else the bundled sample."""
    from brrr_trace.traces.discovery import traces_in

    here = traces_in(Path.cwd())
    if here:
        return here, False
    return [sample_trace()], True


def main(argv: Sequence[str] | None = None) -> int:
    return _command(argv)[0]


def run() -> NoReturn:
    """The command's entry point (``brrr-trace``, ``python -m brrr_trace``): ``main``, then,
    after ``analyze`` and ``diff``, out without the interpreter's teardown. Freeing every object
    of the analysis one by one and a last garbage collection took ~0.15 s of a 5 MB trace's
    ~0.8 s, and nothing of them is needed once the report is written."""
    code, quick = _command(None)
    if quick:
        _exit_now(code)
    raise SystemExit(code)


def _exit_now(code: int) -> NoReturn:
    """``os._exit`` once what the teardown would still do for us is done: the log handlers and
    the standard streams flushed. Anything unusual (a stream that cannot be flushed, a thread
    still running, Ray imported) takes the interpreter's own way out instead."""
    if threading.active_count() == 1 and "ray" not in sys.modules:
        dataclass_code.save()  # os._exit runs no atexit hook
        try:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


def _command(argv: Sequence[str] | None) -> tuple[int, bool]:
    """The exit code, and whether the process may end without the interpreter's teardown
    (not after ``record``, which ran the user's program, nor ``serve``)."""
    args = _parser().parse_args(argv)
    if args.command == "record":
        return _record(args), False
    if args.command == "serve":
        from brrr_trace.server import serve  # pygls is imported only for the server

        return serve(tcp_port=args.tcp, host=args.host, verbose=args.verbose), False
    return _analysis(args), True


def _analysis(args: argparse.Namespace) -> int:
    # The analysis does no linear algebra: without this, numpy's OpenBLAS starts a thread per
    # core at import, which costs ~0.05-0.1 CPU s of a 5 MB trace's ~0.7 (not for ``record``,
    # whose program is the user's, nor the server's long-lived process).
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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


def _mappings(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    from brrr_trace.analyzers.paths import path_mapping

    return tuple(path_mapping(source, local, os.getcwd()) for source, local in args.path_map)


def _color() -> bool:
    """Colour on a terminal, unless NO_COLOR is set (no-color.org: to anything but "")."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _width() -> int:
    """The terminal's width (COLUMNS first, as shutil reads it); 130 for a file or a pipe,
    whatever COLUMNS says (test runners and CI set it for their own output)."""
    if not sys.stdout.isatty():
        return _DEFAULT_WIDTH
    return max(40, shutil.get_terminal_size((_DEFAULT_WIDTH, 24)).columns)


def _analyze(args: argparse.Namespace) -> int:
    from brrr_trace.pipeline import analyze, runs_in
    from brrr_trace.traces.urls import is_url, scheme_of

    given = list(args.traces)
    ray = args.ray
    if (
        ray is not None
        and ray != "local"
        and (Path(ray).exists() or (is_url(ray) and scheme_of(ray) != "ray"))
    ):
        given.insert(0, ray)  # `--ray DIR` (or URL): DIR is a trace, not an address
        args.ray = "local"
    # The URLs given are one set of traces, read like a folder (the ranks of a run).
    urls = [t for t in given if is_url(t)]
    traces: list[Path | str | list[str]] = [Path(t) for t in given if not is_url(t)]
    if urls:
        traces.insert(
            next(i for i, t in enumerate(given) if is_url(t)), urls[0] if len(urls) == 1 else urls
        )
    used_sample = False
    if not traces:
        found, used_sample = _default_traces()
        traces = list(found)
    for trace in traces:
        if isinstance(trace, Path):
            _check_input(trace)
    for _, local in args.path_map:
        if is_url(local):
            raise BrrrError(
                f"{local}: a URL cannot be a path mapping's target; source files are read only "
                "from local folders, while a trace may be at a URL."
            )
    if args.format == "perfetto" and len(traces) > 1:
        raise BrrrError(
            f"--format perfetto writes one trace with its analysis; {len(traces)} were given. "
            "Run it once per trace."
        )
    if args.format == "html" and len(traces) > 1:
        raise BrrrError(
            f"--format html writes one page for one trace, and {len(traces)} were given; "
            "run it once per trace (a folder of rank traces counts as one)."
        )
    # The bundled sample was recorded from workloads.py, shipped beside it: its lines resolve.
    source_root = args.source_root or (str(sample_trace().parent) if used_sample else None)
    options = AnalysisOptions(
        source_root=source_root,
        path_mappings=_mappings(args),
        device=args.device,
        rank=args.rank,
        # The same semantics as the editor's excludeFiles / includeFiles settings.
        excluded_files=DEFAULT_EXCLUDED_FILES + tuple(args.exclude),
        included_files=tuple(args.include),
        max_events=args.max_events,
        run=args.run,
        jobs=args.jobs or 0,
        ray=args.ray,
        timeline_tracks=args.format == "perfetto",
    )
    if args.format == "perfetto":
        return _perfetto(args, traces[0], options)
    with report_output(args.output, sys.stdout.write) as emit:
        reports = []
        for trace in traces:
            # A folder of several runs: one report per run (ranks are merged within a run only).
            several = not isinstance(trace, Path) or trace.is_dir()
            count = len(runs_in(trace, options)) if several and args.run is None else 1
            for run in range(count):
                each = dataclasses.replace(options, run=run) if count > 1 else options
                with _progress(trace) as progress:
                    reports.append(analyze(trace, each, progress))
        # Only the renderer asked for is imported: rich costs the JSON output ~50 ms of start.
        if args.format == "html":
            from brrr_trace.render import html as render_html

            out = render_html.render(reports[0], options.max_source_bytes)
        elif args.format == "json":
            from brrr_trace.render import json as render_json

            out = render_json.render_many(reports)
        elif args.format == "sarif":
            from brrr_trace.render import sarif

            out = sarif.render(reports, source_root or os.getcwd(), options)
        else:
            from brrr_trace.render import text as render_text

            color = args.output is None and _color()
            width = _width() if args.output is None else _DEFAULT_WIDTH
            out = "\n".join(
                render_text.render(r, top=args.top, color=color, width=width) for r in reports
            )
        if used_sample:
            print(
                "brrr-trace: no trace in the current folder (no .json or .json.gz file that "
                "reads like a torch.profiler trace); analyzing the bundled sample trace "
                f"({SAMPLE_NAME}, recorded on an NVIDIA H200). Pass a trace file to analyze it.",
                file=sys.stderr,
            )
        emit(out)
    return 0


def _perfetto(
    args: argparse.Namespace, trace: Path | str | list[str], options: AnalysisOptions
) -> int:
    from brrr_trace.output import replaced_atomically
    from brrr_trace.pipeline import analyze
    from brrr_trace.render import perfetto

    if args.output is None and sys.stdout.isatty():
        raise BrrrError(
            "--format perfetto writes a whole trace; give -o FILE.json (then open it in "
            "ui.perfetto.dev), or redirect the output to a file."
        )
    if args.output is not None:
        with replaced_atomically(args.output) as stream:  # checked before the analysis
            with _progress(trace) as progress:
                report = analyze(trace, options, progress)
            perfetto.write(report, stream)
        return 0
    with _progress(trace) as progress:
        report = analyze(trace, options, progress)
    perfetto.write(report, sys.stdout.buffer)
    sys.stdout.buffer.flush()
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
    from brrr_trace.diff import compare, regressions
    from brrr_trace.pipeline import analyze

    paths = [Path(args.before), Path(args.after)]
    for path in paths:
        _check_input(path)
    options = AnalysisOptions(
        source_root=args.source_root, path_mappings=_mappings(args), max_events=args.max_events
    )
    source_root = args.source_root or os.getcwd()
    percent = args.fail_on_regression
    gate = percent is not None
    sarif_file = args.sarif
    if (
        sarif_file is not None
        and args.output is not None
        and (os.path.abspath(sarif_file) == os.path.abspath(args.output))
    ):
        raise BrrrError(f"--sarif {sarif_file}: is also the -o file; name another file.")
    # Both outputs are checked before the analysis; each is written whole once it is done.
    sarif_target = (
        report_output(sarif_file, sys.stdout.write) if sarif_file is not None else nullcontext()
    )
    with report_output(args.output, sys.stdout.write) as emit, sarif_target as write_sarif:
        reports = []
        for path in paths:
            with _progress(path) as progress:
                reports.append(analyze(path, options, progress))
        result = compare(*reports)
        # Without a gate, SARIF lists what grew by more than nothing: every regression.
        found = regressions(result, percent or 0.0, options.regression_min_share)
        if args.format == "json":
            from brrr_trace.render import json as render_json

            out = render_json.render_diff(result)
        elif args.format == "sarif":
            from brrr_trace.render import sarif

            out = sarif.render_regressions(found, source_root, result.after.trace.path, options)
        else:
            from brrr_trace.render import text as render_text

            color = args.output is None and _color()
            width = _width() if args.output is None else _DEFAULT_WIDTH
            out = render_text.render_diff(result, top=args.top, color=color, width=width)
        if write_sarif is not None:
            from brrr_trace.render import sarif

            write_sarif(
                sarif.render_regressions(found, source_root, result.after.trace.path, options)
            )
        emit(out)
    if gate and found:
        for regression in found:
            _say(f"regression: {regression.summary}.")
        return REGRESSION_EXIT
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
    """A bar on stderr that appears only once a load has taken more than a second: a small
    trace shows none, a big one (or a small gzip that inflates to a big one) does."""

    def __init__(self, name: str, delay_s: float = _PROGRESS_AFTER_S) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._progress = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            transient=True,
            console=Console(file=sys.stderr),
        )
        self._task = self._progress.add_task(f"reading {name}", total=None)
        self._timer = threading.Timer(delay_s, self._progress.start)
        self._timer.daemon = True

    def __enter__(self) -> _BarProgress:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()
        self._timer.join()
        self._progress.stop()

    def __call__(self, done: int, total: int) -> None:
        self._progress.update(self._task, completed=done, total=total)


def _progress(trace: Path | str | list[str]) -> _BarProgress | nullcontext[None]:
    if sys.stderr.isatty():
        if isinstance(trace, Path):
            return _BarProgress(trace.name)
        from brrr_trace.traces.urls import name_of

        return _BarProgress(name_of(trace if isinstance(trace, str) else trace[0]))
    return nullcontext(None)


if __name__ == "__main__":
    run()
