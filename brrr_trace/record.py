"""Record a torch.profiler trace with the settings brrr-trace needs, plus exact call-site lines.

``record(path)`` is a context manager and a decorator; ``run_program`` runs a script or module
in-process under it (``brrr-trace record -- python train.py …``). The trace is Kineto's own Chrome
trace (CPU + CUDA activities, shapes, Python stacks), with two additions that other tools ignore:

* every ``python_function`` event gets ``args["brrr call line"]``: the line in the *caller's* frame
  where the call happened (Kineto only names the callee's ``def`` line). It comes from the
  profiler's in-process event tree, matched to the exported events by (start ns, name); ``0`` means
  the event could not be matched;
* with ``exact_ops`` (the default), every torch call made directly from user code runs inside a
  ``user_annotation`` named ``brrr.line <N>`` (N: the line of the call in the user's frame), so
  operators without a Python call event (``a @ b``, ``x[i] = v``) get their line too. The Python
  events of that machinery are removed from the exported trace.

The top-level key ``brrr_record`` says what was recorded (version, torch version, exact_ops).
This is the only module of brrr-trace that imports torch, always inside functions.
"""

from __future__ import annotations

import contextlib
import decimal
import dis
import functools
import gzip
import io
import json
import os
import re
import runpy
import site
import sys
import sysconfig
import traceback
import types
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Recorder", "record", "run_program"]

FORMAT_VERSION = 1
CALL_LINE_ARG = "brrr call line"
LINE_ANNOTATION = "brrr.line "
_F = TypeVar("_F", bound=Callable[..., Any])


