"""The server against hostile input, through a real LSP client (README, Security notes): settings
from a workspace's own settings file, traces whose strings are Markdown, files the trace names
outside the workspace, FIFOs, and a server killed while it loads."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest_lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.lsp_helpers import (
    SERVER,
    Workspace,
    ended_loads,
    initialize,
    open_and_settle,
    record_client_requests,
)

STATUS = "brrr-trace/status"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    record_client_requests(lsp_client)
    lsp_client.statuses = []  # type: ignore[attr-defined]

    @lsp_client.feature(STATUS)
    def _status(params: Any) -> None:
        plain = params if isinstance(params, dict) else params._asdict()
        lsp_client.statuses.append(plain)  # type: ignore[attr-defined]

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
