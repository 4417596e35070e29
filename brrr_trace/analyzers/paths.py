"""Mapping trace paths (shortened, from another machine) onto local files (DESIGN §5)."""

from __future__ import annotations

import os
from pathlib import Path

_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", "build", "dist"}
_MAX_FILES = 200_000


def _is_windows_abs(path: str) -> bool:
    return len(path) > 2 and path[1] == ":" and path[2] == "/"


class PathMapper:
    """Longest-suffix matching of trace paths against the Python files under a root folder."""

    def __init__(self, root: str | None, mappings: tuple[tuple[str, str], ...] = ()) -> None:
        self.root = Path(root).resolve() if root else None
        self.mappings = tuple(mappings)
        # The only folders whose files are ever read: the root and the targets of the mappings.
        self.allowed = tuple(Path(local).resolve() for _, local in self.mappings) + (
            (self.root,) if self.root is not None else ()
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
        if os.path.isabs(normalized) and self.contains(normalized) and os.path.isfile(normalized):
            return normalized
        return self._by_suffix(normalized)

    def _admit(self, local: str) -> bool:
        """Only Python files that really lie in an allowed folder: a link from the project to
        elsewhere, or a mapping's ``..``, is refused like a path outside it."""
        if not local.lower().endswith((".py", ".pyw")):
            return False
        if not self.contains(local):
            self.refused[local] = "leads out of the source root"
            return False
        return True

    def contains(self, path: str) -> bool:
        """Whether ``path``, links resolved, lies in the source root or a mapping's target."""
        try:
            real = Path(os.path.realpath(path))
            return any(real.is_relative_to(folder) for folder in self.allowed)
        except (OSError, ValueError):
            return False

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
