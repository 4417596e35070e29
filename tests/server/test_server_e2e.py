"""The real server over stdio, driven by pytest-lsp, on a real H200 trace and its source file.

``item_in_loop`` (tests/data/workloads.py): line 108 ``loss = (x @ w).sum()`` is a bf16 GEMM
(compute-bound, 17.0 ms of GPU time and 4.6 ms of idle: after each sync returns, the host's way
to the next launch) and line 109 ``total += loss.item()`` syncs every iteration (overhead-bound,
1.6 ms of idle: while it blocked, and the host's own work on the line after the sync returned;
its finding's saving is 4.4 ms). Lines 104 and 105 (the
``randn`` calls) are below the default 1% threshold.
"""

from __future__ import annotations

import asyncio
from functools import cache

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from brrr_trace.options import AnalysisOptions
from brrr_trace.report import LineReport
from tests.server.lsp_helpers import (
    DATA,
    H200,
    SERVER,
    Workspace,
    age,
    ended_loads,
    hints,
    initialize,
    make_workspace,
    open_and_settle,
    poll_until,
    record_client_requests,
    wait_until,
)


@cache
def fixture_line(fixture: str, line: int) -> LineReport:
    """The pipeline's own result for a fixture line, for the numbers the roofline work refines."""
    from brrr_trace.pipeline import analyze

    report = analyze(H200 / f"{fixture}.json.gz", AnalysisOptions(source_root=str(DATA)))
    return next(r for r in report.lines if r.line == line)


def compute_rate(line: LineReport) -> str:
    """What follows ``compute-bound`` in a hint: achieved TFLOP/s and the share of the roofline."""
    if line.achieved_tflops is None:
        return ""
    peak = f" ({100 * line.peak_fraction:.0f}%)" if line.peak_fraction is not None else ""
    return f" · {line.achieved_tflops:.0f} TFLOP/s{peak}"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient):
    lsp_client.seen = record_client_requests(lsp_client)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


@pytest.mark.parametrize("capabilities", ["neovim@v0.11.0", "emacs@v29.1", "visual_studio_code"])
async def test_progress_then_hints_at_the_end_of_each_hot_line(
    client: LanguageClient, workspace: Workspace, capabilities: str
) -> None:
    await initialize(client, workspace, capabilities)
    await open_and_settle(client, workspace)

    ((token, reports),) = client.progress_reports.items()
    assert token == "brrr-trace/load/1"
    assert isinstance(reports[0], t.WorkDoneProgressBegin)
    assert (reports[0].title, reports[0].message) == (
        "brrr-trace",
        "loading item_in_loop.pt.trace.json.gz",
    )
    assert all(isinstance(r, t.WorkDoneProgressReport) for r in reports[1:-1])
    assert reports[-1] == t.WorkDoneProgressEnd(
        message="item_in_loop.pt.trace.json.gz: 4 lines, GPU 73% busy"
    )

    # VS Code 1.65's recorded capabilities have no inlayHint; the server answers anyway.
    assert await hints(client, workspace) == [
        (
            107,
            len(workspace.line(108)),
            "⏱ 21.6 ms · compute-bound" + compute_rate(fixture_line("item_in_loop", 108)),
        ),
        (108, len(workspace.line(109)), "⏱ 1.8 ms · overhead-bound · sync idle 1.6 ms"),
    ]
    assert len(workspace.line(108)) == 47  # `        loss = (x @ w).sum()  # expect: compute`
    if capabilities.startswith("neovim"):  # the only one of the three with inlayHint refresh
        assert client.seen["inlayHintRefresh"] == [None]  # type: ignore[attr-defined]


async def test_hints_in_a_range_and_by_threshold(
    client: LanguageClient, workspace: Workspace
) -> None:
    await initialize(client, workspace, options={"brrr-trace": {"threshold": 0}})
    await open_and_settle(client, workspace)
    all_lines = [(line, char) for line, char, _ in await hints(client, workspace)]
    assert all_lines == [(103, 66), (104, 62), (107, 47), (108, 48)]

    part = await client.text_document_inlay_hint_async(
        t.InlayHintParams(
            text_document=t.TextDocumentIdentifier(uri=workspace.uri),
            range=t.Range(t.Position(104, 0), t.Position(107, 10)),
        )
    )
    assert [(h.position.line, h.position.character) for h in part] == [(104, 62), (107, 47)]
    assert part[0].label == "⏱ 136.7 µs · overhead-bound · host idle 111.9 µs"

    # A new threshold applies at once, without reloading the trace; flat settings work too.
    client.workspace_did_change_configuration(
        t.DidChangeConfigurationParams(settings={"threshold": 0.5})
    )
    await poll_until(lambda: len(client.seen["inlayHintRefresh"]) == 2)  # type: ignore[attr-defined]
    assert [(line, char) for line, char, _ in await hints(client, workspace)] == [(107, 47)]
    assert len(ended_loads(client)) == 1


