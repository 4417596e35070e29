"""The torch function mode that puts a ``brrr.line N`` annotation around each torch call made
directly from user code (``exact_ops``), so that operators without a Python call event of their
own (``a @ b``, ``x[i] = v``) get the line of their statement.

The handler runs for every torch call while recording, so it is written for speed: everything it
needs is bound once in a closure, it makes no Python call of its own besides the torch function
(each would be one more Python event to hide), and the user-code test is cached per code object.
The class is built on first use, which is when torch gets imported.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from types import FrameType
from typing import Any

from brrr_trace.recording.hidden_frames import HiddenFrame
from brrr_trace.recording.user_code import UserCode
from brrr_trace.traces.brrr_fields import LINE_ANNOTATION_PREFIX

# Tensor methods that launch no operator: no annotation for them.
_METADATA_ONLY_METHODS = (
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


def _metadata_only(torch: Any) -> frozenset[Any]:
    found = set()
    for name in _METADATA_ONLY_METHODS:
        fn = getattr(torch.Tensor, name, None)
        if fn is not None:
            with contextlib.suppress(TypeError):
                hash(fn)
                found.add(fn)
    return frozenset(found)


@functools.cache
def line_mode_class() -> type[Any]:
    """The ``TorchFunctionMode`` subclass; its instances start inactive (``active = False``)."""
    import torch
    from torch.autograd import _record_function_with_args_enter as enter
    from torch.autograd import _record_function_with_args_exit as leave
    from torch.overrides import TorchFunctionMode

    # dynamo traces the handler: is_dynamo_compiling() is True there (and costs one call here)
    is_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)
    getframe = sys._getframe
    dispatch_code = torch.overrides.handle_torch_function.__code__
    user_code = UserCode(torch)
    cache = user_code.cache
    classify = user_code.classify
    no_ops = _metadata_only(torch)
    # property get/set: no operator (on the class, `shape` is its descriptor, not a Size)
    accessor = type(torch.Tensor.shape.__get__)  # type: ignore[attr-defined]
    prefix = LINE_ANNOTATION_PREFIX

    class LineMode(TorchFunctionMode):
        """Wraps torch calls made directly from user code in ``brrr.line N`` annotations."""

        active = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if kwargs is None:
                kwargs = {}
            handle = None
            # is_compiling() first: dynamo traces this handler and must not guard on `active`.
            if not is_compiling() and self.active:
                frame: FrameType | None = getframe(1)
                hops = 0
                while frame is not None and hops < 6:  # skip torch's shims, other modes' handlers
                    code = frame.f_code
                    if code is dispatch_code:  # handle_torch_function <- the torch function
                        frame = frame.f_back
                        if frame is not None:
                            frame = frame.f_back
                    elif code.co_name == "__torch_function__":
                        frame = frame.f_back
                    else:
                        break
                    hops += 1
                if frame is not None:
                    code = frame.f_code
                    try:  # no method calls here: each would be one more Python event to hide
                        user = cache[code]
                    except KeyError:
                        user = classify(code)
                    if user and func not in no_ops and type(func) is not accessor:
                        handle = enter(f"{prefix}{frame.f_lineno}")
            try:
                return func(*args, **kwargs)
            finally:
                if handle is not None:
                    leave(handle)

    return LineMode


def handler_frame() -> HiddenFrame:
    """The handler stands in for the user's torch call; the call it passes on repeats it."""
    return HiddenFrame.passing_call(
        line_mode_class().__torch_function__.__code__, keep_callee=False
    )


def remove_mode(mode: Any) -> None:
    """Take ``mode`` off the torch function mode stack, leaving the modes pushed above it."""
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
