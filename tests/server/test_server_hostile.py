"""The server against hostile input, through a real LSP client (README, Security notes): settings
from a workspace's own settings file, traces whose strings are Markdown, files the trace names
outside the workspace, FIFOs, and a server killed while it loads."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.lsp_helpers import (
    FINDINGS_SERVER,
    SERVER,
    Workspace,
    age,
    ended_loads,
    initialize,
    open_and_settle,
    record_client_requests,
)
from tests.tracebuilder import frame, kernel, launch, op, write


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    record_client_requests(lsp_client)
    yield
    await lsp_client.shutdown_session()


def warnings_about(client: LanguageClient, word: str) -> list[str]:
    return [m.message for m in client.messages if word in m.message]


def tracebacks(client: LanguageClient) -> list[str]:
    return [m.message for m in client.log_messages if "Traceback" in m.message]


# --- 2. the traces globs ------------------------------------------------------------------------


async def test_globs_out_of_the_workspace_are_refused_once_and_good_ones_load(
    client: LanguageClient, workspace: Workspace
) -> None:
    options = {"traces": ["/**/*", "../*/*.gz", "[z-a]*", "traces/*.gz"], "pollInterval": 0.05}
    await initialize(client, workspace, options={"brrr-trace": options})
    await open_and_settle(client, workspace)
    assert ended_loads(client)[0].message.startswith("item_in_loop.pt.trace.json.gz: ")
    # Many rescans later (one every 5 polls), still one warning and no traceback.
    await asyncio.sleep(1.0)
    (warning,) = warnings_about(client, "brrr-trace.traces")
    assert '"/**/*" (an absolute path' in warning and '"../*/*.gz" (it climbs out' in warning
    assert '"[z-a]*" (not a valid glob: bad character range' in warning
    assert "using ['traces/*.gz']" in warning
    assert tracebacks(client) == []


# --- 3. Markdown in trace strings ---------------------------------------------------------------

MARKDOWN = "`![p](http://evil.example/p.png)<img src=x onerror=y>[run](command:workbench.x)*"
# Without "(", "<" or "::", which cut a kernel name short: a reference link and a bare URL.
KERNEL = "k` [run][1] http://evil.example/k\n\n[1]: command:workbench.x"


def markdown_trace(workspace: Workspace) -> None:
    """The fixture's source with a trace whose function, kernel and device names are Markdown."""
    workspace.trace.unlink()
    events = [
        frame(f"workloads.py(108): item_in_loop{MARKDOWN}", 0.0, 100.0),
        op("aten::mm", 1.0, 10.0),
        launch(2.0, 1),
        kernel(KERNEL, 5.0, 50.0, 1),
    ]
    device = {"id": 0, "name": f"GPU{MARKDOWN}"}
    write(workspace.root / "traces" / "md.pt.trace.json", events, deviceProperties=[device])
    age(workspace.root / "traces" / "md.pt.trace.json")


def live_markdown(value: str) -> list[str]:
    """Images, links, autolinks and HTML tags that a Markdown renderer would act on: outside
    code spans, and not backslash-escaped."""
    prose = re.sub(r"(`+)(?:(?!\1).)*?\1", "", value)  # drop code spans
    return re.findall(r"(?<!\\)(?:\[[^\]]*(?<!\\)\][(\[:]|<[a-z]|https?:)", prose)


async def test_markdown_in_trace_strings_never_becomes_links_images_or_html(
    client: LanguageClient, workspace: Workspace
) -> None:
    markdown_trace(workspace)
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    uri = t.TextDocumentIdentifier(uri=workspace.uri)
    hover = await client.text_document_hover_async(t.HoverParams(uri, t.Position(107, 12)))
    assert hover is not None
    value = hover.contents.value
    assert value.count("evil.example") + value.count("evil\\.example") == 3  # shown, as text
    assert live_markdown(value) == []
    function = await client.text_document_hover_async(t.HoverParams(uri, t.Position(101, 5)))
    assert function is None or live_markdown(function.contents.value) == []


