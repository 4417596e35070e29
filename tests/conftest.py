from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.public_scan import PublicScan

PUBLIC = Path(__file__).resolve().parent.parent.parent / "shared" / "traces" / "public"
PUBLIC = Path(os.environ.get("BRRR_PUBLIC_TRACES", PUBLIC))
FIXTURES = Path(__file__).resolve().parent / "data" / "h200"


@pytest.fixture
def public_traces() -> Path:
    if not PUBLIC.is_dir():
        pytest.skip(f"public traces not found at {PUBLIC}")
    return PUBLIC


@pytest.fixture(scope="session")
def public_scan() -> PublicScan:
    if not PUBLIC.is_dir():
        pytest.skip(f"public traces not found at {PUBLIC}")
    return PublicScan(PUBLIC)
