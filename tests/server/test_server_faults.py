"""Protocol faults and a server that goes away mid-load, over raw frames (README, Security
notes): an absurd ``Content-Length``, requests after ``shutdown``, ``exit`` without it, a kill,
and a trace deleted while it loads."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.server.lsp_helpers import SERVER, TIMEOUT_S, Workspace
from tests.server.raw_client import RawClient

SLOW_SERVER = [sys.executable, str(Path(__file__).with_name("slow_server.py"))]
INVALID_REQUEST = -32600


def started(
    command: list[str], workspace: Workspace, env: dict[str, str] | None = None, **settings: Any
) -> RawClient:
    client = RawClient(command, workspace.root, env)
    client.initialize(workspace.root, {"brrr-trace": settings})
    return client


def status(client: RawClient, **fields: Any) -> dict[str, Any]:
    """The first ``brrr-trace/status`` with these fields (``"*"``: any value but None)."""

    def matches(m: dict[str, Any]) -> bool:
        params = m.get("params") or {}
        return m.get("method") == "brrr-trace/status" and all(
            params.get(k) is not None if v == "*" else params.get(k) == v for k, v in fields.items()
        )

    return client.wait_for(matches)["params"]


def analyses(pid: int) -> list[int]:
    """The analysis processes a server started (multiprocessing may start a helper too)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return [c for c in found if b"spawn_main" in _cmdline(c)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def gone(pid: int) -> bool:
    """Whether a process has ended (a zombie counts: it runs nothing any more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + TIMEOUT_S  # only a hang fails
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def hover(client: RawClient, msg_id: int, workspace: Workspace) -> dict[str, Any]:
    client.send(
        {
            "id": msg_id,
            "method": "textDocument/hover",
            "params": {
                "textDocument": {"uri": workspace.uri},
                "position": {"line": 0, "character": 0},
            },
        }
    )
    return client.wait_for(lambda m: m.get("id") == msg_id)


def test_a_huge_content_length_is_skipped_and_the_server_stays(workspace: Workspace) -> None:
    client = started(SERVER, workspace)
    client.send_bytes(b"Content-Length: 100000000000\r\n\r\n{}\r\n")
    assert "error" not in hover(client, 2, workspace)  # answered: alive, and in step
    assert client.shut_down(3, TIMEOUT_S) == 0
    assert "skipped a message of 100000000000 bytes" in client.stderr.decode()


def test_requests_after_shutdown_get_invalid_request(workspace: Workspace) -> None:
    client = started(SERVER, workspace)
    client.send({"id": 2, "method": "shutdown"})
    assert client.wait_for(lambda m: m.get("id") == 2).get("result", "x") is None
    answer = hover(client, 3, workspace)
    assert answer["error"]["code"] == INVALID_REQUEST
    client.send({"method": "exit"})
    assert client.process.wait(TIMEOUT_S) == 0


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_exit_without_shutdown_mid_load_is_code_1_quietly_and_ends_the_analysis(
    workspace: Workspace,
) -> None:
    client = started(SLOW_SERVER, workspace)
    status(client, loading="*")
    wait_until(lambda: analyses(client.process.pid))
    (analysis,) = analyses(client.process.pid)
    client.send({"method": "exit"})
    assert client.process.wait(TIMEOUT_S) == 1
    wait_until(lambda: gone(analysis))
    assert "Traceback" not in client.stderr.decode()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
def test_a_killed_server_leaves_no_analysis_behind(workspace: Workspace) -> None:
    client = started(SLOW_SERVER, workspace)
    status(client, loading="*")
    wait_until(lambda: analyses(client.process.pid))
    (analysis,) = analyses(client.process.pid)
    os.kill(client.process.pid, signal.SIGKILL)
    client.process.wait(TIMEOUT_S)
    wait_until(lambda: gone(analysis))


def test_a_trace_deleted_mid_load_is_not_loading_any_more(workspace: Workspace) -> None:
    client = started(SLOW_SERVER, workspace, pollInterval=0.05)
    status(client, loading=str(workspace.trace))
    workspace.trace.unlink()
    after = status(client, loading=None)
    assert after["trace"] is None
    assert client.shut_down(2, TIMEOUT_S) == 0


# --- 4. no import from the workspace ------------------------------------------------------------

PLANTED = """import pathlib, sys
pathlib.Path(__file__).with_suffix(".imported").write_text(" ".join(sys.argv))
raise ImportError("a planted module")
"""


def test_modules_planted_in_the_workspace_are_not_imported(workspace: Workspace) -> None:
    """Started in the workspace, as an editor without the extension's care would: neither the
    server nor its analysis process imports ``msgspec.py`` (which loading a trace needs) or
    ``multiprocessing.py`` from there."""
    planted = [workspace.root / "msgspec.py", workspace.root / "multiprocessing.py"]
    for module in planted:
        module.write_text(PLANTED)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    client = started(SERVER, workspace, env=env)
    client.wait_for_log("loaded item_in_loop")
    assert client.shut_down(2, TIMEOUT_S) == 0
    assert [p.name for p in workspace.root.glob("*.imported")] == []
