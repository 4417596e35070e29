"""Diagnostics and code actions, end to end, for findings laid on a real report.

``findings_server.py`` runs the real server and replaces each report's findings with ``FINDINGS``
below (lines of ``workloads.py``), so these tests pin the server's behaviour while the rules
engine's thresholds move. The trace is still the real ``item_in_loop`` (GPU span 23.56 ms).
One test at the end uses the findings the pipeline itself produces.
"""

from __future__ import annotations

import ast
import json
import os

import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from brrr_trace.options import AnalysisOptions
from tests.server.lsp_helpers import (
    FINDINGS_SERVER,
    SERVER,
    Workspace,
    initialize,
    open_and_settle,
    record_client_requests,
    wait_until,
)

FINDINGS = [
    {
        "rule": "fp32-matmul",
        "line": 43,
        "severity": "hint",
        "message": "5 FP32 matrix kernels run on CUDA cores",
        "fix": 'torch.set_float32_matmul_precision("high")',
        "est_savings_ns": 100_000,
    },
    {
        "rule": "host-sync",
        "line": 109,
        "severity": "warning",
        "message": "the host waits for the GPU on this line",
        "fix": "Keep the value on the GPU and read it once per step.",
        "est_savings_ns": 5_307_483,
    },
    {
        "rule": "pageable-memcpy",
        "line": 127,
        "severity": "information",
        "message": "copies from pageable memory",
        "fix": "x.pin_memory().to(device, non_blocking=True)",
        "est_savings_ns": 1_000_000,
    },
    {
        "rule": "unfused-optimizer",
        "line": 187,
        "severity": "information",
        "message": "the optimizer step launches 2300 kernels",
        "fix": "Use fused=True.",
        "est_savings_ns": 2_000_000,
    },
    {
        "rule": "manual-attention",
        "line": 240,
        "severity": "warning",
        "message": "attention written by hand",
        "fix": "Use torch.nn.functional.scaled_dot_product_attention(q, k, v).",
        "est_savings_ns": 3_000_000,
    },
]
DOCS = "https://example.org/rules/{rule}.html"
Severity = t.DiagnosticSeverity


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=FINDINGS_SERVER,
        server_env={**os.environ, "BRRR_TEST_FINDINGS": json.dumps(FINDINGS)},
    )
)
async def client(lsp_client: LanguageClient):
    lsp_client.seen = record_client_requests(lsp_client)  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def real_client(lsp_client: LanguageClient):
    record_client_requests(lsp_client)
    yield
    await lsp_client.shutdown_session()


def rng(line: int, start: int, end_line: int, end: int) -> t.Range:
    return t.Range(t.Position(line, start), t.Position(end_line, end))


async def test_diagnostics_for_findings(client: LanguageClient, workspace: Workspace) -> None:
    await initialize(client, workspace, options={"brrr-trace": {"rulesDocsUrl": DOCS}})
    await open_and_settle(client, workspace)
    diagnostics = client.diagnostics[workspace.uri]
    assert [(d.range, d.code, d.severity) for d in diagnostics] == [
        (rng(42, 8, 42, 17), "fp32-matmul", Severity.Hint),  # c = a @ b
        (rng(108, 8, 108, 28), "host-sync", Severity.Warning),  # total += loss.item()
        (rng(126, 8, 126, 32), "pageable-memcpy", Severity.Information),
        (rng(186, 8, 186, 18), "unfused-optimizer", Severity.Information),  # opt.step()
        (rng(239, 8, 239, 56), "manual-attention", Severity.Warning),
    ]
    sync = diagnostics[1]
    assert sync.message == (
        "the host waits for the GPU on this line "
        "(est. saving 5.3 ms, 22.5% of the profiled GPU span)"
    )
    assert sync.source == "brrr-trace"
    assert sync.code_description == t.CodeDescription(
        href="https://example.org/rules/host-sync.html"
    )
    assert diagnostics[0].message.endswith("(est. saving 100.0 µs, 0.4% of the profiled GPU span)")

    # Cut-offs of one's own: saving ≥ 5% of the span is a warning, ≥ 1% an information.
    client.workspace_did_change_configuration(
        t.DidChangeConfigurationParams(
            settings={"brrr-trace": {"warningShare": 0.05, "informationShare": 0.01}}
        )
    )
    await wait_until(
        client,
        lambda: client.diagnostics[workspace.uri][3].severity == Severity.Warning,
        t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
    )
    assert [d.severity for d in client.diagnostics[workspace.uri]] == [
        Severity.Hint,  # 0.4%
        Severity.Warning,  # 22.5%
        Severity.Information,  # 4.2%
        Severity.Warning,  # 8.5%
        Severity.Warning,  # 12.7%
    ]


async def code_actions(
    client: LanguageClient, workspace: Workspace, line: int, only: list[str] | None = None
) -> list[t.CodeAction]:
    """The code actions for a 0-based line, sent with the diagnostics the client has there."""
    diagnostics = [d for d in client.diagnostics[workspace.uri] if d.range.start.line == line]
    result = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=workspace.uri),
            range=rng(line, 0, line, 0),
            context=t.CodeActionContext(diagnostics=diagnostics, only=only),
        )
    )
    return list(result or [])


