"""The real server, except that each report's findings are the ones in ``$BRRR_TEST_FINDINGS``.

The rules engine decides which findings a trace has, and its thresholds are still moving; the
server's diagnostics and code actions are tested against findings chosen here instead, laid on a
real report of a real trace. Run as a script: ``python tests/server/findings_server.py``.
``BRRR_TEST_FINDINGS`` is a JSON list of ``{"rule", "line", "message", "fix", "est_savings_ns"}``
(optionally ``"severity"``, ``"file"``, and ``"path"``: the local file, as a report that mapped
the trace's file there would name it; relative to the source root) for lines of ``workloads.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable

from brrr_trace.options import AnalysisOptions
from brrr_trace.report import Finding, Report
from brrr_trace.server.analysis import default_analyze


def analyze_with_findings(
    path: str, options: AnalysisOptions, progress: Callable[[int, int], None]
) -> Report:
    report = default_analyze(path, options, progress)
    local = {line.file: line.path for line in report.lines}
    findings = tuple(
        Finding(
            rule=spec["rule"],
            severity=spec.get("severity", "warning"),
            file=spec.get("file", "workloads.py"),
            path=_local(spec, options) or local.get(spec.get("file", "workloads.py")),
            line=spec["line"],
            message=spec["message"],
            fix=spec["fix"],
            est_savings_ns=spec["est_savings_ns"],
        )
        for spec in json.loads(os.environ.get("BRRR_TEST_FINDINGS", "[]"))
    )
    return dataclasses.replace(report, findings=findings)


def _local(spec: dict[str, str], options: AnalysisOptions) -> str | None:
    if "path" not in spec:
        return None
    return os.path.normpath(os.path.join(options.source_root or os.getcwd(), spec["path"]))


if __name__ == "__main__":
    from brrr_trace.server import serve

    sys.exit(serve(analyze=analyze_with_findings))
