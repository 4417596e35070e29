"""``initialize`` answered before pygls is imported (``server/handshake.py``): the answer is
pygls' own, pygls still reads every byte the client sent, and answers each request once.

The answer is checked against the real server's (``initialize_answer.py``) for the recorded
capabilities of real clients; the reader against pygls' own reading loop on the same bytes;
the whole server over raw frames, with pygls' import held (``gated_server.py``) to see what a
client gets before it.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pygls.io_ import run

from brrr_trace.server import handshake
from brrr_trace.server.framing import BoundedInput
from brrr_trace.server.handshake import (
    WithoutSecondAnswer,
    answer_initialize,
    early_answer,
    frame,
    read_first_frame,
)
from tests.server.initialize_answer import initialize_request, pygls_answer, pygls_frame
from tests.server.lsp_helpers import SERVER, TIMEOUT_S, Workspace
from tests.server.raw_client import RawClient, parse_frames

GATED_SERVER = [sys.executable, str(Path(__file__).with_name("gated_server.py"))]
RECORDED = Path(pytest_lsp.__file__).parent / "clients"


def body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def framed(message: dict[str, Any]) -> bytes:
    data = body(message)
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


# --- the answer is pygls' own ----------------------------------------------------------------

CAPABILITIES = {
    **{path.stem: json.loads(path.read_text())["capabilities"] for path in RECORDED.glob("*.json")},
    "none": {},
    "utf-32 first": {"general": {"positionEncodings": ["utf-32", "utf-16"]}},
    "unknown only": {"general": {"positionEncodings": ["utf-7"]}},
    "unknown then utf-8": {"general": {"positionEncodings": ["utf-7", "utf-8"]}},
    "general null": {"general": None},
    "willSave false": {"textDocument": {"synchronization": {"willSave": False}}},
    "willSaveWaitUntil true": {"textDocument": {"synchronization": {"willSaveWaitUntil": True}}},
    "synchronization null": {"textDocument": {"synchronization": None}},
}


def test_the_recorded_clients_are_there() -> None:
    assert {"neovim_v0.11.0", "emacs_v29.1", "visual_studio_code_v1.65.2"} <= set(CAPABILITIES)


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_the_early_answer_is_the_one_pygls_gives(name: str) -> None:
    request = initialize_request(CAPABILITIES[name])
    answer = early_answer(body(request))
    assert answer == pygls_answer(request)
    assert answer is not None and frame(answer) == pygls_frame(request)  # byte for byte


def test_the_early_answer_keeps_the_request_id() -> None:
    request = initialize_request(msg_id="a7")
    assert early_answer(body(request)) == pygls_answer(request)
    assert pygls_answer(request)["id"] == "a7"


ACCEPTED = {
    "every field": initialize_request(
        {"general": {"positionEncodings": ["utf-8"]}},
        processId=42,
        rootUri="file:///w",
        rootPath="/w",
        locale="de",
        trace="verbose",
        workDoneToken="t",
        clientInfo={"name": "ed", "version": "1"},
        workspaceFolders=[{"uri": "file:///w", "name": "w"}],
        initializationOptions={"brrr-trace": {"threshold": 0.5}},
    ),
    "no processId": {**initialize_request(), "params": {"capabilities": {}}},
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_pygls_reads_what_is_answered_early(name: str) -> None:
    message = ACCEPTED[name]
    answer = early_answer(body(message))
    assert answer is not None
    assert answer == pygls_answer(message)


REFUSED = {
    "a hover": {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {}},
    "a notification": {k: v for k, v in initialize_request().items() if k != "id"},
    "an id true": initialize_request(msg_id=True),
    "an id null": initialize_request(msg_id=None),
    "an id 1.5": initialize_request(msg_id=1.5),
    "jsonrpc 1.0": {**initialize_request(), "jsonrpc": "1.0"},
    "no capabilities": {**initialize_request(), "params": {"processId": None}},
    "capabilities a list": initialize_request(capabilities=[1]),
    "params a list": {**initialize_request(), "params": []},
    "processId a string": initialize_request(processId="1"),
    "rootUri a number": initialize_request(rootUri=5),
    "trace unknown": initialize_request(trace="loud"),
    "encodings a string": initialize_request({"general": {"positionEncodings": "utf-8"}}),
    "general a list": initialize_request({"general": []}),
    "willSave a string": initialize_request(
        {"textDocument": {"synchronization": {"willSave": "y"}}}
    ),
    "textDocument a list": initialize_request({"textDocument": []}),
    "folders without name": initialize_request(workspaceFolders=[{"uri": "file:///w"}]),
    "clientInfo without name": initialize_request(clientInfo={"version": "1"}),
    "a nested jsonrpc object": initialize_request(initializationOptions={"jsonrpc": "2.0"}),
    "an error": {**initialize_request(), "error": {"code": 1, "message": "x"}},
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_anything_else_is_left_to_pygls(name: str) -> None:
    assert early_answer(body(REFUSED[name])) is None


@pytest.mark.parametrize("data", [b"{", b"[]", b"\xff\xfe", b"[" * 100_000, b""])
def test_no_json_object_is_left_to_pygls(data: bytes) -> None:
    assert early_answer(data) is None


# --- pygls reads every byte -----------------------------------------------------------------


class Recorder:
    """pygls' reading loop's view of a protocol: the messages it would handle."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def structure_message(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def handle_message(self, message: Any) -> None:
        self.messages.append(message)


