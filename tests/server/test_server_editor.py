"""The editor as people use inline profilers, through a real LSP client (pytest-lsp), on the real
``transformer_step`` H200 trace (tests/data/workloads.py): a training step whose model call
``logits = model(inputs)`` (line 306) runs two user ``Block.forward``s (lines 269-280).

From the report (``brrr-trace analyze --format json``): line 306 has 3.2 ms of its own (the
embedding and the head) and 17.2 ms with the blocks it calls, forward and backward (overhead
12.14 ms, memory 2.76 ms, compute 2.27 ms); the blocks' own lines sum to 14.0 ms. The step's
hottest line of its own is 309 ``opt.step()`` (4.6 ms). ``unfused-elementwise`` covers lines
306 and 307 (its line: 307; the optimizer step's kernels are unfused-optimizer's).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.server.lsp_helpers import (
    H200,
    SERVER,
    WORKLOADS,
    Workspace,
    age,
    ended_loads,
    initialize,
    make_workspace,
    open_and_settle,
    record_client_requests,
    wait_until,
)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    record_client_requests(lsp_client)
    yield
    await lsp_client.shutdown_session()


def everything(workspace: Workspace) -> t.Range:
    return t.Range(t.Position(0, 0), t.Position(len(workspace.text.split("\n")), 0))


async def test_the_model_call_shows_its_inclusive_time_and_the_lens_the_functions_total(
    client: LanguageClient, tmp_path: Path
) -> None:
    workspace = make_workspace(tmp_path / "ws", "transformer_step")
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    doc = t.TextDocumentIdentifier(uri=workspace.uri)
    params = t.InlayHintParams(doc, everything(workspace))
    hints = await client.text_document_inlay_hint_async(params)
    by_line = {h.position.line + 1: h for h in hints}
    call = by_line[306]
    assert call.label == "⏱ 17.3 ms incl. · overhead 71%"
    assert call.tooltip.startswith(
        "With the code it calls (forward and backward): 17.3 ms, 64.2% of the profiled GPU span "
        "(overhead 71% · memory 16% · compute 13%). This line: 3.3 ms · overhead-bound"
    )
    # Every label fits VS Code's 43 characters; a plain line shows its own time.
    assert all(len(h.label) <= 43 for h in hints)
    assert by_line[309].label == "⏱ 6.7 ms · overhead · 25%"
    # Per file: line 312 (94 µs, under 5% of line 309's 6.7 ms) gets none.
    assert 312 not in by_line and 274 in by_line

    hover = await client.text_document_hover_async(t.HoverParams(doc, t.Position(305, 14)))
    assert hover is not None
    assert hover.contents.value.split("\n")[2] == (
        "With the code it calls (forward and backward): **17.3 ms** (64.2% of the GPU span; "
        "overhead 71% · memory 16% · compute 13%)"
    )

    lenses = await client.text_document_code_lens_async(t.CodeLensParams(doc))
    titles = {lens.range.start.line + 1: lens.command.title for lens in lenses}
    assert titles[269].startswith("⏱ 14.0 ms in forward · ")
    # The step's lens counts the blocks its model call runs: the whole 27.0 ms span.
    assert titles[284].startswith("⏱ 27.0 ms in transformer_step · ")


async def test_heat_and_a_finding_over_several_lines(
    client: LanguageClient, tmp_path: Path
) -> None:
    workspace = make_workspace(tmp_path / "ws", "transformer_step")
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    heat = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.heat", arguments=[workspace.uri])
    )
    weights = {entry["line"] + 1: entry["weight"] for entry in heat["lines"]}
    assert weights[309] == 1.0  # the hottest line of its own
    assert weights[306] == round(3318.348 / 6675.891, 4)  # its own time, not the inclusive
    assert weights[305] == round(166.850 / 6675.891, 4)
    assert all(0 < w <= 1 for w in weights.values())

    diagnostics = client.diagnostics[workspace.uri]
    chain = [d for d in diagnostics if d.code == "unfused-elementwise" and d.data["line"] == 307]
    assert [d.range.start.line + 1 for d in chain] == [306, 307]
    for d in chain:
        others = [r.location.range.start.line + 1 for r in d.related_information]
        assert others == [n for n in (306, 307) if n != d.range.start.line + 1]

    # The fix is offered once: on the finding's own line, not on every line it covers.
    offered = []
    for line in (306, 307):
        actions = await client.text_document_code_action_async(
            t.CodeActionParams(
                text_document=t.TextDocumentIdentifier(uri=workspace.uri),
                range=t.Range(t.Position(line - 1, 0), t.Position(line - 1, 0)),
                context=t.CodeActionContext(diagnostics=[]),
            )
        )
        offered += [(line, a.title) for a in actions or [] if "unfused-elementwise" in a.title]
    assert offered == [(307, "brrr-trace: how to fix unfused-elementwise")]


def with_rank(source: Path, target: Path, rank: int) -> None:
    """The fixture as the trace of one rank of a job (``distributedInfo`` in its head)."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    data = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, **data}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(json.dumps(data).encode()))


