"""One version of a Python document: its lines, its statements and functions, read with ``ast``.

Index conventions, once for the whole server: the trace and the report count lines from 1 (as
Python does); LSP counts lines from 0. Here, ``line`` arguments are 1-based and every ``char`` is a
code-point index into the line's text (what ``str`` indexing uses). ``ast`` gives columns in UTF-8
bytes; ``char_of`` turns them into code points. Conversion to the client's units (UTF-16 by
default) happens in ``convert.py``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cached_property

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what LSP and Python's tokenizer call a line end


@dataclass(frozen=True)
class FunctionSpan:
    name: str
    qualname: str
    def_line: int  # the line of the ``def`` keyword
    def_char: int
    first_line: int  # the first decorator, where a profiler's frame for the function points
    last_line: int
    # Spans of the functions and classes defined inside, whose lines are not this function's own.
    inner: tuple[tuple[int, int], ...] = ()

    def owns(self, line: int) -> bool:
        return self.first_line <= line <= self.last_line and not any(
            first <= line <= last for first, last in self.inner
        )


class SourceIndex:
    """Built on demand per document version; everything heavier than splitting lines is lazy."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines: list[str] = _LINE_BREAK.split(text)

    def line_text(self, line: int) -> str | None:
        """The text of a 1-based line without its line end, or None past the end."""
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1]
        return None

    @cached_property
    def tree(self) -> ast.Module | None:
        try:
            return ast.parse(self.text)
        except (SyntaxError, ValueError):
            return None

    def char_of(self, line: int, byte_col: int) -> int:
        """The code-point index of a UTF-8 byte column (as ``ast`` reports it) on a 1-based line."""
        text = self.line_text(line) or ""
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    @cached_property
    def _code_end(self) -> dict[int, int]:
        """Per 1-based line: where the code ends (before a trailing comment and blanks)."""
        ends: dict[int, int] = {}
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
        try:
            for token in tokenize.generate_tokens(io.StringIO(self.text).readline):
                if token.type in skip or token.type == tokenize.ENDMARKER:
                    continue
                # A token spanning lines (a triple-quoted string) ends on its last line.
                row, col = token.end
                if col > ends.get(row, -1):
                    ends[row] = col
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass
        return ends

    def code_span(self, line: int) -> tuple[int, int]:
        """``(start, end)`` chars of the code on a 1-based line: indentation to the last token."""
        text = self.line_text(line) or ""
        start = len(text) - len(text.lstrip())
        end = self._code_end.get(line)
        if end is None or end < start:
            end = len(text.rstrip())
        return start, max(start, end)

    @cached_property
    def _simple_statements(self) -> dict[int, ast.stmt]:
        found: dict[int, ast.stmt] = {}
        if self.tree is None:
            return found
        for node in ast.walk(self.tree):
            if isinstance(node, ast.stmt) and not _is_compound(node):
                found.setdefault(node.lineno, node)
        return found

    def statement_range(self, line: int) -> tuple[int, int, int, int]:
        """``(line, char, end_line, end_char)`` of the statement on a 1-based line.

        A simple statement is covered whole, even over several lines; for a compound one
        (``for``, ``with``, ``def``...) or text that does not parse, the code on that line.
        """
        statement = self._simple_statements.get(line)
        if statement is not None and statement.end_lineno is not None:
            end_line = statement.end_lineno
            end_char = self.char_of(end_line, statement.end_col_offset or 0)
            return line, self.char_of(line, statement.col_offset), end_line, end_char
        start, end = self.code_span(line)
        return line, start, line, end

    @cached_property
    def functions(self) -> tuple[FunctionSpan, ...]:
        """Every ``def`` in the document, in order of their ``def`` lines."""
        out: list[FunctionSpan] = []
        if self.tree is not None:
            self._collect(self.tree, "", out)
        return tuple(sorted(out, key=lambda f: f.def_line))

    def _collect(self, node: ast.AST, prefix: str, out: list[FunctionSpan]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    inner = tuple(
                        (_first_line(n), n.end_lineno or n.lineno)
                        for n in ast.walk(child)
                        if n is not child
                        and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    )
                    out.append(
                        FunctionSpan(
                            name=child.name,
                            qualname=qualname,
                            def_line=child.lineno,
                            def_char=self.char_of(child.lineno, child.col_offset),
                            first_line=_first_line(child),
                            last_line=child.end_lineno or child.lineno,
                            inner=inner,
                        )
                    )
                self._collect(child, qualname + ".", out)
            else:
                self._collect(child, prefix, out)

    def function_at(self, line: int) -> FunctionSpan | None:
        """The innermost function whose own lines include a 1-based line."""
        for function in reversed(self.functions):
            if function.owns(line):
                return function
        return None

    def function_defined_on(self, line: int) -> FunctionSpan | None:
        return next((f for f in self.functions if f.def_line == line), None)


def _first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno] + [d.lineno for d in decorators])  # type: ignore[attr-defined]


def _is_compound(node: ast.stmt) -> bool:
    return (
        isinstance(
            node,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.If,
                ast.For,
                ast.AsyncFor,
                ast.While,
                ast.With,
                ast.AsyncWith,
                ast.Try,
                ast.Match,
            ),
        )
        or type(node).__name__ == "TryStar"
    )