class Recorder:
    """Record a trace to ``path`` (gzipped when it ends in ``.gz``); a context manager or decorator.

    ``steps=None`` records everything inside the block. ``steps=N`` records N steps after
    ``wait`` steps and one warm-up step: a step ends at every ``optimizer.step()``
    (``auto_step``), or at every ``Recorder.step()`` call when ``auto_step=False``. The trace is
    written as soon as the N steps are done, or when the block ends with some of them recorded.
    ``exact_ops`` adds ``brrr.line N`` annotations around the torch calls made directly from
    user code (several µs per call while recording).

    After the block: ``written`` (bool), ``path``, ``steps_recorded`` and ``stats`` (call lines
    matched / unmatched, hidden events).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "trace.json.gz",
        *,
        steps: int | None = None,
        wait: int = 0,
        exact_ops: bool = True,
        auto_step: bool = True,
        on_written: Callable[[Recorder], None] | None = None,
    ) -> None:
        if steps is not None and (not isinstance(steps, int) or steps < 1):
            raise ValueError(f"steps must be a positive integer or None, not {steps!r}")
        if not isinstance(wait, int) or wait < 0:
            raise ValueError(f"wait must be a non-negative integer, not {wait!r}")
        if wait and steps is None:
            raise ValueError("wait needs steps")
        self.path = Path(path)
        self.steps = steps
        self.wait = wait
        self.exact_ops = exact_ops
        self.auto_step = auto_step
        self.on_written = on_written
        self.written = False
        self.steps_seen = 0
        self.steps_recorded = 0
        self.stats: dict[str, int] = {}
        self._prof: Any = None
        self._mode: Any = None
        self._hook: Any = None
        self._clock: Any = None
        self._other_steps = 0
        self._in_step_wrapper = 0
        self._wrapped: list[tuple[Any, Any, Any]] = []  # (optimizer ref, wrapper, previous)
        self._metadata_added = False
        self._running = False
        self._broken = False

    # -- context manager / decorator -------------------------------------------------------------

    def __enter__(self) -> Recorder:
        if self._running:
            raise RuntimeError("this Recorder is already recording")
        import torch
        from torch.profiler import ProfilerActivity, profile, schedule

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.written = self._broken = False
        self.steps_seen = self.steps_recorded = 0
        self._metadata_added = False
        self._running = True
        if self.exact_ops:
            self._mode = _line_mode()
            self._mode.__enter__()
        kwargs: dict[str, Any] = {}
        if self.steps is not None:
            kwargs["schedule"] = schedule(wait=self.wait, warmup=1, active=self.steps, repeat=1)
            kwargs["on_trace_ready"] = self._trace_ready
        self._prof = profile(
            activities=activities,
            record_shapes=True,
            with_stack=True,
            profile_memory=False,
            **kwargs,
        )
        try:
            with _quiet_profiler():
                self._prof.start()
            if self.steps is not None and self.auto_step:
                from torch.optim.optimizer import register_optimizer_step_post_hook

                self._hook = register_optimizer_step_post_hook(_optimizer_hook(weakref.ref(self)))
            self._sync()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if not self._running:
            return
        prof = self._prof
        try:
            if self._hook is not None:
                self._hook.remove()
                self._hook = None
            if self._mode is not None:
                self._mode.active = False
            if self.steps is None:
                prof.stop()
                self._write(prof)
            else:
                if not self.written and _is_recording(prof):
                    self.steps_recorded = self._steps_in_window(prof)
                prof.stop()  # calls _trace_ready when steps were being recorded
        except Exception as error:
            if exc_type is None:
                raise
            _warn(f"could not write the trace ({type(error).__name__}: {error})")
        finally:
            self._teardown()

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._copy():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _copy(self) -> Recorder:
        return Recorder(
            self.path,
            steps=self.steps,
            wait=self.wait,
            exact_ops=self.exact_ops,
            auto_step=self.auto_step,
            on_written=self.on_written,
        )

    def step(self) -> None:
        """End a step of the ``steps`` window (only needed with ``auto_step=False``)."""
        if not self._running or self.steps is None or self.written:
            return
        self.steps_seen += 1
        with _quiet_profiler():
            self._prof.step()
        self._sync()

    # -- internals -------------------------------------------------------------------------------

    def _on_optimizer_hook(self, optimizer: Any) -> None:
        """The global post-hook runs inside ``optimizer.step``'s ``Optimizer.step#`` annotation;
        stepping the profiler there would cut that annotation. So the first step of an optimizer
        is counted here, and the optimizer's ``step`` gets wrapped so that later steps are
        counted when it returns."""
        if self._in_step_wrapper or self._broken:
            return
        self._wrap_step(optimizer)
        self._optimizer_step(optimizer)

    def _wrap_step(self, optimizer: Any) -> None:
        if self.written or any(ref() is optimizer for ref, _, _ in self._wrapped):
            return
        previous = optimizer.__dict__.get("step", _MISSING)
        try:
            wrapper = _step_wrapper(optimizer.step, weakref.ref(self), weakref.ref(optimizer))
            optimizer.step = wrapper
        except Exception:  # an optimizer that refuses attributes: steps stay counted in the hook
            return
        self._wrapped.append((weakref.ref(optimizer), wrapper, previous))

    def _unwrap_steps(self) -> None:
        for ref, wrapper, previous in self._wrapped:
            optimizer = ref()
            if optimizer is None or optimizer.__dict__.get("step") is not wrapper:
                continue
            with contextlib.suppress(Exception):
                if previous is _MISSING:
                    del optimizer.step
                else:
                    optimizer.step = previous
        self._wrapped = []

    def _optimizer_step(self, optimizer: Any) -> None:
        """Runs inside the user's ``optimizer.step()``: never lets an error of ours out."""
        try:
            self._count_step(optimizer)
        except Exception as error:
            _warn(f"recording stopped ({type(error).__name__}: {error})")
            self._broken = True
            if self._mode is not None:
                self._mode.active = False

    def _count_step(self, optimizer: Any) -> None:
        # A step is one step of one optimizer (the first seen); a second optimizer that steps
        # twice while the first one does not takes over (the first one was replaced).
        if optimizer is None or self._broken:
            return
        if self._clock is None or self._clock() is None:
            self._clock = weakref.ref(optimizer)
        if self._clock() is not optimizer:
            self._other_steps += 1
            if self._other_steps < 2:
                return
            self._clock = weakref.ref(optimizer)
        self._other_steps = 0
        self.step()

    def _sync(self) -> None:
        prof = self._prof
        recording = _is_recording(prof) if self.steps is not None else True
        if recording and not self._metadata_added:
            self._add_metadata(prof)
        if self._mode is not None:
            self._mode.active = recording and not self.written

    def _add_metadata(self, prof: Any) -> None:
        import torch

        info = {"version": FORMAT_VERSION, "torch_version": torch.__version__}
        info["exact_ops"] = self.exact_ops
        prof.add_metadata_json("brrr_record", json.dumps(info))
        prof.add_metadata_json("torch_version", json.dumps(torch.__version__))
        self._metadata_added = True

    def _steps_in_window(self, prof: Any) -> int:
        return max(0, prof.step_num - self.wait - 1)

    def _trace_ready(self, prof: Any) -> None:
        if self._mode is not None:
            self._mode.active = False
        if not self.steps_recorded:
            self.steps_recorded = min(self.steps or 0, self._steps_in_window(prof))
        self._write(prof)

    def _write(self, prof: Any) -> None:
        if self.written:
            return
        self.stats = export(prof, self.path, exact_ops=self.exact_ops)
        self.written = True
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self.on_written is not None:
            self.on_written(self)

    def _teardown(self) -> None:
        self._running = False
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._unwrap_steps()
        if self._mode is not None:
            _remove_mode(self._mode)
            self._mode = None
        self._prof = None


