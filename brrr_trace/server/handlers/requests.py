"""The requests about one document: inlay hints, hover, code lenses, code actions.

Each takes the document's view (the loaded trace, the text, the settings, all at one moment),
says in the log why it has nothing to give when so, and returns what ``convert`` makes of it.
None waits for a load: the answer comes from whatever trace is loaded now.
"""

from __future__ import annotations

import logging

from lsprotocol import types as t

from brrr_trace.server import convert
from brrr_trace.server.language_server import BrrrServer
from brrr_trace.server.session import DocumentView

log = logging.getLogger("brrr_trace.server")

QUICK_FIXES = t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix])


def inlay_hint(ls: BrrrServer, params: t.InlayHintParams) -> list[t.InlayHint]:
    """The time, regime and evidence at the end of each hot line in the range."""
    view = _view_if_on(ls, params.text_document.uri, "inlayHint", ls.session.settings.inlay_hints)
    if view is None:
        return []
    first, last = params.range.start.line, params.range.end.line
    return convert.hints_in_range(ls.session.hints(view), first, last)


def hover(ls: BrrrServer, params: t.HoverParams) -> t.Hover | None:
    """The evidence of the line (regimes, kernels, roofline, findings), or of the function."""
    view = ls.session.view(params.text_document.uri, "hover")
    if view is None:
        return None
    line = params.position.line + 1
    found = convert.hover(view.snapshot, view.path, view.positions, line)
    if found is None:
        log.debug("hover: the trace has no time on line %d of %s", line, view.path)
    return found


def code_lens(ls: BrrrServer, params: t.CodeLensParams) -> list[t.CodeLens]:
    """A lens on each function whose lines took time: its total and its regime mix."""
    view = _view_if_on(ls, params.text_document.uri, "codeLens", ls.session.settings.code_lens)
    if view is None:
        return []
    return convert.code_lenses(view.snapshot, view.path, view.positions, view.uri)


def code_action(ls: BrrrServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    """A quick fix for each finding in the range: the edit where one is known, else how to."""
    only = params.context.only
    if only and not any(t.CodeActionKind.QuickFix.value.startswith(kind) for kind in only):
        log.debug("codeAction: the client asks only for %s; brrr-trace has quick fixes", only)
        return []
    view = ls.session.view(params.text_document.uri, "codeAction")
    if view is None:
        return []
    lines = (params.range.start.line + 1, params.range.end.line + 1)
    return convert.code_actions(
        view.snapshot,
        view.path,
        view.positions,
        view.settings,
        view.uri,
        lines,
        params.context.diagnostics,
    )


def _view_if_on(ls: BrrrServer, uri: str, request: str, turned_on: bool) -> DocumentView | None:
    """The document's view, unless the settings turn this request's feature off."""
    if not turned_on:
        log.debug("%s: turned off in the settings", request)
        return None
    return ls.session.view(uri, request)
