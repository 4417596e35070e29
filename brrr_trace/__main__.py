"""``python -m brrr_trace``: the command line, without importing from the current folder."""

import os
import sys


def _isolate_from_current_folder() -> None:
    """``-m`` puts the current folder first on ``sys.path`` (unless ``-P`` or PYTHONSAFEPATH);
    an editor that starts the server in the workspace would then import a workspace's
    ``msgspec.py`` or ``logging.py`` instead of the real one. Point that entry at the folder
    brrr_trace itself came from instead (kept, not removed: ``record`` sets ``sys.path[0]``
    for the program it runs, as ``python prog.py`` would)."""
    if getattr(sys.flags, "safe_path", False) or not sys.path:
        return
    if os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_isolate_from_current_folder()

from brrr_trace.cli import run  # noqa: E402

run()
