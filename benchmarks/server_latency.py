"""Language-server latency: inlay hints once a trace is loaded, and requests while one loads.

docs/architecture.md §11: inlay hints answered in under 10 ms (p95) once a trace is loaded;
while a 100 MB trace loads, hover and hint requests are still answered within 50 ms. Every time
here is a round trip measured at a bare JSON-RPC client over stdio to ``python -m brrr_trace
serve``: the server's work, JSON on both sides and the pipes.

Usage (from the repository root):

    .venv/bin/python benchmarks/server_latency.py [--size-mb 100] [--requests 500]

Three measurements:
1. *loaded*: the H200 ``item_in_loop`` trace is loaded; ``--requests`` sequential inlay-hint
   requests over all of ``workloads.py``, then hovers on the hot line and code-lens requests.
2. *while loading*: a ``--size-mb`` trace (``item_in_loop`` repeated, shifted in time, ids
   offset) appears next to it; the server notices it (polling) and loads it while a hint and a
   hover request go out every 20 ms until the load ends.
3. *why a process*: the same large trace analyzed in a thread and in a spawned process, with an
   asyncio probe measuring how late a 10 ms sleep wakes up (the event loop's stall).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gzip
import json
import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIXTURE = DATA / "h200" / "item_in_loop.json.gz"

# args holding ids that must stay unique when events are repeated; one offset per group, because
# the ids of a group point at each other (a flow's id is its launch's correlation, ...).
_ID_GROUPS = {
    "correlation": 0,
    "External id": 1,
    "Record function id": 1,
    "Python id": 2,
    "Python parent id": 2,
    "Sequence number": 3,
    "Ev Idx": 4,
}


def build_big_trace(source: Path, out: Path, size_bytes: int) -> int:
    """Write ``out``: the events of ``source`` repeated (shifted in time) up to ``size_bytes``."""
    with gzip.open(source, "rb") as handle:
        doc = json.loads(handle.read())
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and isinstance(e.get("ts"), (int, float))]
    first = min(e["ts"] for e in timed)
    last = max(e["ts"] + e.get("dur", 0) for e in timed)
    shift_us = last - first + 1_000
    largest = [0] * 5
    for event in timed:
        for key, value in (event.get("args") or {}).items():
            if key in _ID_GROUPS and type(value) is int:
                largest[_ID_GROUPS[key]] = max(largest[_ID_GROUPS[key]], value)
        if event.get("ph") in ("s", "f", "t") and type(event.get("id")) is int:
            largest[0] = max(largest[0], event["id"])
    written, copies = 0, 0
    with open(out, "wb") as handle:
        handle.write(orjson.dumps(doc)[:-1] + b',"traceEvents":[')
        handle.write(b"".join(orjson.dumps(m) + b"," for m in meta))
        separator = b""
        while written < size_bytes:
            for event in timed:
                copy = dict(event)
                copy["ts"] = round(event["ts"] + copies * shift_us, 3)
                if event.get("args"):
                    args = dict(event["args"])
                    for key, value in event["args"].items():
                        if key in _ID_GROUPS and type(value) is int:
                            args[key] = value + copies * (largest[_ID_GROUPS[key]] + 1)
                    copy["args"] = args
                if event.get("ph") in ("s", "f", "t") and type(event.get("id")) is int:
                    copy["id"] = event["id"] + copies * (largest[0] + 1)
                data = orjson.dumps(copy)
                handle.write(separator + data)
                separator = b","
                written += len(data) + 1
            copies += 1
        handle.write(b"]}")
    return copies


def build_many_lines(folder: Path, functions: int) -> Path:
    """A source file of ``functions`` small functions and a trace giving each one a kernel."""
    source = "".join(f"def f{i}(x):\n    y = x @ x\n    return y\n\n\n" for i in range(functions))
    (folder / "many.py").write_text(source)
    events: list[dict[str, Any]] = []
    for i in range(functions):
        ts = 100.0 * i
        events += [
            {"ph": "X", "cat": "python_function", "name": f"many.py({5 * i + 1}): f{i}",
             "pid": 1, "tid": 100, "ts": ts, "dur": 80.0, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 100,
             "ts": ts + 1, "dur": 2.0, "args": {"correlation": i + 1}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts + 10,
             "dur": 50.0, "args": {"device": 0, "stream": 7, "correlation": i + 1}},
        ]  # fmt: skip
    trace = folder / "traces" / "many.pt.trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    old = time.time() - 60
    os.utime(trace, (old, old))
    return folder / "many.py"


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "n": len(ordered),
        "p50_ms": 1e3 * statistics.median(ordered),
        "p95_ms": 1e3 * at(0.95),
        "p99_ms": 1e3 * at(0.99),
        "max_ms": 1e3 * ordered[-1],
    }


class RawClient:
    """A bare JSON-RPC client over the server's stdio: times include the server's work, JSON and
    the pipes, not a client library's decoding into typed objects (which costs more than the
    server's side for large answers: 3-7 ms for 1000 hints with pygls' cattrs converter)."""

    async def start(self, cwd: Path) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "brrr_trace",
            "serve",
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.progress: list[str] = []
        self.progress_changed = asyncio.Event()
        self.next_id = 0
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            header = await stdout.readuntil(b"\r\n\r\n")
            length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:  # a request from the server
                self._send({"id": message["id"], "result": None})
            elif "id" in message:
                self.pending.pop(message["id"]).set_result(message.get("result"))
            elif message["method"] == "$/progress":
                self.progress.append(message["params"]["value"]["kind"])
                self.progress_changed.set()

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self._send({"id": self.next_id, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def count(self, kind: str) -> int:
        return self.progress.count(kind)

    async def wait_progress(self, kind: str, count: int, timeout: float = 600) -> None:
        async def loop() -> None:
            while self.count(kind) < count:
                self.progress_changed.clear()
                await self.progress_changed.wait()

        await asyncio.wait_for(loop(), timeout)

    async def stop(self) -> None:
        await self.request("shutdown", None)
        self.notify("exit", None)
        await self.process.wait()
        self.reader.cancel()


async def start(workspace: Path, source: Path, options: dict[str, Any]) -> RawClient:
    client = RawClient()
    await client.start(workspace)
    capabilities = {
        "window": {"workDoneProgress": True},
        "workspace": {"inlayHint": {"refreshSupport": True}},
        "textDocument": {"inlayHint": {}, "hover": {}, "codeLens": {}},
    }
    await client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "capabilities": capabilities,
            "initializationOptions": {"brrr-trace": options},
        },
    )
    client.notify("initialized", {})
    client.notify(
        "textDocument/didOpen",
        {
            "textDocument": {
                "uri": source.as_uri(),
                "languageId": "python",
                "version": 1,
                "text": source.read_text(),
            }
        },
    )
    await client.wait_progress("end", 1)
    return client


async def timed(client: RawClient, method: str, params: Any) -> tuple[float, Any]:
    begin = time.perf_counter()
    result = await client.request(method, params)
    return time.perf_counter() - begin, result


def whole(source: Path) -> dict[str, Any]:
    lines = source.read_text().count("\n") + 1
    return {
        "textDocument": {"uri": source.as_uri()},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": lines, "character": 0}},
    }


async def many_lines_latency(workspace: Path, source: Path, requests: int) -> dict[str, Any]:
    """Hints for a whole file full of hot lines (Neovim asks for the whole buffer at once).

    With the default threshold (1% of the span) a trace has at most 100 hinted lines; the
    threshold is 0 here so that every function gets one.
    """
    client = await start(workspace, source, {"threshold": 0})
    samples = []
    for _ in range(requests):
        elapsed, hints = await timed(client, "textDocument/inlayHint", whole(source))
        samples.append(elapsed)
    await client.stop()
    lines = source.read_text().count("\n") + 1
    return {f"loaded: inlayHint, {len(hints)} hints in a {lines}-line file": percentiles(samples)}


async def server_latencies(workspace: Path, big: Path, requests: int) -> dict[str, Any]:
    source = workspace / "workloads.py"
    client = await start(workspace, source, {"pollInterval": 0.2})
    hint_params = whole(source)
    hover_params = {
        "textDocument": {"uri": source.as_uri()},
        "position": {"line": 107, "character": 12},
    }
    lens_params = {"textDocument": {"uri": source.as_uri()}}
    for _ in range(20):  # warm up
        await client.request("textDocument/inlayHint", hint_params)

    results: dict[str, Any] = {}
    samples = []
    for _ in range(requests):
        elapsed, hints = await timed(client, "textDocument/inlayHint", hint_params)
        samples.append(elapsed)
    assert hints, "no hints: the trace did not load"
    results["loaded: inlayHint"] = percentiles(samples)
    samples = []
    for _ in range(max(50, requests // 5)):
        elapsed, hover = await timed(client, "textDocument/hover", hover_params)
        samples.append(elapsed)
    assert hover is not None
    results["loaded: hover"] = percentiles(samples)
    samples = []
    for _ in range(max(50, requests // 5)):
        elapsed, _lenses = await timed(client, "textDocument/codeLens", lens_params)
        samples.append(elapsed)
    results["loaded: codeLens"] = percentiles(samples)

    # The big trace appears; the poller notices it, and the load runs while we keep asking.
    shutil.copy(big, workspace / "traces" / "big.pt.trace.json")
    await client.wait_progress("begin", 2)
    started = time.perf_counter()
    hint_samples, hover_samples = [], []
    while client.count("end") < 2:
        elapsed, _ = await timed(client, "textDocument/inlayHint", hint_params)
        hint_samples.append(elapsed)
        elapsed, _ = await timed(client, "textDocument/hover", hover_params)
        hover_samples.append(elapsed)
        await asyncio.sleep(0.02)
    results["load time of the big trace (s)"] = time.perf_counter() - started
    results["while loading: inlayHint"] = percentiles(hint_samples)
    results["while loading: hover"] = percentiles(hover_samples)
    await client.stop()
    return results


def _analyze(path: str) -> int:
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.pipeline import analyze

    return len(analyze(path, AnalysisOptions(source_root=str(DATA))).lines)


async def loop_stall(big: Path, mode: str) -> dict[str, float]:
    """How late does a 10 ms asyncio sleep wake up while the analysis runs in a thread/process?"""
    loop = asyncio.get_running_loop()
    if mode == "thread":
        executor: concurrent.futures.Executor = concurrent.futures.ThreadPoolExecutor(1)
    else:
        executor = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn")
        )
    with executor:
        future = loop.run_in_executor(executor, _analyze, str(big))
        lateness = []
        while not future.done():
            start = time.perf_counter()
            await asyncio.sleep(0.01)
            lateness.append(time.perf_counter() - start - 0.01)
        await future
    return percentiles(lateness)


def table(results: dict[str, Any]) -> str:
    rows = [
        "| measurement | n | p50 ms | p95 ms | p99 ms | max ms |",
        "| --- | --: | --: | --: | --: | --: |",
    ]
    for name, value in results.items():
        if isinstance(value, dict):
            rows.append(
                f"| {name} | {value['n']} | {value['p50_ms']:.2f} | {value['p95_ms']:.2f} | "
                f"{value['p99_ms']:.2f} | {value['max_ms']:.2f} |"
            )
        else:
            rows.append(f"| {name} | | {value:.2f} | | | |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="brrr-server-bench-") as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / "traces").mkdir(parents=True)
        shutil.copy(DATA / "workloads.py", workspace / "workloads.py")
        shutil.copy(FIXTURE, workspace / "traces" / "item_in_loop.pt.trace.json.gz")
        old = time.time() - 60
        os.utime(workspace / "traces" / "item_in_loop.pt.trace.json.gz", (old, old))
        big = Path(tmp) / "big.json"
        copies = build_big_trace(FIXTURE, big, int(args.size_mb * 1e6))
        size_mb = big.stat().st_size / 1e6
        print(
            f"# brrr-trace server latency — {platform.node()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}\n\nbig trace: {size_mb:.0f} MB "
            f"({copies} copies of {FIXTURE.name})\n",
            flush=True,
        )
        results = asyncio.run(server_latencies(workspace, big, args.requests))
        many = Path(tmp) / "many"
        (many / "traces").mkdir(parents=True)
        source = build_many_lines(many, 1000)
        results.update(asyncio.run(many_lines_latency(many, source, args.requests // 5)))
        few = Path(tmp) / "few"
        (few / "traces").mkdir(parents=True)
        source = build_many_lines(few, 100)
        results.update(asyncio.run(many_lines_latency(few, source, args.requests // 5)))
        print(table(results), flush=True)
        stall = {
            f"event-loop stall, analysis in a {mode}": asyncio.run(loop_stall(big, mode))
            for mode in ("thread", "process")
        }
        print("\n" + table(stall))


if __name__ == "__main__":
    main()
