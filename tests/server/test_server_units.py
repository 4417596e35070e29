"""The server's parts without a client: settings, trace discovery, conversion, fixes, the job."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lsprotocol import types as t
from pygls.workspace.position_codec import PositionCodec

from brrr_trace.options import DEFAULT_EXCLUDED_FILES, AnalysisOptions
from brrr_trace.report import Finding, LineReport
from brrr_trace.server import convert, discovery
from brrr_trace.server.actions import apply_edits, fix_for
from brrr_trace.server.analysis import AnalysisFailed, AnalysisJob, default_analyze
from brrr_trace.server.convert import Positions
from brrr_trace.server.discovery import TraceFile, choose_active, discover
from brrr_trace.server.globs import glob_regex
from brrr_trace.server.settings import (
    DEFAULT_TRACE_GLOBS,
    Settings,
    defaults_by_key,
    parse_settings,
)
from brrr_trace.server.snapshot import build_snapshot
from brrr_trace.server.source import SourceIndex
from brrr_trace.vocabulary import IdleCause, Precision, Regime
from tests.server.lsp_helpers import H200, age

# --- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"brrr-trace": {"threshold": 0.05, "pathMappings": [{"from": "/r", "to": "src"}]}},
        {"threshold": 0.05, "pathMappings": [{"from": "/r", "to": "src"}]},
        {"threshold": 0.05, "path_mappings": {"/r": "src"}},
        {"brrr-trace.threshold": 0.05, "brrr-trace.pathMappings": [{"from": "/r", "to": "src"}]},
    ],
    ids=["namespaced", "flat", "snake-case", "dotted"],
)
def test_settings_with_or_without_the_namespace(payload: dict) -> None:
    parsed = parse_settings(payload)
    assert parsed.problems == () and parsed.found
    assert parsed.settings == Settings(threshold=0.05, path_mappings=(("/r", "src"),))


def test_bad_settings_keep_their_defaults_and_say_why() -> None:
    parsed = parse_settings(
        {
            "brrr-trace": {
                "threshold": 2,
                "traces": "*.json",
                "device": -1,
                "pollInterval": "fast",
                "rulesDocsUrl": "https://x",
                "nope": 1,
            }
        }
    )
    assert parsed.settings == Settings(traces=("*.json",))
    assert parsed.unknown_keys == ("nope",)
    assert parsed.problems == (
        "brrr-trace.threshold: expected a number from 0 to 1, got 2; using 0.0.",
        "brrr-trace.device: expected a whole number ≥ 0, or null, got -1; using None.",
        "brrr-trace.pollInterval: expected a number of seconds from 0.05 to 3600, got "
        '"fast"; using 1.0.',
        'brrr-trace.rulesDocsUrl: expected a URL containing "{rule}", got "https://x"; using '
        '"https://github.com/brrr-trace/brrr-trace/blob/main/docs/rules/{rule}.md".',
    )
    assert parse_settings("nonsense").problems == (
        'settings: expected an object, got "nonsense"; using the defaults.',
    )
    # An answer with nothing of ours in it changes nothing.
    assert not parse_settings({"python": {"x": 1}}).found


def test_every_key_has_a_default_that_parses_back() -> None:
    defaults = defaults_by_key()
    assert defaults["traces"] == list(DEFAULT_TRACE_GLOBS) and defaults["threshold"] == 0.0
    assert defaults["pathMappings"] == [] and defaults["warningShare"] is None
    parsed = parse_settings({"brrr-trace": defaults})
    assert parsed.problems == () and parsed.settings == Settings()


def test_severity_cut_offs_must_be_ordered() -> None:
    parsed = parse_settings({"warningShare": 0.01, "informationShare": 0.5})
    assert parsed.settings.warning_share is None and parsed.settings.information_share is None
    assert "above" in parsed.problems[0]


def test_settings_become_analysis_options(tmp_path: Path) -> None:
    settings = parse_settings(
        {
            "sourceRoot": "src",
            "pathMappings": [{"from": "/remote", "to": "${workspaceFolder}/code"}],
            "excludeFiles": ["vendor/*"],
            "device": 1,
        }
    ).settings
    options = settings.analysis_options(str(tmp_path))
    assert options == AnalysisOptions(
        source_root=str(tmp_path / "src"),
        path_mappings=(("/remote", str(tmp_path / "code")),),
        excluded_files=(*DEFAULT_EXCLUDED_FILES, "vendor/*"),
        device=1,
    )


# --- finding traces -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.pt.trace.json", "a/b/x.pt.trace.json", True),
        ("**/*.pt.trace.json", "x.pt.trace.json", True),
        ("**/*.pt.trace.json", "x.pt.trace.json.gz", False),
        ("*trace*.json", "a/trace.json", False),
        ("logs/**", "logs/a/b.json", True),
        ("run_?.json", "run_1.json", True),
        ("run_[0-9].json", "run_a.json", False),
        ("*.{json,gz}", "t.gz", True),
    ],
)
def test_globs(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is matches


def test_discover_newest_first_and_skip_environments(tmp_path: Path) -> None:
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    old = tmp_path / "runs" / "a" / "old.pt.trace.json"
    new = tmp_path / "runs" / "new_trace.json.gz"
    for path in (old, new, tmp_path / ".venv" / "lib" / "x.pt.trace.json", tmp_path / "data.json"):
        path.write_text("{}")
    age(old, 100)
    age(new, 10)
    found = discover([str(tmp_path)], DEFAULT_TRACE_GLOBS).traces
    assert [Path(f.path) for f in found] == [new, old]
    assert choose_active(found, None) == (found[0], None)
    assert choose_active(found, str(old))[0].path == str(old)
    assert choose_active(found, str(tmp_path / "gone.json")) == (
        found[0],
        str(tmp_path / "gone.json"),
    )
    assert discover([str(tmp_path)], ["runs/**/*.json"]).traces == (found[1],)


# --- conversion ---------------------------------------------------------------------------------


def line_report(**changes) -> LineReport:
    fields = dict(
        file="train.py",
        path="/w/train.py",
        line=3,
        function="step",
        precision=Precision.RECOVERED,
        regime=Regime.COMPUTE,
        gpu_ns=16_300_000,
        idle_ns=0,
        cpu_ns=1_000,
        kernels=2,
        backward_gpu_ns=0,
        time_by_regime_ns={Regime.COMPUTE: 16_300_000, Regime.MEMORY: 0, Regime.OVERHEAD: 0},
        idle_by_cause_ns=dict.fromkeys(IdleCause, 0),
    )
    fields.update(changes)
    return LineReport(**fields)


def test_long_labels_carry_the_evidence() -> None:
    assert (
        convert.long_label(line_report(achieved_tflops=808.4, peak_fraction=0.82))
        == "16.3 ms · compute-bound · 808 TFLOP/s (82%)"
    )
    memory = line_report(regime=Regime.MEMORY, achieved_gbps=3412.0, peak_fraction=0.71)
    assert convert.long_label(memory) == "16.3 ms · memory-bound · 3.41 TB/s (71%)"
    idle = {**dict.fromkeys(IdleCause, 0), IdleCause.SYNC: 900_000, IdleCause.HOST: 100_000}
    overhead = line_report(
        regime=Regime.OVERHEAD, gpu_ns=0, idle_ns=1_000_000, idle_by_cause_ns=idle
    )
    assert convert.long_label(overhead) == "1.0 ms · overhead-bound · sync idle 900.0 µs"
    assert convert.long_label(line_report()) == "16.3 ms · compute-bound"


def test_hints_are_short_and_the_tooltip_has_the_whole_text() -> None:
    line = line_report(achieved_tflops=808.4, peak_fraction=0.82)
    assert convert.hint_label(line, 22_000_000) == "⏱ 16.3 ms · compute · 74%"
    tooltip = convert.hint_tooltip(line, 22_000_000)
    assert tooltip.startswith("This line: 16.3 ms · compute-bound · 808 TFLOP/s (82%); 74.1%")
    assert convert.hint_label(line_report(regime=None, cpu_ns=2_000_000), 0) == "⏱ 2.0 ms CPU"
    assert convert.fit("x" * 50) == "x" * 42 + "…"
    assert len(convert.fit("x" * 50)) == convert.HINT_WIDTH == 43


def test_a_call_site_shows_its_inclusive_time_and_the_regime_mix() -> None:
    model_call = line_report(
        gpu_ns=1_000_000,
        regime=Regime.MEMORY,
        time_by_regime_ns={Regime.COMPUTE: 0, Regime.MEMORY: 1_000_000, Regime.OVERHEAD: 0},
        inclusive_by_regime_ns={
            Regime.COMPUTE: 3_000_000,
            Regime.MEMORY: 2_000_000,
            Regime.OVERHEAD: 12_000_000,
        },
    )
    assert convert.is_call_site(model_call)
    label = convert.hint_label(model_call, 27_000_000)
    assert label == "⏱ 17.0 ms incl. · overhead 71%"
    tooltip = convert.hint_tooltip(model_call, 27_000_000)
    assert tooltip.startswith(
        "With the code it calls (forward and backward): 17.0 ms, 63.0% of the profiled GPU "
        "span (overhead 71% · compute 18% · memory 12%). This line: 1.0 ms · memory-bound"
    )


def test_which_lines_get_a_hint_is_decided_per_file() -> None:
    # In a long run (span 10 s) a 16 ms line is 0.16% of the span: it still leads its file.
    lines = [
        line_report(line=1, gpu_ns=16_000_000),
        line_report(line=2, gpu_ns=4_000_000),
        line_report(line=3, gpu_ns=500_000),  # 3% of the hottest line: no hint
        line_report(  # its own time is small, with its callees it matters
            line=4,
            gpu_ns=100_000,
            inclusive_by_regime_ns={
                Regime.COMPUTE: 0,
                Regime.MEMORY: 0,
                Regime.OVERHEAD: 30_000_000,
            },
        ),
    ]
    span = 10_000_000_000
    assert [ln.line for ln in convert.hinted_lines(lines, span, 0.0, 0.05)] == [1, 2, 4]
    assert [ln.line for ln in convert.hinted_lines(lines, span, 0.0, 0.5)] == [1, 4]
    # The span threshold still applies when one is set.
    assert [ln.line for ln in convert.hinted_lines(lines, span, 0.002, 0.05)] == [4]


def test_heat_is_each_lines_share_of_the_hottest_line_of_its_file() -> None:
    index = SourceIndex("a = 1\nb = 2\nc = 3\n")
    positions = Positions(index, PositionCodec(t.PositionEncodingKind.Utf16))
    lines = [
        line_report(line=1, gpu_ns=8_000_000),
        line_report(line=3, gpu_ns=2_000_000, regime=Regime.MEMORY),
        line_report(line=7, gpu_ns=9_000_000),  # past the end of the document
    ]
    assert convert.heat(lines, positions) == [
        {"line": 0, "weight": 1.0, "regime": "compute", "ns": 8_000_000},
        {"line": 2, "weight": 0.25, "regime": "memory", "ns": 2_000_000},
    ]


@pytest.mark.parametrize(
    ("encoding", "end"),
    [
        (t.PositionEncodingKind.Utf16, 19),  # 😀 is two UTF-16 units
        (t.PositionEncodingKind.Utf8, 22),  # µ is two bytes, 😀 four
        (t.PositionEncodingKind.Utf32, 18),
    ],
)
def test_hints_sit_at_the_end_of_the_line_in_the_clients_units(
    encoding: t.PositionEncodingKind, end: int
) -> None:
    index = SourceIndex('x = 1\ny = f("µ😀") @ w2  \nz = 3\n')
    assert len(index.lines[1]) == 18  # code points, trailing blanks included
    positions = Positions(index, PositionCodec(encoding))
    lines = [line_report(line=2), line_report(line=3, gpu_ns=1000), line_report(line=9)]
    hints = convert.inlay_hints(lines, 20_000_000, 0.01, positions, 0.05)
    # Line 3 is under 1% of the span and of the hottest line; line 9 is past the end.
    assert [(h.position.line, h.position.character) for h in hints] == [(1, end)]


def test_kernel_names_are_shortened() -> None:
    assert convert.short_kernel_name("void at::native::reduce_kernel<512, 1>(at::R<float>)") == (
        "at::native::reduce_kernel"
    )
    assert (
        convert.short_kernel_name("Memcpy DtoH (Device -> Pinned)")
        == "Memcpy DtoH (Device -> Pinned)"
    )
    assert convert.short_kernel_name("ampere_sgemm_128x64_nn") == "ampere_sgemm_128x64_nn"


def finding(rule: str, line: int, saving: int, severity: str = "warning") -> Finding:
    return Finding(rule, severity, "train.py", "/w/train.py", line, "m", "f", saving)


def test_severity_is_the_reports_unless_cut_offs_are_set() -> None:
    defaults = Settings()
    assert convert.severity(finding("x", 1, 0, "hint"), 100, defaults) == t.DiagnosticSeverity.Hint
    mine = Settings(warning_share=0.5, information_share=0.1)
    assert convert.severity(finding("x", 1, 60, "hint"), 100, mine) == t.DiagnosticSeverity.Warning
    assert convert.severity(finding("x", 1, 20), 100, mine) == t.DiagnosticSeverity.Information
    assert convert.severity(finding("x", 1, 5), 100, mine) == t.DiagnosticSeverity.Hint
    odd = finding("x", 1, 20, "severe")  # a word we do not know: the share decides
    assert convert.severity(odd, 100, defaults) == t.DiagnosticSeverity.Warning


def test_statement_ranges_cover_the_statement_not_the_comment() -> None:
    index = SourceIndex(
        "for x in y:  # loop\n    z = f(a,\n          b)  # two lines\n    w = 1; v = 2\n"
    )
    assert index.statement_range(1) == (1, 0, 1, 11)  # a compound statement: its header
    assert index.statement_range(2) == (2, 4, 3, 12)
    assert index.statement_range(4) == (4, 4, 4, 9)
    broken = SourceIndex("def f(:\n    x = 1  # c\n")
    assert broken.tree is None and broken.statement_range(2) == (2, 4, 2, 9)


def test_snapshot_index() -> None:
    from brrr_trace.report import Report, Summary, TraceInfo

    lines = (
        line_report(line=7, gpu_ns=5),
        line_report(line=3, gpu_ns=9),
        line_report(line=7, gpu_ns=50, file="copy/train.py"),
        line_report(line=1, path=None, file="elsewhere.py"),
    )
    report = Report(
        tool_version="0",
        trace=TraceInfo("t", None, (), 100, (), True, True),
        summary=Summary(60, 40, 0.6, {}, {}, 3, 0, 0),
        lines=lines,
        findings=(finding("host-sync", 7, 10), finding("x", 2, 1)),
        unmapped_files=("elsewhere.py",),  # the pipeline's list: lines with time, unmapped
    )
    snapshot = build_snapshot(TraceFile("t", 1, 1), AnalysisOptions(), report)
    path = os.path.realpath("/w/train.py")
    assert snapshot.span_ns == 100
    assert [(r.line, r.gpu_ns) for r in snapshot.lines(path)] == [(3, 9), (7, 50)]
    assert snapshot.line_at(path, 7).gpu_ns == 50 and snapshot.line_at(path, 4) is None
    assert [r.line for r in snapshot.lines_between(path, 4, 7)] == [7]
    assert [f.line for f in snapshot.findings(path)] == [2, 7]
    assert snapshot.unmapped_files == ("elsewhere.py",)


def test_function_lenses_count_own_lines_only() -> None:
    index = SourceIndex(
        textwrap.dedent(
            """\
            @decorator
            def outer():
                x = 1

                def inner():
                    return 2
                return inner
            """
        )
    )
    outer, inner = index.functions
    assert (outer.first_line, outer.def_line, outer.last_line) == (1, 2, 7)
    assert inner.qualname == "outer.inner" and outer.owns(3) and not outer.owns(6)
    assert index.function_at(6) == inner and index.function_at(1) == outer


# --- mechanical fixes ---------------------------------------------------------------------------


def fixed(source: str, rule: str, line: int) -> str | None:
    source = textwrap.dedent(source)
    fix = fix_for(rule, SourceIndex(source), line)
    return None if fix is None else apply_edits(source, fix.edits)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "opt = torch.optim.Adam(p, lr=1e-3, foreach=False)",
            "opt = torch.optim.Adam(p, lr=1e-3, fused=True)",
        ),
        ("opt = torch.optim.AdamW(p)", "opt = torch.optim.AdamW(p, fused=True)"),
        ("opt = optim.SGD(p, fused=False)", "opt = optim.SGD(p, fused=True)"),
        ("opt = Adam()", "opt = Adam(fused=True)"),
        (
            "opt = torch.optim.RMSprop(p, lr=0.1)",
            "opt = torch.optim.RMSprop(p, lr=0.1, foreach=True)",
        ),
        ("opt = torch.optim.Adam(p, fused=True)", None),  # already fused
        ("opt = torch.optim.Adam(p, fused=False, foreach=True)", None),  # which one? not ours
        ("opt = mylib.Adam(p)", None),  # not torch's
    ],
)
def test_unfused_optimizer_on_the_constructor_line(before: str, after: str | None) -> None:
    result = fixed(f"import torch\n{before}\n", "unfused-optimizer", 2)
    assert result == (None if after is None else f"import torch\n{after}\n")


def test_unfused_optimizer_from_the_step_line_finds_the_constructor() -> None:
    source = """\
        import torch

        def train(model):
            opt = torch.optim.Adam(
                model.parameters(),
                lr=1e-3,
            )
            for _ in range(3):
                opt.step()
        """
    assert fixed(source, "unfused-optimizer", 9) == textwrap.dedent(source).replace(
        "lr=1e-3,", "lr=1e-3, fused=True,"
    )
    assert fixed(source, "unfused-optimizer", 8) is None  # the `for` line: no step, no optimizer


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("y = x.to(device)", "y = x.pin_memory().to(device, non_blocking=True)"),
        ("y = batch[0].cuda()", "y = batch[0].pin_memory().cuda(non_blocking=True)"),
        ("y = x.pin_memory().to(device)", "y = x.pin_memory().to(device, non_blocking=True)"),
        (
            "y = x.to(device, non_blocking=False)",
            "y = x.pin_memory().to(device, non_blocking=True)",
        ),
        ("y = x.to(torch.float16)", None),  # a dtype conversion, not a copy to the GPU
        ("y = x.pin_memory().to(device, non_blocking=True)", None),  # nothing left to do
        ("y, z = a.to(d), b.to(d)", None),  # two copies: which one is the slow one?
    ],
)
def test_pageable_memcpy(before: str, after: str | None) -> None:
    result = fixed(f"import torch\n{before}  # copy\n", "pageable-memcpy", 2)
    assert result == (None if after is None else f"import torch\n{after}  # copy\n")


def test_fp32_matmul_after_the_imports() -> None:
    source = '''\
        """Doc."""
        import os
        import torch as th

        def f(a):
            return a @ a
        '''
    assert fixed(source, "fp32-matmul", 6) == textwrap.dedent(source).replace(
        "import torch as th\n", 'import torch as th\nth.set_float32_matmul_precision("high")\n'
    )
    assert fixed("import numpy\nx = a @ b\n", "fp32-matmul", 2) is None  # no `import torch`
    already = 'import torch\ntorch.set_float32_matmul_precision("high")\nx = a @ b\n'
    assert fixed(already, "fp32-matmul", 3) is None


def test_fixes_are_checked_and_unknown_rules_have_none() -> None:
    assert fixed("import torch\nx = a @ b\n", "host-sync", 2) is None
    assert fixed("def broken(:\n    opt = torch.optim.Adam(p)\n", "unfused-optimizer", 2) is None


# --- the analysis job ---------------------------------------------------------------------------


def crash(path: str, options: AnalysisOptions, progress) -> None:
    os._exit(3)


def test_the_job_reports_bad_input_and_crashes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_text("this is not json")

    async def run(analyze, path: Path):
        return await AnalysisJob(analyze, str(path), AnalysisOptions()).run(lambda d, t: None)

    with pytest.raises(AnalysisFailed) as bad_input:
        asyncio.run(run(default_analyze, bad))
    assert bad_input.value.bad_input and "bad.pt.trace.json" in str(bad_input.value)

    with pytest.raises(AnalysisFailed) as crashed:
        asyncio.run(run(crash, H200 / "item_in_loop.json.gz"))
    assert not crashed.value.bad_input
    assert str(crashed.value) == "the analysis process stopped with exit code 3"


def test_the_job_reports_progress_and_returns_the_report() -> None:
    progress: list[tuple[int, int]] = []

    async def run():
        job = AnalysisJob(default_analyze, str(H200 / "item_in_loop.json.gz"), AnalysisOptions())
        return await job.run(lambda done, total: progress.append((done, total)))

    report = asyncio.run(run())
    assert len(report.lines) > 0
    assert progress and progress[-1][0] == progress[-1][1] > 0


def test_analyze_does_not_import_the_server(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = (
        "import sys\n"
        "from brrr_trace.cli import main\n"
        f"assert main(['analyze', {str(H200 / 'item_in_loop.json.gz')!r}, '--format', 'json', "
        f"'-o', {str(out)!r}]) == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol')"
        " or m.startswith('brrr_trace.server'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert out.stat().st_size > 0


def test_a_finding_over_several_lines_marks_each_and_points_at_the_others() -> None:
    index = SourceIndex("s = q @ k\np = s.softmax(-1)\no = p @ v\n")
    positions = Positions(index, PositionCodec(t.PositionEncodingKind.Utf16))
    spanning = Finding(
        "manual-attention", "warning", "a.py", "/w/a.py", 1, "m", "f", 10, lines=(1, 2, 3, 9)
    )
    found = convert.diagnostics(spanning, 100, Settings(), positions, "file:///w/a.py")
    assert [d.range.start.line for d in found] == [0, 1, 2]  # line 9 is past the end
    assert {d.code for d in found} == {"manual-attention"}
    assert [r.location.range.start.line for r in found[1].related_information or []] == [0, 2]
    single = convert.diagnostics(finding("host-sync", 2, 5), 100, Settings(), positions, "u")
    assert len(single) == 1 and single[0].related_information is None


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("/**/*", "an absolute path"),
        ("~/traces/*.json", "an absolute path"),
        ("C:/traces/*.json", "an absolute path"),
        ("../other/*.json", "climbs out"),
        ("runs/../../*.json", "climbs out"),
        ("[z-a]*", "not a valid glob"),
    ],
)
def test_trace_globs_must_stay_in_the_workspace(pattern: str, why: str) -> None:
    parsed = parse_settings({"traces": [pattern, "runs/*.json"]})
    assert parsed.settings.traces == ("runs/*.json",)
    (problem,) = parsed.problems
    assert why in problem
    assert parse_settings({"traces": [pattern]}).settings.traces == DEFAULT_TRACE_GLOBS


def test_the_trace_search_is_bounded(tmp_path: Path, monkeypatch) -> None:
    for i in range(5):
        (tmp_path / f"{i}.pt.trace.json").write_text("{}")
    monkeypatch.setattr(discovery, "_MAX_MATCHES", 3)
    found = discover([str(tmp_path)], DEFAULT_TRACE_GLOBS)
    assert len(found.traces) == 3 and "the first 3 trace files" in (found.capped or "")
    monkeypatch.setattr(discovery, "_MAX_MATCHES", 1000)
    monkeypatch.setattr(discovery, "_MAX_ENTRIES", 2)
    for i in range(5):
        (tmp_path / f"d{i}").mkdir()
        (tmp_path / f"d{i}" / "x.pt.trace.json").write_text("{}")
    found = discover([str(tmp_path)], DEFAULT_TRACE_GLOBS)
    assert "after 2 files and folders" in (found.capped or "") and len(found.traces) == 5
