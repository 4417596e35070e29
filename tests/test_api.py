"""The Python API for notebooks and scripts: ``brrr_trace.analyze(path, ...)``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import brrr_trace
from brrr_trace.cli import main
from brrr_trace.errors import BrrrError
from brrr_trace.report import Report
from tests.tracebuilder import frame, kernel, launch, write

ROOT = Path(__file__).resolve().parent.parent
REALCODE = Path(__file__).parent / "data" / "realcode"
GPT = REALCODE / "h200" / "gpt_small.json.gz"


def test_import_stays_light_and_analyze_loads_no_torch() -> None:
    script = (
        "import sys, brrr_trace\n"
        "light = sorted(m for m in ('numpy', 'msgspec', 'brrr_trace.pipeline', 'torch') "
        "if m in sys.modules)\n"
        f"report = brrr_trace.analyze({str(GPT)!r})\n"
        "print(light, 'torch' in sys.modules, len(report.lines) > 0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[] False True\n"


def test_analyze_gives_the_report_the_cli_writes(tmp_path: Path) -> None:
    report = brrr_trace.analyze(GPT, source_root=REALCODE)
    assert isinstance(report, Report)
    out = tmp_path / "r.json"
    assert main(["analyze", str(GPT), "--source-root", str(REALCODE), "--format", "json",
                 "-o", str(out)]) == 0  # fmt: skip
    assert report.to_dict() == json.loads(out.read_text())
    assert json.loads(report.to_json()) == report.to_dict()
    assert report.to_html().startswith("<!DOCTYPE html>")


def test_repr_is_one_short_line() -> None:
    report = brrr_trace.analyze(GPT, source_root=REALCODE)
    assert repr(report) == (
        f"<Report {str(GPT)!r}: span 58.5 ms, mostly overhead-bound, 34 lines, 11 findings>"
    )


def test_the_notebook_summary_is_escaped_and_has_no_script(tmp_path: Path) -> None:
    name = "<script>alert(1)</script>"
    path = write(
        tmp_path / "t.json",
        [
            frame(f"train.py(3): {name}", 0.0, 60.0),
            launch(1.0, 1),
            kernel(name, 5.0, 50.0, 1),
        ],
    )
    shown = brrr_trace.analyze(path, include=["train.py"])._repr_html_()
    assert "<script" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;" in shown
    assert "train.py:3" in shown and "http" not in shown and "src=" not in shown


def test_options_and_errors() -> None:
    report = brrr_trace.analyze(GPT, source_root=REALCODE, launch_gap_ns=0)
    assert report.summary.idle_by_cause_ns["launch"] == 0  # type: ignore[index]
    with pytest.raises(TypeError, match=r"unknown option.*no_such_option"):
        brrr_trace.analyze(GPT, no_such_option=1)
    with pytest.raises(BrrrError):
        brrr_trace.analyze(REALCODE / "gpt.py")
