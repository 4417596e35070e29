"""Mechanical fixes for findings, computed from the document's syntax tree (never from regexes).

Each ``*_fix`` function looks at the statement a finding points to and returns the edits that
apply the rule's fix, or None when the code does not look the way the fix expects. A fix is
checked before it is offered: applied to the text, the result must still parse. Positions are
1-based lines and code-point chars (see ``source.py``); ``convert.py`` makes LSP edits of them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from brrr_trace.server.source import SourceIndex

# Optimizers that take ``fused=True`` (torch >= 2.4); the others get ``foreach=True``.
FUSED_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
FOREACH_OPTIMIZERS = frozenset(
    {"Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop", "SparseAdam"}
)
_DTYPES = frozenset(
    {
        "float",
        "float16",
        "half",
        "bfloat16",
        "float32",
        "float64",
        "double",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "long",
        "uint8",
        "bool",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
    }
)


@dataclass(frozen=True)
class Edit:
    """Replace ``line:char .. end_line:end_char`` (1-based lines, code points) with ``text``."""

    line: int
    char: int
    end_line: int
    end_char: int
    text: str


@dataclass(frozen=True)
class Fix:
    rule: str
    edits: tuple[Edit, ...]
    # What the edit changes, as source text: the call it rewrites, the statement it adds.
    target: str
    change: str


def fix_for(rule: str, index: SourceIndex, line: int) -> Fix | None:
    """The mechanical fix of ``rule`` at a 1-based line, if the rule has one and the code fits."""
    maker = _FIXERS.get(rule)
    if maker is None or index.tree is None:
        return None
    fix = maker(index, line)
    if fix is None or not fix.edits or not _still_parses(index, fix.edits):
        return None
    return fix


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """The text with the edits applied (they must not overlap)."""
    index = SourceIndex(text)
    starts = [0]
    for piece in _line_pieces(text):
        starts.append(starts[-1] + len(piece))

    def offset(line: int, char: int) -> int:
        return starts[line - 1] + min(char, len(index.lines[line - 1]))

    out = text
    for edit in sorted(edits, key=lambda e: (e.line, e.char), reverse=True):
        begin, end = offset(edit.line, edit.char), offset(edit.end_line, edit.end_char)
        out = out[:begin] + edit.text + out[end:]
    return out


def _line_pieces(text: str) -> list[str]:
    """The lines with their line ends, split the way ``SourceIndex`` counts lines."""
    pieces, start, i = [], 0, 0
    while i < len(text):
        c = text[i]
        if c in "\r\n":
            end = i + 2 if text.startswith("\r\n", i) else i + 1
            pieces.append(text[start:end])
            start = i = end
        else:
            i += 1
    pieces.append(text[start:])
    return pieces


def _still_parses(index: SourceIndex, edits: tuple[Edit, ...]) -> bool:
    try:
        ast.parse(apply_edits(index.text, edits))
    except (SyntaxError, ValueError):
        return False
    return True


# --- helpers over the tree --------------------------------------------------------------------


def _pos(index: SourceIndex, node: ast.AST, end: bool = False) -> tuple[int, int]:
    if end:
        line = node.end_lineno or node.lineno  # type: ignore[attr-defined]
        return line, index.char_of(line, node.end_col_offset or 0)  # type: ignore[attr-defined]
    line = node.lineno  # type: ignore[attr-defined]
    return line, index.char_of(line, node.col_offset)  # type: ignore[attr-defined]


def _replace(index: SourceIndex, node: ast.AST, text: str) -> Edit:
    (line, char), (end_line, end_char) = _pos(index, node), _pos(index, node, end=True)
    return Edit(line, char, end_line, end_char, text)


def _insert(at: tuple[int, int], text: str) -> Edit:
    return Edit(at[0], at[1], at[0], at[1], text)


def _calls_on(index: SourceIndex, line: int) -> list[ast.Call]:
    """Calls whose function name ends on a 1-based line (``a.b(\\n...)`` counts for its line)."""
    assert index.tree is not None
    calls = [
        n
        for n in ast.walk(index.tree)
        if isinstance(n, ast.Call) and (n.func.end_lineno or n.func.lineno) == line
    ]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _add_keyword(index: SourceIndex, call: ast.Call, text: str) -> Edit | None:
    """Insert ``text`` (``name=value``) as the last argument of ``call``."""
    arguments: list[ast.AST] = [*call.args, *call.keywords]
    if arguments:
        last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))  # type: ignore[attr-defined]
        return _insert(_pos(index, last, end=True), f", {text}")
    # No arguments: the closing parenthesis is the call's last character.
    end_line, end_char = _pos(index, call, end=True)
    line_text = index.line_text(end_line) or ""
    if end_char < 1 or line_text[end_char - 1 : end_char] != ")":
        return None
    return _insert((end_line, end_char - 1), text)


def _set_keyword_true(index: SourceIndex, call: ast.Call, name: str) -> Edit | None:
    """``name=True`` in ``call``: add it, or set the value; None when it is already True."""
    keyword = _keyword(call, name)
    if keyword is None:
        return _add_keyword(index, call, f"{name}=True")
    if _is_true(keyword.value):
        return None
    return _replace(index, keyword.value, "True")


def _dotted(node: ast.AST) -> str | None:
    """``torch.optim.Adam`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _source(index: SourceIndex, node: ast.AST) -> str:
    return ast.get_source_segment(index.text, node) or ast.unparse(node)


# --- unfused-optimizer ------------------------------------------------------------------------


def _optimizer_class(call: ast.Call) -> str | None:
    name = _dotted(call.func)
    if name is None:
        return None
    last = name.rsplit(".", 1)[-1]
    if last not in FUSED_OPTIMIZERS | FOREACH_OPTIMIZERS:
        return None
    # ``torch.optim.Adam``, ``optim.Adam``, or a bare ``Adam`` imported from torch.optim.
    if "." in name and ".optim." not in f".{name}":
        return None
    return last


def _optimizer_call(index: SourceIndex, line: int) -> ast.Call | None:
    """The optimizer constructor on the line, or the one that built ``opt`` in ``opt.step()``."""
    assert index.tree is not None
    on_line = [c for c in _calls_on(index, line) if _optimizer_class(c)]
    if on_line:
        return on_line[0]
    steps = [
        c
        for c in _calls_on(index, line)
        if isinstance(c.func, ast.Attribute) and c.func.attr == "step"
    ]
    if len(steps) != 1:
        return None
    receiver = ast.unparse(steps[0].func.value)  # type: ignore[attr-defined]
    function = index.function_at(line)
    best: tuple[tuple[int, int], ast.Call] | None = None
    for node in ast.walk(index.tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if not isinstance(value, ast.Call) or not _optimizer_class(value):
                continue
            if not any(ast.unparse(t) == receiver for t in targets):
                continue
            same_function = function is not None and function.owns(node.lineno)
            before = node.lineno <= line
            rank = (2 * same_function + before, node.lineno if before else -node.lineno)
            if best is None or rank > best[0]:
                best = (rank, value)
    return best[1] if best else None


def unfused_optimizer_fix(index: SourceIndex, line: int) -> Fix | None:
    call = _optimizer_call(index, line)
    if call is None:
        return None
    cls = _optimizer_class(call)
    fused, foreach = _keyword(call, "fused"), _keyword(call, "foreach")
    if cls in FUSED_OPTIMIZERS:
        if fused is not None and foreach is not None:
            return None  # both given: which one the user meant is not ours to guess
        if fused is None and foreach is not None:
            edit: Edit | None = _replace(index, foreach, "fused=True")
        else:
            edit = _set_keyword_true(index, call, "fused")
        change = "fused=True"
    else:
        if fused is not None:
            return None
        edit = _set_keyword_true(index, call, "foreach")
        change = "foreach=True"
    if edit is None:
        return None
    return Fix("unfused-optimizer", (edit,), _source(index, call.func), change)


# --- pageable-memcpy --------------------------------------------------------------------------


def _is_dtype(node: ast.expr) -> bool:
    name = _dotted(node)
    return name is not None and name.rsplit(".", 1)[-1] in _DTYPES and name != "float"


def _is_host_to_device_copy(call: ast.Call) -> bool:
    if not isinstance(call.func, ast.Attribute):
        return False
    if call.func.attr == "cuda":
        return True
    if call.func.attr != "to":
        return False
    # ``x.to(torch.float16)`` or ``x.to(dtype=...)`` converts; it copies nothing to a device.
    if call.args and _is_dtype(call.args[0]):
        return False
    names = {k.arg for k in call.keywords}
    return bool(call.args) or "device" in names


def pageable_memcpy_fix(index: SourceIndex, line: int) -> Fix | None:
    copies = [c for c in _calls_on(index, line) if _is_host_to_device_copy(c)]
    if len(copies) != 1:
        return None
    call = copies[0]
    receiver = call.func.value  # type: ignore[attr-defined]
    edits = []
    pinned = (
        isinstance(receiver, ast.Call)
        and isinstance(receiver.func, ast.Attribute)
        and receiver.func.attr == "pin_memory"
    )
    if not pinned:
        edits.append(_insert(_pos(index, receiver, end=True), ".pin_memory()"))
    non_blocking = _set_keyword_true(index, call, "non_blocking")
    if non_blocking is not None:
        edits.append(non_blocking)
    if not edits:
        return None
    return Fix("pageable-memcpy", tuple(edits), _source(index, call), "")


# --- fp32-matmul ------------------------------------------------------------------------------

_TF32_FLAGS = ("backends.cuda.matmul.allow_tf32", "backends.cudnn.allow_tf32")


def _torch_alias(tree: ast.Module) -> str | None:
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch":
                    return alias.asname or "torch"
    return None


def _precision_calls(index: SourceIndex, torch: str) -> list[ast.Call]:
    assert index.tree is not None
    name = f"{torch}.set_float32_matmul_precision"
    return [
        n
        for n in ast.walk(index.tree)
        if isinstance(n, ast.Call)
        and _dotted(n.func) == name
        and len(n.args) == 1
        and isinstance(n.args[0], ast.Constant)
        and isinstance(n.args[0].value, str)
    ]


def _in_scope(index: SourceIndex, node: ast.AST, function_line: int) -> bool:
    """At module level, or in the function that holds ``function_line``."""
    here = index.function_at(node.lineno)  # type: ignore[attr-defined]
    return here is None or here == index.function_at(function_line)


def fp32_matmul_fix(index: SourceIndex, line: int) -> Fix | None:
    tree = index.tree
    assert tree is not None
    torch = _torch_alias(tree)
    if torch is None:
        return None
    edits: list[Edit] = []
    calls = _precision_calls(index, torch)
    module_level_high = any(
        index.function_at(c.lineno) is None and c.args[0].value in ("high", "medium")  # type: ignore[attr-defined]
        for c in calls
    )
    # Settings that force full FP32 where the finding runs would undo the switch: flip them too.
    for call in calls:
        if call.args[0].value == "highest" and _in_scope(index, call, line):  # type: ignore[attr-defined]
            edits.append(_replace(index, call.args[0], '"high"'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _in_scope(index, node, line):
            value = node.value
            if not (isinstance(value, ast.Constant) and value.value is False):
                continue
            if any(_dotted(t) in {f"{torch}.{flag}" for flag in _TF32_FLAGS} for t in node.targets):
                edits.append(_replace(index, value, "True"))
    statement = f'{torch}.set_float32_matmul_precision("high")'
    if not module_level_high:
        after = _last_leading_import(tree)
        if after is None:
            return None
        edits.append(_insert(_pos(index, after, end=True), "\n" + statement))
    if not edits:
        return None
    return Fix("fp32-matmul", tuple(edits), statement, "")


def _last_leading_import(tree: ast.Module) -> ast.stmt | None:
    """The last import of the module's opening run of docstring and imports."""
    last = None
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            last = node
        elif i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        else:
            break
    return last


_FIXERS: dict[str, Callable[[SourceIndex, int], Fix | None]] = {
    "unfused-optimizer": unfused_optimizer_fix,
    "pageable-memcpy": pageable_memcpy_fix,
    "fp32-matmul": fp32_matmul_fix,
}
