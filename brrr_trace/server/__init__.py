"""The brrr-trace language server (pygls): ``brrr-trace serve`` / ``python -m brrr_trace serve``.

Modules by role, the way requests flow:

- ``app``: ``create_server``, which registers every handler of ``handlers/`` on a
  ``language_server.BrrrServer`` (the pygls server holding the three parts below);
- ``handlers/``: one function per notification, request and command (``lifecycle``,
  ``workspace``, ``documents``, ``requests``, ``commands``); ``names``: the names clients call;
- ``session``: the state in one place (settings, documents, the loaded trace, the load);
- ``scheduling``: loading and reloading off the event loop, polling, progress and status;
- ``client``: what goes to the editor, and what the server asks it;
- ``convert`` (document features) and ``messages`` (everything else): the wording, pure;
- ``discovery`` (the trace files) and ``globs`` (the ``traces`` patterns), ``analysis`` (the
  analysis process), ``snapshot`` (the immutable result), ``source`` (the syntax of a
  document), ``actions`` (mechanical fixes), ``settings`` (what clients may set), ``logging``
  (window/logMessage) and ``stderr_log`` (stderr);
- ``handshake``: ``initialize`` answered before pygls is imported (the standard library only),
  the connection then handed to pygls;
- ``framing`` (stdin with bounded reads) and ``protocol`` (pygls' protocol, answering requests
  after ``shutdown``): the protocol faults pygls does not handle (README, Security notes).

Nothing else in the package imports this one.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from brrr_trace.server.analysis import AnalyzeFn
    from brrr_trace.server.language_server import BrrrServer


def serve(
    tcp_port: int | None = None,
    host: str = "127.0.0.1",
    verbose: int = 0,
    analyze: AnalyzeFn | None = None,
) -> int:
    """Run the server on stdio (or on a TCP port, for debugging) until the client leaves.

    ``analyze`` replaces ``pipeline.analyze`` (tests use it); it runs in a spawned process, so
    it must be a module-level function.
    """
    # The analysis process is ``python -c ...`` in this folder, which ``-c`` puts first on its
    # ``sys.path`` before multiprocessing hands it ours: PYTHONSAFEPATH (3.11+) leaves it out.
    os.environ["PYTHONSAFEPATH"] = "1"
    from brrr_trace.server.stderr_log import configure_stderr

    if tcp_port is not None:
        configure_stderr(verbose)
        server = _create(analyze)
        server.start_tcp(host, tcp_port)
        return server.exit_code

    lsp_out = _private_stdout()
    configure_stderr(verbose)
    from brrr_trace.server.framing import BoundedInput
    from brrr_trace.server.handshake import BackgroundImports, answer_initialize

    # pygls takes about a second to import: ``initialize`` is answered meanwhile.
    try:
        imports = BackgroundImports(["brrr_trace.server.app"])
        stdin, stdout = answer_initialize(sys.stdin.buffer, lsp_out)
        imports.wait()
    except KeyboardInterrupt:  # quietly, as pygls ends on one
        return 0
    server = _create(analyze)
    server.start_io(BoundedInput(stdin), stdout)  # type: ignore[arg-type]
    return server.exit_code


def _private_stdout() -> BinaryIO:
    """stdout carries LSP frames only: a private copy of it for the protocol, and file
    descriptor 1 pointed at stderr, so that a stray print, a C library or a child process that
    writes to "stdout" lands in the log instead of corrupting the protocol."""
    lsp_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return lsp_out


def _create(analyze: AnalyzeFn | None) -> BrrrServer:
    from brrr_trace.server.analysis import default_analyze
    from brrr_trace.server.app import create_server

    return create_server(analyze or default_analyze)
