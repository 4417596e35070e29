"""The drawn timeline as data for its script (render/assets/timeline.js), in the HTML report and
in the editor's timeline panel (the server's ``brrr-trace.timeline``): columns per device, places
and names as tables (docs/html-report.md, "The data")."""

from __future__ import annotations

from typing import Any

from brrr_trace.analyzers.timeline_view import KINDS, TimelineView
from brrr_trace.vocabulary import IdleCause

TIMELINE_PROTOCOL_VERSION = 1
_CAUSES = tuple(str(c) for c in IdleCause)


def timeline_data(view: TimelineView) -> dict[str, Any]:
    """The timeline as the script reads it: columns per device, places and names as tables."""
    kind_code = {k: i for i, k in enumerate(KINDS)}
    cause_code = {c: i for i, c in enumerate(_CAUSES)}
    return {
        "version": TIMELINE_PROTOCOL_VERSION,
        "budget": view.budget,
        "causes": list(_CAUSES),
        "places": [[p.file, p.path, p.line, p.function] for p in view.places],
        "names": list(view.names),
        "devices": [
            {
                "device": d.device,
                "span_ns": d.span_ns,
                "ops": d.ops,
                "gaps": d.gaps,
                "merged": d.merged,
                "start": list(d.seg_start_ns),
                "end": list(d.seg_end_ns),
                "kind": [kind_code[k] for k in d.seg_kind],
                "busy": list(d.seg_busy_ns),
                "ops_in": list(d.seg_ops),
                "gaps_in": list(d.seg_gaps),
                "place": list(d.seg_place),
                "name": list(d.seg_name),
                "cause": [cause_code.get(c, -1) for c in d.seg_cause],
            }
            for d in view.devices
        ],
        "steps": [
            {"start_ns": s.start_ns, "end_ns": s.end_ns, "busy_ns": s.busy_ns} for s in view.steps
        ],
    }
