"""The source index: the files a trace names, found by suffix under the source root, with the
walk bounded and the workspace's .gitignore respected (issue #17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brrr_trace.analyzers import paths
from brrr_trace.analyzers.paths import PathMapper


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n")
    return path


def test_a_shortened_trace_path_maps_by_its_longest_suffix(tmp_path: Path) -> None:
    model = _file(tmp_path / "src" / "proj" / "model.py")
    _file(tmp_path / "other" / "model.py")
    mapper = PathMapper(str(tmp_path))
    mapper.expect(["/home/ci/checkout/src/proj/model.py"])
    assert mapper.map("/home/ci/checkout/src/proj/model.py") == str(model)


def test_files_under_a_gitignored_folder_are_not_indexed(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("# generated\nscratch/\n*.bak.py\n/anchored\n")
    _file(tmp_path / "scratch" / "train.py")
    _file(tmp_path / "nested" / "anchored" / "eval.py")
    _file(tmp_path / "anchored" / "eval.py")
    _file(tmp_path / "old.bak.py")
    mapper = PathMapper(str(tmp_path))
    assert mapper.map("/elsewhere/train.py") is None
    assert mapper.map("/elsewhere/old.bak.py") is None
    # "/anchored" is ignored at the root only.
    assert mapper.map("/elsewhere/nested/anchored/eval.py") == str(
        tmp_path / "nested" / "anchored" / "eval.py"
    )


def test_a_nested_gitignore_applies_below_its_folder(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ".gitignore").write_text("gen.py\n")
    _file(tmp_path / "pkg" / "gen.py")
    kept = _file(tmp_path / "gen.py")
    mapper = PathMapper(str(tmp_path))
    assert mapper.map("/x/gen.py") == str(kept)


def test_only_the_names_the_trace_mentions_are_indexed(tmp_path: Path) -> None:
    _file(tmp_path / "a" / "wanted.py")
    _file(tmp_path / "a" / "unwanted.py")
    mapper = PathMapper(str(tmp_path))
    mapper.expect(["/remote/a/wanted.py"])
    assert mapper.map("/remote/a/wanted.py") == str(tmp_path / "a" / "wanted.py")
    assert set(mapper._by_name) == {"wanted.py"}
    # A name asked for later is still found (the index is built again with it).
    assert mapper.map("/remote/a/unwanted.py") == str(tmp_path / "a" / "unwanted.py")


def test_nothing_is_walked_until_a_path_needs_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = _file(tmp_path / "direct.py")
    walked = []
    monkeypatch.setattr(PathMapper, "_index", lambda self, root, names: walked.append(root))
    mapper = PathMapper(str(tmp_path))
    assert mapper.map(str(inside)) == str(inside)  # an absolute path under the root: no walk
    assert walked == []


def test_the_walk_stops_after_the_folder_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "MAX_INDEXED_FOLDERS", 5)
    for i in range(10):
        (tmp_path / f"d{i}").mkdir()
    _file(tmp_path / "d9" / "deep" / "late.py")
    shallow = _file(tmp_path / "early.py")
    mapper = PathMapper(str(tmp_path))
    assert mapper.map("/r/early.py") == str(shallow)  # breadth first: the root's own files
    assert mapper.map("/r/d9/deep/late.py") is None
    assert mapper.index_capped
