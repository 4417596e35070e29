"""DESIGN §2: the core (traces/, analyzers/) imports no server, renderer, CLI or LSP code; the
language server imports no renderer (it formats through ``brrr_trace.units``) and reaches into no
object's private fields but its own."""

from __future__ import annotations

import ast
import subprocess
import sys
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
    assert not _offenders(files, FORBIDDEN)


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> set[str]:
    return {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in files
        for module in imported_modules(path)
        if any(module == bad or module.startswith(bad + ".") for bad in forbidden)
    }


def test_the_server_imports_no_renderer() -> None:
    files = sorted((PACKAGE / "server").rglob("*.py"))
    assert files
    assert not _offenders(files, ("rich", "brrr_trace.render", "brrr_trace.cli"))


def test_starting_the_server_loads_no_renderer() -> None:
    code = (
        "import sys, brrr_trace.server.app\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'rich'"
        " or m.startswith('brrr_trace.render'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def private_uses(path: Path) -> set[str]:
    """``x._field`` where ``x`` is not ``self`` or ``cls``: a reach into another's state."""
    return {
        f"{path.name}:{node.lineno} {ast.unparse(node)}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    }


def test_the_server_uses_no_private_fields_of_others() -> None:
    files = sorted((PACKAGE / "server").rglob("*.py"))
    assert not {use for path in files for use in private_uses(path)}


def test_the_check_itself_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from brrr_trace.render import text\nimport pygls.server\n")
    assert {"brrr_trace.render", "pygls.server"} <= imported_modules(bad)
    bad.write_text("import rich.table\nls._failed.clear()\nself._ok = 1\n")
    assert "rich.table" in imported_modules(bad)
    assert private_uses(bad) == {"bad.py:2 ls._failed"}
