"""Traces at URLs (docs/architecture.md §13): the two-rank DDP run of tests/data/ddp served by a
local http.server thread, as .json.gz and as plain .json, analyzed by URL in worker processes
and on a local Ray cluster, with the same cross-rank result as the folder on disk; an fsspec
prefix listed like a folder; what is refused (redirects off http, a URL as the source root)."""

from __future__ import annotations

import dataclasses
import gzip
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brrr_trace.cli import main
from brrr_trace.errors import NotATraceError
from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.report import Report

RUN = Path(__file__).resolve().parent / "data" / "ddp" / "h200-gloo" / "rank1-late-15ms"
DDP = RUN.parent.parent


class _Files(http.server.SimpleHTTPRequestHandler):
    """Files of the served folder; /redirect/... answers 302 to the URL after it."""

    def do_GET(self) -> None:
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", self.path[len("/redirect/") :])
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, folder): the run's two ranks as .json.gz and, decompressed, as .json."""
    folder = tmp_path_factory.mktemp("served")
    for path in sorted(RUN.glob("rank*.pt.trace.json.gz")):
        shutil.copy(path, folder / path.name)
        (folder / path.name.removesuffix(".gz")).write_bytes(gzip.decompress(path.read_bytes()))
    # The gzip bytes under a plain name: gzip is told by content.
    first = sorted(RUN.glob("rank0.*.pt.trace.json.gz"))[0]
    shutil.copy(first, folder / "renamed.json")

    def handler(*args: Any) -> _Files:
        return _Files(*args, directory=str(folder))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()


def _urls(served: tuple[str, Path], suffix: str) -> list[str]:
    base, folder = served
    names = sorted(p.name for p in folder.glob(f"rank*.pt.trace{suffix}"))
    assert len(names) == 2
    return [f"{base}/{name}" for name in names]


def _without_paths(report: Report) -> Any:
    cross = report.cross_rank
    assert cross is not None
    return dataclasses.replace(
        cross, ranks=tuple(dataclasses.replace(r, path="") for r in cross.ranks)
    )


@pytest.fixture(scope="module")
def on_disk() -> Report:
    return analyze(RUN, AnalysisOptions(jobs=1, source_root=str(DDP)))


@pytest.mark.parametrize("suffix", [".json.gz", ".json"])
def test_ranks_by_url_merge_as_the_folder_does(
    served: tuple[str, Path], suffix: str, on_disk: Report
) -> None:
    urls = _urls(served, suffix)
    report = analyze(urls, AnalysisOptions(jobs=1, source_root=str(DDP)))
    assert report.trace.ranks == (0, 1)
    assert report.trace.path == urls[0]
    assert report.runs[0].paths == tuple(urls)
    assert _without_paths(report) == _without_paths(on_disk)
    assert report.cross_rank is not None and report.cross_rank.stragglers[0].rank == 1
    assert report.summary == on_disk.summary
    assert report.findings == on_disk.findings


def test_on_a_local_ray_cluster_each_task_opens_its_url(
    served: tuple[str, Path], on_disk: Report
) -> None:
    pytest.importorskip("ray")
    report = analyze(_urls(served, ".json.gz"), AnalysisOptions(ray="local", source_root=str(DDP)))
    assert _without_paths(report) == _without_paths(on_disk)