def pygls_reads(stream: Any) -> list[Any]:
    recorder = Recorder()
    run(threading.Event(), BoundedInput(stream), recorder)  # type: ignore[arg-type]
    return recorder.messages


HOVER = {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {}}
INIT = framed(initialize_request())
STREAMS = {
    "initialize, hover": INIT + framed(HOVER),
    "with a Content-Type": (
        b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        % len(body(initialize_request()))
        + body(initialize_request())
        + framed(HOVER)
    ),
    "hover first": framed(HOVER) + INIT,
    "a lower-case header": INIT.replace(b"Content-Length", b"content-length") + framed(HOVER),
    "a bare LF header": INIT.replace(b"\r\n\r\n", b"\n\n", 1) + framed(HOVER),
    "junk lines first": b"junk\r\n" * 3 + INIT + framed(HOVER),
    "many junk lines first": b"junk\r\n" * 20 + INIT + framed(HOVER),
    "a huge Content-Length": b"Content-Length: 100000000000\r\n\r\n{}\r\n" + INIT,
    "Content-Length 0": b"Content-Length: 0\r\n\r\n" + INIT,
    "a 2 MB body": framed({**initialize_request(), "pad": "x" * (2 << 20)}) + framed(HOVER),
    "not JSON": b"Content-Length: 5\r\n\r\n{bad}" + INIT,
    "cut short": INIT[:-10],
    "headers only": INIT[: INIT.index(b"\r\n\r\n")],
    "empty": b"",
    "a 100 kB header line": b"X" * 100_000 + b"\r\n" + INIT,
}

