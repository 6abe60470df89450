#!/usr/bin/env bash
# Where a Docker engine answers, installs what the compose tests
# (deploy/compose_test.go) need beside it: a static busybox (Debian's
# busybox-static), which goes into the stand-in base images they build when
# the engine cannot pull the images the Dockerfile and the compose files
# name. Does nothing without an engine, or when busybox is there.
set -euo pipefail

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
	echo "docker.sh: no Docker engine answers; the compose tests will skip"
	exit 0
fi
if [[ -x /bin/busybox ]] && file -L /bin/busybox 2>/dev/null | grep -q 'statically linked'; then
	echo "docker.sh: Docker engine and a static busybox present"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "docker.sh: apt-get not found; install a static busybox at /bin/busybox" >&2
	exit 1
fi
sudo=""
if [[ "$(id -u)" -ne 0 ]]; then
	sudo="sudo"
fi
echo "docker.sh: installing busybox-static"
$sudo apt-get update
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends busybox-static file
