"""The true source line of every torch call of a program, recorded without brrr-trace.

    python line_truth.py NODES.json -- script.py [args ...]

runs ``script.py`` as ``__main__`` under a ``TorchFunctionMode`` that

* wraps every torch function call in a ``record_function`` named ``truth:<file>:<line>``, where
  file and line are those of the innermost frame of the caller's stack that belongs to the
  programs of this folder (library code, the standard library and torch are walked through, so a
  call made inside ``site-packages`` lands on the user line that called into the library);
  ``Tensor.backward`` calls are named ``truth-backward:<file>:<line>`` and run with the mode on, so
  torch calls made by Python hooks during backward are named too;
* notes every autograd node created during the call (found from the call's tensors through
  ``next_functions``, stopping at nodes already known) with that line: ``NODES.json`` maps each
  node's sequence number to ``[file, line, node name]``.

The script profiles itself (``--profile``), so its trace holds these annotations; the
evaluator (``benchmarks/line_accuracy.py``) reads the truth out of that trace and matches its GPU
ops, by launch order and kernel name, to a trace of the same program recorded without the mode.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode

HERE = os.path.dirname(os.path.abspath(__file__))
_OWN_FILES = {os.path.abspath(__file__)}


def _is_program_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        path.startswith(HERE + os.sep)
        and path not in _OWN_FILES
        and "-packages" + os.sep not in path
        and path.endswith(".py")
    )


class LineTruth(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.nodes: dict[int, list[object]] = {}
        self._verdicts: dict[str, bool] = {}
        self._lock = threading.Lock()

    def _caller(self) -> tuple[str, int] | None:
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            verdict = self._verdicts.get(filename)
            if verdict is None:
                verdict = self._verdicts[filename] = _is_program_file(filename)
            if verdict:
                return os.path.relpath(os.path.abspath(filename), HERE), frame.f_lineno
            frame = frame.f_back
        return None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        where = self._caller()
        if where is None:
            return func(*args, **kwargs)
        if func is torch.Tensor.backward:
            # The mode is off inside this handler, and the autograd engine runs with the thread
            # state of the backward() call: run it with the mode back on, so that torch calls
            # made by Python hooks during backward get their lines too.
            with torch.profiler.record_function(f"truth-backward:{where[0]}:{where[1]}"), self:
                return _backward(*args, **kwargs)
        if func is torch.Tensor.register_hook and len(args) == 2:
            args = (args[0], self.active(args[1]))
        with torch.profiler.record_function(f"truth:{where[0]}:{where[1]}"):
            out = func(*args, **kwargs)
        self._note_nodes((out, args, kwargs), where)
        return out

    def active(self, fn):
        """``fn`` run with this mode on: the autograd engine calls Python hooks and custom
        ``backward`` methods without the caller's torch-function modes."""

        def run(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return run

    def install(self) -> None:
        """Route the code that the autograd engine calls back into through the mode."""
        module = torch.nn.Module
        for name in (
            "register_full_backward_hook",
            "register_full_backward_pre_hook",
            "register_backward_hook",
        ):
            original = getattr(module, name)

            def register(mod, hook, *args, _original=original, **kwargs):
                return _original(mod, self.active(hook), *args, **kwargs)

            setattr(module, name, register)
        backward_function = torch.autograd.function.BackwardCFunction
        original_apply = backward_function.apply

        def apply(ctx, *args):
            with self:
                return original_apply(ctx, *args)

        backward_function.apply = apply

    def _note_nodes(self, values: object, where: tuple[str, int]) -> None:
        pending = [t.grad_fn for t in _tensors(values) if t.grad_fn is not None]
        with self._lock:
            while pending:
                node = pending.pop()
                if node is None or type(node).__name__ == "AccumulateGrad":
                    continue
                seq = int(node._sequence_nr())
                if seq in self.nodes:
                    continue
                self.nodes[seq] = [where[0], where[1], node.name()]
                pending.extend(next_node for next_node, _ in node.next_functions)


def _backward(
    tensor: torch.Tensor,
    gradient: torch.Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: object = None,
) -> None:
    """What ``Tensor.backward`` does, without its torch-function dispatch."""
    torch.autograd.backward(
        tensor,
        gradient,
        retain_graph,
        create_graph,
        inputs=inputs,  # type: ignore[arg-type]
    )


def _tensors(value: object, depth: int = 0):
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 4 and isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth + 1)


def main() -> int:
    argv = sys.argv[1:]
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    nodes_path, script, script_args = argv[0], argv[2], argv[3:]
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    mode = LineTruth()
    mode.install()
    try:
        with mode:
            runpy.run_path(script, run_name="__main__")
    finally:
        with open(nodes_path, "w") as handle:
            json.dump({str(k): v for k, v in mode.nodes.items()}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