async def test_hover_shows_the_evidence(client: LanguageClient, workspace: Workspace) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    uri = t.TextDocumentIdentifier(uri=workspace.uri)

    hover = await client.text_document_hover_async(t.HoverParams(uri, t.Position(107, 12)))
    assert hover is not None and hover.contents.kind == t.MarkupKind.Markdown
    assert hover.range == t.Range(t.Position(107, 8), t.Position(107, 28))
    text = hover.contents.value.split("\n")
    assert text[0] == (
        "**brrr-trace** · `item_in_loop` line 108 · **compute-bound** · **21.6 ms** "
        "(91.7% of the GPU span)"
    )
    assert text[2:7] == [
        "| regime | time | share of the line |",
        "| :-- | --: | --: |",
        "| compute | 15.4 ms | 71.2% |",
        "| memory | 1.5 ms | 6.8% |",
        "| overhead | 4.8 ms | 22.0% |",
    ]
    assert text[8].startswith(
        "GPU busy 17.0 ms in 400 kernels · GPU idle charged here 4.6 ms "
        "(sync 3.7 ms, host 137.6 µs, launch 763.4 µs)"
    )
    assert "- `nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN` (gemm) ×100 — 15.4 ms" in text
    assert "- `at::native::reduce_kernel` (reduction) ×100 — 1.5 ms" in text
    roofline = next(line for line in text if line.startswith("**Roofline** (NVIDIA H200): "))
    expected = fixture_line("item_in_loop", 108)
    if expected.achieved_tflops is not None:
        assert f"{expected.achieved_tflops:.0f} TFLOP/s achieved" in roofline
    assert text[-2].startswith("*Line recovered: the trace names only the function")
    assert text[-1] == "*Trace:* `item_in_loop.pt.trace.json.gz`"

    sync = await client.text_document_hover_async(t.HoverParams(uri, t.Position(108, 20)))
    assert sync is not None
    assert "GPU idle charged here 1.6 ms (sync 1.6 ms)" in sync.contents.value
    assert "`Memcpy DtoH (Device -> Pinned)` (memcpy) ×100" in sync.contents.value

    # The def line: the function's lines, costliest first.
    function = await client.text_document_hover_async(t.HoverParams(uri, t.Position(101, 5)))
    assert function is not None
    assert function.contents.value.split("\n")[4:8] == [
        "| 108 | compute | 21.6 ms |",
        "| 109 | overhead | 1.8 ms |",
        "| 105 | overhead | 136.7 µs |",
        "| 104 | memory | 46.7 µs |",
    ]
    # A line without GPU time has no hover.
    assert await client.text_document_hover_async(t.HoverParams(uri, t.Position(106, 8))) is None


async def test_code_lens_on_the_def_line(client: LanguageClient, workspace: Workspace) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=workspace.uri))
    )
    assert [(lens.range, lens.command.title) for lens in lenses] == [
        (
            t.Range(t.Position(101, 0), t.Position(101, 0)),
            "⏱ 23.6 ms in item_in_loop · compute 65% · memory 7% · overhead 27%",
        )
    ]
    assert lenses[0].command.command == "brrr-trace.showFunction"
    shown = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(
            command=lenses[0].command.command, arguments=lenses[0].command.arguments
        )
    )
    assert "| 108 | compute | 21.6 ms |" in shown
    await wait_until(client, lambda: bool(client.messages), t.WINDOW_SHOW_MESSAGE)
    assert client.messages[-1].message == shown


