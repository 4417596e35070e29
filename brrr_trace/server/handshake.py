"""``initialize`` answered before pygls is imported (importing it takes ~1 s, most of it the ~1 000
classes of ``lsprotocol.types``), with the standard library only.

On stdio, ``serve`` imports pygls and the server in a thread (``BackgroundImports``) while
``answer_initialize`` reads the first message itself. When it is an ``initialize`` that pygls
will read as one, it is answered at once with pygls' own answer (``initialize_result.json``,
checked against the real server by ``tests/server/test_server_handshake.py``). pygls then gets
the connection as if nothing had happened: ``ReplayedInput`` hands it every byte read so far
before the rest of stdin, so it still handles that ``initialize`` (its workspace, the client's
capabilities, the settings our handler takes), and ``WithoutSecondAnswer`` drops its answer to
it from stdout after comparing it with the one sent (a warning when they differ). Any other
first message, or one not read exactly as pygls reads it, is only replayed: pygls answers it.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from brrr_trace import __version__
from brrr_trace.server.framing import MAX_LINE_BYTES

log = logging.getLogger("brrr_trace.server")

RESULT_FILE = Path(__file__).with_name("initialize_result.json")
# pygls' own header pattern (pygls/io_.py): a header it would not match is left to it.
_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")
_HEADER = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
_MAX_HEADER_LINES = 8  # clients send one or two
_MAX_BODY = 1 << 20  # editors send a few kB; a larger one is pygls' to read
# pygls' choice (ServerCapabilitiesBuilder.choose_position_encoding): the client's first of
# these, else UTF-16.
_ENCODINGS = ("utf-8", "utf-16", "utf-32")
_TRACE_VALUES = ("off", "messages", "verbose")
_WILL_SAVE = ("willSave", "willSaveWaitUntil")


class BackgroundImports:
    """Imports modules in a daemon thread; ``wait`` re-raises what the import raised."""

    def __init__(self, modules: Sequence[str]) -> None:
        self._modules = tuple(modules)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="brrr-trace imports", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for module in self._modules:
                importlib.import_module(module)
        except BaseException as error:  # handed to the main thread, which raises it
            self._error = error

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


@dataclass(frozen=True)
class FirstFrame:
    """The bytes read from stdin for the first message, and its body when pygls would read
    exactly these bytes as one message (``None``: not a frame this module reads)."""

    raw: bytes
    body: bytes | None


def read_first_frame(stream: BinaryIO) -> FirstFrame:
    """Read one frame as pygls' reader does (header lines until a blank one after a
    ``Content-Length``, then that many bytes), giving up early on anything unusual."""
    raw = bytearray()
    length = 0
    for _ in range(_MAX_HEADER_LINES):
        line = stream.readline(MAX_LINE_BYTES)
        raw += line
        if not line:
            return FirstFrame(bytes(raw), None)
        if not length and (match := _CONTENT_LENGTH.fullmatch(line)):
            length = int(match.group(1))
        if length and not line.strip():
            break
    else:
        return FirstFrame(bytes(raw), None)
    if length > _MAX_BODY:
        return FirstFrame(bytes(raw), None)
    body = stream.read(length)
    raw += body
    return FirstFrame(bytes(raw), body if len(body) == length else None)


def initialize_result(client_capabilities: dict[str, Any]) -> dict[str, Any]:
    """pygls' ``InitializeResult`` for a client with these capabilities: the file's, with the
    two parts pygls derives from them."""
    result: dict[str, Any] = json.loads(RESULT_FILE.read_text(encoding="utf-8"))
    capabilities = result["capabilities"]
    capabilities["positionEncoding"] = position_encoding(client_capabilities)
    capabilities["textDocumentSync"] = _with_will_save(
        capabilities["textDocumentSync"], _synchronization(client_capabilities)
    )
    result["serverInfo"]["version"] = __version__
    return result


def position_encoding(client_capabilities: dict[str, Any]) -> str:
    """The encoding of positions pygls picks for a client with these capabilities."""
    general = client_capabilities.get("general") or {}
    for encoding in general.get("positionEncodings") or ():
        if encoding in _ENCODINGS:
            return str(encoding)
    return "utf-16"


def _synchronization(client_capabilities: dict[str, Any]) -> dict[str, Any]:
    return (client_capabilities.get("textDocument") or {}).get("synchronization") or {}


def _with_will_save(sync: dict[str, Any], client_sync: dict[str, Any]) -> dict[str, Any]:
    """pygls says ``willSave`` (``willSaveWaitUntil``) is false whenever the client says
    anything of it (its ``client value and server has the feature``); brrr-trace has neither."""
    said = {key: False for key in _WILL_SAVE if client_sync.get(key) is not None}
    if not said:
        return sync
    # pygls' order of the fields: before ``save``
    before = {k: v for k, v in sync.items() if k != "save"}
    after = {k: v for k, v in sync.items() if k == "save"}
    return {**before, **said, **after}


def early_answer(body: bytes) -> dict[str, Any] | None:
    """The answer to this message body if it is an ``initialize`` request that pygls will read
    as one (else ``None``: pygls answers it, whatever it is)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # pygls fails on it too, and says so
        return None
    if not isinstance(message, dict) or not _is_initialize(message):
        return None
    # pygls reads every object with a "jsonrpc" key as a message, nested ones too.
    if any("jsonrpc" in item for item in _objects(message)[1:]):
        return None
    result = initialize_result(message["params"]["capabilities"])
    return {"id": message["id"], "jsonrpc": "2.0", "result": result}


