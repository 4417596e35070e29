"""Mapping trace paths (shortened, from another machine) onto local files
(docs/architecture.md §5)."""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("brrr_trace")

_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", "build", "dist"}
# The walk for files named by the trace stops after this many folders: a source root (or the
# current folder, the default) may be a home folder or /tmp with 100 000 folders below.
MAX_INDEXED_FOLDERS = 20_000
PYTHON_FILES = (".py", ".pyw")
_IGNORE_FILE = ".gitignore"


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
        self._relative: dict[str, str | None] = {}  # a report's lines share a few files
        # File names the suffix index holds (those the trace mentions); built on first need.
        self._wanted: set[str] = set()
        self._indexed: set[str] | None = None
        self.index_capped = False

    def expect(self, trace_paths: Iterable[str]) -> None:
        """The trace paths that will be asked for: the index is built for their file names
        only, in one walk, the first time a path is not found directly."""
        self._wanted.update(_file_name(p) for p in trace_paths)

    def _candidates(self, name: str) -> list[str]:
        if self.root is None or not self.root.is_dir():
            return []
        if self._indexed is None or name not in self._indexed:
            self._wanted.add(name)
            self._index(self.root, frozenset(self._wanted))
        return self._by_name.get(name, [])

    def _index(self, root: Path, names: frozenset[str]) -> None:
        """Where under ``root`` the files called ``names`` are: breadth first, the ignore files'
        folders and files left out, at most ``MAX_INDEXED_FOLDERS`` folders."""
        self._by_name = {}
        self._indexed = set(names)
        folders = [(str(root), _Ignore.empty())]
        visited = 0
        capped = False
        while folders and not capped:
            ahead = []
            for folder, ignore in folders:
                visited += 1
                if visited > MAX_INDEXED_FOLDERS:
                    capped = True
                    break
                try:
                    entries = sorted(os.scandir(folder), key=lambda e: e.name)
                except OSError:
                    continue
                # Only a folder that lists an ignore file is asked for it (a failed open in
                # every folder cost more than the walk).
                if any(entry.name == _IGNORE_FILE for entry in entries):
                    ignore = ignore.below(folder)
                for entry in entries:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir:
                        name = entry.name
                        if name in _SKIP_DIRS or name.startswith("."):
                            continue
                        if not ignore.ignores(entry.path, True):
                            ahead.append((entry.path, ignore))
                    elif (
                        entry.name in names
                        and entry.name.endswith(".py")
                        and not ignore.ignores(entry.path, False)
                    ):
                        self._by_name.setdefault(entry.name, []).append(entry.path)
            folders = ahead
        if capped:
            self.index_capped = True
            log.info(
                "source index: stopped after %d folders under %s; pass --source-root to "
                "the project's own folder",
                MAX_INDEXED_FOLDERS,
                root,
            )

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
        if local not in self._relative:
            self._relative[local] = self._relative_to_root(local, self.root)
        return self._relative[local]

    @staticmethod
    def _relative_to_root(local: str, root: Path) -> str | None:
        for candidate in (Path(os.path.abspath(local)), Path(os.path.realpath(local))):
            if candidate.is_relative_to(root):
                return candidate.relative_to(root).as_posix()
        return None

    def _by_suffix(self, normalized: str) -> str | None:
        parts = normalized.split("/")
        # One file reached through a link is one candidate, not a tie.
        candidates = list({os.path.realpath(c): c for c in self._candidates(parts[-1])}.values())
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


def _file_name(trace_path: str) -> str:
    return trace_path.replace("\\", "/").rsplit("/", 1)[-1]


class _Ignore:
    """The patterns of the ``.gitignore`` files from the source root down to one folder.

    The common forms only: ``name``, ``*.ext``, ``dir/``, ``/anchored``, ``a/b`` and ``**``;
    a ``!`` exception is not honoured, so an ignored folder stays ignored (what is walked can
    only shrink)."""

    def __init__(self, rules: tuple[tuple[str, str, bool, bool], ...]) -> None:
        # (folder of the ignore file, pattern, anchored, folders only)
        self.rules = rules

    @staticmethod
    def empty() -> _Ignore:
        return _Ignore(())

    def below(self, folder: str) -> _Ignore:
        try:
            with open(os.path.join(folder, _IGNORE_FILE), encoding="utf-8", errors="replace") as f:
                lines = f.read(1 << 20).splitlines()
        except OSError:
            return self
        rules = list(self.rules)
        for line in lines:
            text = line.strip()
            if not text or text.startswith(("#", "!")):
                continue
            only_dirs = text.endswith("/")
            text = text.rstrip("/")
            anchored = "/" in text
            rules.append((folder, text.lstrip("/"), anchored, only_dirs))
        return _Ignore(tuple(rules))

    def ignores(self, path: str, is_dir: bool) -> bool:
        name = os.path.basename(path)
        for base, pattern, anchored, only_dirs in self.rules:
            if only_dirs and not is_dir:
                continue
            if anchored:
                # The walk joins names onto its folders, so a path below ``base`` starts with
                # it: the same as relpath, without normalising both (most of the walk's time).
                prefix = base + os.sep
                if path.startswith(prefix):
                    relative = path[len(prefix) :].replace(os.sep, "/")
                else:
                    relative = os.path.relpath(path, base).replace(os.sep, "/")
                if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(
                    relative, pattern.replace("**/", "")
                ):
                    return True
            elif fnmatch.fnmatchcase(name, pattern):
                return True
        return False
