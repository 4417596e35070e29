"""The Python API for notebooks and scripts: ``brrr_trace.analyze(path, ...)``.

``import brrr_trace`` stays light (no numpy, no analysis, no torch): the package resolves
``analyze`` here on first use, and this module imports the pipeline only when it is called.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from brrr_trace.report import Report

if TYPE_CHECKING:
    from brrr_trace.traces.reader import ProgressFn


@dataclasses.dataclass(frozen=True, repr=False)
class AnalyzedReport(Report):
    """A ``Report`` with its outputs at hand: ``to_dict()`` (the JSON contract as Python
    values), ``to_json()``, ``to_html()`` (the shareable page) and, in Jupyter, the summary
    shown as HTML."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as Python values: what ``json.loads(report.to_json())`` gives."""
        import msgspec

        from brrr_trace.render.json import to_dict

        doc: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(to_dict(self)))
        return doc

    def to_json(self) -> str:
        from brrr_trace.render.json import render

        return render(self)

    def to_html(self) -> str:
        from brrr_trace.render.html import render

        return render(self)

    def _repr_html_(self) -> str:
        from brrr_trace.render.html import summary_html

        return summary_html(self)


def analyze(
    path: str | os.PathLike[str],
    source_root: str | os.PathLike[str] | None = None,
    *,
    device: int | None = None,
    rank: int | None = None,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    path_mappings: Sequence[tuple[str, str]] = (),
    progress: ProgressFn | None = None,
    **options: Any,
) -> AnalyzedReport:
    """Analyze a torch.profiler trace (a .json or .json.gz file, or a folder of rank traces).

    ``source_root`` is the folder the trace's source paths map onto (default: the current
    folder); ``include`` / ``exclude`` are the globs of ``brrr-trace analyze --include /
    --exclude``; any other keyword is a field of ``AnalysisOptions`` (``launch_gap_ns=...``).
    Raises ``brrr_trace.errors.BrrrError`` (one sentence) for input that is not a trace.
    """
    from brrr_trace.options import DEFAULT_EXCLUDED_FILES, AnalysisOptions
    from brrr_trace.pipeline import analyze as run

    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(AnalysisOptions)})
    if unknown:
        raise TypeError(f"analyze() got unknown option(s) {', '.join(unknown)}")
    settings = AnalysisOptions(
        source_root=os.path.expanduser(os.fspath(source_root)) if source_root is not None else None,
        device=device,
        rank=rank,
        excluded_files=DEFAULT_EXCLUDED_FILES + tuple(exclude),
        included_files=tuple(include),
        path_mappings=tuple((str(a), str(b)) for a, b in path_mappings),
        **options,
    )
    report = run(path, settings, progress)
    return AnalyzedReport(**{f.name: getattr(report, f.name) for f in dataclasses.fields(report)})
