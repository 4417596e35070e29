"""Trace strings reach the terminal neutralised: no escape sequence, no bidi override, no rich
markup taking effect (README, Security notes)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from brrr_trace.cli import main
from brrr_trace.safe_text import terminal_safe
from tests.tracebuilder import frame, kernel, launch, op, write

H200 = Path(__file__).resolve().parent / "data" / "h200"
HOSTILE = (
    "\x1b]8;;http://evil\x1b\\x\x1b]8;;\x1b\\\x1b[2J\x9b31m\u202eevil\u2066[/oops][link=http://x]y"
)
MARKUP = "[/oops]\x1b[2J\u202e[link=http://x]"  # a name torch could write (no backslash)
RAW = ("\x1b", "\x9b", "\u202e", "\u2066")


def hostile_trace(path: Path) -> Path:
    events = [
        frame(f"train{HOSTILE}.py(1): f{HOSTILE}", 0.0, 100.0),
        op("aten::mm", 1.0, 10.0),
        launch(2.0, 1),
        kernel(f"void k{HOSTILE}", 5.0, 50.0, 1),
    ]
    return write(path, events, deviceProperties=[{"id": 0, "name": f"GPU{HOSTILE}"}])


def assert_clean(text: str) -> None:
    assert not any(c in text for c in RAW), repr(text)
    assert "\\x1b]8;;http://evil" in text  # shown, escaped, not dropped


def test_neutralising_keeps_ordinary_text_and_escapes_controls() -> None:
    assert terminal_safe("train.py:12 step · 3.2 µs → ×") == "train.py:12 step · 3.2 µs → ×"
    assert terminal_safe("a\x1b[2Jb\tc\u202ed") == "a\\x1b[2Jb\\x09c\\u202ed"


def test_text_report_shows_escapes_not_sequences(tmp_path, capsys) -> None:
    assert main(["analyze", str(hostile_trace(tmp_path / "t.json"))]) == 0
    out = capsys.readouterr().out
    assert_clean(out)
    assert "[/oops][link=http://x]" in out  # markup in names is shown as text


def test_json_report_escapes_c1_and_bidi_and_round_trips(tmp_path, capsys) -> None:
    assert main(["analyze", str(hostile_trace(tmp_path / "t.json")), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW)
    doc = json.loads(out)
    assert doc["lines"][0]["function"] == f"f{HOSTILE}"  # the value itself is unchanged


def test_markup_in_names_does_not_break_diff(tmp_path, capsys) -> None:
    """Before: MarkupError ("closing tag '[/oops]' ... doesn't match any open tag"), exit 1."""
    doc = json.loads(gzip.decompress((H200 / "fp32_matmul.json.gz").read_bytes()))
    for event in doc["traceEvents"]:
        if isinstance(event.get("name"), str):
            event["name"] = event["name"].replace("workloads.py", f"work{MARKUP}loads.py")
    after = tmp_path / "after.json"
    after.write_text(json.dumps(doc))
    before = str(H200 / "fp32_matmul_tf32.json.gz")
    # A source root without the fixtures' files: the trace's own paths say what is user code.
    assert main(["diff", before, str(after), "--source-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in RAW)
    assert "New fp32-matmul at work[/oops]\\x1b[2J\\u202e[link=http://x]loads.py:36" in out


def test_error_messages_quoting_a_name_are_neutralised(tmp_path, capsys) -> None:
    bad = tmp_path / ("x" + HOSTILE.replace("/", "") + ".json")
    bad.write_text("not json")
    assert main(["analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert not any(c in err for c in RAW)
    assert err.count("\n") == 1


def test_markdown_escapes_keep_the_text_and_drop_the_markup() -> None:
    from brrr_trace.safe_text import markdown_code, markdown_text

    assert markdown_text("a_b.c") == "a\\_b\\.c"
    assert markdown_text("![i](http://x)<b>") == "\\!\\[i\\]\\(http\\:\\/\\/x\\)\\<b\\>"
    assert markdown_text("µs ×3\x1b") == "µs ×3\\\\x1b"  # renders as the escape \\x1b
    assert markdown_code("a") == "`a`"
    assert markdown_code("a``b") == "```a``b```"  # a longer fence: the run stays inside
    assert markdown_code("`x") == "`` `x ``"  # padded: one space each side is dropped again
