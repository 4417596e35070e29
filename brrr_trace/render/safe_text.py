"""Trace strings made harmless for a terminal, and for JSON that may be printed to one.

Every name in a trace (kernels, files, functions, devices, paths) is text from whoever wrote
the file. Raw, an ESC or a C1 control starts a terminal escape (``\\x1b]8;;`` makes a hidden
link, ``\\x1b[2J`` clears the screen); a bidi override (U+202E) shows text in another order than
it is. Each such character is shown as its ``\\x..`` / ``\\u....`` escape instead, so it stays
visible and nothing reaches the terminal raw.
"""

from __future__ import annotations

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
