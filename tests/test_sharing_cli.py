"""The CLI for reports shared with others: --path-map (the editor's pathMappings), paths
relative to the source root, several traces in one JSON object, and a terminal of any width
(NO_COLOR, progress on a TTY only)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from brrr_trace import cli
from brrr_trace.cli import main
from brrr_trace.pipeline import analyze
from brrr_trace.render import text as render_text
from brrr_trace.server.settings import Settings
from tests.report_checks import assert_valid_report
from tests.test_golden_output import GEMM, step
from tests.tracebuilder import frame, kernel, launch, write


def remote_step(root: str) -> list[dict]:
    """The golden step, recorded on another machine under ``root``."""
    return [
        dict(e, name=f"{root}/{e['name']}") if e["cat"] == "python_function" else e
        for e in step(waits=True)
    ]


def test_path_map_puts_another_machines_files_under_the_source_root(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("src", "old"):  # two train.py: the file name alone does not tell
        (tmp_path / "repo" / folder).mkdir(parents=True)
        (tmp_path / "repo" / folder / "train.py").write_text("x = 1\n" * 40)
    trace = write(tmp_path / "t.json", remote_step("/home/alice/proj"))
    monkeypatch.chdir(tmp_path / "repo")
    code = main(["analyze", str(trace), "--format", "json", "--path-map", "/home/alice/proj=src"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {line["relative_path"] for line in doc["lines"]} == {"src/train.py"}
    assert {line["path"] for line in doc["lines"]} == {str(tmp_path / "repo" / "src" / "train.py")}
    assert [f["relative_path"] for f in doc["findings"]] == ["src/train.py"]
    assert doc["unmapped_files"] == []
    # Without the mapping nothing is guessed between the two.
    assert main(["analyze", str(trace), "--format", "json"]) == 0
    unmapped = json.loads(capsys.readouterr().out)
    assert {line["relative_path"] for line in unmapped["lines"]} == {None}
    assert unmapped["unmapped_files"] == ["/home/alice/proj/train.py"]


def test_path_map_means_what_the_editors_path_mappings_mean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = cli._parser().parse_args(
        ["analyze", "--path-map", "C:\\work\\proj=src", "--path-map", "/r=${workspaceFolder}/x"]
    )
    editor = Settings(path_mappings=(("C:\\work\\proj", "src"), ("/r", "${workspaceFolder}/x")))
    expected = editor.analysis_options(str(tmp_path)).path_mappings
    assert (
        cli._mappings(args)
        == expected
        == (
            ("C:/work/proj", str(tmp_path / "src")),
            ("/r", str(tmp_path / "x")),
        )
    )


@pytest.mark.parametrize("bad", ["nothing", "=src", "/r="])
def test_a_bad_path_map_is_a_usage_error(bad: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["analyze", "--path-map", bad])
    assert exit_.value.code == 2
    assert "FROM=TO" in capsys.readouterr().err


def test_several_traces_give_one_object_of_the_same_shape(tmp_path: Path, capsys) -> None:
    t = write(tmp_path / "t.json", step(waits=True))
    u = write(tmp_path / "u.json", step(waits=False))
    assert main(["analyze", str(t), str(u), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert_valid_report(doc)
    assert [r["trace"]["path"] for r in doc["reports"]] == [str(t), str(u)]
    assert {k: v for k, v in doc.items() if k != "reports"} == doc["reports"][0]
    assert main(["analyze", str(t), "--format", "json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert "reports" not in one and one == doc["reports"][0]


def long_named_step() -> list[dict]:
    deep = "/very/long/folder/names/of/a/monorepo/services/training/models"
    return [
        frame(f"{deep}/transformer_block.py(10): forward_with_a_very_long_function_name", 0, 20),
        launch(5.0, 1),
        kernel(GEMM, 10.0, 200.0, 1),
        frame(f"{deep}/optimizer_step.py(20): update", 30.0, 235.0),
        launch(35.0, 2),
        kernel(GEMM, 240.0, 1234.5, 2),
    ]


@pytest.mark.parametrize("width", [60, 80, 100, 130])
def test_the_table_fits_the_terminal_and_no_number_is_cut(tmp_path: Path, width: int) -> None:
    report = analyze(write(tmp_path / "t.json", long_named_step()))
    out = render_text.render(report, color=False, width=width)
    table = out[out.index("Lines by time") : out.index("\n(def): ")]
    assert all(len(line.rstrip()) <= width for line in table.splitlines())
    rows = [line for line in table.splitlines() if re.match(r"\d+  ", line)]
    assert len(rows) == 2
    for row in rows:
        numbers = re.split(r"\b(compute|memory|overhead)\b", row)[-1]
        assert "…" not in numbers, row
    assert "1.2 ms" in rows[0] and "200.0 µs" in rows[1]
    if width >= 80:  # at 60 the share column goes before any number is cut
        assert "86.3%" in rows[0]  # 1264.5 µs of a 1464.5 µs span
    # The names were shortened, the leading folders first.
    assert "/very/long" not in table and "_step.py:20" in table


def test_shorten_cuts_folders_first_then_the_function() -> None:
    place, rest = "a/b/c/model.py:123", " forward_pass"
    assert render_text.shorten(place, rest, 40) == "a/b/c/model.py:123 forward_pass"
    assert render_text.shorten(place, rest, 29) == "…/c/model.py:123 forward_pass"
    assert render_text.shorten(place, rest, 28) == "…/model.py:123 forward_pass"
    assert render_text.shorten(place, rest, 20) == "…/model.py:123 forw…"
    assert render_text.shorten(place, rest, 12) == "…odel.py:123"  # the line number stays


def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli._color()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cli._color()
    monkeypatch.setenv("NO_COLOR", "")  # no-color.org: set to the empty string means unset
    assert cli._color()


def test_progress_on_a_terminal_for_any_file_and_never_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = write(tmp_path / "t.json", step(waits=True))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert cli._progress(small).__class__.__name__ == "nullcontext"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    bar = cli._progress(small)
    assert isinstance(bar, cli._BarProgress)
    with bar as progress:  # the bar waits a second before it shows: a quick load shows none
        progress(10, 100)
        analyze(small)
    assert not bar._timer.is_alive()


def test_escaped_names_are_measured_as_shown(tmp_path: Path) -> None:
    """A name full of controls is wider once escaped (\\x1b is four cells): the table is laid
    out for the escaped text, so the numbers still fit."""
    from tests.test_hostile_text import hostile_trace

    report = analyze(hostile_trace(tmp_path / "t.json"))
    out = render_text.render(report, color=False, width=80)
    table = out[out.index("Lines by time") : out.index("\n(def): ")]
    assert all(len(line.rstrip()) <= 80 for line in table.splitlines())
    (row,) = [line for line in table.splitlines() if re.match(r"1  ", line)]
    assert re.search(r"memory  50\.0 µs  100\.0%  50\.0 µs  0 ns +1$", row.rstrip()), row


def test_the_width_is_the_terminals_and_130_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    assert cli._width() == 130  # a file or a pipe: COLUMNS is the test runner's, not ours
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert cli._width() == 72
