"""The HTML report (render/html.py): what the page holds, that trace strings stay text, and the
timeline's message protocol. The browser tests run headless Chromium (`--dump-dom` prints the
DOM after the scripts ran) and skip where there is none; client/e2e/ci.sh installs it."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from brrr_trace.cli import main
from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.render import html as render_html
from brrr_trace.report import Report
from tests.tracebuilder import frame, kernel, launch, op, runtime, write

REALCODE = Path(__file__).parent / "data" / "realcode"
GPT = REALCODE / "h200" / "gpt_small.json.gz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")

# Each would set the title or add an element #pwned if it ever ran.
TITLE = "document.title='pwned'"
ADD = "document.body.appendChild(Object.assign(document.createElement('b'),{id:'pwned'}))"
PAYLOADS = [
    f"<script>{TITLE}</script>",
    f"</style><script>{ADD}</script>",
    f"</script><script>{TITLE}</script>",
    f'<img src=x onerror="{ADD}">',
    f'" onmouseover="{TITLE}" x="',
    "javascript:alert(1)",
    "line\u2028break\u2029<!--",
]
# A real file under the source root ("<…" alone would be excluded as not user code).
EVIL_FILE = "x<img src=x onerror=alert(1)>.py"


def hostile_trace(root: Path) -> Path:
    """Kernels, files and functions named by the payloads; a source file whose text is one."""
    (root / EVIL_FILE).write_text(
        "def run():\n    x = 1\n    y = 2  # </pre><script>" + TITLE + "</script>\n    return x\n"
    )
    events = [{**op("ProfilerStep#1", 0.0, 500.0), "cat": "user_annotation"}]
    t = 0.0
    for k, payload in enumerate(PAYLOADS):
        events += [
            frame(f"src/{payload}.py({k + 1}): {payload}", t, 40.0),
            launch(t + 1.0, k + 1),
            kernel(f"{payload}_kernel", t + 5.0, 20.0, k + 1),
        ]
        t += 50.0
    events += [
        frame(f"{EVIL_FILE}(3): run", t, 60.0),
        launch(t + 1.0, 99),
        kernel(PAYLOADS[0], t + 5.0, 30.0, 99),
        runtime("cudaDeviceSynchronize", t + 2.0, 40.0),
    ]
    return write(root / "hostile.json", events)


def hostile_options(root: Path) -> AnalysisOptions:
    # The payload files are named inside no folder of the source root: --include makes them
    # user code all the same, so that each is a line of the report.
    return AnalysisOptions(source_root=str(root), included_files=("src/*",))


class Elements(HTMLParser):
    """Every element's tag and attributes, and the text of the <title>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def where(self, tag: str | None = None, **attrs: str) -> list[dict[str, str | None]]:
        return [
            a
            for t, a in self.elements
            if (tag is None or t == tag) and all(a.get(k) == v for k, v in attrs.items())
        ]


def parse(page: str) -> Elements:
    found = Elements()
    found.feed(page)
    return found


def assert_inert(found: Elements, trace_path: str) -> None:
    """No element, handler, link or title that a payload could have made."""
    assert found.title == f"brrr-trace · {trace_path}"
    assert not found.where(id="pwned")
    assert not found.where("img") and not found.where("iframe")
    handlers = [(t, k) for t, a in found.elements for k in a if k.startswith("on")]
    assert handlers == []
    hrefs = [a.get("href") or "" for _, a in found.elements if "href" in a]
    assert all(h.startswith("#") for h in hrefs), hrefs
    srcs = [a for _, a in found.elements if "src" in a]
    assert srcs == []


def sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def inline_scripts(page: str) -> list[tuple[str, str]]:
    return re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.S)


# --- without a browser ---------------------------------------------------------------------


def test_hostile_strings_stay_text_in_the_page(tmp_path: Path) -> None:
    report = analyze(hostile_trace(tmp_path), hostile_options(tmp_path))
    page = render_html.render(report)
    found = parse(page)
    assert_inert(found, report.trace.path)
    # The two scripts of the package and the timeline's data: no other <script> element.
    scripts = inline_scripts(page)
    assert [attrs for attrs, _ in scripts] == [
        ' type="application/json" class="brrr-timeline-data"',
        "",
        "",
    ]
    data = scripts[0][1]
    assert not set(data) & set("<>&\u2028\u2029")
    names = json.loads(data)["names"]
    assert set(names) >= {f"{p}_kernel" for p in PAYLOADS} | {PAYLOADS[0]}
    # Every payload is in the page as text (escaped), kernel names and file names alike.
    for payload in PAYLOADS[:4]:
        assert render_html._t(f"{payload}_kernel") in page
    # The hostile source file was read (through safe_read) and its text shown escaped.
    assert "&lt;/pre&gt;&lt;script&gt;" in page
    assert page.count("<pre") == page.count("</pre>")


