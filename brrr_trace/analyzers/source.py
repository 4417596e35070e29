"""What a function body can produce, statement by statement (docs/architecture.md §5).

Modern torch names a Python frame by its ``def`` line only. When the source file is at hand, a
function body is flattened into slots, in evaluation order, each saying what a statement can
show up as among the events of one invocation: ``a @ b`` can only make ``matmul``, ``x.cos()``
a built-in-method frame named ``cos``, ``self.fc(x)`` an ``nn.Module`` frame of the class that
``__init__`` assigned to ``self.fc``, a ``for`` over a DataLoader its ``__next__`` frames.
``alignment.align`` then places the observed events on the slots.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from brrr_trace.analyzers.safe_read import read_source
from brrr_trace.options import AnalysisOptions

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
    module_class: str | None = None  # the class of an nn.Module frame
    # Names of the frames it runs first (a decorator's wrapper, `F.max_pool2d`'s `fn`): the
    # function the user called is among them.
    inner: frozenset[str] = frozenset()


_MODULE_FRAME = re.compile(r"^nn\.Module: (\w+?)(?:_\d+)?$")


def observe(event_name: str, is_frame: bool, inner: frozenset[str] = frozenset()) -> Observed:
    if not is_frame:
        leaf = event_name.split("::", 1)[-1].split(".", 1)[0]
        return Observed(leaf, False)
    module = _MODULE_FRAME.match(event_name)
    if module:
        return Observed(MODULE, True, module_class=module.group(1), inner=inner)
    if event_name.startswith("nn.Module:"):
        return Observed(MODULE, True, inner=inner)
    builtin = _BUILTIN.match(event_name)
    if builtin:
        return Observed(builtin.group(1).rsplit(".", 1)[-1], True)
    frame = _FRAME.match(event_name)
    if frame:
        return Observed(frame["func"], True, frame["file"], inner=inner)
    return Observed(event_name, True, inner=inner)


@lru_cache(maxsize=1 << 16)
def frame_function(event_name: str) -> str | None:
    """The function a frame event names (``<built-in method cos …>`` -> ``cos``)."""
    builtin = _BUILTIN.match(event_name)
    if builtin:
        return builtin.group(1).rsplit(".", 1)[-1]
    frame = _FRAME.match(event_name)
    return frame["func"] if frame else None


@dataclass(frozen=True)
class Slot:
    """One thing a statement can produce, in evaluation order."""

    line: int
    ops: frozenset[str] = frozenset()  # ATen op names (operators, subscripts)
    call: str | None = None  # called name (function, method, module attribute)
    module_call: bool = False  # the callee may be an nn.Module
    iteration: bool = False  # a for-loop header
    module_class: str | None = None  # the callee's class, when __init__ says it

    def matches(self, seen: Observed) -> float:
        """0 = no; 1 = weak (a generic wrapper, a module of unknown class); 1.5 = a function the
        event runs first has the called name; 2 = by name; 3 = a module of the known class."""
        if self.iteration and seen.name in _ITERATION:
            return 2
        if self.call is not None:
            if seen.name == MODULE:
                if not self.module_call:
                    return 0
                if self.module_class is not None and seen.module_class is not None:
                    # A class mismatch may still be a subclass or an alias: weaker than unknown.
                    return 3 if self.module_class == seen.module_class else 0.5
                return 1
            if seen.name == self.call or seen.name == self.call + "_":
                return 2
            if seen.name in _CONSTRUCTION and self.call[:1].isupper():
                return 2
            if self.call == "step" and seen.file.startswith("torch/optim/"):
                return 2
            if seen.inner and _called_inside(self.call, seen.inner):
                return 1.5
            if seen.is_frame and seen.name in _GENERIC_WRAPPERS:
                return 1
        if (
            self.ops
            and not seen.is_frame
            and (seen.name in self.ops or seen.name.rstrip("_") in self.ops)
        ):
            return 2
        return 0


def _called_inside(call: str, inner: frozenset[str]) -> bool:
    return call in inner or f"_{call}" in inner or f"{call}_" in inner or f"_{call}_" in inner


@dataclass(frozen=True)
class Body:
    """A function body flattened into slots, with the loops that may repeat a range of them."""

    slots: tuple[Slot, ...]
    loops: tuple[tuple[int, int], ...]  # [start, end) slot ranges of loop bodies (header included)
    first_line: int
    last_line: int


@dataclass(frozen=True)
class ModuleClasses:
    """What a class's methods assign to ``self``: ``self.fc = nn.Linear(...)`` gives
    ``fc -> Linear``; ``self.blocks = nn.ModuleList([Block(...) for ...])`` gives the class of
    its elements, ``blocks -> Block``."""

    attributes: dict[str, str]
    elements: dict[str, str]


class _Flattener:
    def __init__(self, classes: ModuleClasses | None = None) -> None:
        self.slots: list[Slot] = []
        self.loops: list[tuple[int, int]] = []
        self.classes = classes or ModuleClasses({}, {})
        self.loop_classes: dict[str, str] = {}  # loop variable -> class of what it iterates

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
            self._note_loop_variable(stmt.target, stmt.iter)
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
            cls = self._class_of(node.func) if module else None
            self.slots.append(Slot(line, call=name, module_call=module, module_class=cls))
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

    def _note_loop_variable(self, target: ast.expr, iterated: ast.expr) -> None:
        if (
            isinstance(iterated, ast.Call)
            and isinstance(iterated.func, ast.Name)
            and iterated.func.id == "enumerate"
            and iterated.args
        ):
            if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                self._note_loop_variable(target.elts[1], iterated.args[0])
            return
        attr = _self_attribute(iterated)
        if attr is not None and isinstance(target, ast.Name):
            cls = self.classes.elements.get(attr)
            if cls is not None:
                self.loop_classes[target.id] = cls

    def _class_of(self, func: ast.expr) -> str | None:
        """The class of the module a call calls: ``self.fc(x)``, ``block(x)`` in a loop over
        ``self.blocks``, ``self.blocks[0](x)``."""
        if isinstance(func, ast.Name):
            return self.loop_classes.get(func.id)
        if isinstance(func, ast.Subscript):
            attr = _self_attribute(func.value)
            return self.classes.elements.get(attr) if attr is not None else None
        attr = _self_attribute(func)
        return self.classes.attributes.get(attr) if attr is not None else None


def _self_attribute(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def _constructor(node: ast.expr) -> str | None:
    """``nn.Linear(...)`` -> ``Linear``; only capitalized names (classes, not factories)."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name if isinstance(name, str) and name[:1].isupper() else None


