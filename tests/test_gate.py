"""`brrr-trace diff BEFORE AFTER --fail-on-regression PCT`: a CI gate. Exit 3 when the step
time or a line grew by more than PCT percent, with the regressions as SARIF on request.

The traces: the golden step (tests/test_golden_output.py) before, and after with the update
line's add taking 150 µs instead of 50 µs (the span grows from 405 to 505 µs, +24.7%).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brrr_trace.cli import REGRESSION_EXIT, main
from tests.report_checks import assert_valid_sarif
from tests.test_golden_output import step
from tests.tracebuilder import write


def slower_update() -> list[dict]:
    """The update's add 100 µs longer; everything after it 100 µs later."""
    out = []
    for event in step(waits=True):
        event = dict(event)
        if event.get("cat") == "kernel" and event["ts"] == 210.0:
            event["dur"] = 150.0
        elif event["ts"] >= 260.0:
            event["ts"] += 100.0
        if event["name"] in ("train.py(20): update", "cudaStreamSynchronize"):
            event["dur"] += 100.0
        out.append(event)
    return out


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    before = write(tmp_path / "before.json", step(waits=True))
    after = write(tmp_path / "after.json", slower_update())
    return str(before), str(after)


def test_a_regression_beyond_the_gate_fails_with_exit_3(pair, capsys) -> None:
    code = main(["diff", *pair, "--fail-on-regression", "10"])
    err = capsys.readouterr().err
    assert code == REGRESSION_EXIT == 3
    assert err.splitlines() == [
        "brrr-trace: regression: The GPU span grew by 24.7% (more than 10%): 405.0 µs before, "
        "505.0 µs after.",
        "brrr-trace: regression: train.py:20 update grew by 181.8% (more than 10%): 55.0 µs "
        "before, 155.0 µs after.",
    ]


def test_within_the_gate_exits_0(pair, capsys) -> None:
    assert main(["diff", *pair, "--fail-on-regression", "200"]) == 0
    assert "regression" not in capsys.readouterr().err


def test_no_gate_no_failure(pair, capsys) -> None:
    assert main(["diff", *pair]) == 0


def test_the_regressions_as_sarif(pair, tmp_path: Path, capsys) -> None:
    out = tmp_path / "gate.sarif"
    code = main(["diff", *pair, "--fail-on-regression", "10", "--sarif", str(out)])
    assert code == 3
    assert capsys.readouterr().out.startswith("brrr-trace diff")  # the text diff as usual
    doc = json.loads(out.read_text())
    assert_valid_sarif(doc)
    results = doc["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [
        ("step-regression", "error"),
        ("line-regression", "error"),
    ]
    assert all(
        r["locations"][0]["physicalLocation"]["region"] == {"startLine": 20} for r in results
    )
    assert results[1]["properties"] == {
        "before_us": 55.0,
        "after_us": 155.0,
        "change_percent": 181.82,
        "trace_file": "train.py",
    }
    rules = [r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]]
    assert rules == ["line-regression", "step-regression"]


def test_format_sarif_prints_the_regressions(pair, capsys) -> None:
    assert main(["diff", *pair, "--format", "sarif"]) == 0  # no gate: reported, not failed
    doc = json.loads(capsys.readouterr().out)
    assert_valid_sarif(doc)
    assert {r["ruleId"] for r in doc["runs"][0]["results"]} == {
        "step-regression",
        "line-regression",
    }


def test_the_same_trace_twice_passes_any_gate(pair, capsys) -> None:
    assert main(["diff", pair[0], pair[0], "--fail-on-regression", "0"]) == 0


@pytest.mark.parametrize("bad", ["-5", "ten", "nan"])
def test_a_bad_percentage_is_a_usage_error(pair, bad: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["diff", *pair, "--fail-on-regression", bad])
    assert exit_.value.code == 2
