"""How long ``brrr-trace serve`` takes from its start to its answer to ``initialize``.

An editor starts the server when a Python file opens; until ``initialize`` is answered, no hint
or hover can come. The clock starts just before the process is started and stops when the
answer's last byte is read, so it covers the interpreter's start, the imports and the handshake.

    python benchmarks/server_start.py [--runs 5]

Prints one JSON line: every run's seconds and their median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _frame(message: dict[str, object]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_answer(stream: object) -> dict[str, object]:
    read = stream.readline  # type: ignore[attr-defined]
    length = 0
    while True:
        line = read()
        if not line:
            raise SystemExit("the server closed its output before answering initialize")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answer: dict[str, object] = json.loads(stream.read(length))  # type: ignore[attr-defined]
    return answer


def start_to_initialize(python: str) -> float:
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
    child.stdin.write(
        _frame(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": ROOT.as_uri(), "capabilities": {}},
            }
        )
    )
    child.stdin.flush()
    while True:
        answer = _read_answer(child.stdout)
        if answer.get("id") == 1:
            break
    elapsed = time.perf_counter() - started
    child.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    child.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    child.stdin.flush()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    times = [start_to_initialize(args.python) for _ in range(args.runs)]
    print(
        json.dumps({"runs_s": [round(t, 3) for t in times], "median_s": statistics.median(times)})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
