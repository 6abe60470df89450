#!/usr/bin/env bash
# Installs node (Debian) when missing, then the seeds' TypeScript clients'
# pinned packages (npm ci) and builds them (tsc), for the gateway's
# compatibility test. Idempotent.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/gateway/testdata/seedclients"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	sudo=""
	[[ "$(id -u)" -ne 0 ]] && sudo="sudo"
	echo "node.sh: installing nodejs and npm"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
cd "$dir"
if [[ ! -d node_modules ]] || [[ package-lock.json -nt node_modules ]]; then
	npm ci --no-audit --no-fund --loglevel=error
fi
if [[ ! -f dist/smoke.js ]] || [[ -n "$(find src -newer dist/smoke.js)" ]]; then
	npx --no-install tsc -p .
fi
echo "node.sh: seed clients built"