def module_classes(cls: ast.ClassDef) -> ModuleClasses:
    attributes: dict[str, str] = {}
    elements: dict[str, str] = {}
    for node in _walk_statements(cls):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        attr = _self_attribute(node.targets[0])
        ctor = _constructor(node.value)
        if attr is None or ctor is None:
            continue
        attributes[attr] = ctor
        assert isinstance(node.value, ast.Call)
        if ctor in ("ModuleList", "Sequential") and node.value.args:
            items = node.value.args[0]
            inner: ast.expr | None = None
            if isinstance(items, (ast.ListComp, ast.GeneratorExp)):
                inner = items.elt
            elif isinstance(items, (ast.List, ast.Tuple)) and items.elts:
                kinds = {_constructor(e) for e in items.elts}
                inner = items.elts[0] if len(kinds) == 1 else None
            elif ctor == "Sequential":
                kinds = {_constructor(e) for e in node.value.args}
                inner = node.value.args[0] if len(kinds) == 1 else None
            element = _constructor(inner) if inner is not None else None
            if element is not None:
                elements[attr] = element
    return ModuleClasses(attributes, elements)


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
def _parse(path: str, mtime_ns: int, max_bytes: int) -> ast.Module | None:
    try:
        return ast.parse(read_source(path, max_bytes), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


@lru_cache(maxsize=4096)
def find_body(
    path: str,
    mtime_ns: int,
    def_line: int,
    function: str,
    max_bytes: int = AnalysisOptions.max_source_bytes,
) -> Body | None:
    """The body of the function a frame names: ``def`` (or first decorator) at ``def_line``.

    ``path`` must be one the path mapper admitted; the read itself refuses what is not a regular
    file of at most ``max_bytes`` (``safe_read.SourceSkipped``)."""
    tree = _parse(path, mtime_ns, max_bytes)
    if tree is None:
        return None
    if function == "<module>":
        return _flatten(tree.body, 1, _last_line(tree))
    return _body_of(_index(path, mtime_ns, max_bytes), def_line, function)


@dataclass(frozen=True)
class _Index:
    """A module's functions by name (in ``ast.walk`` order) and the class owning each method."""

    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
    owner: dict[ast.AST, ast.ClassDef]


@lru_cache(maxsize=256)
def _index(path: str, mtime_ns: int, max_bytes: int) -> _Index:
    """One walk of a parsed module, shared by every function looked up in it."""
    tree = _parse(path, mtime_ns, max_bytes)
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    owner: dict[ast.AST, ast.ClassDef] = {}
    for node in _walk_statements(tree) if tree is not None else ():
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                owner[item] = node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, []).append(node)
    return _Index(functions, owner)


# The fields that hold statements (directly, or in except handlers and match cases).
_BLOCKS = frozenset(("body", "orelse", "finalbody", "handlers", "cases"))
_BLOCK_NODES = (ast.stmt, ast.excepthandler, ast.match_case)


def _walk_statements(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` without the expressions: the same nodes that are statements, in the same
    order. A statement only ever lies in another's block, so skipping the expressions (most
    of a module's nodes, and most of a walk's time) changes no statement's depth or order."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        for field in node._fields:
            if field in _BLOCKS:
                todo.extend(v for v in getattr(node, field, ()) if isinstance(v, _BLOCK_NODES))
        yield node


def _body_of(index: _Index, def_line: int, function: str) -> Body | None:
    owner = index.owner
    candidates = index.functions.get(function, [])
    found = None
    for node in candidates:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if def_line in (first, node.lineno):
            found = node
            break
    else:
        # A frame already running when profiling started is named by its current line.
        found = next(
            (n for n in candidates if n.lineno <= def_line <= (n.end_lineno or n.lineno)), None
        )
    if found is None:
        return None
    cls = owner.get(found)
    classes = module_classes(cls) if cls is not None else None
    return _flatten(found.body, found.lineno, found.end_lineno or found.lineno, classes)


def _last_line(tree: ast.Module) -> int:
    return max((getattr(n, "end_lineno", 0) or 0 for n in tree.body), default=1)


def _flatten(
    body: list[ast.stmt], first: int, last: int, classes: ModuleClasses | None = None
) -> Body:
    flat = _Flattener(classes)
    flat.statements(body)
    return Body(tuple(flat.slots), tuple(flat.loops), first, last)
