#!/usr/bin/env bash
# Runs a compose file for real on a Docker engine: docker compose up --wait,
# publish an event over HTTP and read it back through the ops replay on the
# published ports, then docker compose down -v.
#
#   scripts/compose-smoke.sh [compose file]     (default docker-compose.yml)
#
# With EVENTHUB_LOCAL_IMAGES=1 (or when the engine cannot pull the images)
# it builds every image from static binaries compiled here instead (the hub
# and nats-server from go.mod's versions, on an empty base image; the hub
# binary doubles as the NATS health probe), so it also runs on an engine
# without registry access. Prometheus, Grafana and the NATS exporters of
# the cluster file are left out then.
set -euo pipefail
cd "$(dirname "$0")/.."
file="${1:-docker-compose.yml}"
project="eventhub-smoke-$$"
token="${WS_TOKEN:-change-me-dev-token}"
compose=(docker compose -p "$project" -f "$file")

cleanup() { "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; rm -rf "${work:-}"; }
trap cleanup EXIT

if ! docker info >/dev/null 2>&1; then
	echo "compose-smoke: no Docker engine answers" >&2
	exit 2
fi

if [[ "${EVENTHUB_LOCAL_IMAGES:-}" != "1" ]] && ! "${compose[@]}" pull --quiet --ignore-buildable >/dev/null 2>&1; then
	echo "compose-smoke: the engine cannot pull the images; building them from local binaries"
	EVENTHUB_LOCAL_IMAGES=1
fi

if [[ "${EVENTHUB_LOCAL_IMAGES:-}" == "1" ]]; then
	work="$(mktemp -d)"
	CGO_ENABLED=0 go build -trimpath -o "$work/eventhub" ./cmd/eventhub
	CGO_ENABLED=0 go build -trimpath -o "$work/nats-server" github.com/nats-io/nats-server/v2
	printf 'FROM scratch\nCOPY eventhub /eventhub\nUSER 65532\nENTRYPOINT ["/eventhub"]\nCMD ["serve"]\n' > "$work/Dockerfile.hub"
	printf 'FROM scratch\nCOPY nats-server /nats-server\nCOPY eventhub /eventhub\nENTRYPOINT ["/nats-server"]\n' > "$work/Dockerfile.nats"
	docker build -q -t eventhub-local/hub -f "$work/Dockerfile.hub" "$work" >/dev/null
	docker build -q -t eventhub-local/nats -f "$work/Dockerfile.nats" "$work" >/dev/null
	# An override that swaps in the local images and probes NATS with the
	# hub binary (no wget in an empty image).
	{
		echo "services:"
		for svc in $("${compose[@]}" config --services); do
			img="$("${compose[@]}" config --format json | go run ./scripts/composeimage "$svc")"
			case "$img" in
			nats:*)
				printf '  %s:\n    image: eventhub-local/nats\n    healthcheck:\n      test: ["CMD", "/eventhub", "healthcheck", "-url", "http://localhost:8222/healthz"]\n' "$svc" ;;
			build)
				printf '  %s:\n    image: eventhub-local/hub\n    build: !reset null\n' "$svc" ;;
			*)
				printf '  %s:\n    profiles: ["needs-registry"]\n' "$svc" ;;
			esac
		done
	} > "$work/override.yml"
	compose+=(-f "$work/override.yml")
fi

"${compose[@]}" up -d --wait --wait-timeout 120
port="$("${compose[@]}" port "$("${compose[@]}" config --services | grep -m1 eventhub)" 8081 | cut -d: -f2)"
ops="$("${compose[@]}" port "$("${compose[@]}" config --services | grep -m1 eventhub)" 8082 | cut -d: -f2)"
id="smoke-$$"
curl -fsS -X POST "http://127.0.0.1:$port/publish/smoke.test" -H "Authorization: Bearer $token" \
	-H "Eventhub-Id: $id" -d '{"smoke":true}' >/dev/null
curl -fsS "http://127.0.0.1:$ops/replay?topic=smoke.test" -H "Authorization: Bearer $token" | grep -q "\"id\":\"$id\""
echo "compose-smoke: $file: healthy, and an event went through"