async def test_reload_when_the_client_reports_a_changed_trace(
    client: LanguageClient, workspace: Workspace
) -> None:
    # Emacs 29 registers file watchers dynamically: the server relies on its events.
    await initialize(client, workspace, "emacs@v29.1")
    await open_and_settle(client, workspace)
    (registration,) = client.seen["register"]  # type: ignore[attr-defined]
    assert registration.registrations[0].method == t.WORKSPACE_DID_CHANGE_WATCHED_FILES
    watchers = registration.registrations[0].register_options["watchers"]
    patterns = [w["globPattern"] for w in watchers]
    assert patterns == [
        "**/*.pt.trace.json",
        "**/*.pt.trace.json.gz",
        "**/*trace*.json",
        "**/*trace*.json.gz",
    ]
    status = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.status")
    )
    assert status["watching"] is True

    workspace.replace_trace("item_in_loop_fixed")
    client.workspace_did_change_watched_files(
        t.DidChangeWatchedFilesParams(
            changes=[t.FileEvent(uri=workspace.trace.as_uri(), type=t.FileChangeType.Changed)]
        )
    )
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    assert ended_loads(client)[1].message == "item_in_loop.pt.trace.json.gz: 6 lines, GPU 93% busy"
    # The fixed loop keeps the sum on the GPU (lines 119-120) and syncs once, on line 121.
    assert [(line, label.split(" · ")[1]) for line, _, label in await hints(client, workspace)] == [
        (116, "overhead-bound"),
        (118, "compute-bound"),
        (119, "overhead-bound"),
        (120, "overhead-bound"),
    ]


async def test_reload_by_polling_when_the_client_cannot_watch(
    client: LanguageClient, workspace: Workspace
) -> None:
    # Neovim 0.11 on Linux does not register file watchers: the server polls.
    await initialize(client, workspace, options={"brrr-trace": {"pollInterval": 0.1}})
    await open_and_settle(client, workspace)
    assert client.seen["register"] == []  # type: ignore[attr-defined]

    workspace.replace_trace("item_in_loop_fixed")
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    assert [line for line, _, _ in await hints(client, workspace)] == [116, 118, 119, 120]

    # A new, newer trace becomes the active one.
    newer = workspace.root / "traces" / "newer.pt.trace.json.gz"
    newer.write_bytes((H200 / "item_in_loop.json.gz").read_bytes())
    age(newer, 5)
    await wait_until(client, lambda: len(ended_loads(client)) == 3)
    assert [line for line, _, _ in await hints(client, workspace)] == [107, 108]
    traces = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.listTraces")
    )
    assert [(e["name"], e["active"]) for e in traces] == [
        ("newer.pt.trace.json.gz (active)", True),
        ("item_in_loop.pt.trace.json.gz", False),
    ]

    # ... unless a trace is picked with the command.
    picked = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(
            command="brrr-trace.selectTrace", arguments=["traces/item_in_loop.pt.trace.json.gz"]
        )
    )
    assert picked == {"path": str(workspace.trace)}
    await wait_until(client, lambda: len(ended_loads(client)) == 4)
    assert [line for line, _, _ in await hints(client, workspace)] == [116, 118, 119, 120]


async def test_a_broken_trace_gives_one_message_and_the_server_keeps_running(
    client: LanguageClient, workspace: Workspace
) -> None:
    workspace.trace.write_bytes(b'{"traceEvents": [{"ph": "X", "name": ')
    age(workspace.trace)
    await initialize(client, workspace, options={"brrr-trace": {"pollInterval": 0.1}})
    await open_and_settle(client, workspace)
    assert ended_loads(client)[0].message == "failed"
    await asyncio.sleep(0.5)  # five more polls: the same broken file is not read again
    assert len(ended_loads(client)) == 1
    (message,) = client.messages
    assert message.type == t.MessageType.Warning
    assert message.message.startswith(
        "brrr-trace could not read the trace item_in_loop.pt.trace.json.gz: "
    )
    assert await hints(client, workspace) == []
    status = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.status")
    )
    assert status["error"] == message.message and status["trace"] is None

    workspace.replace_trace("item_in_loop")  # fixed on disk: picked up by the next poll
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    assert [line for line, _, _ in await hints(client, workspace)] == [107, 108]


async def test_bad_settings_give_one_warning_and_the_defaults(
    client: LanguageClient, workspace: Workspace
) -> None:
    options = {
        "brrr-trace": {"threshold": "lots", "pathMappings": 3, "inlayHints": True, "colour": "red"}
    }
    await initialize(client, workspace, options=options)
    await open_and_settle(client, workspace)
    (message,) = client.messages
    assert message.type == t.MessageType.Warning
    assert message.message == (
        "brrr-trace: some settings were ignored. "
        'brrr-trace.threshold: expected a number from 0 to 1, got "lots"; using 0.01. '
        'brrr-trace.pathMappings: expected a list of {"from": ..., "to": ...} objects, got 3; '
        "using []."
    )
    assert [line for line, _, _ in await hints(client, workspace)] == [107, 108]
    assert any("ignoring unknown settings colour" in m.message for m in client.log_messages)


