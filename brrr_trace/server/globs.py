"""The ``traces`` globs: VS Code / LSP glob syntax, relative to a workspace folder.

A workspace's own settings file can set ``brrr-trace.traces``, so a glob is input to check: an
absolute one (``/**/*``) or one that climbs out with ``..`` would walk the whole file system,
and one that does not compile (``[z-a]*``) must be said once, not fail every rescan.
``refusal`` says why a pattern is refused; ``compiled`` is the regex of one that is not.
"""

from __future__ import annotations

import os
import re

from brrr_trace.safe_text import terminal_safe


def refusal(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a ``traces`` glob, or None when it can."""
    normal = pattern.replace("\\", "/")
    if normal.startswith(("/", "~")) or os.path.isabs(normal) or re.match(r"[A-Za-z]:", normal):
        return "an absolute path: globs are relative to each workspace folder"
    if ".." in normal.split("/"):
        return "it climbs out of the workspace folder with .."
    try:
        glob_regex(normal)
    except re.error as error:
        return f"not a valid glob: {terminal_safe(str(error))}"
    return None


def compiled(pattern: str) -> re.Pattern[str] | None:
    """The regex of an accepted pattern, matched against ``a/b/c`` paths; None if refused."""
    if refusal(pattern) is not None:
        return None
    return glob_regex(pattern.replace("\\", "/").removeprefix("./"))


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A VS Code / LSP glob (``**``, ``*``, ``?``, ``[...]``, ``{a,b}``) as a regex on ``a/b/c``."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif c == "{":
            end = pattern.find("}", i + 1)
            if end < 0:
                out.append(re.escape(c))
                i += 1
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(glob_regex(o).pattern[:-2] for o in options) + ")")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")
