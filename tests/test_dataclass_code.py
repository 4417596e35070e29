"""brrr_trace.dataclass_code: the methods dataclasses generates, loaded from a file beside the
bytecode instead of compiled, are the methods a compile gives; the file is written as Python
writes bytecode, and one that is damaged only costs the compile."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

from brrr_trace import dataclass_code

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "realcode" / "h200" / "gpt_small.json.gz"

_CLASS = """
from dataclasses import dataclass, field
@dataclass(frozen=True)
class Line:
    file: str
    line: int = 0
    kernels: tuple[str, ...] = ()
    by_regime: dict[str, int] = field(default_factory=dict)
"""


def _create(module: str) -> type:
    namespace: dict[str, object] = {"__name__": module}
    sys.modules[module] = type(sys)(module)
    sys.modules[module].__dict__.update(namespace)
    try:
        exec(_CLASS, sys.modules[module].__dict__)
        return sys.modules[module].__dict__["Line"]  # type: ignore[return-value]
    finally:
        del sys.modules[module]


def test_a_class_of_the_package_gets_the_methods_a_compile_gives() -> None:
    assert dataclasses.exec is dataclass_code._exec  # type: ignore[attr-defined]
    looked_up = _create("brrr_trace.a_module_for_the_test")
    again = _create("brrr_trace.a_module_for_the_test")  # the codes held by now
    dataclasses.exec = exec  # type: ignore[attr-defined]
    try:
        compiled = _create("brrr_trace.a_module_for_the_test")
    finally:
        dataclass_code.install()
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        code = getattr(compiled, name).__code__
        assert getattr(looked_up, name).__code__ == code, name
        assert getattr(again, name).__code__ == code, name
    # The annotations a compile gives: none of dataclass_code's `from __future__` flags.
    assert looked_up.__init__.__annotations__ == compiled.__init__.__annotations__
    assert looked_up.__init__.__annotations__["return"] is None
    a = looked_up("x.py", 3, ("k",), {"compute": 1})
    assert a == looked_up("x.py", 3, ("k",), {"compute": 1}) and a != looked_up("x.py")
    assert repr(a) == "Line(file='x.py', line=3, kernels=('k',), by_regime={'compute': 1})"


def test_another_packages_classes_are_compiled_as_before() -> None:
    before = set(dataclass_code._used)
    line = _create("users_program")
    assert dataclass_code._used == before
    dataclasses.exec = exec  # type: ignore[attr-defined]
    try:
        compiled = _create("users_program")
    finally:
        dataclass_code.install()
    for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        assert getattr(line, name).__code__ == getattr(compiled, name).__code__, name
    assert line.__init__.__annotations__["return"] is None  # not the string "_return_type"


def _analyze(out: Path, pycache: Path, *, write: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONPYCACHEPREFIX": str(pycache)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "brrr_trace", "analyze", str(TRACE), "--format=json", f"-o{out}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def _cache_file(pycache: Path) -> Path:
    (found,) = pycache.rglob("dataclass-methods.*.bin")
    return found


def test_the_file_is_written_once_and_the_report_is_the_same(tmp_path: Path) -> None:
    pycache = tmp_path / "pyc"
    first = _analyze(tmp_path / "first.json", pycache, write=True)
    assert first.returncode == 0, first.stderr
    cache = _cache_file(pycache)
    assert cache.parent.name == "brrr_trace" and cache.stat().st_size > 0
    written = cache.read_bytes()
    cache.touch()
    stamp = cache.stat().st_mtime_ns
    second = _analyze(tmp_path / "second.json", pycache, write=True)
    assert second.returncode == 0, second.stderr
    assert cache.read_bytes() == written and cache.stat().st_mtime_ns == stamp  # nothing new
    without = _analyze(tmp_path / "without.json", tmp_path / "pyc-off", write=False)
    assert without.returncode == 0, without.stderr
    assert not (tmp_path / "pyc-off").exists()
    report = (tmp_path / "without.json").read_bytes()
    assert (tmp_path / "first.json").read_bytes() == report
    assert (tmp_path / "second.json").read_bytes() == report


def test_a_damaged_file_costs_only_the_compile(tmp_path: Path) -> None:
    pycache = tmp_path / "pyc"
    assert _analyze(tmp_path / "good.json", pycache, write=True).returncode == 0
    cache = _cache_file(pycache)
    good = cache.read_bytes()
    header = dataclass_code._header()
    count = len(marshal.loads(good[len(header) :]))
    assert count > 300  # ~70 classes, most with six methods
    for damaged in (b"", b"not marshal data", good[:20] + b"\xff" * 40, good[: len(good) // 2]):
        cache.write_bytes(damaged)
        done = _analyze(tmp_path / "again.json", pycache, write=True)
        assert done.returncode == 0 and not done.stderr, done.stderr
        assert (tmp_path / "again.json").read_bytes() == (tmp_path / "good.json").read_bytes()
        # Written again, whole: the header, then as many codes as the first run compiled.
        data = cache.read_bytes()
        assert data.startswith(header) and len(marshal.loads(data[len(header) :])) == count
