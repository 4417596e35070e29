"""DESIGN §2: the core (traces/, analyzers/, hardware/) imports no server, renderer, CLI, LSP or
recorder code; only recording/ imports torch, and only inside functions, so that
`brrr-trace analyze` never loads it; the language server imports no renderer (it formats
through ``brrr_trace.units``) and reaches into no object's private fields but its own."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "brrr_trace"
CORE = ("traces", "analyzers", "hardware")
FORBIDDEN = (
    "pygls",
    "lsprotocol",
    "rich",
    "torch",
    "brrr_trace.server",
    "brrr_trace.render",
    "brrr_trace.cli",
    "brrr_trace.recording",
)
# recording/ runs inside the user's program: it may read traces (the one trace reader, brrr's
# fields), never the analysis, the renderers, the server or the CLI.
RECORDING_FORBIDDEN = (
    "brrr_trace.analyzers",
    "brrr_trace.render",
    "brrr_trace.server",
    "brrr_trace.cli",
    "brrr_trace.pipeline",
)


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def module_level_imports(path: Path) -> set[str]:
    """Modules imported when the file is imported (not inside a function)."""
    found: set[str] = set()
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))
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


def is_torch(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


def test_core_imports_nothing_of_the_outer_layers() -> None:
    assert not offenders(CORE, FORBIDDEN)


def test_hardware_knows_nothing_of_traces_or_their_analysis() -> None:
    # The peak table and device matching sit below the analyzers (the diff and the pipeline
    # use them too), so they must not reach up into them.
    assert not offenders(
        ("hardware",),
        (*FORBIDDEN, "brrr_trace.traces", "brrr_trace.analyzers", "brrr_trace.pipeline"),
    )


def test_recording_imports_none_of_the_analysis_or_the_outer_layers() -> None:
    assert not offenders(("recording",), RECORDING_FORBIDDEN)


def test_only_recording_imports_torch_and_only_inside_functions() -> None:
    # data/ holds example workloads: user code, shipped so that the sample trace's lines resolve
    outside = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if not path.is_relative_to(PACKAGE / "recording")
        and not path.is_relative_to(PACKAGE / "data")
    ]
    assert outside
    assert not {
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in outside
        for module in imported_modules(path)
        if is_torch(module)
    }
    recording = sorted((PACKAGE / "recording").rglob("*.py"))
    assert recording
    assert not {
        f"{path.relative_to(PACKAGE)} imports {module} when it is imported"
        for path in recording
        for module in module_level_imports(path)
        if is_torch(module)
    }


def test_analyze_and_the_record_entry_point_load_no_torch(tmp_path: Path) -> None:
    script = (
        "import sys, brrr_trace\n"
        "from brrr_trace.cli import main, sample_trace\n"
        "assert brrr_trace.record.__name__ == 'Recorder'\n"
        "out = sys.argv[1]\n"
        "assert main(['analyze', str(sample_trace()), '--format', 'json', '-o', out]) == 0\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "report.json")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_version_is_written_once() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    source = project["tool"]["setuptools"]["dynamic"]["version"]
    assert source == {"attr": "brrr_trace.__version__"}


def test_the_server_imports_no_renderer() -> None:
    assert not offenders(("server",), ("rich", "brrr_trace.render", "brrr_trace.cli"))


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
    bad.write_text(
        "from brrr_trace.render import text\nimport pygls.server\n"
        "def f():\n    import torch\n"
        "if True:\n    import torch.nn\n"
    )
    assert {"brrr_trace.render", "pygls.server", "torch", "torch.nn"} <= imported_modules(bad)
    assert module_level_imports(bad) == {"brrr_trace.render", "pygls.server", "torch.nn"}
    bad.write_text("import rich.table\nls._failed.clear()\nself._ok = 1\n")
    assert "rich.table" in imported_modules(bad)
    assert private_uses(bad) == {"bad.py:2 ls._failed"}