def test_the_cli_reads_urls_as_one_run(
    served: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    urls = _urls(served, ".json.gz")
    code = main(["analyze", *urls, "--jobs", "1", "--format", "json", "--source-root", str(DDP)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"]["path"] == urls[0]
    assert out["trace"]["ranks"] == [0, 1]
    assert out["cross_rank"]["stragglers"][0]["rank"] == 1


def test_one_url_is_one_trace_and_gzip_is_told_by_content(served: tuple[str, Path]) -> None:
    base, _ = served
    by_name = analyze(f"{base}/renamed.json", AnalysisOptions(source_root=str(DDP)))
    local = analyze(sorted(RUN.glob("rank0.*.json.gz"))[0], AnalysisOptions(source_root=str(DDP)))
    assert by_name.summary == local.summary
    assert by_name.cross_rank is None


def test_a_missing_url_is_one_sentence(served: tuple[str, Path]) -> None:
    base, _ = served
    with pytest.raises(NotATraceError) as raised:
        analyze(f"{base}/nothing.json")
    assert str(raised.value) == (
        f"{base}/nothing.json: the server answered 404 File not found; check the URL (and that "
        "it needs no sign-in)."
    )


def test_a_redirect_off_http_is_refused(served: tuple[str, Path]) -> None:
    base, _ = served
    with pytest.raises(NotATraceError) as raised:
        analyze(f"{base}/redirect/file:///etc/passwd")
    assert str(raised.value) == (
        f"{base}/redirect/file:///etc/passwd: redirects to 'file:///etc/passwd', which is not an "
        "http(s) URL; brrr-trace follows redirects only to http(s), so pass the trace's own URL."
    )


def test_a_redirect_to_http_is_followed(served: tuple[str, Path]) -> None:
    base, folder = served
    name = sorted(p.name for p in folder.glob("rank1.*.json.gz"))[0]
    report = analyze(f"{base}/redirect/{base}/{name}")
    assert report.trace.ranks == (1,)


def test_an_http_folder_is_one_sentence(served: tuple[str, Path]) -> None:
    base, _ = served
    with pytest.raises(NotATraceError) as raised:
        analyze(f"{base}/")
    assert str(raised.value) == (
        f"{base}/: an http(s) URL ending in / is a folder, which a web server cannot list; pass "
        "the URL of each rank's trace file."
    )


def test_a_url_is_never_the_source_root(
    served: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    urls = _urls(served, ".json.gz")
    code = main(["analyze", urls[0], "--source-root", "https://example.com/src"])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "brrr-trace: https://example.com/src: a URL cannot be the source root; source files are "
        "read only from a local folder (--source-root DIR), while a trace may be at a URL."
    )


def test_an_fsspec_prefix_is_listed_like_a_folder(tmp_path: Path, on_disk: Report) -> None:
    pytest.importorskip("fsspec")
    for path in RUN.glob("rank*.pt.trace.json.gz"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "facts.json").write_text("{}")  # not a trace: left out
    prefix = f"file://{tmp_path}"
    report = analyze(prefix, AnalysisOptions(jobs=1, source_root=str(DDP)))
    assert [Path(p).name for p in report.runs[0].paths] == sorted(
        p.name for p in RUN.glob("rank*.pt.trace.json.gz")
    )
    assert all(p.startswith("file://") for p in report.runs[0].paths)
    assert _without_paths(report) == _without_paths(on_disk)


def test_an_fsspec_memory_file_is_read_in_this_process() -> None:
    fsspec = pytest.importorskip("fsspec")
    path = sorted(RUN.glob("rank0.*.json.gz"))[0]
    fsspec.filesystem("memory").pipe("/brrr-test/rank0.json.gz", path.read_bytes())
    by_url = analyze("memory://brrr-test/rank0.json.gz")
    assert by_url.summary == analyze(path).summary


def test_a_gzip_bomb_at_a_url_is_cut_as_a_file_is(
    served: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As tests/test_hostile_values.py's bomb on disk: 20,000 identical kernels in about 11 KB of
    # gzip; a quarter of an event per compressed byte (the size the server says) is read.
    import brrr_trace.traces.loader as traces
    from brrr_trace.traces import load
    from tests.tracebuilder import kernel

    monkeypatch.setattr(traces, "_GZIP_CAP_FLOOR", 1_000)
    base, folder = served
    events = [kernel("k", 0.0, 0.5, corr=1)] * 20_000
    bomb = folder / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    loaded = load(f"{base}/bomb.json.gz")
    assert len(loaded.trace.gpu) == bomb.stat().st_size // 4 < 20_000
    assert "gzip-ratio" in [p.kind for p in loaded.problems]