def test_only_the_hashed_inline_code_is_allowed(tmp_path: Path) -> None:
    page = render_html.render(analyze(GPT, AnalysisOptions(source_root=str(REALCODE))))
    (policy,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    policy = policy.replace("&#x27;", "'")
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    code = [body for attrs, body in inline_scripts(page) if "application/json" not in attrs]
    (style,) = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    assert directives == {
        "default-src": "'none'",
        "script-src": " ".join(sha256(c) for c in code),
        "style-src": sha256(style),
        "base-uri": "'none'",
        "form-action": "'none'",
    }
    assert not re.search(r"https?://", page)  # nothing to fetch, no link out


def test_the_page_holds_the_source_around_hot_lines() -> None:
    report = analyze(GPT, AnalysisOptions(source_root=str(REALCODE)))
    page = render_html.render(report)
    hottest = report.lines[0]
    assert hottest.path is not None
    source = Path(hottest.path).read_text().splitlines()
    hot = f"{hottest.line:>{len(str(hottest.line + 3))}}  {source[hottest.line - 1]}"
    assert f'<span class="brrr-hot">{render_html._t(hot)}</span>' in page
    # Without the source root, no file is found and no source is shown.
    bare = render_html.render(analyze(GPT, AnalysisOptions(source_root=str(REALCODE / "h200"))))
    assert "brrr-source" not in bare.replace("pre.brrr-source", "")


def test_script_json_cannot_close_its_element() -> None:
    value = {"k": "</script><!--<script>&\u2028\u2029", "n": [1, 2]}
    text = render_html.script_json(value)
    assert not set(text) & set("<>&\u2028\u2029")
    assert json.loads(text) == value


def test_cli_writes_one_page_and_refuses_two_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    args = ["--source-root", str(REALCODE), "--format", "html"]
    assert main(["analyze", str(GPT), *args, "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["analyze", str(GPT), str(GPT), *args]) == 2
    err = capsys.readouterr().err
    assert err == (
        "brrr-trace: --format html writes one page for one trace, and 2 were given; run it "
        "once per trace (a folder of rank traces counts as one).\n"
    )


def test_a_report_without_a_timeline_or_steps_still_renders(tmp_path: Path) -> None:
    path = write(tmp_path / "cpu.json", [frame("train.py(1): f", 0.0, 10.0)])
    report = analyze(path)
    page = render_html.render(Report(**{**report.__dict__, "timeline": None}))
    assert "No GPU activity to draw." in page and 'id="steps"' not in page


# --- in a browser ----------------------------------------------------------------------------


def dump_dom(page: Path, tmp_path: Path) -> str:
    done = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            "--virtual-time-budget=3000",
            "--window-size=1200,900",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@browser
def test_the_dom_holds_what_the_json_report_holds(tmp_path: Path) -> None:
    page = tmp_path / "gpt.html"
    args = ["analyze", str(GPT), "--source-root", str(REALCODE)]
    assert main([*args, "--format", "html", "-o", str(page)]) == 0
    assert main([*args, "--format", "json", "-o", str(tmp_path / "gpt.json")]) == 0
    expected = json.loads((tmp_path / "gpt.json").read_text())
    found = parse(dump_dom(page, tmp_path))

    (steps,) = found.where("section", id="steps")
    assert steps["data-count"] == str(expected["steps"]["count"]) == "2"
    rows = found.where("tr", **{"class": "brrr-step"})
    assert [float(r["data-duration-us"] or 0) for r in rows] == expected["steps"]["durations_us"]
    lines = [(r["data-file"], int(r["data-line"] or 0)) for r in found.where("tr")
             if r.get("class") == "brrr-line"]  # fmt: skip
    assert lines == [(ln["file"], ln["line"]) for ln in expected["lines"]]
    findings = [
        (f["data-rule"], f["data-file"], int(f["data-line"] or 0), float(f["data-savings-us"] or 0))
        for f in found.where("div", **{"class": "brrr-finding"})
    ]
    assert findings == [
        (f["rule"], f["file"], f["line"], f["est_savings_us"]) for f in expected["findings"]
    ]
    assert len(findings) == 11
    (summary,) = found.where("section", id="summary")
    assert summary["data-kernels"] == str(expected["summary"]["kernels"])
    # The timeline's script ran (under the page's policy) and drew every segment.
    (timeline,) = found.where("div", id="timeline")
    assert timeline["data-drawn"] == "1451"


HARNESS = """
window.addEventListener("load", function () {
  var root = document.querySelector(".brrr-timeline");
  var data = JSON.parse(root.querySelector("script.brrr-timeline-data").textContent);
  root.addEventListener("brrr:reveal", function (e) {
    document.body.setAttribute("data-reveal", JSON.stringify(e.detail));
  });
  var dev = data.devices[0];
  var best = -1;
  for (var i = 0; i < dev.kind.length; i++) {
    if (dev.kind[i] === 0 && dev.place[i] >= 0 &&
        (best < 0 || dev.end[i] - dev.start[i] > dev.end[best] - dev.start[best])) best = i;
  }
  var canvas = root.querySelector("canvas");
  var r = canvas.getBoundingClientRect();
  var x = r.left + (dev.start[best] + dev.end[best]) / 2 / dev.span_ns * r.width;
  var y = r.top + 18 + 14;
  ["pointerdown", "pointerup"].forEach(function (type) {
    canvas.dispatchEvent(new PointerEvent(type, {clientX: x, clientY: y, pointerId: 1}));
  });
  var place = data.places[dev.place[best]];
  window.postMessage({type: "highlight", path: place[1] || place[0], line: place[2]}, "*");
  setTimeout(function () {
    document.body.setAttribute("data-picked", String(best));
    document.body.setAttribute("data-highlighted", root.getAttribute("data-highlighted"));
    document.body.setAttribute("data-detail",
      root.querySelector(".brrr-tl-detail").textContent);
  }, 200);
});
"""


def with_harness(page: str) -> str:
    """The page with the harness script added, and allowed by the page's own policy."""
    code = [body for attrs, body in inline_scripts(page) if "application/json" not in attrs]
    (style,) = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    old = render_html.content_security_policy(code, [style])
    new = render_html.content_security_policy([*code, HARNESS], [style])
    page = page.replace(render_html._t(old), render_html._t(new))
    return page.replace("</body>", f"<script>{HARNESS}</script></body>")


def picked(report: Report, found: Elements) -> tuple[dict[str, str | None], int]:
    """The segment the harness clicked, from the report's own view, and its place's segments."""
    assert report.timeline is not None
    (body,) = found.where("body")
    dev = report.timeline.devices[0]
    index = int(body["data-picked"] or -1)
    place = dev.seg_place[index]
    return body, sum(1 for p in dev.seg_place if p == place)


@browser
def test_hostile_page_runs_no_injected_script_even_when_clicked(tmp_path: Path) -> None:
    report = analyze(hostile_trace(tmp_path), hostile_options(tmp_path))
    page = tmp_path / "hostile.html"
    page.write_text(with_harness(render_html.render(report)))
    found = parse(dump_dom(page, tmp_path))
    assert_inert(found, report.trace.path)
    body, marked = picked(report, found)
    assert report.timeline is not None
    dev = report.timeline.devices[0]
    index = int(body["data-picked"] or -1)
    place = report.timeline.places[dev.seg_place[index]]
    name = report.timeline.names[dev.seg_name[index]]
    # The click said which line, with the hostile names as plain text.
    assert json.loads(body["data-reveal"] or "") == {
        "type": "reveal",
        "path": place.path,
        "file": place.file,
        "line": place.line,
        "function": place.function,
        "kind": "kernel",
    }
    assert name in (body["data-detail"] or "") and place.file in (body["data-detail"] or "")
    assert body["data-highlighted"] == str(marked)
    # The page's glue showed the clicked line in the lines table.
    revealed = [r for r in found.where("tr") if "brrr-revealed" in (r.get("class") or "")]
    assert [(r["data-file"], r["data-line"]) for r in revealed] == [(place.file, str(place.line))]


@browser
def test_the_timeline_fragment_talks_to_a_webview(tmp_path: Path) -> None:
    # What the editor panel (issue #16) will host: the fragment and timeline.js alone, with the
    # VS Code webview API there; the reveal goes to it, a highlight comes in as a message.
    report = analyze(GPT, AnalysisOptions(source_root=str(REALCODE)))
    assert report.timeline is not None
    stub = (
        "window.acquireVsCodeApi = function () { return { postMessage: function (m) {"
        " document.documentElement.setAttribute('data-sent', JSON.stringify(m)); } }; };"
    )
    page = tmp_path / "panel.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>panel</title></head><body>"
        f"<script>{stub}</script>{render_html.timeline_fragment(report.timeline)}"
        f"<script>{render_html.timeline_script()}</script><script>{HARNESS}</script>"
        "</body></html>"
    )
    found = parse(dump_dom(page, tmp_path))
    body, marked = picked(report, found)
    (html_element,) = found.where("html")
    sent = json.loads(html_element["data-sent"] or "")
    assert sent == json.loads(body["data-reveal"] or "")
    place = report.timeline.places[
        report.timeline.devices[0].seg_place[int(body["data-picked"] or 0)]
    ]
    assert (sent["type"], sent["path"], sent["line"]) == ("reveal", place.path, place.line)
    assert place.path is not None and place.path.endswith("gpt.py")
    assert body["data-highlighted"] == str(marked) and marked > 1


def test_ranks_and_fields_added_later_are_shown(tmp_path: Path) -> None:
    events = [frame("train.py(1): f", 0.0, 30.0), launch(1.0, 1), kernel("k", 5.0, 20.0, 1)]
    for rank in (0, 1):
        write(tmp_path / f"r{rank}.pt.trace.json", events, distributedInfo={"rank": rank})
    report = analyze(tmp_path)
    page = render_html.render(report)
    assert "<p>Ranks of the traces: 0, 1. This page covers one" in page
    assert "this report covers rank 0 (choose another with --rank)" in page
    # A report with a field this page does not know (cross-rank results, say) shows it whole,
    # escaped, rather than failing or dropping it.

    @dataclasses.dataclass(frozen=True)
    class Skew:
        rank: int
        wait_ns: int
        note: str

    @dataclasses.dataclass(frozen=True, repr=False)
    class Newer(Report):
        rank_skew: tuple[Skew, ...] = ()

    newer = Newer(**report.__dict__, rank_skew=(Skew(1, 2_500_000, "<b>late</b>"),))
    page = render_html.render(newer)
    assert (
        "<h3>rank_skew</h3><ol><li><table><tbody><tr><th>rank</th><td>1</td></tr>"
        "<tr><th>wait_ns</th><td>2.5 ms</td></tr>"
        "<tr><th>note</th><td>&lt;b&gt;late&lt;/b&gt;</td></tr></tbody></table></li></ol>"
    ) in page


@browser
def test_the_timeline_framed_reports_to_its_parent(tmp_path: Path) -> None:
    # Framed without the webview API (a plain iframe, as a webview is underneath): the reveal
    # goes to the parent window.
    report = analyze(GPT, AnalysisOptions(source_root=str(REALCODE)))
    assert report.timeline is not None
    (tmp_path / "panel.html").write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>panel</title></head><body>"
        f"{render_html.timeline_fragment(report.timeline)}"
        f"<script>{render_html.timeline_script()}</script><script>{HARNESS}</script>"
        "</body></html>"
    )
    parent = tmp_path / "parent.html"
    parent.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>parent</title></head><body>"
        "<script>window.addEventListener('message', function (e) {"
        " document.body.setAttribute('data-got', JSON.stringify(e.data)); });</script>"
        "<iframe src='panel.html' width='1000' height='300'></iframe></body></html>"
    )
    (body,) = parse(dump_dom(parent, tmp_path)).where("body")
    got = json.loads(body["data-got"] or "")
    assert got["type"] == "reveal" and got["kind"] == "kernel"
    place = next(
        p for p in report.timeline.places if (p.file, p.line) == (got["file"], got["line"])
    )
    assert got["path"] == place.path and got["function"] == place.function


