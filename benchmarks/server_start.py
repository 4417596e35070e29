"""How long ``brrr-trace serve`` takes from its start to its answer to ``initialize``, and to the
first hover it can answer.

An editor starts the server when a Python file opens; until ``initialize`` is answered, the
editor waits, and no hint or hover can come until pygls runs. ``serve`` answers ``initialize``
itself before pygls is imported (``server/handshake.py``); the first hover still waits for
pygls and the server modules. The clock starts just before the process is started and stops
when an answer's last byte is read, so it covers the interpreter's start, the imports and the
handshake. The client does what an editor does: ``initialize``, and once it is answered,
``initialized`` and a hover (of a file that is not open, in an empty folder: answered with
nothing, as soon as a handler can run).

    python benchmarks/server_start.py [--runs 5]

Prints one JSON line: every run's seconds to each answer, their medians, and the server
process's CPU seconds (user + system, from /proc) when each answer came.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent


def _frame(message: dict[str, object]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_answer(stream: IO[bytes]) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit("the server closed its output before answering")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answer: dict[str, Any] = json.loads(stream.read(length))
    return answer


def _wait_for(stream: IO[bytes], msg_id: int) -> None:
    while _read_answer(stream).get("id") != msg_id:
        pass


def _cpu_s(pid: int) -> float | None:
    """The process's user + system CPU seconds so far (Linux), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Start:
    initialize_s: float
    hover_s: float
    initialize_cpu_s: float | None
    hover_cpu_s: float | None


def one_start(python: str, workspace: Path) -> Start:
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    started = time.perf_counter()
    child = subprocess.Popen(
        [python, "-m", "brrr_trace", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    params = {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}}
    child.stdin.write(_frame({"id": 1, "method": "initialize", "params": params}))
    child.stdin.flush()
    _wait_for(child.stdout, 1)
    initialize_s = time.perf_counter() - started
    initialize_cpu_s = _cpu_s(child.pid)
    hover = {
        "textDocument": {"uri": (workspace / "a.py").as_uri()},
        "position": {"line": 0, "character": 0},
    }
    child.stdin.write(_frame({"method": "initialized", "params": {}}))
    child.stdin.write(_frame({"id": 2, "method": "textDocument/hover", "params": hover}))
    child.stdin.flush()
    _wait_for(child.stdout, 2)
    hover_s = time.perf_counter() - started
    hover_cpu_s = _cpu_s(child.pid)
    child.stdin.write(_frame({"id": 3, "method": "shutdown"}))
    child.stdin.write(_frame({"method": "exit"}))
    child.stdin.flush()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
    return Start(initialize_s, hover_s, initialize_cpu_s, hover_cpu_s)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        starts = [one_start(args.python, Path(folder)) for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "runs_s": [round(s.initialize_s, 3) for s in starts],
                "median_s": _median([s.initialize_s for s in starts]),
                "hover_runs_s": [round(s.hover_s, 3) for s in starts],
                "hover_median_s": _median([s.hover_s for s in starts]),
                "cpu_at_initialize_median_s": _median([s.initialize_cpu_s for s in starts]),
                "cpu_at_hover_median_s": _median([s.hover_cpu_s for s in starts]),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
