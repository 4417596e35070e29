"""Trace strings made harmless for a terminal, for JSON that may be printed to one, and for
Markdown (the language server's hovers).

Every name in a trace (kernels, files, functions, devices, paths) is text from whoever wrote
the file. Raw, an ESC or a C1 control starts a terminal escape (``\\x1b]8;;`` makes a hidden
link, ``\\x1b[2J`` clears the screen); a bidi override (U+202E) shows text in another order than
it is. Each such character is shown as its ``\\x..`` / ``\\u....`` escape instead, so it stays
visible and nothing reaches the terminal raw. In Markdown, a name could also be an image that
loads a URL, a ``command:`` link or raw HTML: there it is escaped, or put in a code span.
"""

from __future__ import annotations

import re

# C0 controls, DEL and C1 controls; the bidi embeddings, overrides, isolates and marks; the
# Unicode line and paragraph separators (a line break inside one table cell).
_UNSAFE = (
    list(range(0x00, 0x20))
    + list(range(0x7F, 0xA0))
    + [0x061C, 0x200E, 0x200F, 0x2028, 0x2029]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A))
)


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TERMINAL = {code: _escape(code) for code in _UNSAFE}
# JSON escapes C0 itself; the rest is valid raw in a JSON string, so write it as \\uXXXX there.
_JSON = {code: f"\\u{code:04x}" for code in _UNSAFE if code >= 0x20}


def terminal_safe(text: str) -> str:
    """``text`` with every control and bidi character written out as an escape."""
    return text.translate(_TERMINAL)


def json_safe(encoded: str) -> str:
    """Encoded JSON with the characters above as ``\\u`` escapes: the same value when parsed.

    They can only occur inside strings (JSON's own syntax is ASCII), so this is lossless."""
    return encoded.translate(_JSON)


# Every ASCII punctuation character may be backslash-escaped in CommonMark, and then stands for
# itself: no emphasis, link, image, autolink (``http\:``), HTML tag or entity can start.
_MARKDOWN = {code: "\\" + chr(code) for code in range(0x21, 0x7F) if not chr(code).isalnum()}
_BACKTICKS = re.compile("`+")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown prose: controls escaped as above, punctuation escaped."""
    return terminal_safe(text).translate(_MARKDOWN)


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span, whose content is never read as Markdown: fenced with
    one backtick more than its longest run of them, padded where it starts or ends with one."""
    shown = terminal_safe(text)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(shown)), default=0) + 1)
    if shown.startswith(("`", " ")) or shown.endswith(("`", " ")) or not shown:
        shown = f" {shown} "
    return f"{fence}{shown}{fence}"