_MISSING = object()


# `brrr_trace.record(path, ...)`: the recording itself is the context manager and decorator.
record = Recorder


def _optimizer_hook(ref: weakref.ref[Recorder]) -> Callable[..., None]:
    def hook(optimizer: Any, _args: Any, _kwargs: Any) -> None:
        recorder = ref()
        if recorder is not None and recorder._running:
            recorder._on_optimizer_hook(optimizer)

    return hook


def _step_wrapper(
    inner: Callable[..., Any], rec_ref: weakref.ref[Recorder], opt_ref: weakref.ref[Any]
) -> Callable[..., Any]:
    def step(*args: Any, **kwargs: Any) -> Any:
        recorder = rec_ref()
        live = recorder is not None and recorder._running
        if live:
            recorder._in_step_wrapper += 1
        try:
            out = inner(*args, **kwargs)
        finally:
            if live:
                recorder._in_step_wrapper -= 1
        if live and recorder._running:
            recorder._optimizer_step(opt_ref())
        return out

    return step


def _inner_code(outer: Callable[..., Any], name: str) -> Any:
    return next(c for c in outer.__code__.co_consts if getattr(c, "co_name", None) == name)


_STEP_CODE = _inner_code(_step_wrapper, "step")
_HOOK_CODE = _inner_code(_optimizer_hook, "hook")


