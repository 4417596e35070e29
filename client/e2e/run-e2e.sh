#!/usr/bin/env bash
# End-to-end: the packaged .vsix in code-server (the real VS Code 1.100.3 workbench), driven by
# headless Chromium. Opens brrr_trace/data/workloads.py beside two runs (a training step as ranks 0
# and 1, and the item_in_loop loop) and checks, on the training step, the heat decorations, a short
# hint and its tooltip, the inclusive hint on the model call, a finding over three lines, the run
# picker and the status bar's run and rank, the timeline panel (a click on a kernel moves the
# cursor to its line); on the loop, the hints, a hover, the host-sync
# diagnostic and the summary; then points brrr-trace.interpreter at a fresh venv and installs the
# bundled wheel there from the prompt; saves screenshots (see drive.mjs).
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
#   TIMELINE_SCREENSHOT  the timeline panel's (default: docs/editor/timeline.png; "" to skip)
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

# The workspace: the workload source and two runs, named so the default globs find them: a
# training step as the traces of ranks 0 and 1 of one job (runs/step; distributedInfo added to
# the head), and the item_in_loop loop (runs/loop). Rank 0 is the newest, so it is shown first.
# The traces are dated back: the server waits for a file written in the last second to settle.
WS=$RUN/ws
mkdir -p "$WS/runs/step" "$WS/runs/loop"
cp "$REPO/brrr_trace/data/workloads.py" "$WS/workloads.py"
"$PY" - "$REPO/tests/data/h200/transformer_step.json.gz" "$WS/runs/step" << 'PYTHON'
import gzip, json, pathlib, sys
trace = json.loads(gzip.decompress(pathlib.Path(sys.argv[1]).read_bytes()))
for rank in (0, 1):
    ranked = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}, **trace}
    out = pathlib.Path(sys.argv[2]) / f"rank{rank}.pt.trace.json.gz"
    out.write_bytes(gzip.compress(json.dumps(ranked).encode()))
PYTHON
cp "$REPO/tests/data/h200/item_in_loop.json.gz" "$WS/runs/loop/item_in_loop.pt.trace.json.gz"
touch -d '-3 min' "$WS/runs/step/rank1.pt.trace.json.gz"
touch -d '-2 min' "$WS/runs/loop/item_in_loop.pt.trace.json.gz"
touch -d '-1 min' "$WS/runs/step/rank0.pt.trace.json.gz"

# For the last check: a fresh virtual environment without brrr_trace, into which the extension
# installs the wheel it carries (its dependencies from the package index; PIP_* settings apply).
FRESH=$RUN/fresh-venv
"${BASE_PYTHON:-/usr/bin/python3}" -m venv "$FRESH"

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
  FRESH_PYTHON="$FRESH/bin/python" TIMELINE_SCREENSHOT="${TIMELINE_SCREENSHOT-$REPO/docs/editor/timeline.png}" \
  node "$CLIENT/e2e/drive.mjs" || STATUS=$?
if [ $STATUS = 0 ]; then
  "$FRESH/bin/python" -c 'import brrr_trace; print("e2e: the fresh venv has brrr_trace", brrr_trace.__version__, "from", brrr_trace.__file__)' ||
    STATUS=1
fi
echo "e2e: $([ $STATUS = 0 ] && echo passed || echo FAILED) in $(elapsed) s; screenshots and logs in $OUT"
exit $STATUS
