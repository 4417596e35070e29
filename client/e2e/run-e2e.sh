#!/usr/bin/env bash
# End-to-end: the packaged .vsix in code-server (the real VS Code 1.100.3 workbench), driven by
# headless Chromium. Opens brrr_trace/data/workloads.py beside the item_in_loop H200 trace and checks
# the inlay hints on lines 108 (compute-bound) and 109 (overhead-bound), a hover, the host-sync
# diagnostic and the status-bar item, then switches brrr-trace.interpreter to a Python without
# brrr_trace and checks the restart and the install offer; saves screenshots.
#
#   npm run e2e                    (from client/; see README.md "End-to-end test")
#
# Environment (all optional):
#   CS          code-server binary   (default: $CODE_SERVER_DIR/node_modules/.bin/code-server,
#               CODE_SERVER_DIR defaults to ~/.cache/brrr-code-server; installed if missing)
#   VSIX        the extension        (default: client/brrr-trace.vsix; built if missing)
#   PY          a Python with brrr_trace installed (default: the repository's .venv, else python3)
#   OUT         screenshots and logs (default: client/e2e-out)
#   SCREENSHOT  where the README's screenshot goes (default: docs/vscode.png; "" to skip)
#   PORT        code-server's loopback port (default 8081)
set -euo pipefail
CLIENT=$(cd "$(dirname "$0")/.." && pwd)
REPO=$(cd "$CLIENT/.." && pwd)
START=$(date +%s.%N)
elapsed() { awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

CODE_SERVER_DIR=${CODE_SERVER_DIR:-$HOME/.cache/brrr-code-server}
CS=${CS:-$CODE_SERVER_DIR/node_modules/.bin/code-server}
if [ ! -x "$CS" ]; then
  "$CLIENT/e2e/install-code-server.sh" "$CODE_SERVER_DIR"
  echo "e2e: code-server installed at $(elapsed) s"
fi
VSIX=${VSIX:-$CLIENT/brrr-trace.vsix}
if [ ! -f "$VSIX" ]; then
  (cd "$CLIENT" && npm run --silent package)
fi
if [ -z "${PY:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PY=$REPO/.venv/bin/python; else PY=$(command -v python3); fi
fi
"$PY" -c 'import brrr_trace' || { echo "e2e: $PY cannot import brrr_trace (pip install -e $REPO)" >&2; exit 2; }
[ -x /usr/bin/chromium ] || { echo "e2e: /usr/bin/chromium is missing (apt-get install -y chromium)" >&2; exit 2; }
OUT=${OUT:-$CLIENT/e2e-out}
SCREENSHOT=${SCREENSHOT-$REPO/docs/vscode.png}
PORT=${PORT:-8081}
rm -rf "$OUT"
mkdir -p "$OUT"
RUN=$(mktemp -d)

# The workspace: the workload source and its trace, named so the default globs find it. The trace
# is dated back a minute: the server waits for a file written in the last second to settle.
WS=$RUN/ws
mkdir -p "$WS/traces"
cp "$REPO/brrr_trace/data/workloads.py" "$WS/workloads.py"
cp "$REPO/tests/data/h200/item_in_loop.json.gz" "$WS/traces/item_in_loop.pt.trace.json.gz"
touch -d '-1 min' "$WS/traces/item_in_loop.pt.trace.json.gz"

# For the last check: an interpreter in which brrr_trace cannot be imported (no site-packages).
NO_BRRR=$RUN/python-without-brrr-trace
printf '#!/bin/sh\nexec %s -I -S "$@"\n' "$(command -v python3)" > "$NO_BRRR"
chmod +x "$NO_BRRR"

# A fresh profile, extensions folder and code-server config: nothing of the user's is touched.
export XDG_CONFIG_HOME=$RUN/xdg-config XDG_DATA_HOME=$RUN/xdg-data
export TMPDIR=$RUN/tmp  # code-server leaves its sockets there
mkdir -p "$RUN/user/User" "$TMPDIR"
DIRS=(--user-data-dir "$RUN/user" --extensions-dir "$RUN/ext")
cat > "$RUN/user/User/settings.json" <<JSON
{
  "brrr-trace.interpreter": "$PY",
  "editor.inlayHints.enabled": "on",
  "editor.inlayHints.maximumLength": 0,
  "editor.minimap.enabled": false,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.ignoreRecommendations": true,
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden"
}
JSON
"$CS" "${DIRS[@]}" --install-extension "$VSIX" > "$OUT/install-extension.log" 2>&1 ||
  { cat "$OUT/install-extension.log" >&2; exit 1; }
echo "e2e: extension installed at $(elapsed) s"

# setsid: code-server, its extension host, file watchers and the language server form one process
# group, killed together on exit (the extension host would otherwise outlive the browser for hours).
setsid "$CS" --bind-addr "127.0.0.1:$PORT" --auth none --disable-telemetry --disable-update-check \
  --disable-workspace-trust "${DIRS[@]}" "$WS" > "$OUT/code-server.log" 2>&1 &
PGID=$!
cleanup() {
  kill -TERM -- "-$PGID" 2> /dev/null || true
  sleep 1
  kill -KILL -- "-$PGID" 2> /dev/null || true
  cp -r "$RUN/user/logs" "$OUT/" 2> /dev/null || true
  rm -rf "$RUN"
}
trap cleanup EXIT
for _ in $(seq 150); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
  sleep 0.2
done
echo "e2e: code-server up at $(elapsed) s"

STATUS=0
CS_URL="http://127.0.0.1:$PORT/?folder=$WS" OUT="$OUT" SCREENSHOT="$SCREENSHOT" \
  NO_BRRR_PYTHON="$NO_BRRR" \
  node "$CLIENT/e2e/drive.mjs" || STATUS=$?
echo "e2e: $([ $STATUS = 0 ] && echo passed || echo FAILED) in $(elapsed) s; screenshots and logs in $OUT"
exit $STATUS
