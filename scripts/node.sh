#!/usr/bin/env bash
# Installs node (Debian's nodejs) when missing: the gateway's compatibility
# test runs the reference TypeScript clients under it, and the hub's test a
# nats.js program. The clients' compiled JavaScript and their one runtime
# package (ws) are committed in gateway/testdata/seedclients, nats.js and its
# dependencies in hub/testdata/natsjs/node_modules, so nothing comes from the
# npm registry here; scripts/seedclients.sh and scripts/natsjs.sh fetch them
# again. npm (Debian's npm package, when node comes without it) builds the
# browser client's package with npm pack in web's test, offline. Idempotent.
set -euo pipefail
if ! command -v node >/dev/null 2>&1; then
	sudo=""
	[[ "$(id -u)" -ne 0 ]] && sudo="sudo"
	echo "node.sh: installing nodejs"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs >/dev/null
fi
if ! command -v npm >/dev/null 2>&1; then
	sudo=""
	[[ "$(id -u)" -ne 0 ]] && sudo="sudo"
	echo "node.sh: installing npm"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
fi
echo "node.sh: node $(node --version), npm $(npm --version)"
