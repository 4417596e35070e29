"""Helpers of the language-server tests: a workspace with a real H200 trace, waiting helpers.

The workspace is a copy of ``tests/data/workloads.py`` (the source the fixtures were recorded
from) and ``item_in_loop.json.gz`` renamed to match the default ``*.pt.trace.json.gz`` glob. The
trace names its source ``workloads.py``; the server maps it onto the copy by path suffix.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from lsprotocol import types as t
from pytest_lsp import LanguageClient, client_capabilities

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
WORKLOADS = DATA / "workloads.py"
H200 = DATA / "h200"
TRACE_NAME = "item_in_loop.pt.trace.json.gz"
SERVER = [sys.executable, "-m", "brrr_trace", "serve"]
FINDINGS_SERVER = [sys.executable, str(Path(__file__).with_name("findings_server.py"))]
TIMEOUT_S = 30


@dataclass
class Workspace:
    root: Path
    source: Path
    trace: Path

    @property
    def uri(self) -> str:
        return self.source.as_uri()

    @property
    def text(self) -> str:
        return self.source.read_text(encoding="utf-8")

    def line(self, number: int) -> str:
        """A 1-based line of the source, without its line end."""
        return self.text.split("\n")[number - 1]

    def replace_trace(self, fixture: str) -> None:
        """Overwrite the trace with another fixture, as a profiler re-exporting it would."""
        shutil.copy(H200 / f"{fixture}.json.gz", self.trace)
        age(self.trace)


def age(path: Path, seconds: float = 30) -> None:
    """Date a file back: the server waits for files written in the last second to settle."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def make_workspace(root: Path, fixture: str = "item_in_loop") -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    source = root / "workloads.py"
    shutil.copy(WORKLOADS, source)
    (root / "traces").mkdir(exist_ok=True)
    trace = root / "traces" / TRACE_NAME
    shutil.copy(H200 / f"{fixture}.json.gz", trace)
    age(trace, 60)
    return Workspace(root, source, trace)


def read_code_actions_correctly(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 reads any result item with a ``command`` key as a ``Command``, so a
    ``CodeAction`` that carries a command comes out mangled. Editors tell them apart by the type
    of ``command`` (a string in a ``Command``); so does this hook."""
    converter = client.protocol._converter

    def hook(obj: Any, _: type) -> t.Command | t.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, t.Command)
        return converter.structure(obj, t.CodeAction)

    converter.register_structure_hook(Union[t.Command, t.CodeAction], hook)  # noqa: UP007


def record_client_requests(client: LanguageClient) -> dict[str, list[Any]]:
    """Answer (and count) the server-to-client requests pytest-lsp has no handler for."""
    read_code_actions_correctly(client)
    seen: dict[str, list[Any]] = {"inlayHintRefresh": [], "codeLensRefresh": [], "register": []}

    @client.feature(t.WORKSPACE_INLAY_HINT_REFRESH)
    def _inlay_refresh(params: Any) -> None:
        seen["inlayHintRefresh"].append(params)

    @client.feature(t.WORKSPACE_CODE_LENS_REFRESH)
    def _lens_refresh(params: Any) -> None:
        seen["codeLensRefresh"].append(params)

    @client.feature(t.CLIENT_REGISTER_CAPABILITY)
    def _register(params: t.RegistrationParams) -> None:
        seen["register"].append(params)

    return seen


STATUS = "brrr-trace/status"


def record_statuses(client: LanguageClient) -> list[dict[str, Any]]:
    """Every ``brrr-trace/status`` the server sends, as plain dicts (pygls hands a custom
    notification's params over as a named tuple)."""
    statuses: list[dict[str, Any]] = []

    @client.feature(STATUS)
    def _status(params: Any) -> None:
        statuses.append(params if isinstance(params, dict) else params._asdict())

    return statuses


async def initialize(
    client: LanguageClient,
    workspace: Workspace,
    capabilities: str = "neovim@v0.11.0",
    options: Any = None,
) -> None:
    await client.initialize_session(
        t.InitializeParams(
            capabilities=client_capabilities(capabilities),
            root_uri=workspace.root.as_uri(),
            workspace_folders=[t.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
            initialization_options=options,
        )
    )


def ended_loads(client: LanguageClient) -> list[t.WorkDoneProgressEnd]:
    """The ``end`` of every finished ``$/progress``, in token order."""
    return [
        report
        for reports in client.progress_reports.values()
        for report in reports
        if isinstance(report, t.WorkDoneProgressEnd)
    ]


async def wait_until(
    client: LanguageClient, condition: Callable[[], bool], method: str = t.PROGRESS
) -> None:
    """Wait for notifications of ``method`` until ``condition`` holds (or fail after a while)."""

    async def loop() -> None:
        while not condition():
            await client.wait_for_notification(method)

    await asyncio.wait_for(loop(), TIMEOUT_S)


async def poll_until(condition: Callable[[], bool]) -> None:
    """For what arrives as a request to the client (no notification to wait on): look often."""

    async def loop() -> None:
        while not condition():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(loop(), TIMEOUT_S)


async def open_and_settle(client: LanguageClient, workspace: Workspace, loads: int = 1) -> None:
    """Open the source, then wait for its diagnostics and for ``loads`` progress ends."""
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(
                uri=workspace.uri, language_id="python", version=1, text=workspace.text
            )
        )
    )
    await wait_until(
        client, lambda: workspace.uri in client.diagnostics, t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
    )
    await wait_until(client, lambda: len(ended_loads(client)) >= loads)


async def hints(client: LanguageClient, workspace: Workspace) -> list[tuple[int, int, str]]:
    result = await client.text_document_inlay_hint_async(
        t.InlayHintParams(
            text_document=t.TextDocumentIdentifier(uri=workspace.uri),
            range=t.Range(t.Position(0, 0), t.Position(len(workspace.text.split("\n")), 0)),
        )
    )
    return [(h.position.line, h.position.character, h.label) for h in result or []]