# The streams whose first message pygls reads as an initialize, within the early reader's bounds
# (at most 8 header lines, a body of at most 1 MiB).
ANSWERED_EARLY = {
    "initialize, hover",
    "with a Content-Type",
    "junk lines first",
    "Content-Length 0",
    "a 100 kB header line",
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_pygls_reads_the_same_messages_after_the_first_was_read(name: str) -> None:
    data = STREAMS[name]
    stdin, out = io.BytesIO(data), io.BytesIO()
    replayed, _ = answer_initialize(stdin, out)  # type: ignore[arg-type]
    assert pygls_reads(replayed) == pygls_reads(io.BytesIO(data))
    answered = parse_frames(out.getvalue())
    assert bool(answered) == (name in ANSWERED_EARLY)
    assert answered == [pygls_answer(initialize_request())] * len(answered)


def test_without_its_answer_file_the_server_leaves_initialize_to_pygls(
    monkeypatch, tmp_path: Path, caplog
) -> None:
    monkeypatch.setattr(handshake, "RESULT_FILE", tmp_path / "missing.json")
    data = INIT + framed(HOVER)
    stdin, out = io.BytesIO(data), io.BytesIO()
    replayed, stdout = answer_initialize(stdin, out)  # type: ignore[arg-type]
    assert stdout is out and out.getvalue() == b""
    assert pygls_reads(replayed) == [initialize_request(), HOVER]
    assert "could not answer initialize early" in caplog.text


def test_the_first_frame_is_read_as_pygls_reads_it() -> None:
    stream = io.BytesIO(INIT + framed(HOVER))
    first = read_first_frame(stream)
    assert first.raw == INIT and first.body == body(initialize_request())
    assert stream.read() == framed(HOVER)  # nothing read past it
    huge = io.BytesIO(b"Content-Length: 100000000000\r\n\r\n{}")
    assert read_first_frame(huge) == read_first_frame(io.BytesIO(huge.getvalue()[:-2]))
    assert huge.read() == b"{}"  # the body of a huge frame is not read


class Trickle(io.RawIOBase):
    """A pipe that gives its bytes in the pieces they were written in, as a socket or pipe does
    when a client writes slowly."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self.pieces:
            return 0
        piece = self.pieces.pop(0)
        size = min(len(piece), len(buffer))
        buffer[:size] = piece[:size]
        if size < len(piece):
            self.pieces.insert(0, piece[size:])
        return size


def test_an_initialize_in_many_pieces_is_answered_early() -> None:
    data = INIT + framed(HOVER)
    pieces = [data[i : i + 7] for i in range(0, len(data), 7)]
    out = io.BytesIO()
    replayed, _ = answer_initialize(io.BufferedReader(Trickle(pieces)), out)  # type: ignore[arg-type]
    assert parse_frames(out.getvalue()) == [pygls_answer(initialize_request())]
    assert pygls_reads(replayed) == [initialize_request(), HOVER]


# --- pygls' second answer -------------------------------------------------------------------


def test_only_pygls_answer_to_that_initialize_is_dropped(caplog) -> None:
    sent = pygls_answer(initialize_request())
    out = io.BytesIO()
    writer = WithoutSecondAnswer(out, sent)  # type: ignore[arg-type]
    passed = [
        {"jsonrpc": "2.0", "id": "1", "result": None},  # another id: the string "1"
        {"jsonrpc": "2.0", "id": 1, "method": "client/registerCapability", "params": {}},
        {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "m"}},
    ]
    for message in passed:
        writer.write(frame(message))
    writer.write(frame(sent))  # dropped
    later = {"jsonrpc": "2.0", "id": 1, "result": None}  # the id again, later: passed
    writer.write(frame(later))
    assert parse_frames(out.getvalue()) == [*passed, later]
    assert "differs" not in caplog.text


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ({"hoverProvider": False}, "hoverProvider"),
        ({"callHierarchyProvider": True}, "callHierarchyProvider"),
        (None, "an error"),
    ],
)
def test_a_different_answer_from_pygls_is_dropped_with_a_warning(
    caplog, answer: dict[str, Any] | None, named: str
) -> None:
    sent = pygls_answer(initialize_request())
    if answer is None:
        own: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "x"}}
    else:
        own = json.loads(json.dumps(sent))
        own["result"]["capabilities"].update(answer)
    out = io.BytesIO()
    with caplog.at_level(logging.WARNING, logger="brrr_trace.server"):
        WithoutSecondAnswer(out, sent).write(frame(own))  # type: ignore[arg-type]
    assert out.getvalue() == b""
    assert f"differs from pygls' own ({named})" in caplog.text


# --- the whole server -----------------------------------------------------------------------


def hover_request(msg_id: int, workspace: Workspace, line: int = 107) -> dict[str, Any]:
    return {
        "id": msg_id,
        "method": "textDocument/hover",
        "params": {
            "textDocument": {"uri": workspace.uri},
            "position": {"line": line, "character": 12},
        },
    }


def open_source(client: RawClient, workspace: Workspace) -> None:
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


def answers(client: RawClient, msg_id: Any) -> list[dict[str, Any]]:
    return [
        m for m in parse_frames(bytes(client.stdout)) if m.get("id") == msg_id and "method" not in m
    ]


def features_work(client: RawClient, workspace: Workspace, msg_id: int) -> None:
    """The trace loads; the hot line's diagnostics come and its hover answers."""
    open_source(client, workspace)
    client.wait_for_log("loaded item_in_loop.pt.trace.json.gz")
    published = client.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics"
            and m["params"]["uri"] == workspace.uri
            and m["params"]["diagnostics"]
        )
    )
    assert "host-sync" in {d["code"] for d in published["params"]["diagnostics"]}
    client.send(hover_request(msg_id, workspace))
    hover = client.wait_for(lambda m: m.get("id") == msg_id)
    assert "line 108" in hover["result"]["contents"]["value"]


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + TIMEOUT_S  # only a hang fails
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@contextlib.contextmanager
def gated(workspace: Workspace, tmp_path: Path) -> Iterator[tuple[RawClient, Path]]:
    """The server with pygls held until the gate file exists; killed at the end if still up."""
    gate = tmp_path / "gate"
    env = {**os.environ, "BRRR_TEST_GATE": str(gate)}
    client = RawClient(GATED_SERVER, workspace.root, env)
    try:
        yield client, gate
    finally:
        if client.process.poll() is None:
            client.process.kill()


