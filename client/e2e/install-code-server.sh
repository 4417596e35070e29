#!/usr/bin/env bash
# Install code-server 4.100.3 (the VS Code 1.100.3 workbench; the last release that runs on Node 20)
# into DEST, from npm only: nothing is fetched from GitHub, nodejs.org or a marketplace.
# Needs (Debian): build-essential python3 libkrb5-dev ripgrep. Takes about 1-2 minutes, ~300 MB.
# client/README.md ("End-to-end test") says what each workaround below is for.
set -euo pipefail
DEST=${1:?usage: install-code-server.sh DEST}
VERSION=4.100.3
RIPGREP_PKG=1.15.11            # @vscode/ripgrep, as pinned by code-server's npm-shrinkwrap.json
RIPGREP_TAG=v13.0.0-10         # the rg release that package's postinstall asks GitHub for

if [ -x "$DEST/node_modules/.bin/code-server" ] &&
  [ "$(node -p "require('$DEST/node_modules/code-server/package.json').version")" = "$VERSION" ]; then
  echo "code-server $VERSION already in $DEST"
  exit 0
fi
for tool in rg node npm make g++ krb5-config; do
  command -v "$tool" > /dev/null || { echo "install-code-server: '$tool' is missing (apt-get install -y build-essential libkrb5-dev ripgrep)" >&2; exit 2; }
done

# (1) @vscode/ripgrep's postinstall looks for the release tarball in this cache before asking
#     api.github.com; put Debian's rg there under the expected name. os.tmpdir() follows $TMPDIR.
RG_CACHE="${TMPDIR:-/tmp}/vscode-ripgrep-cache-$RIPGREP_PKG"
STAGE=$(mktemp -d)
mkdir -p "$RG_CACHE" "$DEST"
cp "$(command -v rg)" "$STAGE/rg"
tar czf "$RG_CACHE/ripgrep-$RIPGREP_TAG-x86_64-unknown-linux-musl.tar.gz" -C "$STAGE" rg
rm -rf "$STAGE"

cd "$DEST"
[ -f package.json ] || echo '{"name":"code-server-pin","version":"1.0.0","private":true}' > package.json
export npm_config_yes=true       # (2) node-pty's postinstall runs `npx node-gyp`
export npm_config_nodedir=/usr   # (3) build native modules against /usr/include/node, no download
# (4) code-server's postinstall refuses to run as root without --unsafe-perm (after the name).
npm install "code-server@$VERSION" --unsafe-perm --no-audit --no-fund
# Every code-server run writes config.yaml under $XDG_CONFIG_HOME: keep that out of the user's.
CHECK=$(mktemp -d)
XDG_CONFIG_HOME=$CHECK XDG_DATA_HOME=$CHECK "$DEST/node_modules/.bin/code-server" --version
rm -rf "$CHECK"
echo "code-server $VERSION installed in $DEST"
