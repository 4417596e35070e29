"""The names the editor extension calls or listens for (``client/src/status.ts`` repeats them)."""

from __future__ import annotations

CMD_SHOW_FIX = "brrr-trace.showFix"
CMD_SHOW_FUNCTION = "brrr-trace.showFunction"
CMD_SELECT_TRACE = "brrr-trace.selectTrace"
CMD_LIST_TRACES = "brrr-trace.listTraces"
CMD_RELOAD = "brrr-trace.reload"
CMD_STATUS = "brrr-trace.status"
CMD_HEAT = "brrr-trace.heat"
CMD_TIMELINE = "brrr-trace.timeline"
# Sent whenever a load starts, ends or fails, with the ``brrr-trace.status`` command's answer
# (the VS Code extension's status bar); clients that do not know it ignore it.
STATUS_NOTIFICATION = "brrr-trace/status"
# What ``framing.BoundedInput`` hands pygls in place of a message too large to read.
SKIPPED_MESSAGE = "$/brrr-trace/skippedMessage"