def init_params(workspace: Workspace) -> dict[str, Any]:
    return {"processId": None, "rootUri": workspace.root.as_uri(), "capabilities": {}}


def test_initialize_is_answered_while_pygls_is_not_imported(
    workspace: Workspace, tmp_path: Path
) -> None:
    with gated(workspace, tmp_path) as (client, gate):
        client.send({"id": 1, "method": "initialize", "params": init_params(workspace)})
        answer = client.wait_for(lambda m: m.get("id") == 1)
        assert not gate.exists()  # so neither pygls nor lsprotocol was imported
        assert answer == pygls_answer(initialize_request())
        wait_until(lambda: b"pygls import waits" in client.stderr)  # the gate held an import
        gate.touch()
        client.send({"method": "initialized", "params": {}})
        features_work(client, workspace, 2)
        assert client.shut_down(3) == 0
    assert len(answers(client, 1)) == 1  # pygls' own answer was dropped
    stderr = client.stderr.decode()
    assert "differs" not in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("name", ["neovim_v0.11.0", "emacs_v29.1", "visual_studio_code_v1.65.2"])
def test_pygls_own_answer_to_a_real_client_is_the_one_sent(workspace: Workspace, name: str) -> None:
    """The check at run time: pygls' answer, computed in the server, compared and dropped."""
    client = RawClient([*SERVER, "-v"], workspace.root)
    request = initialize_request(CAPABILITIES[name], rootUri=workspace.root.as_uri())
    try:
        client.send_bytes(framed(request))
        answer = client.wait_for(lambda m: m.get("id") == 1)
        assert client.shut_down(2) == 0
    finally:
        if client.process.poll() is None:
            client.process.kill()
    assert answer == pygls_answer(request)
    assert len(answers(client, 1)) == 1
    stderr = client.stderr.decode()
    assert "pygls' answer to initialize is the one sent early" in stderr
    assert "differs" not in stderr


def test_messages_sent_before_pygls_is_ready_wait_for_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    """A client that sends on right after the answer: pygls reads it all, in order."""
    with gated(workspace, tmp_path) as (client, gate):
        client.send({"id": 1, "method": "initialize", "params": init_params(workspace)})
        client.wait_for(lambda m: m.get("id") == 1)
        client.send({"method": "initialized", "params": {}})
        open_source(client, workspace)
        client.send(hover_request(2, workspace, line=0))
        client.send({"id": 3, "method": "shutdown"})
        client.send({"method": "exit"})
        time.sleep(0.2)  # let the server read them while pygls is held (not a timing check)
        gate.touch()
        assert client.process.wait(TIMEOUT_S) == 0
    assert [len(answers(client, i)) for i in (1, 2, 3)] == [1, 1, 1]
    assert answers(client, 2)[0].get("result", "x") is None  # line 1: no time, no hover


