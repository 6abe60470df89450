#!/usr/bin/env bash
# Fetches again the packages the hub's nats.js test runs on (nats and its
# dependencies nkeys.js and tweetnacl, at the versions
# hub/testdata/natsjs/package.json pins) and unpacks them, as `npm pack`
# gives them, into hub/testdata/natsjs/node_modules. Needs npm and the npm
# registry; commit node_modules/ afterwards. The test itself never runs
# this: it needs only node (scripts/node.sh) and the committed packages,
# and fails when a committed package is not the pinned version.
set -euo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/hub/testdata/natsjs"
command -v npm >/dev/null 2>&1 || { echo "natsjs.sh: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# name@version for every pinned package.
mapfile -t pins < <(node -e '
	const deps = require(process.argv[1]).dependencies;
	for (const [name, version] of Object.entries(deps)) console.log(`${name}@${version}`);
' "$dir/package.json")
(cd "$tmp" && npm pack --silent "${pins[@]}" >/dev/null)
rm -rf "$dir/node_modules"
for pin in "${pins[@]}"; do
	name="${pin%@*}" version="${pin##*@}"
	mkdir -p "$dir/node_modules/$name"
	tar -xzf "$tmp/$name-$version.tgz" -C "$dir/node_modules/$name" --strip-components=1
done
echo "natsjs.sh: unpacked ${pins[*]} into $dir/node_modules"