@contextlib.contextmanager
def _quiet_profiler() -> Iterator[None]:
    """Without torch's warning that a schedule's cycles are not accumulated: ours has one."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each")
        yield


def _warn(message: str) -> None:
    print(f"brrr-trace: {message}", file=sys.stderr)


def _is_recording(prof: Any) -> bool:
    from torch.profiler import ProfilerAction

    return prof.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


# -- exact lines for operators: the torch function mode --------------------------------------------

_LINE_MODE_CLASS: Any = None
_HANDLER_DEF_LINE = 0
_HANDLER_CALL_LINE = 0


def _line_mode() -> Any:
    global _LINE_MODE_CLASS, _HANDLER_DEF_LINE, _HANDLER_CALL_LINE
    if _LINE_MODE_CLASS is None:
        _LINE_MODE_CLASS = _make_line_mode_class()
        code = _LINE_MODE_CLASS.__torch_function__.__code__
        _HANDLER_DEF_LINE = code.co_firstlineno
        _HANDLER_CALL_LINE = _call_ex_line(code)
    return _LINE_MODE_CLASS()


def _call_ex_line(code: Any) -> int:
    """The line of the one ``func(*args, **kwargs)`` in the mode's handler."""
    line = 0
    for instr in dis.get_instructions(code):
        positions = getattr(instr, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        elif isinstance(instr.starts_line, int) and not isinstance(instr.starts_line, bool):
            line = instr.starts_line
        if instr.opname == "CALL_FUNCTION_EX":
            return line
    raise RuntimeError("brrr-trace: cannot find the call in the line mode's handler")


def _make_line_mode_class() -> Any:
    import torch
    from torch.autograd import _record_function_with_args_enter as enter
    from torch.autograd import _record_function_with_args_exit as leave
    from torch.overrides import TorchFunctionMode

    # dynamo traces the handler: is_dynamo_compiling() is True there (and costs one call here)
    is_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)
    getframe = sys._getframe
    dispatch_code = torch.overrides.handle_torch_function.__code__
    user_code = _UserCode(torch)
    cache = user_code.cache
    classify = user_code.classify
    no_ops = _metadata_only(torch)
    accessor = type(torch.Tensor.shape.__get__)  # property get/set: no operator

    class LineMode(TorchFunctionMode):
        """Wraps torch calls made directly from user code in ``brrr.line N`` annotations."""

        active = False

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if kwargs is None:
                kwargs = {}
            handle = None
            # is_compiling() first: dynamo traces this handler and must not guard on `active`.
            if not is_compiling() and self.active:
                frame = getframe(1)
                for _ in range(6):  # skip torch's dispatch shims and other modes' handlers
                    code = frame.f_code
                    if code is dispatch_code:  # handle_torch_function <- the torch function
                        frame = frame.f_back
                        if frame is not None:
                            frame = frame.f_back
                    elif code.co_name == "__torch_function__":
                        frame = frame.f_back
                    else:
                        break
                    if frame is None:
                        break
                if frame is not None:
                    code = frame.f_code
                    try:  # no method calls here: each would be one more Python event to hide
                        user = cache[code]
                    except KeyError:
                        user = classify(code)
                    if user and func not in no_ops and type(func) is not accessor:
                        handle = enter(f"brrr.line {frame.f_lineno}")
            try:
                return func(*args, **kwargs)
            finally:
                if handle is not None:
                    leave(handle)

    return LineMode


def _metadata_only(torch: Any) -> frozenset[Any]:
    """Tensor methods that launch no operator: no annotation for them."""
    names = (
        "size",
        "dim",
        "stride",
        "numel",
        "nelement",
        "ndimension",
        "is_contiguous",
        "element_size",
        "data_ptr",
        "storage_offset",
        "is_floating_point",
        "is_complex",
        "get_device",
        "__len__",
        "__hash__",
        "requires_grad_",
        "retain_grad",
        "register_hook",
        "has_names",
        "is_pinned",
    )
    found = set()
    for name in names:
        fn = getattr(torch.Tensor, name, None)
        if fn is not None:
            with contextlib.suppress(TypeError):
                hash(fn)
                found.add(fn)
    return frozenset(found)


_EXAMPLES = os.path.normcase(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", ""))


class _UserCode:
    """Is a code object the user's: a real file outside torch, brrr_trace, the standard library,
    site-packages and inductor's cache of generated code? Cached per code object."""

    def __init__(self, torch: Any) -> None:
        self.cache: dict[Any, bool] = {}
        roots = [os.path.dirname(torch.__file__), os.path.dirname(__file__)]
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            with contextlib.suppress(KeyError):
                roots.append(sysconfig.get_paths()[key])
        roots.append(os.path.dirname(os.__file__))
        with contextlib.suppress(Exception):
            roots.extend(site.getsitepackages())
        with contextlib.suppress(Exception):
            roots.append(site.getusersitepackages())
        roots.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))  # inductor's generated code
        prefixes = set()
        for root in roots:
            if root:
                for variant in (os.path.abspath(root), os.path.realpath(root)):
                    prefixes.add(os.path.normcase(variant).rstrip(os.sep) + os.sep)
        self.prefixes = tuple(sorted(prefixes))

    def classify(self, code: Any) -> bool:
        self.cache[code] = user = self._is_user(code.co_filename)
        return user

    def _is_user(self, filename: str) -> bool:
        if not filename or filename.startswith("<") or not os.path.isfile(filename):
            return False
        for variant in (os.path.abspath(filename), os.path.realpath(filename)):
            path = os.path.normcase(variant)
            if path.startswith(_EXAMPLES):
                return True  # brrr_trace/data/: example workloads, user code like any other
            if path.startswith(self.prefixes):
                return False
            parts = path.split(os.sep)
            if "site-packages" in parts or "dist-packages" in parts:
                return False
            if any(part.startswith("torchinductor_") for part in parts):
                return False  # inductor's generated code: /tmp/torchinductor_<user>/…
        return True