def test_the_live_markdown_check_can_fail() -> None:
    assert len(live_markdown(MARKDOWN)) == 4 and len(live_markdown(KERNEL)) == 3
    assert live_markdown(f"``{MARKDOWN}``") == []


# --- 1. and 6. source files: only open ones in the workspace, never a FIFO --------------------


def fix(rule: str, line: int, **where: str) -> dict[str, Any]:
    return {
        "rule": rule,
        "line": line,
        "message": "m",
        "fix": "f",
        "est_savings_ns": 1_000_000,
        **where,
    }


# Findings for ``findings_server.py`` on files a report could name: /etc/passwd, a FIFO in the
# workspace, a Python file outside it (paths relative to the workspace folder).
PLANTED_FINDINGS = [
    fix("host-sync", 109),
    fix("fp32-matmul", 1, file="/etc/passwd", path="/etc/passwd"),
    fix("fp32-matmul", 1, file="pipe.py", path="pipe.py"),
    fix("pageable-memcpy", 2, file="secret.py", path="../elsewhere/secret.py"),
]


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    """The files ``PLANTED_FINDINGS`` name."""
    (tmp_path / "ws").mkdir()
    fifo = tmp_path / "ws" / "pipe.py"
    os.mkfifo(fifo)
    outside = tmp_path / "elsewhere" / "secret.py"
    outside.parent.mkdir()
    outside.write_text("import torch\nx = torch.ones(3).cuda()\n")
    return {"fifo": fifo, "outside": outside}


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=FINDINGS_SERVER,
        server_env={**os.environ, "BRRR_TEST_FINDINGS": json.dumps(PLANTED_FINDINGS)},
    )
)
async def findings_client(lsp_client: LanguageClient, planted: dict[str, Path]):
    record_client_requests(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def code_actions(client: LanguageClient, uri: str, last: int = 5) -> list[Any]:
    answer = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=t.Range(t.Position(0, 0), t.Position(last, 0)),
            context=t.CodeActionContext(diagnostics=[]),
        )
    )
    return answer or []


async def test_files_outside_the_workspace_or_not_regular_are_never_read_or_edited(
    findings_client: LanguageClient, workspace: Workspace, planted: dict[str, Path]
) -> None:
    client = findings_client
    await initialize(client, workspace)
    await open_and_settle(client, workspace)  # the FIFO did not block the load
    assert [d.code for d in client.diagnostics[workspace.uri]] == ["host-sync"]
    assert set(client.diagnostics) == {workspace.uri}  # none for passwd, the FIFO, the outside
    passwd = Path("/etc/passwd").as_uri()
    assert await code_actions(client, passwd) == []  # not open: no edits, not read
    # Open in the editor, but outside the workspace: no hover, hint, diagnostic or edit either.
    outside = planted["outside"]
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            t.TextDocumentItem(outside.as_uri(), "python", 1, outside.read_text())
        )
    )
    assert await code_actions(client, outside.as_uri()) == []
    hover = t.HoverParams(t.TextDocumentIdentifier(outside.as_uri()), t.Position(1, 2))
    assert await client.text_document_hover_async(hover) is None
    assert outside.as_uri() not in client.diagnostics
    # The workspace's own document still gets its fix.
    actions = await code_actions(client, workspace.uri, last=120)
    assert [a.title for a in actions] == ["brrr-trace: how to fix host-sync"]


async def test_a_fifo_as_the_trace_does_not_hang_the_load(
    client: LanguageClient, workspace: Workspace
) -> None:
    fifo = workspace.root / "traces" / "newest.pt.trace.json"
    os.mkfifo(fifo)  # the newest file matching the globs, and the chosen trace
    await initialize(client, workspace, options={"brrr-trace": {"trace": str(fifo)}})
    await open_and_settle(client, workspace)
    assert ended_loads(client)[0].message.startswith("item_in_loop.pt.trace.json.gz: ")
    assert warnings_about(client, "newest.pt.trace.json does not exist or is not a regular file")
