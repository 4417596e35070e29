"""A bare LSP client over a server subprocess: every byte of its stdout kept and parsed, raw
bytes sent when a test needs a frame no real client would send."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import IO, Any


def parse_frames(data: bytes) -> list[dict[str, Any]]:
    """Split a byte stream into LSP messages; raise on any byte that is not part of a frame."""
    messages = []
    at = 0
    while at < len(data):
        end = data.find(b"\r\n\r\n", at)
        if end < 0:
            raise ValueError(f"bytes outside a frame at {at}: {data[at : at + 60]!r}")
        length = None
        for header in data[at:end].split(b"\r\n"):
            name, sep, value = header.partition(b":")
            if not sep or name.strip().lower() not in (b"content-length", b"content-type"):
                raise ValueError(f"not an LSP header at {at}: {header[:60]!r}")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise ValueError(f"frame without Content-Length at {at}")
        body = data[end + 4 : end + 4 + length]
        if len(body) != length:
            raise ValueError(f"frame at {at} is cut short")
        messages.append(json.loads(body))
        at = end + 4 + length
    return messages


class RawClient:
    """Just enough of an LSP client to drive the server and keep every byte of its stdout."""

    def __init__(self, command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.messages: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._read, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, False), daemon=True).start()

    def _read(self, stream: IO[bytes], is_stdout: bool) -> None:
        while chunk := stream.read1(65536):  # type: ignore[attr-defined]
            with self._changed:
                (self.stdout if is_stdout else self.stderr).extend(chunk)
                self._changed.notify_all()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send_bytes(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def wait_for(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: any(predicate(m) for m in self._complete()), timeout=timeout
            )
        assert ok, f"timed out; stderr:\n{self.stderr.decode(errors='replace')}"
        return next(m for m in self._complete() if predicate(m))

    def initialize(self, root: Path, options: Any = None) -> None:
        """``initialize`` (no client capabilities: the server polls, shows no progress), its
        answer, ``initialized``."""
        params = {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
        if options is not None:
            params["initializationOptions"] = options
        self.send({"id": 1, "method": "initialize", "params": params})
        self.wait_for(lambda m: m.get("id") == 1)
        self.send({"method": "initialized", "params": {}})

    def wait_for_log(self, start: str) -> dict[str, Any]:
        """The first ``window/logMessage`` whose text starts with ``start``."""
        return self.wait_for(
            lambda m: (
                m.get("method") == "window/logMessage" and m["params"]["message"].startswith(start)
            )
        )

    def shut_down(self, msg_id: int, timeout: float = 30) -> int:
        """``shutdown``, its answer, ``exit``: the server's exit code."""
        self.send({"id": msg_id, "method": "shutdown"})
        self.wait_for(lambda m: m.get("id") == msg_id)
        self.send({"method": "exit"})
        return self.process.wait(timeout)

    def _complete(self) -> list[dict[str, Any]]:
        data = bytes(self.stdout)
        cut = len(data)
        while cut > 0:  # parse the longest prefix that ends on a frame boundary
            try:
                return parse_frames(data[:cut])
            except ValueError:
                cut = data.rfind(b"Content-Length", 0, cut)
        return []
