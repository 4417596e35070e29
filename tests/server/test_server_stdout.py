"""Nothing but LSP frames on the server's stdout, even when code in it (or in the analysis
process) prints: the server is run as a bare subprocess and every byte of its stdout is parsed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

import pytest

from tests.server.lsp_helpers import SERVER, Workspace

NOISY_SERVER = [sys.executable, str(Path(__file__).with_name("noisy_server.py"))]


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


def test_the_frame_check_can_fail() -> None:
    frame = b"Content-Length: 2\r\n\r\n{}"
    assert parse_frames(frame + frame) == [{}, {}]
    for bad in (b"noise\n" + frame, frame + b"noise\n", frame[:-1], b"X-Other: 1\r\n\r\n{}"):
        with pytest.raises(ValueError):
            parse_frames(bad)


class RawClient:
    """Just enough of an LSP client to drive the server and keep every byte of its stdout."""

    def __init__(self, command: list[str], cwd: Path) -> None:
        self.process = subprocess.Popen(
            command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
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
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def wait_for(self, predicate: Any, timeout: float = 30) -> dict[str, Any]:
        with self._changed:
            ok = self._changed.wait_for(
                lambda: any(predicate(m) for m in self._complete()), timeout=timeout
            )
        assert ok, f"timed out; stderr:\n{self.stderr.decode(errors='replace')}"
        return next(m for m in self._complete() if predicate(m))

    def _complete(self) -> list[dict[str, Any]]:
        data = bytes(self.stdout)
        cut = len(data)
        while cut > 0:  # parse the longest prefix that ends on a frame boundary
            try:
                return parse_frames(data[:cut])
            except ValueError:
                cut = data.rfind(b"Content-Length", 0, cut)
        return []


@pytest.mark.parametrize("command", [SERVER, NOISY_SERVER], ids=["server", "noisy"])
def test_stdout_carries_only_lsp_frames(workspace: Workspace, command: list[str]) -> None:
    client = RawClient(command, workspace.root)
    try:
        client.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "processId": None,
                    "rootUri": workspace.root.as_uri(),
                    "capabilities": {},
                },
            }
        )
        client.wait_for(lambda m: m.get("id") == 1)
        client.send({"method": "initialized", "params": {}})
        client.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": workspace.uri,
                        "languageId": "python",
                        "version": 1,
                        "text": workspace.text,
                    }
                },
            }
        )
        client.wait_for(
            lambda m: (
                m.get("method") == "window/logMessage"
                and m["params"]["message"].startswith("loaded item_in_loop.pt.trace.json.gz")
            )
        )
        client.send({"id": 2, "method": "shutdown"})
        client.wait_for(lambda m: m.get("id") == 2)
        client.send({"method": "exit"})
        assert client.process.wait(timeout=30) == 0
    finally:
        if client.process.poll() is None:
            client.process.kill()

    messages = parse_frames(bytes(client.stdout))  # raises on a single stray byte
    assert {m.get("method") for m in messages} >= {"window/logMessage"}
    if command is NOISY_SERVER:
        stderr = client.stderr.decode()
        for where in ("analysis process", "server process"):
            assert f"noise from print() in the {where}" in stderr
            assert f"noise from os.write(1) in the {where}" in stderr


def test_tcp_for_debugging(workspace: Workspace) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [*SERVER, "--tcp", str(port)], cwd=workspace.root, stderr=subprocess.PIPE
    )
    try:
        for _ in range(100):
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the server did not listen")
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
        ).encode()
        with connection:
            connection.sendall(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            data = b""
            while b"serverInfo" not in data:
                chunk = connection.recv(65536)
                assert chunk, "connection closed"
                data += chunk
                with suppress(ValueError):
                    (answer,) = parse_frames(data)
                    break
        assert answer["id"] == 1
        assert answer["result"]["serverInfo"]["name"] == "brrr-trace"
        assert answer["result"]["capabilities"]["inlayHintProvider"] is not None
    finally:
        process.kill()
        process.wait()