def _remove_mode(mode: Any) -> None:
    """Take our mode off the torch function mode stack, leaving modes pushed above it."""
    from torch.overrides import _get_current_function_mode_stack, _pop_mode, _push_mode

    mode.active = False
    stack = _get_current_function_mode_stack()
    if not any(m is mode for m in stack):
        return
    above = []
    while True:
        top = _pop_mode()
        if top is mode:
            break
        above.append(top)
    for m in reversed(above):
        _push_mode(m)


# -- export: Kineto's JSON plus call lines ---------------------------------------------------------


class _PyNode:
    __slots__ = ("caller_line", "drop", "dur_ns", "new_parent", "python_id")

    def __init__(self, caller_line: int, dur_ns: int) -> None:
        self.caller_line = caller_line
        self.dur_ns = dur_ns
        self.drop = False
        self.new_parent: _PyNode | bool | None = False  # False: keep the exported parent id
        self.python_id: Any = None


def export(prof: Any, path: str | os.PathLike[str], *, exact_ops: bool) -> dict[str, int]:
    """Export a stopped profile to ``path`` with call lines added; returns counts for the record."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    raw = final.with_name(final.name + ".kineto.json")
    out = final.with_name(final.name + ".tmp")
    index: dict[tuple[int, str], list[_PyNode]] | None
    try:
        index = _index_tree(prof.profiler.kineto_results.experimental_event_tree())
    except Exception as error:  # an older or newer torch without the tree: lines become 0
        _warn(f"no call lines ({type(error).__name__}: {error})")
        index = None
    prof.export_chrome_trace(str(raw))
    try:
        stats = _rewrite(raw, out, index, final, exact_ops)
        os.replace(out, final)
    except Exception as error:
        _warn(
            f"could not add call lines ({type(error).__name__}: {error}); "
            "the trace is as torch wrote it"
        )
        with contextlib.suppress(OSError):
            out.unlink()
        _copy(raw, final)
        stats = {}
    finally:
        with contextlib.suppress(OSError):
            raw.unlink()
    return stats


def _copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as fin, _open_write(dst) as fout:
        while chunk := fin.read(1 << 22):
            fout.write(chunk)


def _open_write(path: Path, gz: bool | None = None) -> Any:
    if path.name.endswith(".gz") if gz is None else gz:
        return gzip.open(path, "wb", compresslevel=6)
    return open(path, "wb")


def _transparent_frames() -> dict[tuple[str, int], tuple[int, bool]]:
    """brrr-trace's own frames that run inside the user's program, hidden from the trace:
    (function, def line) -> (line of the call they pass through, keep that callee?)."""
    frames = {
        ("step", _STEP_CODE.co_firstlineno): (_call_ex_line(_STEP_CODE), True),
        ("hook", _HOOK_CODE.co_firstlineno): (-1, False),  # all plumbing
    }
    if _HANDLER_DEF_LINE:
        frames["__torch_function__", _HANDLER_DEF_LINE] = (_HANDLER_CALL_LINE, False)
    return frames


def _index_tree(roots: Sequence[Any]) -> dict[tuple[int, str], list[_PyNode]]:
    """(start ns, name) -> the Python events of the profiler's tree, with their caller lines.

    brrr-trace's own frames (the line mode's handler, the optimizer step wrapper) and what they
    call besides the call they pass through are marked to drop; the events under them are
    re-parented to the nearest kept ancestor."""
    from torch._C._profiler import _ExtraFields_PyCall as PyCall
    from torch._C._profiler import _ExtraFields_PyCCall as PyCCall

    index: dict[tuple[int, str], list[_PyNode]] = {}
    transparent = _transparent_frames()
    # stack items: (event, nearest kept python ancestor or None, python parent dropped?,
    #               region, (call line, keep callee, caller line) of the transparent frame)
    # region 0: normal; 1: directly inside a transparent frame; 2: inside its plumbing
    stack: list[tuple[Any, ...]] = [(e, None, False, 0, None) for e in roots]
    pop, push = stack.pop, stack.append
    while stack:
        item = pop()
        event = item[0]
        fields = event.extra_fields
        kind = type(fields)
        child = item[1:]
        if kind is PyCall or kind is PyCCall:
            _, kept, parent_dropped, region, frame = item
            caller = fields.caller
            node = _PyNode(caller.line_number, event.duration_time_ns)
            try:
                name = event.name
            except UnicodeDecodeError:
                # torch can hand out undecodable strings (names of freed code objects): such
                # an event is not indexed (its call line will be 0), its children still are
                name = ""
            else:
                key = (event.start_time_ns, name)
                same = index.get(key)
                if same is None:
                    index[key] = [node]
                else:
                    same.append(node)
            through = None
            if kind is PyCall and "record.py(" in name and _is_ours(fields.callsite):
                callsite = fields.callsite
                through = transparent.get((callsite.function_name, callsite.line_number))
            if region == 2:
                node.drop = True
            elif region == 1:
                call_line, keep_callee, outer_line = frame
                if not (caller.line_number == call_line and _is_ours(caller)):
                    node.drop = True  # plumbing
                    child = (kept, True, 2, None)
                elif keep_callee:  # seen from outside, the user called this
                    node.caller_line = outer_line
                    node.new_parent = kept
                    child = (node, False, 0, None)
                else:
                    node.drop = True
                    child = (kept, True, 0, None)
            elif through is not None:
                node.drop = True
                child = (kept, True, 1, (*through, caller.line_number))
            else:
                if parent_dropped:
                    node.new_parent = kept
                child = (node, False, 0, None)
        for sub in event.children:
            push((sub, *child))
    return index


def _is_ours(frame_state: Any) -> bool:
    try:
        name = frame_state.file_name
    except UnicodeDecodeError:
        return False
    return name.replace("\\", "/").endswith("brrr_trace/record.py")


_TS = re.compile(r'"ts"\s*:\s*(-?[0-9.eE+-]+)')


class _Reader:
    """Streams JSON values out of a (large) text file with ``raw_decode``."""

    CHUNK = 1 << 22

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.decoder = json.JSONDecoder()
        self.ws = re.compile(r"\s*")

    def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.stream.read(self.CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        while True:
            self.pos = self.ws.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} in the trace at offset {self.pos}")
        self.pos += 1

    def value(self) -> tuple[Any, str]:
        self.peek()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self._fill():
                    continue
                raise
            if end >= len(self.buf) and self._fill():
                continue  # a number may go on in the next chunk
            text = self.buf[self.pos : end]
            self.pos = end
            return obj, text


def _rewrite(
    src: Path,
    dst: Path,
    index: dict[tuple[int, str], list[_PyNode]] | None,
    final: Path,
    exact_ops: bool,
) -> dict[str, int]:
    stats = {"python_events": 0, "call_lines_matched": 0, "call_lines_unmatched": 0, "hidden": 0}
    unresolved: dict[Any, _PyNode | None] = {}
    brrr_record: dict[str, Any] = {}
    base = 0
    gz = final.name.endswith(".gz")
    # errors="replace": torch can write undecodable names (see _index_tree); the result is UTF-8
    with open(src, encoding="utf-8", errors="replace") as fin, _open_write(dst, gz) as raw_out:
        out = io.TextIOWrapper(raw_out, encoding="utf-8", newline="\n")
        reader = _Reader(fin)
        reader.expect("{")
        out.write("{")
        first_key = True
        while reader.peek() != "}":
            if not first_key:
                reader.expect(",")
            key, _ = reader.value()
            reader.expect(":")
            if key == "traceEvents":
                out.write(("" if first_key else ",\n") + '"traceEvents": [\n')
                _rewrite_events(reader, out, index, base, stats, unresolved)
                out.write("\n]")
                first_key = False
                continue
            value, text = reader.value()
            if key == "baseTimeNanoseconds" and isinstance(value, int):
                base = value
            if key == "brrr_record" and isinstance(value, dict):
                brrr_record = value
                continue
            if key == "traceName":
                text = json.dumps(str(final))
            out.write(("" if first_key else ",\n") + json.dumps(key) + ": " + text)
            first_key = False
        reader.expect("}")
        import torch

        brrr_record = {
            "version": FORMAT_VERSION,
            "torch_version": torch.__version__,
            "exact_ops": exact_ops,
            **brrr_record,
            "call_lines": {
                "matched": stats["call_lines_matched"],
                "unmatched": stats["call_lines_unmatched"],
                "hidden_events": stats["hidden"],
            },
        }
        out.write(("" if first_key else ",\n") + '"brrr_record": ' + json.dumps(brrr_record))
        out.write("\n}\n")
        out.flush()
        out.detach()
    if unresolved:
        _fix_parents(dst, unresolved, gz)
    return stats


def _ts_ns(text: str, value: Any) -> int:
    """The event's ts in ns, exactly as written (a float would lose the last digit)."""
    match = _TS.search(text)
    if match:
        digits = match.group(1)
        whole, dot, frac = digits.partition(".")
        if whole.lstrip("-").isdigit() and (not dot or frac.isdigit()) and len(frac) <= 3:
            ns = abs(int(whole)) * 1000 + (int(frac.ljust(3, "0")) if frac else 0)
            exact = -ns if whole.startswith("-") else ns
        else:
            try:
                exact = int((decimal.Decimal(digits) * 1000).to_integral_value())
            except decimal.InvalidOperation:
                exact = None
        if exact is not None and abs(exact / 1000 - value) <= 1e-6 * max(1.0, abs(value)):
            return exact
    return round(float(value) * 1000)


