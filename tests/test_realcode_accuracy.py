"""GPU time on the true line, on real training programs recorded on an H200 (tests/data/realcode).

The truth comes from a TorchFunctionMode run of the same program (line_truth.py), not from
brrr-trace; benchmarks/line_accuracy.py matches the runs' GPU ops and scores each one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.line_accuracy import (
    PROGRAMS,
    load_truth,
    programs_in,
    read_events,
    score,
    truth_rows,
)

H200 = PROGRAMS / "h200"
SCORES = {
    (program, kind): score(
        program,
        H200 / f"{program}{suffix}",
        load_truth(H200 / f"{program}.truth.json.gz"),
        PROGRAMS,
    )
    for program in programs_in(H200)
    for kind, suffix in (("plain", ".json.gz"), ("record", ".record.json.gz"))
    if (H200 / f"{program}{suffix}").exists()
}


def share(kind: str) -> float:
    scores = [s for (_, k), s in SCORES.items() if k == kind]
    return sum(s.right_ns for s in scores) / sum(s.gpu_ns for s in scores)


def test_the_set_covers_the_kinds_of_code_people_write() -> None:
    programs = {program for program, _ in SCORES}
    assert programs >= {"gpt_small", "cnn", "rnn", "amp_transformer", "hooks", "use_library"}
    # Every program's truth explains nearly all of its GPU time (the runs line up).
    for s in SCORES.values():
        assert s.unknown_ns <= 0.01 * s.gpu_ns, s


def test_plain_traces_put_97_percent_of_gpu_time_on_the_true_line() -> None:
    assert share("plain") >= 0.97
    for (program, kind), s in SCORES.items():
        if kind == "plain":
            assert s.accuracy >= 0.95, (program, s.accuracy, s.wrong)


def test_recorded_traces_put_99_percent_on_the_true_line() -> None:
    assert share("record") >= 0.99


@pytest.mark.parametrize("program", ["gpt.py", "hooks.py"])
def test_on_the_cpu_too_the_truth_and_the_lines_agree(program: str, tmp_path: Path) -> None:
    """The same check end to end on this machine's CPU: the program runs, is profiled, is run
    under the truth mode, and brrr-trace's line for every leaf CPU op is compared."""
    pytest.importorskip("torch")
    args = [program, "--device", "cpu", "--small", "--steps", "4"]
    plain, truth_trace, nodes = tmp_path / "p.json", tmp_path / "t.json", tmp_path / "n.json"
    run = {"cwd": PROGRAMS, "check": True, "capture_output": True, "timeout": 300}
    subprocess.run([sys.executable, *args, "--profile", str(plain)], **run)  # type: ignore[call-overload]
    subprocess.run(
        [sys.executable, "line_truth.py", str(nodes), "--", *args, "--profile", str(truth_trace)],
        **run,  # type: ignore[call-overload]
    )
    rows = truth_rows(read_events(truth_trace), json.loads(nodes.read_text()))
    assert {row[4] for row in rows} >= {"call", "node"}
    s = score(program, plain, rows, PROGRAMS)
    assert s.gpu_ns > 0 and s.accuracy >= 0.95, s.wrong
