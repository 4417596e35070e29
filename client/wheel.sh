#!/usr/bin/env bash
# Build the brrr-trace wheel that the .vsix carries (wheels/), from this checkout: a clean copy of
# the package (no stale build/ of the checkout in it), `pip wheel --no-deps`. The extension
# installs it when brrr_trace is missing from the chosen interpreter; its dependencies then come
# from the package index. PY: the Python that builds it (needs pip; setuptools for
# --no-build-isolation, else pip fetches the build backend).
set -euo pipefail
CLIENT=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$CLIENT/.." && pwd)
PY=${PY:-$(command -v python3 || command -v python)}
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
cp "$REPO/pyproject.toml" "$REPO/README.md" "$SRC/"
(cd "$REPO" && tar --exclude='__pycache__' --exclude='*.pyc' -cf - brrr_trace) | tar -xf - -C "$SRC"
rm -rf "$CLIENT/wheels"
mkdir -p "$CLIENT/wheels"
if ! "$PY" -m pip wheel --quiet --no-deps --no-build-isolation -w "$CLIENT/wheels" "$SRC" 2> "$SRC/pip.log"; then
  "$PY" -m pip wheel --quiet --no-deps -w "$CLIENT/wheels" "$SRC" || { cat "$SRC/pip.log" >&2; exit 1; }
fi
ls "$CLIENT"/wheels/brrr_trace-*.whl