_ARGS_KEY = re.compile(r'[{,]\s*"args"\s*:\s*\{')
_PARENT_ID = re.compile(r'("Python parent id"\s*:\s*)(null|-?\d+)')
_ENCODE = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode


def _with_args(text: str, event: dict[str, Any], line: int, parent: Any = _MISSING) -> str:
    """The event's text with the call line (and a new parent id) put into its args: spliced
    into Kineto's text when its layout is the usual one, else re-encoded."""
    at = text.rfind('"args"')
    start = max(text.rfind(",", 0, at), text.rfind("{", 0, at)) if at > 0 else -1
    match = _ARGS_KEY.match(text, start) if start >= 0 else None
    if match is None:
        args = event.setdefault("args", {})
        args[CALL_LINE_ARG] = line
        if parent is not _MISSING:
            args["Python parent id"] = parent
        return _ENCODE(event)
    body = text[match.end() :]
    if parent is not _MISSING:
        value = "null" if parent is None else str(int(parent))
        body, count = _PARENT_ID.subn(lambda m: m.group(1) + value, body, count=1)
        if not count:
            args = event.setdefault("args", {})
            args[CALL_LINE_ARG] = line
            args["Python parent id"] = parent
            return _ENCODE(event)
    sep = "" if body.lstrip().startswith("}") else ", "
    return f'{text[: match.end()]}"{CALL_LINE_ARG}": {int(line)}{sep}{body}'


