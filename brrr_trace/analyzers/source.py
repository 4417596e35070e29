"""Call-site recovery: which statement of a function issued each op (DESIGN §5).

Modern torch names a Python frame by its ``def`` line only. When the source file is at hand,
the events directly inside one invocation of a user function (child Python frames and ATen ops
issued by operators) are aligned, in execution order, with what the function body can produce:
``a @ b`` can only make ``matmul``, ``x.cos()`` a built-in-method frame named ``cos``,
``self.fc(x)`` an ``nn.Module`` frame, a ``for`` over a DataLoader its ``__next__`` frames.
The walk moves forward through the statements and may wrap to the start of an enclosing loop;
an event that matches nothing takes the line of its neighbours when they agree, else none.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass
from functools import lru_cache

# Operators -> the ATen op names they can dispatch to (leaf names, no namespace/overload).
_BINOP: dict[type, frozenset[str]] = {
    ast.Add: frozenset({"add", "cat"}),
    ast.Sub: frozenset({"sub", "rsub"}),
    ast.Mult: frozenset({"mul", "repeat"}),
    ast.Div: frozenset({"div", "true_divide"}),
    ast.FloorDiv: frozenset({"floor_divide", "div"}),
    ast.Mod: frozenset({"remainder", "fmod"}),
    ast.Pow: frozenset({"pow", "square", "sqrt"}),
    ast.MatMult: frozenset({"matmul", "mm", "bmm", "linear", "addmm", "einsum", "dot", "mv"}),
    ast.BitAnd: frozenset({"bitwise_and", "logical_and", "__and__"}),
    ast.BitOr: frozenset({"bitwise_or", "logical_or", "__or__"}),
    ast.BitXor: frozenset({"bitwise_xor", "__xor__"}),
    ast.LShift: frozenset({"bitwise_left_shift", "__lshift__"}),
    ast.RShift: frozenset({"bitwise_right_shift", "__rshift__"}),
}
_UNARY: dict[type, frozenset[str]] = {
    ast.USub: frozenset({"neg"}),
    ast.Invert: frozenset({"bitwise_not", "logical_not"}),
    ast.Not: frozenset({"logical_not", "is_nonzero", "item"}),
}
_COMPARE: dict[type, frozenset[str]] = {
    ast.Eq: frozenset({"eq"}),
    ast.NotEq: frozenset({"ne"}),
    ast.Lt: frozenset({"lt"}),
    ast.LtE: frozenset({"le"}),
    ast.Gt: frozenset({"gt"}),
    ast.GtE: frozenset({"ge"}),
}
_SUBSCRIPT_LOAD = frozenset({"select", "slice", "index", "narrow", "unsqueeze", "view", "alias"})
_SUBSCRIPT_STORE = frozenset(
    {"copy_", "fill_", "index_put_", "masked_fill_", "index_fill_", "masked_scatter_"}
)
# Truth tests of tensors (`if t:`, `while t > 0:`) read the value back to the host.
_TRUTH = frozenset({"is_nonzero", "item", "_local_scalar_dense"})
# Frames that wrap whatever the user called (decorators, dispatch glue): they match any call.
_GENERIC_WRAPPERS = frozenset(
    {
        "wrapper",
        "_fn",
        "decorate_context",
        "inner",
        "wrapped",
        "_wrapped_call_impl",
        "__call__",
        "compile_wrapper",
    }
)
_CONSTRUCTION = frozenset({"__init__", "__new__", "__post_init__"})
_ITERATION = frozenset({"__iter__", "__next__", "iter", "next", "_next_data"})

_BUILTIN = re.compile(r"^<built-in (?:method|function) ([\w.]+)")
_FRAME = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<func>.*)$")
MODULE = "nn.Module"


@dataclass(frozen=True)
class Observed:
    """What a child event of a frame invocation says about itself."""

    name: str  # op or function name; MODULE for nn.Module frames
    is_frame: bool
    file: str = ""


def observe(event_name: str, is_frame: bool) -> Observed:
    if not is_frame:
        leaf = event_name.split("::", 1)[-1].split(".", 1)[0]
        return Observed(leaf, False)
    if event_name.startswith("nn.Module:"):
        return Observed(MODULE, True)
    builtin = _BUILTIN.match(event_name)
    if builtin:
        return Observed(builtin.group(1).rsplit(".", 1)[-1], True)
    frame = _FRAME.match(event_name)
    if frame:
        return Observed(frame["func"], True, frame["file"])
    return Observed(event_name, True)


@dataclass(frozen=True)
class Slot:
    """One thing a statement can produce, in evaluation order."""

    line: int
    ops: frozenset[str] = frozenset()  # ATen op names (operators, subscripts)
    call: str | None = None  # called name (function, method, module attribute)
    module_call: bool = False  # the callee may be an nn.Module
    iteration: bool = False  # a for-loop header

    def matches(self, seen: Observed) -> int:
        """0 = no; 1 = weak (generic wrapper, module); 2 = by name."""
        if self.iteration and seen.name in _ITERATION:
            return 2
        if self.call is not None:
            if seen.name == self.call or seen.name == self.call + "_":
                return 2
            if seen.name in _CONSTRUCTION and self.call[:1].isupper():
                return 2
            if seen.is_frame and seen.name in _GENERIC_WRAPPERS:
                return 1
            if seen.name == MODULE and self.module_call:
                return 1
            if self.call == "step" and seen.file.startswith("torch/optim/"):
                return 2
        if (
            self.ops
            and not seen.is_frame
            and (seen.name in self.ops or seen.name.rstrip("_") in self.ops)
        ):
            return 2
        return 0


@dataclass(frozen=True)
class Body:
    """A function body flattened into slots, with the loops that may repeat a range of them."""

    slots: tuple[Slot, ...]
    loops: tuple[tuple[int, int], ...]  # [start, end) slot ranges of loop bodies (header included)
    first_line: int
    last_line: int


class _Flattener:
    def __init__(self) -> None:
        self.slots: list[Slot] = []
        self.loops: list[tuple[int, int]] = []

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for deco in stmt.decorator_list:
                self.expr(deco, stmt.lineno)
            return  # a nested def runs in its own frame
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self.expr(stmt.iter, stmt.lineno)  # evaluated once, before the loop
            start = len(self.slots)
            self.slots.append(Slot(stmt.lineno, iteration=True))
            self.statements(stmt.body)
            self.loops.append((start, len(self.slots)))
            self.statements(stmt.orelse)
            return
        if isinstance(stmt, ast.While):
            start = len(self.slots)
            self.expr(stmt.test, stmt.lineno)
            self.slots.append(Slot(stmt.lineno, ops=_TRUTH))
            self.statements(stmt.body)
            self.loops.append((start, len(self.slots)))
            self.statements(stmt.orelse)
            return
        if isinstance(stmt, ast.If):
            self.expr(stmt.test, stmt.lineno)
            self.slots.append(Slot(stmt.lineno, ops=_TRUTH))
            self.statements(stmt.body)
            self.statements(stmt.orelse)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self.expr(item.context_expr, stmt.lineno)
            self.slots.append(Slot(stmt.lineno, call="__enter__"))
            self.statements(stmt.body)
            self.slots.append(Slot(stmt.lineno, call="__exit__"))
            return
        if isinstance(stmt, ast.Try):
            self.statements(stmt.body)
            for handler in stmt.handlers:
                self.statements(handler.body)
            self.statements(stmt.orelse)
            self.statements(stmt.finalbody)
            return
        if isinstance(stmt, ast.AugAssign):
            self.expr(stmt.value, stmt.lineno)
            self.expr(stmt.target, stmt.lineno, store=False)
            ops = _BINOP.get(type(stmt.op), frozenset())
            self.slots.append(Slot(stmt.lineno, ops=ops | {op + "_" for op in ops}))
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if stmt.value is not None:
                self.expr(stmt.value, stmt.lineno)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                self.expr(target, stmt.lineno, store=True)
            return
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.expr(child, stmt.lineno)

    def expr(self, node: ast.expr, line: int, store: bool = False) -> None:
        """Post-order walk: operands are evaluated before the operation that uses them."""
        if isinstance(node, ast.Lambda):
            self.slots.append(Slot(line, call="<lambda>"))  # runs in its own frame when called
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # Python <= 3.11 runs a comprehension in a frame of its own; 3.12 inlines it, so its
            # body is also laid out here, as a loop.
            self.slots.append(Slot(line, call=_comprehension_name(node)))
            for generator in node.generators:
                self.expr(generator.iter, line)
            start = len(self.slots)
            for generator in node.generators:
                for condition in generator.ifs:
                    self.expr(condition, line)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            for part in parts:
                self.expr(part, line)
            if len(self.slots) > start:
                self.loops.append((start, len(self.slots)))
            return
        if isinstance(node, ast.Call):
            self.expr(node.func.value if isinstance(node.func, ast.Attribute) else node.func, line)
            for arg in node.args:
                self.expr(arg, line)
            for kw in node.keywords:
                self.expr(kw.value, line)
            name, module = _callee(node.func)
            self.slots.append(Slot(line, call=name, module_call=module))
            return
        if isinstance(node, ast.BinOp):
            self.expr(node.left, line)
            self.expr(node.right, line)
            self.slots.append(Slot(line, ops=_BINOP.get(type(node.op), frozenset())))
            return
        if isinstance(node, ast.UnaryOp):
            self.expr(node.operand, line)
            self.slots.append(Slot(line, ops=_UNARY.get(type(node.op), frozenset())))
            return
        if isinstance(node, ast.Compare):
            self.expr(node.left, line)
            for op, right in zip(node.ops, node.comparators, strict=True):
                self.expr(right, line)
                self.slots.append(Slot(line, ops=_COMPARE.get(type(op), frozenset())))
            return
        if isinstance(node, ast.Subscript):
            self.expr(node.value, line)
            self.expr(node.slice, line)
            # A store first views the target (select/slice), then writes into it (copy_/fill_);
            # advanced indexing makes a single index_put_.
            self.slots.append(Slot(line, ops=_SUBSCRIPT_LOAD))
            if store:
                self.slots.append(Slot(line, ops=_SUBSCRIPT_STORE))
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, line, store)


def _comprehension_name(node: ast.expr) -> str:
    return {
        ast.Lambda: "<lambda>",
        ast.ListComp: "<listcomp>",
        ast.SetComp: "<setcomp>",
        ast.DictComp: "<dictcomp>",
        ast.GeneratorExp: "<genexpr>",
    }[type(node)]


_BUILTIN_NAMES = frozenset(dir(builtins))


def _callee(func: ast.expr) -> tuple[str | None, bool]:
    """The called name, and whether the callee may be an ``nn.Module`` (``model(x)``,
    ``self.fc(x)``, ``self.blocks[0](x)``), as opposed to a method like ``opt.zero_grad()``."""
    if isinstance(func, ast.Attribute):
        root = func.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        return func.attr, isinstance(root, ast.Name) and root.id == "self"
    if isinstance(func, ast.Name):
        return func.id, func.id not in _BUILTIN_NAMES
    return None, True


@lru_cache(maxsize=256)
def _parse(path: str, mtime_ns: int) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


@lru_cache(maxsize=4096)
def find_body(path: str, mtime_ns: int, def_line: int, function: str) -> Body | None:
    """The body of the function a frame names: ``def`` (or first decorator) at ``def_line``."""
    tree = _parse(path, mtime_ns)
    if tree is None:
        return None
    return _body_of(tree, def_line, function)


def _body_of(tree: ast.Module, def_line: int, function: str) -> Body | None:
    if function == "<module>":
        return _flatten(tree.body, 1, _last_line(tree))
    candidates = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function
    ]
    for node in candidates:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if def_line in (first, node.lineno):
            return _flatten(node.body, node.lineno, node.end_lineno or node.lineno)
    # A frame already running when profiling started is named by its current line, not its def.
    for node in candidates:
        if node.lineno <= def_line <= (node.end_lineno or node.lineno):
            return _flatten(node.body, node.lineno, node.end_lineno or node.lineno)
    return None


def _last_line(tree: ast.Module) -> int:
    return max((getattr(n, "end_lineno", 0) or 0 for n in tree.body), default=1)


def _flatten(body: list[ast.stmt], first: int, last: int) -> Body:
    flat = _Flattener()
    flat.statements(body)
    return Body(tuple(flat.slots), tuple(flat.loops), first, last)


def align(
    body: Body, seen: tuple[Observed, ...], anchors: tuple[int | None, ...] | None = None
) -> tuple[int | None, ...]:
    """The line of each observed child event, in order; None where the source cannot tell.

    ``anchors`` are lines already known for some events (the recorder's call-site lines): the
    walk jumps to them, so the events in between are placed from there.
    """
    slots = body.slots
    n = len(slots)
    lines: list[int | None] = [None] * len(seen)
    pos = 0
    for k, event in enumerate(seen):
        anchor = anchors[k] if anchors is not None else None
        if anchor is not None:
            lines[k] = anchor
            at = _first_slot_on(body, anchor, pos)
            if at is not None:
                pos = at + 1 if at + 1 < n else at
            continue
        hit = _search(body, pos, event)
        if hit is not None:
            lines[k] = slots[hit].line
            pos = hit + 1 if hit + 1 < n else hit
    # Unmatched events sit between matched neighbours: same line on both sides settles it.
    for k, line in enumerate(lines):
        if line is not None:
            continue
        before = next((lines[j] for j in range(k - 1, -1, -1) if lines[j] is not None), None)
        after = next((lines[j] for j in range(k + 1, len(lines)) if lines[j] is not None), None)
        if before is not None and before == after:
            lines[k] = before
    return tuple(lines)


def _first_slot_on(body: Body, line: int, pos: int) -> int | None:
    """The slot of ``line`` the walk reaches next from ``pos`` (wrapping to the start)."""
    slots = body.slots
    for index in list(range(pos, len(slots))) + list(range(0, pos)):
        if slots[index].line == line:
            return index
    return None


def _search(body: Body, pos: int, event: Observed) -> int | None:
    """First slot from ``pos`` on that matches strongly, wrapping to enclosing loop starts."""
    slots = body.slots
    order = list(range(pos, len(slots)))
    for start, end in sorted(body.loops, key=lambda r: r[1] - r[0]):
        if start <= pos < end or pos == end:
            order.extend(range(start, min(pos, end)))
    weak = None
    for index in order:
        score = slots[index].matches(event)
        if score == 2:
            return index
        if score == 1 and weak is None:
            weak = index
    return weak
