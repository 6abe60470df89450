#!/usr/bin/env bash
# Installs the Chromium browser that the browser tests (e2e/browser, in the
# e2e module) drive with chromedp (Debian package "chromium", with
# fonts-dejavu-core so that pages and the dashboard screenshot have a font
# without the recommended packages).
# Idempotent: does nothing when a Chromium binary is already installed. Set
# CHROMIUM_BIN to use another binary; the tests read the same variable.
set -euo pipefail

find_chromium() {
	local c
	if [[ -n "${CHROMIUM_BIN:-}" ]]; then
		[[ -x "$CHROMIUM_BIN" ]] && { echo "$CHROMIUM_BIN"; return 0; }
		return 1
	fi
	for c in /usr/bin/chromium chromium chromium-browser; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if bin=$(find_chromium); then
	echo "chromium.sh: Chromium present at $bin"
	exit 0
fi

if [[ -n "${CHROMIUM_BIN:-}" ]]; then
	echo "chromium.sh: CHROMIUM_BIN=$CHROMIUM_BIN is not an executable" >&2
	exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium.sh: apt-get not found; install Chromium with your package manager, or set CHROMIUM_BIN" >&2
	exit 1
fi

sudo=""
if [[ "$(id -u)" -ne 0 ]]; then
	sudo="sudo"
fi

echo "chromium.sh: installing chromium"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core

if ! bin=$(find_chromium); then
	echo "chromium.sh: chromium installed but no chromium binary found on PATH" >&2
	exit 1
fi
echo "chromium.sh: Chromium installed at $bin ($("$bin" --version 2>/dev/null || echo "version unknown"))"
