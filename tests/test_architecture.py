"""What the import contracts (pyproject's [tool.importlinter], run by `lint-imports`; see
docs/architecture.md §1) cannot check: recording/ imports torch only inside functions, and
`brrr-trace analyze` never loads it; starting the language server loads no renderer; the server
reaches into no object's private fields but its own; every module is in a layer; the version is
written once."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "brrr_trace"


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


def is_torch(module: str) -> bool:
    return module == "torch" or module.startswith("torch.")


def test_recording_imports_torch_only_inside_functions() -> None:
    # That no other module imports torch is the `torch` import contract.
    recording = sorted((PACKAGE / "recording").rglob("*.py"))
    assert recording
    assert not {
        f"{path.relative_to(PACKAGE)} imports {module} when it is imported"
        for path in recording
        for module in module_level_imports(path)
        if is_torch(module)
    }


def test_every_module_of_the_package_is_in_a_layer() -> None:
    # A module the layers contract does not name is held to nothing; data/ is not a package.
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (layers,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == "layers")
    named = {part.strip() for layer in layers["layers"] for part in layer.split("|")}
    modules = {
        f"brrr_trace.{path.stem if path.is_file() else path.name}"
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert modules == named


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


def modules_after_analyze(tmp_path: Path, keep: str) -> str:
    """What ``analyze --format json`` of GPT small's trace leaves in ``sys.modules``, filtered
    by the expression ``keep`` over a module's name ``m``, sorted, as printed."""
    trace = ROOT / "tests" / "data" / "realcode" / "h200" / "gpt_small.json.gz"
    script = (
        "import sys\n"
        "from brrr_trace.cli import main\n"
        "assert main(['analyze', sys.argv[1], '--format', 'json', '-o', sys.argv[2]]) == 0\n"
        "heavy = ('rich', 'multiprocessing', 'concurrent', 'pygls', 'lsprotocol', 'torch')\n"
        "ours = ('brrr_trace.render.', 'brrr_trace.server', 'brrr_trace.recording',\n"
        "        'brrr_trace.diff', 'brrr_trace.analyzers.crossrank')\n"
        f"print(sorted(m for m in sys.modules if {keep}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(trace), str(tmp_path / "report.json")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_analyze_loads_no_numpy_ma(tmp_path: Path) -> None:
    # numpy imports numpy.ma on the first plain np.unique (~40-80 ms of a small trace's run);
    # brrr_trace.arraysets answers the same without it.
    assert modules_after_analyze(tmp_path, "m.split('.')[:2] == ['numpy', 'ma']") == "[]"


def test_analyze_as_json_loads_only_what_it_uses(tmp_path: Path) -> None:
    # What a single trace's `analyze --format json` leaves out of its start: the other
    # renderers (rich ~50 ms), the server, the recorder, `diff`, the cross-rank merge and the
    # process pool (multiprocessing, concurrent.futures), none of which it runs.
    loaded = modules_after_analyze(tmp_path, "m.split('.')[0] in heavy or m.startswith(ours)")
    assert loaded == "['brrr_trace.render.json']"


def test_the_version_is_written_once() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    source = project["tool"]["setuptools"]["dynamic"]["version"]
    assert source == {"attr": "brrr_trace.__version__"}


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
    assert module_level_imports(bad) == {"brrr_trace.render", "pygls.server", "torch.nn"}
    bad.write_text("ls._failed.clear()\nself._ok = 1\n")
    assert private_uses(bad) == {"bad.py:1 ls._failed"}
