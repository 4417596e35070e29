"""DESIGN §2: the core (traces/, analyzers/, hardware/) imports no server, renderer, CLI or LSP
code."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "brrr_trace"
CORE = ("traces", "analyzers", "hardware")
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
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def offenders(layers: tuple[str, ...], forbidden: tuple[str, ...]) -> set[str]:
    """Each import of a ``forbidden`` module (or one below it) by a file of ``layers``."""
    files = [path for layer in layers for path in sorted((PACKAGE / layer).rglob("*.py"))]
    assert all(any((PACKAGE / layer).rglob("*.py")) for layer in layers)
    return {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in files
        for module in imported_modules(path)
        if any(module == bad or module.startswith(bad + ".") for bad in forbidden)
    }


def test_core_imports_nothing_of_the_outer_layers() -> None:
    assert not offenders(CORE, FORBIDDEN)


def test_hardware_knows_nothing_of_traces_or_their_analysis() -> None:
    # The peak table and device matching sit below the analyzers (the diff and the pipeline
    # use them too), so they must not reach up into them.
    assert not offenders(
        ("hardware",),
        (*FORBIDDEN, "brrr_trace.traces", "brrr_trace.analyzers", "brrr_trace.pipeline"),
    )


def test_the_check_itself_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from brrr_trace.render import text\nimport pygls.server\n")
    assert {"brrr_trace.render", "pygls.server"} <= imported_modules(bad)