def test_the_timeline_data_the_script_and_the_editor_read(tmp_path: Path) -> None:
    # The data of docs/html-report.md, version 1, for test_timeline_view's sync step: what an
    # editor panel will read, so any change to it shows here.
    from tests.test_timeline_view import ADD, GEMM, sync_step

    report = analyze(sync_step(tmp_path), AnalysisOptions(source_root=str(tmp_path)))
    assert report.timeline is not None
    assert render_html.timeline_data(report.timeline) == {
        "version": 1,
        "budget": 20_000,
        "causes": ["sync", "dataloader", "host", "launch", "other", "collective"],
        "places": [
            ["train.py", None, 10, "forward"],
            ["train.py", None, 20, "update"],
            ["train.py", None, 30, "log"],
        ],
        "names": [GEMM, ADD],
        "devices": [
            {
                "device": 0,
                "span_ns": 405_000,
                "ops": 3,
                "gaps": 1,
                "merged": False,
                "start": [0, 200_000, 250_000, 385_000],
                "end": [200_000, 250_000, 385_000, 405_000],
                "kind": [0, 0, 1, 0],
                "busy": [200_000, 50_000, 0, 20_000],
                "ops_in": [1, 1, 0, 1],
                "gaps_in": [0, 0, 1, 0],
                "place": [0, 1, 1, 2],
                "name": [0, 1, -1, 1],
                "cause": [-1, -1, 0, -1],
            }
        ],
        "steps": [],
    }