async def test_runs_and_ranks_for_the_picker_and_the_status(
    client: LanguageClient, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(WORKLOADS, root / "workloads.py")
    step = root / "runs" / "step"
    with_rank(H200 / "transformer_step.json.gz", step / "rank1.pt.trace.json.gz", 1)
    with_rank(H200 / "transformer_step.json.gz", step / "rank0.pt.trace.json.gz", 0)
    loop = root / "runs" / "loop" / "item_in_loop.pt.trace.json.gz"
    loop.parent.mkdir(parents=True)
    shutil.copy(H200 / "item_in_loop.json.gz", loop)
    age(step / "rank1.pt.trace.json.gz", 120)
    age(loop, 90)
    age(step / "rank0.pt.trace.json.gz", 60)  # the newest: shown first
    workspace = Workspace(root, root / "workloads.py", step / "rank0.pt.trace.json.gz")
    await initialize(client, workspace)
    await open_and_settle(client, workspace)

    entries = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.listTraces", arguments=[])
    )
    assert [(Path(e["path"]).name, e["run"], e["rank"], e["active"]) for e in entries] == [
        ("rank0.pt.trace.json.gz", "runs/step", 0, True),
        ("item_in_loop.pt.trace.json.gz", "runs/loop", None, False),
        ("rank1.pt.trace.json.gz", "runs/step", 1, False),
    ]
    status = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.status", arguments=[])
    )
    assert (status["run"], status["rank"], status["traces"]) == ("runs/step", 0, 3)

    # The picker's choice: rank 1 of the same run.
    await client.workspace_execute_command_async(
        t.ExecuteCommandParams(
            command="brrr-trace.selectTrace", arguments=[str(step / "rank1.pt.trace.json.gz")]
        )
    )
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    status = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.status", arguments=[])
    )
    assert Path(status["trace"]).name == "rank1.pt.trace.json.gz"
    assert (status["run"], status["rank"]) == ("runs/step", 1)


async def test_the_timeline_panel_gets_the_drawn_timeline_and_null_before_a_trace(
    client: LanguageClient, tmp_path: Path
) -> None:
    empty = make_workspace(tmp_path / "empty", "transformer_step")
    empty.trace.unlink()  # nothing to load: the panel says so instead of drawing
    workspace = make_workspace(tmp_path / "ws", "transformer_step")
    await initialize(client, empty)
    command = t.ExecuteCommandParams(command="brrr-trace.timeline", arguments=[])
    assert await client.workspace_execute_command_async(command) is None

    client.workspace_did_change_workspace_folders(
        t.DidChangeWorkspaceFoldersParams(
            t.WorkspaceFoldersChangeEvent(
                added=[t.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
                removed=[t.WorkspaceFolder(uri=empty.root.as_uri(), name="ws")],
            )
        )
    )
    await open_and_settle(client, workspace)
    data = await client.workspace_execute_command_async(command)
    assert data["version"] == 1
    assert data["causes"] == ["sync", "dataloader", "host", "launch", "other", "collective"]
    # One H200, its 27.0 ms span (the step's lens), 424 ops and the 423 gaps between them.
    [device] = data["devices"]
    assert (device["device"], device["span_ns"], device["ops"], device["gaps"]) == (
        0,
        26994568,
        424,
        423,
    )
    # A place is [trace's file, local path, line, function]: what a click reveals in the editor.
    places = {(p[2], p[3]): p for p in data["places"]}
    assert places[306, "transformer_step"] == [
        "workloads.py",
        str(workspace.source),
        306,
        "transformer_step",
    ]
    # The segments name their places: opt.step()'s kernels (line 309) are drawn.
    drawn_lines = {data["places"][i][2] for i in device["place"] if i >= 0}
    assert {306, 309} <= drawn_lines
