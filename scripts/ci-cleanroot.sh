#!/usr/bin/env bash
# Proves scripts/install-deps.sh on a clean system: builds a fresh minimal
# Debian root (debootstrap --variant=minbase, from the Debian mirror this host
# uses), puts into it the Go toolchain and a fresh clone of the repository (the
# committed HEAD, not the work tree), and inside it runs
#
#   scripts/install-deps.sh            the only thing that may install packages
#   scripts/install-deps.sh --check    everything it lists is now there
#   make test                          the command README.md gives, as root
#   go run ./bench/qoe --periods 1     the QoE experiment on the EUA data, briefly
#   scripts/package-check.sh          make package, then the packages installed,
#                                      checked, a daemon started from them, purged
#
# then fails if any test skipped for a reason that is not on the list of
# reasons unrelated to Debian packages (ALLOWED_SKIPS below): in a clean root a
# test that skips because a tool is missing means install-deps forgot it.
#
# Nothing installed by hand on this host is visible in the root: it sees only
# the minbase packages, what install-deps installs, Go (/usr/local/go,
# read-only, as "a fresh machine with Go" has it), Go's own settings file, and
# the host's Go module cache read-only as a module proxy (modules are not
# Debian packages; anything not in it comes from the real proxy), and the
# build caches CI keeps between its runs (CLEANROOT_CACHE, below). Nothing
# else is kept across runs. Everything runs in its own mount and PID namespace:
# when it ends, however it ends, every process in the root is killed and
# every mount is gone; the root is deleted on exit.
#
# usage: scripts/ci-cleanroot.sh [REPO]      (root; REPO defaults to this checkout)
# env:   CLEANROOT_MIRROR    Debian mirror (default: the host's, else deb.debian.org)
#        CLEANROOT_SUITE     Debian suite (default: the host's codename, else bookworm)
#        CLEANROOT_TIMEOUT   limit for the whole run inside the root (default 60m:
#                            a cold run on a busy machine took over 40m)
#        CLEANROOT_RUN       what runs in the root after install-deps, instead of make test and bench/qoe
#        CLEANROOT_KEEP=1    keep the root (unmounted) for a look afterwards
#        CLEANROOT_CACHE     a host directory for the build caches kept between
#                            runs (default /var/cache/anysched-ci; "none": a
#                            cold run, everything compiled from nothing)
#
# The build caches: Go's (compiled packages, plain, -race and fuzz-
# instrumented, and the fuzzing corpus it grows) and golangci-lint's
# (analysis results per package), mounted read-write at the root user's
# ~/.cache, as hosted CI keeps them between runs (setup-go caches
# GOCACHE). Both are content-addressed, keyed by every input (source,
# flags, toolchain), so a cached entry is what the build would produce;
# test results are not cached (make test runs go test -count=1). They
# save the four cold builds of make test (about 1,000 CPU-seconds on two
# cores, a third of the run) but not a test. Go trims entries unused for
# five days; past CACHE_LIMIT_GB the whole directory is emptied first.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "${1:-$here}" && git rev-parse --show-toplevel)
commit=$(git -C "$repo" rev-parse HEAD)
timeout_=${CLEANROOT_TIMEOUT:-60m}
run=${CLEANROOT_RUN:-}
cache=${CLEANROOT_CACHE-/var/cache/anysched-ci}
[ "$cache" != none ] || cache=
CACHE_LIMIT_GB=30

# Skips that are not about a missing Debian package (extended regular
# expressions, matched against "package test: reason").
ALLOWED_SKIPS=(
  'set [A-Z_]+=(1|N|DIR)'                 # opt-in probes (QOE_SCALE=1, ALLOC_SCALE=N, QOE_CBC=DIR: CBC's LP runs)
  ': short$' 'province-scale topology'    # -short only
  'kernel has no' 'no /dev/net/tun'       # a kernel without a feature (TCP-MD5, TUN)
  'binds non-local addresses anyway'      # a host with ip_nonlocal_bind set
)

log() { printf 'cleanroot: %s\n' "$*"; }
die() { printf 'cleanroot: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }
declare -a timings=()
stage_start=0
begin() { stage_start=$(now); log "--- $*"; }
end() { timings+=("$(printf '%-34s %4ds' "$1" $(( $(now) - stage_start )))"); }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, namespaces)"
for c in unshare chroot mount timeout git; do
  command -v "$c" >/dev/null 2>&1 || die "needs $c"
