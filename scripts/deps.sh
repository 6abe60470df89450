#!/usr/bin/env bash
# Installs what the test suite needs beyond Go, from Debian's packages, when
# it is missing: PostgreSQL (outbox tests start their own server from its
# binaries). The nats-server binary for the external-server tests is built by
# the tests themselves from the module version in go.mod.
set -euo pipefail

need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "== installing ${need[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${need[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
