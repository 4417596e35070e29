"""Fixtures of the language-server tests (the helpers are in ``lsp_helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.lsp_helpers import Workspace, make_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A copy of ``workloads.py`` and its ``item_in_loop`` H200 trace, in a fresh folder."""
    return make_workspace(tmp_path / "ws")