async def test_source_root_and_unmapped_files(client: LanguageClient, tmp_path) -> None:
    # Two copies of workloads.py: the trace's short path matches both, and the server says so.
    workspace = make_workspace(tmp_path / "ws" / "b")
    root = tmp_path / "ws"
    (root / "a").mkdir()
    (root / "a" / "workloads.py").write_text(workspace.text)
    at_root = Workspace(root, workspace.source, workspace.trace)
    await initialize(client, at_root)
    await open_and_settle(client, at_root)
    (message,) = client.messages
    assert message.message == (
        "brrr-trace: none of the source files in item_in_loop.pt.trace.json.gz (`workloads.py`) "
        "map onto this workspace. Set brrr-trace.pathMappings or brrr-trace.sourceRoot."
    )
    assert await hints(client, at_root) == []

    client.workspace_did_change_configuration(
        t.DidChangeConfigurationParams(settings={"brrr-trace": {"sourceRoot": "b"}})
    )
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    assert [line for line, _, _ in await hints(client, at_root)] == [107, 108]


async def test_path_mappings_for_a_trace_from_another_machine(
    client: LanguageClient, tmp_path
) -> None:
    from tests.tracebuilder import frame, kernel, launch, write

    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    source = root / "src" / "train.py"
    source.write_text("import torch\n\n\ndef step(x):\n    return x @ x\n")
    # A second train.py: matching by file name alone would be ambiguous.
    (root / "backup").mkdir()
    (root / "backup" / "train.py").write_text(source.read_text())
    trace = write(
        root / "run.pt.trace.json",
        [
            frame("/remote/job/train.py(4): step", 0.0, 100.0),
            launch(1.0, corr=1),
            kernel("k", 10.0, 50.0, corr=1),
        ],
    )
    age(trace)
    workspace = Workspace(root, source, trace)
    mapping = [{"from": "/remote/job", "to": "${workspaceFolder}/src"}]
    await initialize(client, workspace, options={"pathMappings": mapping})
    await open_and_settle(client, workspace)
    assert await hints(client, workspace) == [(3, 12, "⏱ 50.0 µs · memory-bound")]
    assert client.messages == []


async def test_settings_pulled_from_the_client(
    client: LanguageClient, workspace: Workspace
) -> None:
    # No initializationOptions: the server asks for the "brrr-trace" section after `initialized`,
    # and again when told that the configuration changed without the new values.
    client.set_configuration({"threshold": 0.5}, section="brrr-trace")
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    assert [line for line, _, _ in await hints(client, workspace)] == [107]

    client.set_configuration({"threshold": 0.05}, section="brrr-trace")
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
    await poll_until(lambda: len(client.seen["inlayHintRefresh"]) == 2)  # type: ignore[attr-defined]
    assert [line for line, _, _ in await hints(client, workspace)] == [107, 108]


async def test_select_trace_without_a_path_asks_the_user(
    client: LanguageClient, workspace: Workspace
) -> None:
    other = workspace.root / "traces" / "fixed.pt.trace.json.gz"
    other.write_bytes((H200 / "item_in_loop_fixed.json.gz").read_bytes())
    age(other, 120)  # older: not the active one
    asked: list[t.ShowMessageRequestParams] = []

    @client.feature(t.WINDOW_SHOW_MESSAGE_REQUEST)
    def choose(params: t.ShowMessageRequestParams) -> t.MessageActionItem:
        asked.append(params)
        return params.actions[1]

    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    picked = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="brrr-trace.selectTrace")
    )
    assert [a.title for a in asked[0].actions] == [
        "item_in_loop.pt.trace.json.gz (active)",
        "fixed.pt.trace.json.gz",
    ]
    assert picked == {"path": str(other)}
    await wait_until(client, lambda: len(ended_loads(client)) == 2)
    assert [line for line, _, _ in await hints(client, workspace)] == [116, 118, 119, 120]


async def test_a_json_file_that_is_no_trace_does_not_hide_the_real_one(
    client: LanguageClient, workspace: Workspace
) -> None:
    # Newer than the trace and matching the default `**/*trace*.json` glob.
    impostor = workspace.root / "stacktrace_settings.json"
    impostor.write_text('{"colors": true}')
    age(impostor, 10)
    await initialize(client, workspace)
    await open_and_settle(client, workspace, loads=2)
    assert [end.message for end in ended_loads(client)] == [
        "failed",
        "item_in_loop.pt.trace.json.gz: 4 lines, GPU 73% busy",
    ]
    (message,) = client.messages
    assert message.message.startswith(
        "brrr-trace could not read the trace stacktrace_settings.json: "
    )
    assert [line for line, _, _ in await hints(client, workspace)] == [107, 108]