done
GO=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$GO" ] || die "needs Go (/usr/local/go)"
goroot=$("$GO" env GOROOT)

# --- the Debian mirror and suite this host uses -----------------------------

# "URI SUITE" for every deb source of this host, one-line and deb822 formats.
apt_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                       if (i + 1 <= NF) print $i, $(i + 1) }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         { types = ""; uris = ""; suites = ""; enabled = "yes"
           for (k = 1; k <= NF; k++) {
             l = $k; if (l ~ /^[ \t]*#/) continue
             if (l ~ /^Types:/)   { sub(/^Types:[ \t]*/, "", l); types = l }
             if (l ~ /^URIs:/)    { sub(/^URIs:[ \t]*/, "", l); uris = l }
             if (l ~ /^Suites:/)  { sub(/^Suites:[ \t]*/, "", l); suites = l }
             if (l ~ /^Enabled:/) { sub(/^Enabled:[ \t]*/, "", l); enabled = l }
           }
           if (enabled == "no" || (" " types " ") !~ / deb /) next
           nu = split(uris, u, /[ \t]+/); ns = split(suites, s, /[ \t]+/)
           for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) if (u[i] != "" && s[j] != "") print u[i], s[j] }' "$f"
  done
}

suite=${CLEANROOT_SUITE:-$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-}")}
suite=${suite:-bookworm}
mirror=${CLEANROOT_MIRROR:-$(apt_sources | awk -v s="$suite" '$2 == s { print $1; exit }')}
mirror=${mirror:-http://deb.debian.org/debian}
security=$(apt_sources | awk -v s="$suite-security" '$2 == s { print $1; exit }')
security=${security:-http://deb.debian.org/debian-security}
mirror=${mirror%/} security=${security%/}
log "Debian $suite from $mirror (security: $security); repository $repo at $commit"

# --- debootstrap on the host (a CI tool, not a project dependency) ----------
if ! command -v debootstrap >/dev/null 2>&1; then
  begin "installing debootstrap on the host"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  end "host: install debootstrap"
fi

work=$(mktemp -d /var/tmp/anysched-cleanroot.XXXXXX)
root=$work/root
cleanup() {
  local rc=$? pid
  # Processes still in the root (the namespaces end with their first process,
  # so this only finds something if that went wrong): kill them.
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] && kill -9 "$pid" 2>/dev/null || true
  done
  # Mounts are in the private namespace only; this is a second guard.
  if grep -q " $root/" /proc/self/mounts 2>/dev/null; then
    grep " $root/" /proc/self/mounts | awk '{ print $2 }' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  fi
  if [ "${CLEANROOT_KEEP:-}" = 1 ]; then
    log "kept $root"
  else
    rm -rf --one-file-system "$work" 2>/dev/null || true
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the root ---------------------------------------------------------------
begin "debootstrap --variant=minbase $suite"
include=()
case "$mirror" in https://*) include=(--include=ca-certificates) ;; esac # apt needs it for an https mirror, as the host does
if ! debootstrap --variant=minbase "${include[@]}" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -n 30 "$work/debootstrap.log" >&2
  die "debootstrap failed"
fi
end "debootstrap (minbase)"

begin "preparing the root"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security $suite-security main
EOF
# As in any chroot or container image: package scripts do not start daemons
# (nginx, bird, frr, prometheus would otherwise start and outlive the root).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
cat -- /etc/resolv.conf >"$root/etc/resolv.conf"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
echo cleanroot >"$root/etc/hostname"
# Go: the toolchain (bind-mounted read-only below) and its settings file, as
# this kind of machine has them (e.g. GOTOOLCHAIN=local, GOFLAGS).
mkdir -p "$root/usr/local/go" "$root/root/.config/go" "$root/var/cache/host-gomod"
goenv=$("$GO" env GOENV)
[ -f "$goenv" ] && cp "$goenv" "$root/root/.config/go/env"
modcache=$("$GO" env GOMODCACHE)/cache/download
hostproxy=$("$GO" env GOPROXY)
goproxy=$hostproxy
# The network's trust: certificate authorities this host trusts beyond
# Debian's own set (e.g. an egress proxy's) go where a machine's local CAs go;
# ca-certificates, once install-deps installs it, adds them to its bundle (and
# without it, nothing in the root trusts anything).
mkdir -p "$root/usr/local/share/ca-certificates"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cat >"$work/extra-cas.awk" <<'AWK'
{ sub(/\r$/, "") }
/-----BEGIN CERTIFICATE-----/ { body = ""; pem = $0 "\n"; inside = 1; next }
inside { pem = pem $0 "\n" }
/-----END CERTIFICATE-----/ { inside = 0
  if (FILENAME != bundle) known[body] = 1
  else if (!(body in known)) printf "%s", pem
  next }
inside { body = body $0 }
AWK
  mapfile -t debian_cas < <(find /usr/share/ca-certificates -name '*.crt' 2>/dev/null | sort)
  awk -v bundle=/etc/ssl/certs/ca-certificates.crt -f "$work/extra-cas.awk" \
    "${debian_cas[@]}" /etc/ssl/certs/ca-certificates.crt >"$root/usr/local/share/ca-certificates/host-local.crt"
  if [ -s "$root/usr/local/share/ca-certificates/host-local.crt" ]; then
    log "$(grep -c 'BEGIN CERT' "$root/usr/local/share/ca-certificates/host-local.crt") local CA(s) of this host go to the root's /usr/local/share/ca-certificates"
  else
    rm -f "$root/usr/local/share/ca-certificates/host-local.crt"
  fi
fi
# The repository: a fresh clone of the committed HEAD, alone in its directory.
git clone -q --no-hardlinks "$repo" "$root/root/anysched"
git -C "$root/root/anysched" checkout -q --detach "$commit"
# The modules the clone needs, into the host's cache (from the cache or the
# proxy), so that the root rarely needs the network for Go.
(cd "$root/root/anysched" && "$GO" mod download) || log "warning: go mod download failed on the host"
if [ -d "$modcache" ]; then goproxy="file:///var/cache/host-gomod,$hostproxy"; else modcache=""; fi
# The kept build caches (see the top).
mkdir -p "$root/root/.cache/go-build" "$root/root/.cache/golangci-lint"
cache_size() { [ -n "$cache" ] && du -sm "$cache" 2>/dev/null | awk '{ print $1 }' || echo 0; }
if [ -n "$cache" ]; then
  mkdir -p "$cache/go-build" "$cache/golangci-lint"
  if [ "$(cache_size)" -gt $((CACHE_LIMIT_GB * 1024)) ]; then
    log "the kept build caches are over ${CACHE_LIMIT_GB} GB: emptied, this run builds cold"
    rm -rf "${cache:?}/go-build" "${cache:?}/golangci-lint"
    mkdir -p "$cache/go-build" "$cache/golangci-lint"
  fi
  cache_before=$(cache_size)
  # An empty cache is a few kilobytes of directories and Go's README.
  cache_state=warm; [ "$cache_before" -ge 64 ] || cache_state="cold: nothing kept yet"
  log "build caches kept in $cache: ${cache_before} MB at the start ($cache_state)"
else
  log "no kept build caches (CLEANROOT_CACHE=none): a cold run"
fi
end "prepare (Go, clone, resolv.conf)"

# --- inside: mounts, then the chroot -----------------------------------------
# Runs as PID 1 of a new PID namespace, in a private mount namespace: the
# kernel kills every process left in the root when it exits, and its mounts
# never reach the host.
cat >"$work/inside.sh" <<'EOF'
#!/bin/bash
set -euo pipefail
root=$1 goroot=$2 modcache=$3 cache=$4; shift 4
# The root is a mount point, as / is on a machine (ip netns exec remounts it).
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mkdir -p "$root/run/lock" "$root/run/netns"
mount --bind "$goroot" "$root/usr/local/go"
mount -o remount,bind,ro "$root/usr/local/go"
if [ -n "$modcache" ]; then
  mount --bind "$modcache" "$root/var/cache/host-gomod"
  mount -o remount,bind,ro "$root/var/cache/host-gomod"
fi
if [ -n "$cache" ]; then
  mount --bind "$cache/go-build" "$root/root/.cache/go-build"
  mount --bind "$cache/golangci-lint" "$root/root/.cache/golangci-lint"
fi
# bash as PID 1 reaps orphans; the chroot's processes are its children.
chroot "$root" "$@" &
wait $!
EOF
chmod +x "$work/inside.sh"

# The steps inside the root; their timings go to /root/timings.
cat >"$root/root/steps.sh" <<EOF
#!/bin/bash
set -euo pipefail
cd /root/anysched
step() { local name=\$1 t=\$(date +%s) rc=0; shift; echo "cleanroot: --- \$name: \$*"; "\$@" || rc=\$?
  printf '%-34s %4ds%s\n' "root: \$name" \$(( \$(date +%s) - t )) "\$([ \$rc = 0 ] || echo "  FAILED (\$rc)")" >>/root/timings; return \$rc; }
echo "cleanroot: inside: \$(. /etc/os-release; echo "\$PRETTY_NAME"), \$(dpkg-query -f '.\n' -W | wc -l) packages, \$(go version)"
step "install-deps" scripts/install-deps.sh
step "install-deps --check" scripts/install-deps.sh --check
echo "cleanroot: \$(dpkg-query -f '.\n' -W | wc -l) packages after install-deps"
if [ -n "${run}" ]; then
  step "${run}" ${run}
else
  # make test's skipped tests go to /root/skips for the audit below.
  step "make test" env ANYSCHED_TEST_SKIPS=/root/skips make test
  step "go run ./bench/qoe --periods 1" go run ./bench/qoe --periods 1
  # Last: it installs and purges packages in the root. Most of its time is
  # the first build of nfpm; the limit is for a hang.
  step "package check" timeout --kill-after=10s 8m scripts/package-check.sh
fi
EOF
chmod +x "$root/root/steps.sh"
: >"$root/root/timings"
: >"$root/root/skips"

begin "in the root: install-deps, ${run:-make test, bench/qoe} (limit $timeout_)"
env_in=(HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 CI=true
  PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  GOPROXY="$goproxy")
for v in GOSUMDB GONOSUMDB GONOPROXY GOPRIVATE GOINSECURE http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && env_in+=("$v=${!v}")
done
rc=0
timeout --kill-after=30s "$timeout_" \
  unshare --mount --pid --fork --kill-child --propagation private \
  "$work/inside.sh" "$root" "$goroot" "$modcache" "$cache" \
  /usr/bin/env -i "${env_in[@]}" /bin/bash /root/steps.sh </dev/null || rc=$?
end "in the root (total)"
[ $rc -ne 124 ] || log "TIMED OUT after $timeout_"

# --- the skip audit -----------------------------------------------------------
bad=()
allowed=()
while IFS= read -r line; do
  [ -n "$line" ] || continue
  ok=false
  for re in "${ALLOWED_SKIPS[@]}"; do
    if [[ "$line" =~ $re ]]; then ok=true; break; fi
  done
  if $ok; then allowed+=("$line"); else bad+=("$line"); fi
done <"$root/root/skips"

echo
log "timings:"
printf '  %s\n' "${timings[@]}"
sed 's/^/  /' "$root/root/timings"
if [ -n "$cache" ]; then
  log "build caches kept in $cache: ${cache_before} MB at the start ($cache_state), $(cache_size) MB at the end"
else
  log "build caches: none kept (a cold run)"
fi
log "skipped tests in the root: ${#allowed[@]} for reasons unrelated to packages, ${#bad[@]} otherwise"
[ ${#allowed[@]} -eq 0 ] || printf '  allowed: %s\n' "${allowed[@]}"
if [ ${#bad[@]} -gt 0 ]; then
  printf '  NOT allowed: %s\n' "${bad[@]}" >&2
  log "a test skipped in a clean root: if it needs a Debian package, add the package to scripts/install-deps.sh;" >&2
  log "if its reason has nothing to do with packages, add the reason to ALLOWED_SKIPS in scripts/ci-cleanroot.sh" >&2
  [ $rc -ne 0 ] || rc=1
fi
if [ $rc -ne 0 ]; then log "FAILED ($rc)"; else log "passed"; fi
exit $rc
