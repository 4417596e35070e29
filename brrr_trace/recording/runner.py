"""Running the user's program in this process under a recorder: ``brrr-trace record -- …``.

The program runs as ``python script.py args…`` or ``python -m module args…`` would run it
(``runpy``, its own ``sys.argv`` and ``sys.path[0]``), and its exit code is the command's. An
uncaught exception prints the traceback Python would print, without brrr-trace's and runpy's
frames on top of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import runpy
import sys
import traceback
from collections.abc import Sequence
from typing import Any, Literal

from brrr_trace.recording.recorder import Recorder
from brrr_trace.recording.user_code import is_own_file

ProgramKind = Literal["script", "module"]


class UsageError(Exception):
    """A ``brrr-trace record`` command line that cannot run: a bad one, or no torch to run it."""


def check_runnable(program: Sequence[str]) -> None:
    """Raise :class:`UsageError` unless ``program`` can be run and recorded here."""
    parse_program(program)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError(
            "PyTorch is not installed in this environment (pip install torch)"
        ) from None


def parse_program(program: Sequence[str]) -> tuple[ProgramKind, str, list[str]]:
    """``[python] script.py args…`` or ``[python] -m module args…`` -> (kind, target, argv)."""
    words = list(program)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise UsageError("nothing to run: brrr-trace record -- python train.py [args…]")
    if _looks_like_python(words[0]):
        words = words[1:]
    if not words:
        raise UsageError("nothing to run after the interpreter: give a script or -m module")
    first = words[0]
    if first == "-m":
        if len(words) < 2:
            raise UsageError("-m needs a module name")
        return "module", words[1], [words[1], *words[2:]]
    if first.startswith("-m") and len(first) > 2:
        return "module", first[2:], [first[2:], *words[1:]]
    if first.startswith("-") and first != "-":
        raise UsageError(
            f"the program runs inside brrr-trace's interpreter, so python options like {first} "
            "cannot apply; give `python script.py …` or `python -m module …`"
        )
    if not os.path.exists(first):
        raise UsageError(f"{first}: no such file")
    return "script", first, words


def _looks_like_python(word: str) -> bool:
    name = os.path.basename(word).lower()
    if name.endswith(".exe"):
        name = name[:-4]
    if os.path.exists(word) and os.path.isfile(word) and word.endswith(".py"):
        return False
    return re.fullmatch(r"python(\d+(\.\d+)?)?[a-z]?", name) is not None or (
        os.path.exists(word) and os.path.realpath(word) == os.path.realpath(sys.executable)
    )


def run_program(
    program: Sequence[str],
    *,
    path: str | os.PathLike[str] = "trace.json.gz",
    steps: int | None = None,
    wait: int = 0,
    exact_ops: bool = True,
) -> int:
    """Run ``python script.py args…`` / ``python -m module args…`` in this process under a
    :class:`Recorder`; returns the program's exit code (1 after an uncaught exception)."""
    kind, target, argv = parse_program(program)
    display = str(path)

    def written(rec: Recorder) -> None:
        if steps is not None:  # mid-run: say so now, the program goes on
            _say_written(rec, display)

    recorder = Recorder(path, steps=steps, wait=wait, exact_ops=exact_ops, on_written=written)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = argv
    if kind == "script":
        script_dir = os.path.dirname(os.path.abspath(target))
        if sys.path:
            sys.path[0] = script_dir
        else:
            sys.path.insert(0, script_dir)
    elif sys.path:
        sys.path[0] = os.getcwd()
    code = 0
    try:
        try:
            with recorder:
                if kind == "module":
                    runpy.run_module(target, run_name="__main__", alter_sys=True)
                else:
                    runpy.run_path(target, run_name="__main__")
        except SystemExit as exit_:
            code = _exit_code(exit_.code)
        except KeyboardInterrupt as error:
            _print_user_traceback(error)
            code = 130
        except BaseException as error:
            _print_user_traceback(error)
            code = 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    if recorder.written:
        if steps is None:
            _say_written(recorder, display)
    elif steps is not None:
        need = wait + 1 + steps
        print(
            f"brrr-trace: nothing recorded: the program made {recorder.steps_seen} optimizer "
            f"step(s), and --steps {steps} --wait {wait} needs {need}; "
            "record without --steps to profile the whole run",
            file=sys.stderr,
        )
    return code


def _say_written(rec: Recorder, display: str) -> None:
    what = ""
    if rec.steps is not None:
        what = f" ({rec.steps_recorded} of {rec.steps} steps)"
        if rec.steps_recorded >= rec.steps:
            what = f" ({rec.steps} steps)"
    print(
        f"brrr-trace: trace written to {display}{what}; "
        f"analyze it with: brrr-trace analyze {display}",
        file=sys.stderr,
    )
    with contextlib.suppress(Exception):
        sys.stderr.flush()


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"), as Python does
    return 1


_RUNPY_FILE = os.path.abspath(runpy.__file__)


def _print_user_traceback(error: BaseException) -> None:
    """The traceback Python would print: without brrr-trace's and runpy's frames on top."""
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        runpy_frame = filename.startswith("<frozen runpy") or (
            os.path.abspath(filename) == _RUNPY_FILE
        )
        if not (runpy_frame or is_own_file(filename)):
            break
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)
