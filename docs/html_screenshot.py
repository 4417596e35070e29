"""Make docs/html-report.png: the HTML report of a real-code trace in headless Chromium, zoomed
onto the second step with its longest kernel clicked.

    PYTHONPATH=. python docs/html_screenshot.py [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from brrr_trace.options import AnalysisOptions
from brrr_trace.pipeline import analyze
from brrr_trace.render import html

ROOT = Path(__file__).resolve().parent.parent
REALCODE = ROOT / "tests" / "data" / "realcode"

# Zoom onto step 2, click its longest kernel, then come back to the top of the page (the click
# scrolls the lines table to the kernel's line).
SCENE = """
window.addEventListener("load", function () {
  var root = document.querySelector(".brrr-timeline");
  var data = JSON.parse(root.querySelector("script.brrr-timeline-data").textContent);
  var step = data.steps[1];
  root.dispatchEvent(new CustomEvent("brrr:zoom", {detail: step}));
  var dev = data.devices[0], best = -1;
  for (var i = 0; i < dev.kind.length; i++) {
    if (dev.kind[i] === 0 && dev.start[i] >= step.start_ns && dev.end[i] <= step.end_ns &&
        (best < 0 || dev.end[i] - dev.start[i] > dev.end[best] - dev.start[best])) best = i;
  }
  var canvas = root.querySelector("canvas"), r = canvas.getBoundingClientRect();
  var w = step.end_ns - step.start_ns;
  var x = r.left + ((dev.start[best] + dev.end[best]) / 2 - step.start_ns) / w * r.width;
  ["pointerdown", "pointerup"].forEach(function (type) {
    canvas.dispatchEvent(new PointerEvent(type, {clientX: x, clientY: r.top + 30, pointerId: 1}));
  });
  setTimeout(function () { window.scrollTo(0, 0); }, 50);
});
"""


def page_with_scene(page: str) -> str:
    code = [b for a, b in re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S) if not a]
    (style,) = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    old = html.content_security_policy(code, [style])
    new = html.content_security_policy([*code, SCENE], [style])
    page = page.replace(html._t(old), html._t(new))
    return page.replace("</body>", f"<script>{SCENE}</script></body>")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "html-report.png")
    args = parser.parse_args()
    # Paths as a reader would type them from the repository root.
    report = analyze(
        Path("tests/data/realcode/h200/gpt_small.json.gz"),
        AnalysisOptions(source_root=str(REALCODE.relative_to(ROOT))),
    )
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(page_with_scene(html.render(report)), encoding="utf-8")
        subprocess.run(
            [
                args.chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={tmp}/profile",
                "--window-size=1280,1180",
                "--virtual-time-budget=3000",
                f"--screenshot={args.out}",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
