#!/usr/bin/env bash
# Vendors hls.js's full dist build (the light build has no content
# steering) for the content steering player test
# (internal/wiring/app/steering_test.go), so the test needs no network:
# fetches the pinned version's tarball from registry.npmjs.org, checks its
# sha512 against the integrity the registry's metadata publishes for that
# version, and writes hls.min.js, its LICENSE and VERSION under
# internal/wiring/app/testdata/hlsjs/.
#
#   scripts/fetch-hlsjs.sh            the pinned version (below)
#   scripts/fetch-hlsjs.sh 1.7.4      another one (then update VERSION in the test's notes)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-1.7.4}
dest=internal/wiring/app/testdata/hlsjs
registry=https://registry.npmjs.org
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

curl -fsS --max-time 60 -o "$work/meta.json" "$registry/hls.js/$version"
# The version document has one dist block: its integrity and tarball.
# (JSON with or without spaces after the colons)
integrity=$(grep -oE '"integrity": *"sha512-[A-Za-z0-9+/=]+"' "$work/meta.json" | head -n1 | sed -E 's/.*"(sha512-[^"]+)"$/\1/' || true)
tarball=$(grep -oE '"tarball": *"[^"]+"' "$work/meta.json" | head -n1 | sed -E 's/.*"([^"]+)"$/\1/' || true)
if [ -z "$integrity" ] || [ -z "$tarball" ]; then
  echo "fetch-hlsjs: no sha512 integrity or tarball for hls.js $version in the registry's metadata" >&2
  exit 1
fi
case "$tarball" in
  "$registry/hls.js/-/hls.js-$version.tgz") ;;
  *) echo "fetch-hlsjs: unexpected tarball URL $tarball" >&2; exit 1 ;;
esac
curl -fsS --max-time 120 -o "$work/hls.tgz" "$tarball"
got="sha512-$(openssl dgst -sha512 -binary "$work/hls.tgz" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "fetch-hlsjs: hls.js-$version.tgz is $got, the registry says $integrity" >&2
  exit 1
fi
tar -xzf "$work/hls.tgz" -C "$work" package/dist/hls.min.js package/LICENSE
mkdir -p "$dest"
cp "$work/package/dist/hls.min.js" "$dest/hls.min.js"
cp "$work/package/LICENSE" "$dest/LICENSE"
printf 'hls.js %s\n%s\n%s\n' "$version" "$tarball" "$integrity" >"$dest/VERSION"
echo "fetch-hlsjs: hls.js $version ($integrity) in $dest"
