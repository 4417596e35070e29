#!/usr/bin/env bash
# CI stage for the VS Code extension, from a bare checkout: unit tests, the .vsix, and the
# end-to-end test in code-server + headless Chromium. About 3 minutes on 2 cores from nothing
# (apt ~1 min, code-server ~1 min, npm ci ~15 s, e2e ~1-3 min: it pip-installs the bundled wheel
# and its dependencies from the package index into a fresh venv).
#
#   client/e2e/ci.sh            (with a Python that has brrr_trace installed first on PATH,
#                                or PY=/path/to/python)
# BRRR_CI_APT=0 skips installing the Debian packages; CODE_SERVER_DIR caches code-server.
set -euo pipefail
cd "$(dirname "$0")/.."
T0=$SECONDS
lap() { echo "ci: $1 ($((SECONDS - T0)) s)"; }

PACKAGES=(chromium fonts-noto-color-emoji ripgrep libkrb5-dev build-essential)
missing=()
for package in "${PACKAGES[@]}"; do
  dpkg -s "$package" > /dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${BRRR_CI_APT:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    lap "apt: ${missing[*]}"
  else
    echo "ci: missing Debian packages: ${missing[*]}" >&2
    exit 2
  fi
fi

npm ci --no-audit --no-fund
lap 'npm ci'
npm test
lap 'npm test'
PY=${PY:-$(command -v python || command -v python3)}
export PY
# The HTML report's browser tests skip in the Python stage when it has no Chromium; here it has.
(cd .. && "$PY" -m pytest -q -p no:cacheprovider tests/test_html.py)
lap 'HTML report in Chromium'
npm run package  # wheel.sh builds the bundled brrr-trace wheel with $PY
lap "npm run package: $(du -k brrr-trace.vsix | cut -f1) KB"
export CODE_SERVER_DIR=${CODE_SERVER_DIR:-$HOME/.cache/brrr-code-server}
# The screenshot stays in e2e-out/: CI does not rewrite docs/vscode.png.
SCREENSHOT='' npm run e2e
lap 'e2e passed'
