#!/usr/bin/env bash
# Installs the Debian packages anysched's build, tests and demo use, when they
# are missing. Needs root (or sudo) for apt-get; without it, it says what is
# missing and the tests that need those tools skip.
set -euo pipefail

# command -> package
declare -A need=(
  [protoc]=protobuf-compiler   # make proto, and the staleness test of generated code
  [dig]=dnsutils               # DNS front-end tests
  [curl]=curl                  # HTTP front-end tests and the demo
  [nginx]=nginx                # a real edge in the health end-to-end test
  [wrk]=wrk                    # make bench: HTTP front end vs a bare handler
  [dnsperf]=dnsperf            # make bench: DNS front end vs a bare server
  [bird]=bird2                 # the lab's routers; BIRD config templates are parsed by bird -p
  [vtysh]=frr                  # FRR config templates are checked with vtysh --dryrun
  [cbc]=coinor-cbc             # the QoE solver's LP export is cross-checked with CBC
  [glpsol]=glpk-utils          # ... and read by GLPK
  [promtool]=prometheus        # the Prometheus config and alert rules in deploy/ are checked with promtool
  [ip]=iproute2                # network namespaces for the privileged tests and the lab
  [tc]=iproute2
  [systemd-analyze]=systemd    # the systemd units in deploy/ are checked with systemd-analyze verify
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${need[$cmd]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
    exit 0
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
