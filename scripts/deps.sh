#!/usr/bin/env bash
# Installs what the test suite needs beyond Go, from Debian's packages, when
# it is missing. The nats-server binary for the external-server tests is built
# by the tests themselves from the module version in go.mod.
set -euo pipefail
cd "$(dirname "$0")"
./postgres.sh   # PostgreSQL server binaries: the outbox tests start their own servers
./chromium.sh   # Chromium: e2e/browser drives the dashboard in a real browser
./docker.sh   # a static busybox for the compose tests' stand-in images, where a Docker engine runs
./node.sh       # node: the gateway's test runs the reference TypeScript clients (committed, built),
                # the hub's test a nats.js program (nats.js committed under hub/testdata/natsjs);
                # npm: web's test builds the browser client's package (npm pack, offline)
