"""Nothing but LSP frames on the server's stdout, even when code in it (or in the analysis
process) prints: the server is run as a bare subprocess and every byte of its stdout is parsed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

from tests.server.lsp_helpers import SERVER, Workspace
from tests.server.raw_client import RawClient, parse_frames

NOISY_SERVER = [sys.executable, str(Path(__file__).with_name("noisy_server.py"))]


def test_the_frame_check_can_fail() -> None:
    frame = b"Content-Length: 2\r\n\r\n{}"
    assert parse_frames(frame + frame) == [{}, {}]
    for bad in (b"noise\n" + frame, frame + b"noise\n", frame[:-1], b"X-Other: 1\r\n\r\n{}"):
        with pytest.raises(ValueError):
            parse_frames(bad)


@pytest.mark.parametrize("command", [SERVER, NOISY_SERVER], ids=["server", "noisy"])
def test_stdout_carries_only_lsp_frames(workspace: Workspace, command: list[str]) -> None:
    client = RawClient(command, workspace.root)
    try:
        client.initialize(workspace.root)
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
        client.wait_for_log("loaded item_in_loop.pt.trace.json.gz")
        assert client.shut_down(2) == 0
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