def _objects(value: Any) -> list[dict[str, Any]]:
    """``value`` if it is an object, then every object inside it."""
    found = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _is_initialize(message: dict[str, Any]) -> bool:
    """An ``initialize`` request whose params lsprotocol reads: the fields it types, checked
    (deeper inside ``capabilities``, a wrong type still fails in pygls, as without this)."""
    msg_id = message.get("id")
    params = message.get("params")
    if not (
        message.get("jsonrpc") == "2.0"
        and message.get("method") == "initialize"
        and "error" not in message
        and _is_id(msg_id)
        and isinstance(params, dict)
        and isinstance(params.get("capabilities"), dict)
    ):
        return False
    assert isinstance(params, dict)
    capabilities = params["capabilities"]
    general = capabilities.get("general")
    encodings = general.get("positionEncodings") if isinstance(general, dict) else None
    document = capabilities.get("textDocument")
    sync = document.get("synchronization") if isinstance(document, dict) else None
    folders = params.get("workspaceFolders")
    client = params.get("clientInfo")
    return (
        (params.get("processId") is None or _is_int(params["processId"]))
        and all(_str_or_none(params.get(key)) for key in ("rootUri", "rootPath", "locale"))
        and params.get("trace") in (None, *_TRACE_VALUES)
        and (params.get("workDoneToken") is None or _is_id(params["workDoneToken"]))
        and (general is None or isinstance(general, dict))
        and (document is None or isinstance(document, dict))
        and (sync is None or isinstance(sync, dict))
        and (sync is None or all(_bool_or_none(sync.get(key)) for key in _WILL_SAVE))
        and (encodings is None or (isinstance(encodings, list) and all(map(_is_str, encodings))))
        and (folders is None or (isinstance(folders, list) and all(map(_is_folder, folders))))
        and (
            client is None
            or (
                isinstance(client, dict)
                and _is_str(client.get("name"))
                and _str_or_none(client.get("version"))
            )
        )
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bool_or_none(value: Any) -> bool:
    return value is None or isinstance(value, bool)


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _str_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_id(value: Any) -> bool:
    return _is_int(value) or isinstance(value, str)


def _is_folder(value: Any) -> bool:
    return isinstance(value, dict) and _is_str(value.get("uri")) and _is_str(value.get("name"))


def frame(message: dict[str, Any]) -> bytes:
    """A message as pygls frames it (ASCII JSON, so characters and bytes count the same)."""
    body = json.dumps(message).encode()
    return _HEADER % len(body) + body


class ReplayedInput:
    """stdin for pygls: ``replay`` first, then the stream, with ``readline`` and ``read`` as on
    a binary file (``size`` bounds them)."""

    def __init__(self, replay: bytes, stream: BinaryIO) -> None:
        self._replay = io.BytesIO(replay)
        self._left = len(replay)
        self._stream = stream

    def readline(self, size: int = -1) -> bytes:
        if not self._left:
            return self._stream.readline(size)
        line = self._replay.readline(size)
        self._left -= len(line)
        if self._left or line.endswith(b"\n") or len(line) == size:
            return line
        return line + self._stream.readline(-1 if size < 0 else size - len(line))

    def read(self, size: int = -1) -> bytes:
        if not self._left:
            return self._stream.read(size)
        data = self._replay.read(size)
        self._left -= len(data)
        if self._left or len(data) == size:
            return data
        return data + self._stream.read(-1 if size < 0 else size - len(data))


class Output(Protocol):
    """What pygls writes stdout with (a binary file, or ``WithoutSecondAnswer``)."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class WithoutSecondAnswer:
    """stdout for pygls: its own answer to the ``initialize`` answered early is compared with
    that answer and dropped (a client must get one answer per request); every other write goes
    out as it comes. pygls writes each message in one ``write``."""

    def __init__(self, stream: BinaryIO, sent: dict[str, Any]) -> None:
        self._stream = stream
        self._sent = sent
        self._waiting = True

    def write(self, data: bytes) -> int:
        if self._waiting and (answer := self._answer_to_initialize(data)) is not None:
            self._waiting = False
            self._compare(answer)
            return len(data)
        return self._stream.write(data)

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        self._stream.close()

    def _answer_to_initialize(self, data: bytes) -> dict[str, Any] | None:
        try:
            message = json.loads(data.partition(b"\r\n\r\n")[2])
        except ValueError:
            return None
        sent_id = self._sent["id"]
        if (
            isinstance(message, dict)
            and "method" not in message
            and type(message.get("id")) is type(sent_id)  # 1 is not "1" (nor True)
            and message.get("id") == sent_id
        ):
            return message
        return None

    def _compare(self, answer: dict[str, Any]) -> None:
        if answer == self._sent:
            log.debug("pygls' answer to initialize is the one sent early")
            return
        log.warning(
            "the early answer to initialize differs from pygls' own (%s); brrr-trace's "
            "initialize_result.json is out of date, please report it",
            _difference(self._sent.get("result"), answer.get("result"))
            or ("an error" if "error" in answer else "the message"),
        )


def _difference(sent: Any, got: Any) -> str:
    """The fields of the capabilities and server info that differ, by name."""
    if not isinstance(sent, dict) or not isinstance(got, dict):
        return ""
    names = set()
    for part in ("capabilities", "serverInfo"):
        ours, theirs = sent.get(part) or {}, got.get(part) or {}
        names |= {key for key in {*ours, *theirs} if ours.get(key) != theirs.get(key)}
    return ", ".join(sorted(names))


def answer_initialize(stdin: BinaryIO, stdout: BinaryIO) -> tuple[ReplayedInput, Output]:
    """Read the first message and answer it if it is ``initialize``: the stdin and stdout to
    hand pygls next."""
    first = read_first_frame(stdin)
    replayed = ReplayedInput(first.raw, stdin)
    try:
        answer = None if first.body is None else early_answer(first.body)
    except (OSError, ValueError, KeyError, TypeError) as error:  # initialize_result.json
        log.warning("could not answer initialize early (%s); pygls answers it", error)
        answer = None
    if answer is None:
        log.debug("the first message is no initialize to answer early: pygls answers it")
        return replayed, stdout
    try:
        stdout.write(frame(answer))
        stdout.flush()
    except OSError as error:  # the client is gone; pygls finds out and ends
        log.debug("could not answer initialize early: %s", error)
        return replayed, stdout
    return replayed, WithoutSecondAnswer(stdout, answer)