def _rewrite_events(
    reader: _Reader,
    out: io.TextIOWrapper,
    index: dict[tuple[int, str], list[_PyNode]] | None,
    base: int,
    stats: dict[str, int],
    unresolved: dict[Any, _PyNode | None],
) -> None:
    reader.expect("[")
    first = True
    write = out.write
    while True:
        char = reader.peek()
        if char == "]":
            reader.pos += 1
            return
        if not first:
            if char != ",":
                raise ValueError(f"expected ',' in traceEvents at offset {reader.pos}")
            reader.pos += 1
            if reader.peek() == "]":  # a trailing comma
                reader.pos += 1
                return
        event, text = reader.value()
        if isinstance(event, dict) and event.get("cat") == "python_function":
            text = _python_event(event, text, index, base, stats, unresolved)
            if text is None:
                first = False
                continue
        write(text if first else ",\n" + text)
        first = False


def _python_event(
    event: dict[str, Any],
    text: str,
    index: dict[tuple[int, str], list[_PyNode]] | None,
    base: int,
    stats: dict[str, int],
    unresolved: dict[Any, _PyNode | None],
) -> str | None:
    stats["python_events"] += 1
    args = event.get("args")
    if not isinstance(args, dict):
        args = event["args"] = {}
    node = None
    if index is not None and "ts" in event:
        candidates = index.get((_ts_ns(text, event["ts"]) + base, str(event.get("name"))))
        if candidates:
            node = candidates[0]
            if len(candidates) > 1:
                dur = event.get("dur")
                if isinstance(dur, (int, float)):
                    node = min(candidates, key=lambda n: abs(n.dur_ns - dur * 1000))
            candidates.remove(node)
    if node is None:
        stats["call_lines_unmatched"] += 1
        return _with_args(text, event, 0)
    node.python_id = args.get("Python id")
    if node.drop:
        stats["hidden"] += 1
        return None
    stats["call_lines_matched"] += 1
    if node.new_parent is False:
        return _with_args(text, event, node.caller_line)
    parent = node.new_parent
    if parent is not None and parent.python_id is None:
        unresolved[node.python_id] = parent
        return _with_args(text, event, node.caller_line)
    return _with_args(text, event, node.caller_line, None if parent is None else parent.python_id)


