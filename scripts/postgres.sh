#!/usr/bin/env bash
# Installs the PostgreSQL server binaries that internal/pgtest runs (Debian /
# Ubuntu package "postgresql"). Idempotent: does nothing when initdb and
# postgres are already installed. The package's own cluster is not used: the
# tests start throwaway servers of their own.
set -euo pipefail

have_binaries() {
	local d
	if [[ -n "${PGTEST_BIN_DIR:-}" ]]; then
		[[ -x "$PGTEST_BIN_DIR/initdb" && -x "$PGTEST_BIN_DIR/postgres" ]]
		return
	fi
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" && -x "$d/postgres" ]] && return 0
	done
	return 1
}

if have_binaries; then
	echo "postgres.sh: PostgreSQL server binaries present"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "postgres.sh: apt-get not found; install the PostgreSQL server (initdb, postgres) with your package manager, or set PGTEST_BIN_DIR" >&2
	exit 1
fi

sudo=""
if [[ "$(id -u)" -ne 0 ]]; then
	sudo="sudo"
fi

echo "postgres.sh: installing postgresql"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends postgresql

if ! have_binaries; then
	echo "postgres.sh: postgresql installed but initdb/postgres not found under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
echo "postgres.sh: PostgreSQL server binaries installed"
