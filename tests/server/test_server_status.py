"""The ``brrr-trace/status`` notification: the VS Code extension's status bar follows it.

The server sends the ``brrr-trace.status`` command's answer whenever a load starts, ends or fails,
so a client need not poll. On the ``item_in_loop`` H200 fixture the GPU is 73% busy.
"""

from __future__ import annotations

import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.lsp_helpers import (
    SERVER,
    Workspace,
    age,
    ended_loads,
    initialize,
    open_and_settle,
    poll_until,
    record_client_requests,
    record_statuses,
)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    record_client_requests(lsp_client)
    lsp_client.statuses = record_statuses(lsp_client)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_status_when_a_load_starts_and_ends(
    client: LanguageClient, workspace: Workspace
) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    statuses = client.statuses  # type: ignore[attr-defined]
    await poll_until(lambda: len(statuses) >= 2)

    loading, loaded = statuses
    assert loading["loading"] == str(workspace.trace) and loading["trace"] is None
    assert loaded["trace"] == str(workspace.trace) and loaded["loading"] is None
    assert loaded["error"] is None
    assert round(loaded["gpuUtilization"], 2) == 0.73
    assert loaded["lines"] == 4 and loaded["spanNs"] > 0
    answer = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.status")
    )
    assert answer == loaded


async def test_status_when_a_load_fails(client: LanguageClient, workspace: Workspace) -> None:
    workspace.trace.write_bytes(b'{"traceEvents": [{"ph": "X", "name": ')
    age(workspace.trace)
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    assert ended_loads(client)[0].message == "failed"
    statuses = client.statuses  # type: ignore[attr-defined]
    await poll_until(lambda: len(statuses) >= 2)

    failed = statuses[-1]
    assert failed["trace"] is None and failed["loading"] is None
    assert failed["error"].startswith(
        "brrr-trace could not read the trace item_in_loop.pt.trace.json.gz: "
    )
