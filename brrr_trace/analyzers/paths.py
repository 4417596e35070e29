"""Mapping trace paths (shortened, from another machine) onto local files
(docs/architecture.md §5)."""

from __future__ import annotations

import os
from pathlib import Path

_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", "build", "dist"}
_MAX_FILES = 200_000
PYTHON_FILES = (".py", ".pyw")


def _is_windows_abs(path: str) -> bool:
    return len(path) > 2 and path[1] == ":" and path[2] == "/"


NOT_PYTHON = "is not a Python file"


def resolve_local(path: str, base: str) -> str:
    """A local folder as the user wrote it (``${workspaceFolder}``, ``~``, ``$VAR``, relative to
    ``base``) as an absolute path: the editor's settings and the CLI's ``--path-map`` alike."""
    path = path.replace("${workspaceFolder}", base).replace("${workspaceRoot}", base)
    path = os.path.expanduser(os.path.expandvars(path))
    return os.path.normpath(os.path.join(base, path))


def path_mapping(prefix: str, local: str, base: str) -> tuple[str, str]:
    """One mapping of trace paths starting with ``prefix`` onto the folder ``local``: the prefix
    with forward slashes (as trace paths are compared), the folder resolved at ``base``."""
    return prefix.replace("\\", "/"), resolve_local(local, base)


class SourceFolders:
    """The folders whose source files may be read (README, Security notes): the source root
    and the targets of the path mappings for the analysis; the server adds the workspace's."""

    def __init__(self, folders: list[str]) -> None:
        # Links resolved (``allowed``), and as written (``_named``: a path is judged before its
        # links are).
        self.allowed = tuple(Path(folder).resolve() for folder in folders)
        self._named = self.allowed + tuple(Path(os.path.abspath(f)) for f in folders)

    def refusal(self, local: str) -> str | None:
        """Why ``local`` may not be read, or None. A trace may name any file. Only Python files
        named inside an allowed folder are read (a mapping's ``..`` climbs out of it), and a
        link among them only to a Python file (a module shared between checkouts, a Bazel
        runfiles tree), never to /etc/passwd, a key, /proc/self/environ or a device."""
        if not local.lower().endswith(PYTHON_FILES):
            return NOT_PYTHON
        if not self.named_inside(local):
            return "lies outside the source root"
        if not self.may_read(os.path.realpath(local)):
            return "is a link out of the source root to a file that is not Python"
        return None

    def named_inside(self, path: str) -> bool:
        lexical = Path(os.path.abspath(path))  # ``..`` collapsed, links not followed
        return any(lexical.is_relative_to(folder) for folder in self._named) or self.contains(path)

    def contains(self, path: str) -> bool:
        """Whether ``path``, links resolved, lies in one of the folders."""
        try:
            real = Path(os.path.realpath(path))
            return any(real.is_relative_to(folder) for folder in self.allowed)
        except (OSError, ValueError):
            return False

    def may_read(self, real: str) -> bool:
        """Whether a file, links already resolved, may be read: it lies in an allowed folder,
        or it is Python source that a link inside one leads to."""
        return real.lower().endswith(PYTHON_FILES) or self.contains(real)


class PathMapper:
    """Longest-suffix matching of trace paths against the Python files under a root folder."""

    def __init__(self, root: str | None, mappings: tuple[tuple[str, str], ...] = ()) -> None:
        self.root = Path(root).resolve() if root else None
        self.mappings = tuple(mappings)
        # The folders whose files may be read: the root and the targets of the mappings.
        self.folders = SourceFolders(
            [local for _, local in self.mappings] + ([root] if root else [])
        )
        # Trace paths whose file exists but was refused, and why (reported as a problem).
        self.refused: dict[str, str] = {}
        self._by_name: dict[str, list[str]] = {}
        self._cache: dict[str, str | None] = {}
        if self.root is not None and self.root.is_dir():
            self._index(self.root)

    def _index(self, root: Path) -> None:
        count = 0
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
            for name in files:
                if name.endswith(".py"):
                    self._by_name.setdefault(name, []).append(os.path.join(folder, name))
                    count += 1
            if count > _MAX_FILES:
                break

    def map(self, trace_path: str) -> str | None:
        if trace_path in self._cache:
            return self._cache[trace_path]
        found = self._map(trace_path)
        if found is not None and not self._admit(found):
            found = None
        self._cache[trace_path] = found
        return found

    def _map(self, trace_path: str) -> str | None:
        normalized = trace_path.replace("\\", "/")
        for prefix, local in self.mappings:
            if normalized.startswith(prefix):
                candidate = os.path.join(local, normalized[len(prefix) :].lstrip("/"))
                if os.path.isfile(candidate):
                    return os.path.abspath(candidate)
        # An absolute path counts only under the source root: a trace may name any file here.
        if (
            os.path.isabs(normalized)
            and self._named_inside(normalized)
            and os.path.isfile(normalized)
        ):
            return normalized
        return self._by_suffix(normalized)

    def _admit(self, local: str) -> bool:
        refusal = self.folders.refusal(local)
        if refusal is not None and refusal != NOT_PYTHON:
            self.refused[local] = refusal
        return refusal is None

    def _named_inside(self, path: str) -> bool:
        return self.folders.named_inside(path)

    def may_read(self, real: str) -> bool:
        return self.folders.may_read(real)

    def relative(self, local: str | None) -> str | None:
        """``local`` (a mapped file) relative to the source root, with forward slashes: the
        repository-relative path of SARIF and other shared reports; None outside the root."""
        if local is None or self.root is None:
            return None
        for candidate in (Path(os.path.abspath(local)), Path(os.path.realpath(local))):
            if candidate.is_relative_to(self.root):
                return candidate.relative_to(self.root).as_posix()
        return None

    def _by_suffix(self, normalized: str) -> str | None:
        parts = normalized.split("/")
        # One file reached through a link is one candidate, not a tie.
        candidates = list(
            {os.path.realpath(c): c for c in self._by_name.get(parts[-1], [])}.values()
        )
        best, best_len, tie = None, 0, False
        for candidate in candidates:
            cparts = candidate.replace("\\", "/").split("/")
            common = 0
            while (
                common < min(len(parts), len(cparts)) and parts[-1 - common] == cparts[-1 - common]
            ):
                common += 1
            if common > best_len:
                best, best_len, tie = candidate, common, False
            elif common == best_len:
                tie = True
        if best is None or tie:
            return None
        # A relative path is relative to an import root on the recording machine (torch
        # shortens paths so): all of it must match, or `torch/cuda/__init__.py` would map onto
        # any local `__init__.py`.
        relative = not os.path.isabs(normalized) and not _is_windows_abs(normalized)
        if relative and best_len < len([p for p in parts if p not in ("", ".")]):
            return None
        return best
