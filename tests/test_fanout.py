"""The per-rank worker pool: a worker that dies is one sentence, not a traceback."""

from __future__ import annotations

import os

import pytest

from brrr_trace import fanout
from brrr_trace.errors import BrrrError


def dies(path: str) -> None:
    os._exit(9)  # what the kernel's OOM killer leaves the pool with


def test_a_worker_that_dies_names_its_trace_and_what_to_do() -> None:
    with pytest.raises(BrrrError) as raised:
        fanout.in_processes(dies, [("rank3.json.gz",)], jobs=1)
    assert str(raised.value) == (
        "a worker process analyzing rank3.json.gz stopped abruptly (out of memory, or killed); "
        "with fewer at a time (--jobs 1) each has more memory."
    )
