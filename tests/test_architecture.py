"""DESIGN §2: the core (traces/, analyzers/) imports no server, renderer, CLI or LSP code."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "brrr_trace"
FORBIDDEN = (
    "pygls",
    "lsprotocol",
    "rich",
    "torch",
    "brrr_trace.server",
    "brrr_trace.render",
    "brrr_trace.cli",
)


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_core_imports_nothing_of_the_outer_layers() -> None:
    files = sorted((PACKAGE / "traces").rglob("*.py")) + sorted(
        (PACKAGE / "analyzers").rglob("*.py")
    )
    assert files
    offenders = {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in files
        for module in imported_modules(path)
        if any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN)
    }
    assert not offenders


def test_the_check_itself_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from brrr_trace.render import text\nimport pygls.server\n")
    assert {"brrr_trace.render", "pygls.server"} <= imported_modules(bad)