def test_exit_without_shutdown_after_the_early_answer_is_code_1(
    workspace: Workspace, tmp_path: Path
) -> None:
    with gated(workspace, tmp_path) as (client, gate):
        client.send({"id": 1, "method": "initialize", "params": init_params(workspace)})
        client.wait_for(lambda m: m.get("id") == 1)
        client.send({"method": "exit"})
        gate.touch()
        assert client.process.wait(TIMEOUT_S) == 1
    assert "Traceback" not in client.stderr.decode()


def test_ctrl_c_before_the_first_message_ends_the_server_quietly(
    workspace: Workspace, tmp_path: Path
) -> None:
    with gated(workspace, tmp_path) as (client, _):
        wait_until(lambda: b"pygls import waits" in client.stderr)  # waiting for a message
        client.process.send_signal(signal.SIGINT)
        assert client.process.wait(TIMEOUT_S) == 0  # as once pygls runs
    assert "Traceback" not in client.stderr.decode()


def test_a_client_that_leaves_after_the_answer_ends_the_server(workspace: Workspace) -> None:
    client = RawClient(SERVER, workspace.root)
    client.send({"id": 1, "method": "initialize", "params": init_params(workspace)})
    client.wait_for(lambda m: m.get("id") == 1)
    assert client.process.stdin is not None
    client.process.stdin.close()
    try:
        client.process.wait(TIMEOUT_S)  # ended, not hanging
    finally:
        if client.process.poll() is None:
            client.process.kill()
    assert "Traceback" not in client.stderr.decode()


def test_initialize_in_pieces_is_answered_once_and_the_server_works(
    workspace: Workspace,
) -> None:
    client = RawClient(SERVER, workspace.root)
    try:
        data = framed(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params(workspace)}
        )
        cuts = [
            0,
            9,
            data.index(b"\r\n") + 1,
            data.index(b"\r\n\r\n") + 4,
            len(data) - 3,
            len(data),
        ]
        for start, end in itertools.pairwise(cuts):
            client.send_bytes(data[start:end])
            time.sleep(0.1)  # each piece its own write on the pipe (not a timing check)
        client.wait_for(lambda m: m.get("id") == 1)
        client.send({"method": "initialized", "params": {}})
        features_work(client, workspace, 2)
        assert client.shut_down(3) == 0
    finally:
        if client.process.poll() is None:
            client.process.kill()
    assert len(answers(client, 1)) == 1
    assert answers(client, 1)[0] == pygls_answer(initialize_request())


@pytest.mark.parametrize(
    "first",
    [
        framed(
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "textDocument/hover",
                "params": {
                    "textDocument": {"uri": "file:///w/a.py"},
                    "position": {"line": 0, "character": 0},
                },
            }
        ),
        b"Content-Length: 5\r\n\r\n{bad}",
    ],
    ids=["a hover", "not JSON"],
)
def test_another_first_message_leaves_everything_to_pygls(
    workspace: Workspace, first: bytes
) -> None:
    client = RawClient(SERVER, workspace.root)
    try:
        client.send_bytes(first)
        client.send({"id": 1, "method": "initialize", "params": init_params(workspace)})
        answer = client.wait_for(lambda m: m.get("id") == 1)
        assert answer == pygls_answer(initialize_request())
        client.send({"method": "initialized", "params": {}})
        features_work(client, workspace, 2)
        assert client.shut_down(3) == 0
    finally:
        if client.process.poll() is None:
            client.process.kill()
    assert len(answers(client, 1)) == 1
    if b"hover" in first:
        (early,) = answers(client, 7)  # pygls answered it, once: nothing known yet
        assert early.get("result", "x") is None
