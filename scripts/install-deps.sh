#!/usr/bin/env bash
# Installs the Debian packages anysched's build, tests and demo use, when they
# are missing. Needs root (or sudo) for apt-get; without it, it says what is
# missing and the tests that need those tools skip.
#
# A package counts as present only when dpkg has it installed AND every
# command or file the project uses from it is there: a package that some other
# package merely Recommends (apt-get --no-install-recommends leaves those out)
# is listed here by itself, with the file the project needs from it, so that
# its absence is noticed even when no command is missing.
#
#   scripts/install-deps.sh          install what is missing (root or sudo)
#   scripts/install-deps.sh --check  install nothing; list what is missing, exit 1 if anything is
#
# scripts/ci-cleanroot.sh (run by .ci/run) proves this list on a fresh minimal
# Debian root: a tool that a test needs and this list forgets fails CI there.
set -euo pipefail

# package -> what the project uses from it: command names (looked up in PATH
# plus the sbin directories) or absolute paths of files
declare -A need=(
  [protobuf-compiler]="protoc"          # make proto, and the staleness test of generated code (proto/)
  [libprotobuf-dev]="/usr/include/google/protobuf/timestamp.proto"  # the well-known types proto/ imports; only Recommended by protobuf-compiler
  [dnsutils]="dig"                      # DNS front-end tests
  [curl]="curl"                         # HTTP front-end tests, the lab (curl inside namespaces), the demo and scripts/package-check.sh
  [nginx]="nginx"                       # a real edge in the health and lab end-to-end tests, and the hls.js content steering test's edges
  [ffmpeg]="ffmpeg"                     # real players: the edges' HLS tests and the lab's players (TestPrivilegedPlayers)
  [wrk]="wrk"                           # make bench: HTTP front end vs a bare handler
  [nghttp2-client]="h2load"             # make bench: HTTP keep-alive latency at a fixed offered rate, against nginx
  [dnsperf]="dnsperf"                   # make bench: DNS front end vs a bare server
  [gdnsd]="gdnsd"                       # make bench: the DNS front end's per-core peer
  [bird2]="bird birdc"                  # the lab's routers; BIRD config templates are parsed by bird -p
  [frr]="vtysh /usr/lib/frr/zebra /usr/lib/frr/ospfd"  # FRR templates checked with vtysh --dryrun; zebra+ospfd in the FRR host lab
  [coinor-cbc]="cbc"                    # the QoE solver's LP export is cross-checked with CBC (and bench/qoe --cbc)
  [glpk-utils]="glpsol"                 # ... and read by GLPK
  [prometheus]="promtool"               # the Prometheus config and alert rules in deploy/ are checked with promtool
  [iproute2]="ip tc"                    # network namespaces and netem for the privileged tests and the lab
  [procps]="sysctl kill"                # the lab: ip_forward in each namespace, kill -9 of leftover processes
  [systemd]="systemd-analyze systemd-sysusers systemd-tmpfiles"  # the units in deploy/ are verified (and the packaged ones); sysusers/tmpfiles applied to a scratch root
  [make]="make"                         # make test, make demo
  [git]="git"                           # make build stamps git describe into the binaries; make package derives the package version from it
  [gcc]="gcc"                           # cgo, which go test -race needs
  [libc6-dev]="/usr/include/stdio.h"    # ... and its C headers; only Recommended by gcc
  [ca-certificates]="/etc/ssl/certs/ca-certificates.crt"  # go fetches modules (e.g. genproto's pinned plugins) over HTTPS
  [chromium]="/usr/bin/chromium"        # the operator console's browser tests (chromedp, headless), make screenshots, and the hls.js players of the content steering test
  [fonts-dejavu-core]="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # ... text in headless Chromium's screenshots; only Recommended by chromium
)

check=false
case "${1-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
have_dpkg=false
command -v dpkg-query >/dev/null 2>&1 && have_dpkg=true

# present PKG: dpkg has it installed (where there is dpkg) and every probe is there.
present() {
  local pkg=$1 probe
  if $have_dpkg; then
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" = "ii " ] || return 1
  fi
  for probe in ${need[$pkg]}; do
    case "$probe" in
      /*) [ -e "$probe" ] || return 1 ;;
      *) type -P "$probe" >/dev/null 2>&1 || return 1 ;;
    esac
  done
}

missing_pkgs() {
  local pkg
  for pkg in $(printf '%s\n' "${!need[@]}" | sort); do
    present "$pkg" || echo "$pkg"
  done
}

# what_is_missing PKG: the probes of PKG that are absent (for messages).
what_is_missing() {
  local pkg=$1 probe out=()
  if $have_dpkg && [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" != "ii " ]; then
    out+=("package not installed")
  fi
  for probe in ${need[$pkg]}; do
    case "$probe" in
      /*) [ -e "$probe" ] || out+=("$probe") ;;
      *) type -P "$probe" >/dev/null 2>&1 || out+=("$probe") ;;
    esac
  done
  echo "${out[*]}"
}

mapfile -t missing < <(missing_pkgs)
if [ ${#missing[@]} -eq 0 ]; then
  $check && echo "install-deps: all ${#need[@]} packages present"
  exit 0
fi
if $check; then
  for pkg in "${missing[@]}"; do echo "install-deps: missing $pkg ($(what_is_missing "$pkg"))" >&2; done
  exit 1
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: missing ${missing[*]}; no apt-get here, install them by hand (the tests that need them skip)" >&2
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || echo "install-deps: apt-get update failed (see above); installing from the lists there are" >&2
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# nginx and gdnsd are run by the tests and benchmarks themselves, on
# loopback with their own configuration; the system services their packages
# start (ports 80 and 53) would only be in the way.
if [ -d /run/systemd/system ]; then
  for svc in nginx gdnsd; do
    case " ${missing[*]} " in *" $svc "*) $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || true ;; esac
  done
fi

# The packages are installed: every probe must now be there, or this list
# names the wrong package for a command or file.
mapfile -t still < <(missing_pkgs)
if [ ${#still[@]} -ne 0 ]; then
  for pkg in "${still[@]}"; do
    echo "install-deps: $pkg is installed but still missing: $(what_is_missing "$pkg")" >&2
  done
  exit 1
fi