def _fix_parents(path: Path, unresolved: dict[Any, _PyNode | None], gz: bool) -> None:
    """Second pass, only when a kept event came before the ancestor it is re-parented to."""
    fixed = path.with_name(path.name + ".2")
    opener: Any = gzip.open if gz else open
    with opener(path, "rt", encoding="utf-8") as fin, _open_write(fixed, gz) as raw_out:
        doc_out = io.TextIOWrapper(raw_out, encoding="utf-8", newline="\n")
        reader = _Reader(fin)  # type: ignore[arg-type]
        reader.expect("{")
        doc_out.write("{")
        first_key = True
        while reader.peek() != "}":
            if not first_key:
                reader.expect(",")
            key, _ = reader.value()
            reader.expect(":")
            doc_out.write(("" if first_key else ",\n") + json.dumps(key) + ": ")
            first_key = False
            if key != "traceEvents":
                doc_out.write(reader.value()[1])
                continue
            reader.expect("[")
            doc_out.write("[\n")
            first = True
            while reader.peek() != "]":
                if not first:
                    reader.expect(",")
                event, text = reader.value()
                args = event.get("args") if isinstance(event, dict) else None
                if isinstance(args, dict) and args.get("Python id") in unresolved:
                    parent = unresolved[args["Python id"]]
                    args["Python parent id"] = None if parent is None else parent.python_id
                    text = json.dumps(event, ensure_ascii=False)
                doc_out.write(text if first else ",\n" + text)
                first = False
            reader.expect("]")
            doc_out.write("\n]")
        doc_out.write("\n}\n")
        doc_out.flush()
        doc_out.detach()
    os.replace(fixed, path)


# -- running a program in-process ------------------------------------------------------------------


class UsageError(Exception):
    """A bad ``brrr-trace record`` command line."""


def parse_program(program: Sequence[str]) -> tuple[str, str, list[str]]:
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


def _print_user_traceback(error: BaseException) -> None:
    """The traceback Python would print: without brrr-trace's and runpy's frames on top."""
    tb = error.__traceback__
    ours = (os.path.dirname(os.path.abspath(__file__)) + os.sep, os.path.abspath(runpy.__file__))
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (filename.startswith("<frozen runpy") or os.path.abspath(filename).startswith(ours)):
            break
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


class _CallableModule(types.ModuleType):
    """``brrr_trace.record(...)`` works whether ``brrr_trace.record`` names this module or the
    function: calling the module calls :func:`record`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Recorder:
        return record(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
