#!/usr/bin/env bash
# Rebuilds what the gateway's compatibility test runs from the reference
# TypeScript clients in gateway/testdata/seedclients/src: installs the pinned
# packages (npm ci: needs the npm registry), compiles with tsc into dist/,
# and records the sources' hashes in dist/SOURCES.sha256, which the test
# checks so that a changed source without a rebuild fails loudly. Commit
# dist/ and node_modules/ws/ afterwards. The test itself never runs this.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/gateway/testdata/seedclients"
cd "$dir"
command -v npm >/dev/null 2>&1 || { echo "seedclients.sh: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
npm ci --no-audit --no-fund --loglevel=error
rm -rf dist
npx --no-install tsc -p .
(cd src && sha256sum -- *.ts) > dist/SOURCES.sha256
echo "seedclients.sh: rebuilt dist/ with ws $(node -p 'require("ws/package.json").version')"
