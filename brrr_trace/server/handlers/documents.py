"""Notifications about documents: diagnostics when one opens or is saved; closed ones forgotten."""

from __future__ import annotations

from lsprotocol import types as t

from brrr_trace.server.language_server import BrrrServer


def did_open(ls: BrrrServer, params: t.DidOpenTextDocumentParams) -> None:
    """Publish the document's diagnostics."""
    _publish(ls, params.text_document.uri)


def did_save(ls: BrrrServer, params: t.DidSaveTextDocumentParams) -> None:
    """Publish the document's diagnostics for its saved text."""
    _publish(ls, params.text_document.uri)


def did_close(ls: BrrrServer, params: t.DidCloseTextDocumentParams) -> None:
    """Forget the document's syntax and hints."""
    ls.session.forget(params.text_document.uri)


def _publish(ls: BrrrServer, uri: str) -> None:
    if not ls.session.in_scope(uri):
        return  # outside the workspace: the server says nothing about it
    diagnostics = ls.session.diagnostics(uri)
    ls.client.publish(t.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))
