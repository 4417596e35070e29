"""``brrr-trace record -o X`` writes no file but X, and X only whole: links planted at the names
it used to write through (``X.tmp``, ``X.kineto.json``) are not followed (README, Security
notes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")  # recording_info names the torch version

from brrr_trace.recording import export
from brrr_trace.recording.hidden_frames import HiddenFrames

KINETO = '{"schemaVersion": 1, "traceEvents": [\n{"ph": "X", "name": "a", "ts": 1, "dur": 1}\n]}'


class FakeProfile:
    """What ``export`` uses of a stopped profile: no event tree, and torch's own JSON."""

    profiler = None  # no ``kineto_results``: the export goes on without call lines

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text(KINETO)


def planted_links(folder: Path, target: Path, victim: Path) -> list[Path]:
    names = [target.name + ".tmp", target.name + ".kineto.json"]
    links = [folder / name for name in names]
    for link in links:
        link.symlink_to(victim)
    return links


def test_links_planted_beside_the_output_are_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "t.json"
    links = planted_links(tmp_path, target, victim)
    export.export(FakeProfile(), target, exact_ops=False, hidden=HiddenFrames([]))
    assert victim.read_text() == "keep me"
    assert all(link.is_symlink() for link in links)
    assert json.loads(target.read_text())["traceEvents"][0]["name"] == "a"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(["t.json", "victim", *(link.name for link in links)])


def test_a_failed_rewrite_still_writes_torchs_trace_atomically(tmp_path, monkeypatch) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    target = tmp_path / "t.json"
    planted_links(tmp_path, target, victim)

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise ValueError("boom")

    monkeypatch.setattr(export, "rewrite", broken)
    assert export.export(FakeProfile(), target, exact_ops=False, hidden=HiddenFrames([])) == {}
    assert victim.read_text() == "keep me"
    assert target.read_text() == KINETO
