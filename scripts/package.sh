#!/usr/bin/env bash
# Builds the Debian packages (make package): anysched-common,
# anysched-central-scheduler, anysched-regional-scheduler,
# anysched-healthcheck and anysched-schedctl, into bin/deb/, from the
# binaries make build stamped and the files of deploy/systemd and
# deploy/examples/production, with nfpm and the configurations in
# deploy/debian/. nfpm is pinned here and installed with go install into
# GOPATH/bin on first use, so that go.mod does not carry a packager.
#
#   VERSION=... scripts/package.sh     (make package passes make build's VERSION)
#
# The package version is derived from VERSION (git describe): a tag v1.2.3
# gives 1.2.3, 4 commits after it 1.2.3+git<commit time>.4.<sha>, no tag at
# all 0.0.0~git<commit time>.<sha>; a dirty tree appends .dirty. The commit
# time (UTC) makes later commits sort later, as apt needs for an upgrade.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
nfpm_version=2.48.0
out=bin/deb

die() { printf 'package: %s\n' "$*" >&2; exit 1; }

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || true)}
[ -n "$version" ] || die "no version: not a git checkout and VERSION is not set (VERSION=1.2.3 make package)"

# deb_version DESCRIBE: the Debian version of a git describe string.
deb_version() {
  local v=${1#v} dirty="" when
  case "$v" in *-dirty) dirty=.dirty v=${v%-dirty} ;; esac
  when=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || date -u +%Y%m%d%H%M%S)
  if [[ "$v" =~ ^[0-9a-f]{7,40}$ ]] && [ "$(git rev-parse --short=${#v} HEAD 2>/dev/null)" = "$v" ]; then
    v=0.0.0~git$when.$v                                 # no tag: the abbreviated commit
  elif [[ "$v" =~ ^(.+)-([0-9]+)-g([0-9a-f]+)$ ]]; then
    v=${BASH_REMATCH[1]}+git$when.${BASH_REMATCH[2]}.${BASH_REMATCH[3]}  # commits after a tag
  fi
  v=$v$dirty
  [[ "$v" =~ ^[0-9][A-Za-z0-9.+~]*$ ]] ||
    die "version \"$1\" gives \"$v\", not a Debian upstream version (a digit, then letters, digits and . + ~)"
  echo "$v"
}
ANYSCHED_DEB_VERSION=$(deb_version "$version")

goarch=$("$GO" env GOARCH)
case "$goarch" in
  amd64 | arm64 | riscv64 | ppc64le | s390x) ANYSCHED_DEB_ARCH=$goarch ;;
  386) ANYSCHED_DEB_ARCH=i386 ;;
  arm) ANYSCHED_DEB_ARCH=armhf ;;
  *) die "GOARCH $goarch: no Debian architecture known for it" ;;
esac
export ANYSCHED_DEB_VERSION ANYSCHED_DEB_ARCH

# The binaries must be make build's, stamped with this version.
for b in central-scheduler regional-scheduler healthcheck schedctl; do
  [ -x "bin/$b" ] || die "bin/$b is missing: run make package (it runs make build first)"
done
[ "$(cat bin/.version 2>/dev/null)" = "$version" ] ||
  die "bin/ was stamped \"$(cat bin/.version 2>/dev/null)\", not \"$version\": run make package (it runs make build first)"

# The packaged units: deploy/systemd's, with the binaries where the packages
# put them (/usr/bin, not the by-hand /usr/local/bin). Only Exec lines are
# rewritten; any other /usr/local path left is a unit this script does not
# understand.
rm -rf "$out"
mkdir -p "$out/units"
for u in deploy/systemd/*.service; do
  sed -E '/^Exec/ s#/usr/local/bin/#/usr/bin/#g' "$u" >"$out/units/${u##*/}"
  if grep -n '^[^#]*/usr/local/' "$out/units/${u##*/}" >&2; then
    die "$u: /usr/local paths outside Exec lines (above); the packaged unit would name them"
  fi
done

# nfpm at the pinned version ("go version -m" names the module version it
# was built from; nfpm --version says "dev" when built by go install).
nfpm=$("$GO" env GOPATH)/bin/nfpm
if ! "$GO" version -m "$nfpm" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/goreleaser/nfpm/v2[[:space:]]+v$nfpm_version[[:space:]]"; then
  echo "package: installing nfpm v$nfpm_version"
  GOFLAGS= "$GO" install -trimpath -ldflags="-s -w" "github.com/goreleaser/nfpm/v2/cmd/nfpm@v$nfpm_version"
fi

for cfg in common central-scheduler regional-scheduler healthcheck schedctl; do
  "$nfpm" package --config "deploy/debian/$cfg.yaml" --packager deb --target "$out/" >/dev/null ||
    die "nfpm failed on deploy/debian/$cfg.yaml"
done
echo "package: version $ANYSCHED_DEB_VERSION-1 ($ANYSCHED_DEB_ARCH), binaries stamped $version:"
ls -s --block-size=K "$out"/*.deb | sed 's/^/  /'