def apply(text: str, edits: list[t.TextEdit]) -> str:
    """Apply LSP edits (ASCII text: characters are code points) the way an editor does."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character))[::-1]:
        begin = starts[edit.range.start.line] + edit.range.start.character
        end = starts[edit.range.end.line] + edit.range.end.character
        text = text[:begin] + edit.new_text + text[end:]
    return text


async def test_code_actions_with_mechanical_edits(
    client: LanguageClient, workspace: Workspace
) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    uri = workspace.uri

    # unfused-optimizer on `opt.step()`: the edit goes to the constructor of `opt`, line 182.
    (optimizer,) = await code_actions(client, workspace, 186)
    assert optimizer.title == "brrr-trace: use fused=True in torch.optim.Adam(...)"
    assert optimizer.kind == t.CodeActionKind.QuickFix and optimizer.is_preferred
    assert [d.code for d in optimizer.diagnostics] == ["unfused-optimizer"]
    assert optimizer.edit.changes == {
        uri: (t.TextEdit(range=rng(181, 56, 181, 69), new_text="fused=True"),)
    }

    (copy,) = await code_actions(client, workspace, 126)
    assert copy.title == "brrr-trace: copy from pinned memory with non_blocking=True"
    assert copy.edit.changes == {
        uri: (
            t.TextEdit(range=rng(126, 21, 126, 21), new_text=".pin_memory()"),
            t.TextEdit(range=rng(126, 31, 126, 31), new_text=", non_blocking=True"),
        )
    }

    # fp32-matmul: the switch after the imports, and the two lines of this function that force
    # full FP32 flipped (they would undo it).
    (tf32,) = await code_actions(client, workspace, 42)
    assert (
        tf32.title == 'brrr-trace: allow TF32 matmuls (torch.set_float32_matmul_precision("high"))'
    )
    assert tf32.edit.changes == {
        uri: (
            t.TextEdit(range=rng(37, 39, 37, 48), new_text='"high"'),
            t.TextEdit(range=rng(36, 44, 36, 49), new_text="True"),
            t.TextEdit(
                range=rng(21, 48, 21, 48), new_text='\ntorch.set_float32_matmul_precision("high")'
            ),
        )
    }

    edits = [e for a in (optimizer, copy, tf32) for e in a.edit.changes[uri]]
    fixed = apply(workspace.text, edits)
    ast.parse(fixed)
    lines = fixed.split("\n")
    assert lines[21:23] == [
        "from torch.utils.data import DataLoader, Dataset",
        'torch.set_float32_matmul_precision("high")',
    ]
    assert lines[37:39] == [
        "    torch.backends.cuda.matmul.allow_tf32 = True",
        '    torch.set_float32_matmul_precision("high")',
    ]
    assert (
        lines[127]
        == "        x_gpu = x_cpu.pin_memory().to(device, non_blocking=True)  # expect: memory"
    )
    assert lines[182] == "    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)"


async def test_code_actions_that_explain(client: LanguageClient, workspace: Workspace) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)

    (sync,) = await code_actions(client, workspace, 108)
    assert sync.title == "brrr-trace: how to fix host-sync"
    assert sync.edit is None and sync.command.command == "brrr-trace.showFix"
    assert list(sync.command.arguments) == [
        {
            "uri": workspace.uri,
            "line": 109,
            "rule": "host-sync",
            "message": "the host waits for the GPU on this line",
            "fix": "Keep the value on the GPU and read it once per step.",
            "estSavingsNs": 5_307_483,
        }
    ]
    shown = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command=sync.command.command, arguments=sync.command.arguments)
    )
    assert shown == (
        "brrr-trace · host-sync (line 109): Keep the value on the GPU and read it once per "
        "step. Estimated saving: 5.3 ms."
    )
    await wait_until(client, lambda: bool(client.messages), t.WINDOW_SHOW_MESSAGE)
    assert client.messages == [t.ShowMessageParams(type=t.MessageType.Info, message=shown)]

    (attention,) = await code_actions(client, workspace, 239)
    assert attention.title == "brrr-trace: how to fix manual-attention"
    assert attention.command.arguments[0]["fix"] == FINDINGS[4]["fix"]

    # Only quick fixes are offered; a request for refactorings gets none. No finding, no action.
    assert await code_actions(client, workspace, 108, only=[t.CodeActionKind.Refactor]) == []
    assert await code_actions(client, workspace, 107) == []


async def test_edits_follow_the_text_being_edited(
    client: LanguageClient, workspace: Workspace
) -> None:
    await initialize(client, workspace)
    await open_and_settle(client, workspace)
    # The user already made the optimizer fused: nothing mechanical is left, only the advice.
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=workspace.uri, version=2),
            content_changes=[
                t.TextDocumentContentChangePartial(range=rng(181, 56, 181, 69), text="fused=True")
            ],
        )
    )
    (action,) = await code_actions(client, workspace, 186)
    assert action.title == "brrr-trace: how to fix unfused-optimizer" and action.edit is None


async def test_diagnostics_from_the_pipelines_own_findings(
    real_client: LanguageClient, workspace: Workspace
) -> None:
    await initialize(real_client, workspace)
    await open_and_settle(real_client, workspace)
    from brrr_trace.pipeline import analyze
    from brrr_trace.units import duration as fmt_time

    report = analyze(workspace.trace, AnalysisOptions(source_root=str(workspace.root)))
    (finding,) = [f for f in report.findings if f.rule == "host-sync"]
    share = 100 * finding.est_savings_ns / (report.summary.gpu_busy_ns + report.summary.gpu_idle_ns)
    sync = [d for d in real_client.diagnostics[workspace.uri] if d.code == "host-sync"]
    assert [(d.range, d.severity) for d in sync] == [(rng(108, 8, 108, 28), Severity.Warning)]
    # The trace is a plain profiler one: the saving with the profiler's cost at 0.75x and 3x
    # the model (item_in_loop's host-sync, README) follows it.
    assert sync[0].message == (
        f"{finding.message} (est. saving {fmt_time(finding.est_savings_ns)}, {share:.1f}% of the "
        "profiled GPU span; 3.8 ms to 4.4 ms with the profiler's own cost uncertain)"
    )
    assert sync[0].code_description.href.endswith("/docs/rules/host-sync.md")
