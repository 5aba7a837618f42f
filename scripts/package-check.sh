#!/usr/bin/env bash
# Proves the Debian packages of make package on this machine, end to end:
# builds them, installs them with dpkg, checks what they installed (files,
# modes, owners, the user anysched, conffiles, the units with
# systemd-analyze verify, the version stamp), starts the installed central
# scheduler as anysched on loopback until its /readyz answers and stops it
# with SIGTERM (exit 0 wanted), runs --check-config on the installed example
# configurations, then removes and purges the packages and checks that
# nothing is left but what Debian keeps (the user and group).
#
#   scripts/package-check.sh       (root, on Debian; CI runs it in its clean root)
#
# It refuses to run where an anysched package is already installed (it would
# replace and then purge it). Needs curl and systemd-analyze (install-deps).
# Everything it installed is purged on exit, however it ends, and the user
# anysched is deleted again if it did not exist before.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
packages=(anysched-common anysched-central-scheduler anysched-regional-scheduler anysched-healthcheck anysched-schedctl)
daemons=(central-scheduler regional-scheduler healthcheck)
units=(anysched-central.service anysched-regional.service anysched-healthcheck.service)

log() { printf 'package-check: %s\n' "$*"; }
die() { printf 'package-check: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (dpkg -i, a daemon run as the user anysched)"
for c in dpkg dpkg-query setpriv curl systemd-analyze make; do
  command -v "$c" >/dev/null 2>&1 || die "needs $c (scripts/install-deps.sh installs curl and systemd)"
done
installed=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 'anysched-*' 2>/dev/null | awk '$1 != "un" { print $NF }' || true)
[ -z "$installed" ] || die "anysched packages are already installed here ($(echo $installed)): this check would replace and purge them"
user_existed=false
getent passwd anysched >/dev/null && user_existed=true

scratch=$(mktemp -d /tmp/anysched-package-check.XXXXXX)
chmod 0711 "$scratch"   # anysched reaches its run directory inside
daemon_pid=""
cleanup() {
  local rc=$?
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -9 "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  if dpkg-query -W -f='${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null | grep -qv '^un'; then
    dpkg --purge "${packages[@]}" >/dev/null 2>&1 || log "warning: dpkg --purge ${packages[*]} failed in the cleanup"
  fi
  if ! $user_existed && getent passwd anysched >/dev/null; then
    userdel anysched 2>/dev/null || log "warning: userdel anysched failed"
    ! getent group anysched >/dev/null || groupdel anysched 2>/dev/null || true
  fi
  rm -rf "$scratch"
  if [ $rc -eq 0 ]; then log "passed in $(( $(date +%s) - started ))s"; else log "failed after $(( $(date +%s) - started ))s"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build and install --------------------------------------------------------
log "--- make package"
make --no-print-directory package
stamp=$(cat bin/.version)
debs=()
for p in "${packages[@]}"; do
  f=$(ls bin/deb/"${p}"_*.deb 2>/dev/null) || die "bin/deb has no $p package"
  debs+=("$f")
done
log "--- dpkg -i"
if ! dpkg -i "${debs[@]}"; then
  log "dpkg -i failed; apt-get install -f for missing dependencies"
  DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq --no-install-recommends || die "the packages do not install (dpkg -i, then apt-get install -f)"
fi
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p")" = "ii " ] || die "$p is not installed after dpkg -i"
  dpkg-query -L "$p" >"$scratch/$p.list"
done

# --- what was installed ---------------------------------------------------------
log "--- files, modes, owners, user, conffiles"
# want_stat PATH "MODE USER:GROUP"
want_stat() {
  local got
  got=$(stat -c '%a %U:%G' "$1" 2>/dev/null) || die "$1 is missing"
  [ "$got" = "$2" ] || die "$1 is $got, want $2"
}
for b in "${daemons[@]}" schedctl; do want_stat "/usr/bin/$b" "755 root:root"; done
for u in "${units[@]}"; do want_stat "/usr/lib/systemd/system/$u" "644 root:root"; done
for f in sysusers.d/anysched.conf tmpfiles.d/anysched.conf sysctl.d/90-anysched.conf modules-load.d/anysched.conf; do
  want_stat "/usr/lib/$f" "644 root:root"
done
check_dirs() {
  want_stat /etc/anysched "750 root:anysched"
  want_stat /etc/anysched/tls "750 root:anysched"
  for d in /var/lib/anysched /var/lib/anysched/center /var/lib/anysched/regional /var/lib/anysched/healthcheck; do
    want_stat "$d" "750 anysched:anysched"
  done
}
check_dirs
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd anysched) || die "no user anysched"
[ "$uid" -lt 1000 ] && [ "$home" = /var/lib/anysched ] && [ "$shell" = /usr/sbin/nologin ] ||
  die "user anysched: uid $uid, home $home, shell $shell; want a system user, /var/lib/anysched, /usr/sbin/nologin"
declare -A examples=(
  [anysched-central-scheduler]="center.yaml.example"
  [anysched-regional-scheduler]="regional-primary.yaml.example regional-standby.yaml.example"
  [anysched-healthcheck]="healthcheck.yaml.example"
)
for p in "${!examples[@]}"; do
  conffiles=$(dpkg-query -W -f='${Conffiles}' "$p")
  for e in ${examples[$p]}; do
    want_stat "/etc/anysched/$e" "644 root:root"
    grep -q "^ /etc/anysched/$e [0-9a-f]\{32\}" <<<"$conffiles" || die "$p: /etc/anysched/$e is not a conffile: $conffiles"
  done
done
for f in /etc/anysched/center.yaml /etc/anysched/regional.yaml /etc/anysched/healthcheck.yaml; do
  [ ! -e "$f" ] || die "$f exists: the packages must not ship a configuration a daemon would start with"
done

# Installed again, as an upgrade is (dpkg unpacks the directories anew, and
# postinst runs with the old version): the modes and owners hold.
log "--- dpkg -i again (an upgrade in place)"
dpkg -i "${debs[@]}" >/dev/null || die "installing the packages over themselves failed"
check_dirs

log "--- the units"
for u in "${units[@]}"; do
  f=/usr/lib/systemd/system/$u
  ! grep -n /usr/local/ "$f" || die "$f names /usr/local (above): the packaged units run /usr/bin"
  grep -q '^ExecStart=/usr/bin/' "$f" || die "$f: ExecStart does not run a binary in /usr/bin"
  [ ! -e "/etc/systemd/system/multi-user.target.wants/$u" ] || die "$u is enabled: the packages install units disabled"
done
# Offline: no systemd needs to run here; every warning counts.
out=$(systemd-analyze verify --man=no "${units[@]/#//usr/lib/systemd/system/}" 2>&1) || die "systemd-analyze verify: $out"
[ -z "$out" ] || die "systemd-analyze verify warns: $out"

log "--- version stamp $stamp"
got=$(schedctl version)
[ "$got" = "schedctl $stamp" ] || die "schedctl version says \"$got\", want \"schedctl $stamp\""

# --- the installed examples with --check-config ----------------------------------
# Run as anysched (the units' ExecStartPre does the same): the examples must
# decode and validate; the only problems allowed are the TLS, signing and
# BGP key files under /etc/anysched that an operator supplies.
log "--- --check-config on the installed examples"
as_anysched() { setpriv --reuid=anysched --regid=anysched --init-groups --inh-caps=-all -- "$@"; }
for pair in central-scheduler:center regional-scheduler:regional-primary regional-scheduler:regional-standby healthcheck:healthcheck; do
  b=${pair%%:*} cfg=/etc/anysched/${pair#*:}.yaml.example rc=0
  out=$(as_anysched "/usr/bin/$b" --config "$cfg" --check-config 2>&1) || rc=$?
  [ $rc -eq 2 ] || die "$b --check-config $cfg: exit $rc, want 2 (only the operator's key files missing): $out"
  others=$(sed 1d <<<"$out" | grep -v '"\?/etc/anysched/[^ ]*"\?: no such file or directory$' || true)
  [ -z "$others" ] || die "$b --check-config $cfg: problems beyond the missing key files:
$others"
done

# --- start the installed central scheduler ---------------------------------------
# The loopback example (embedded etcd, no announcement), its paths in a
# scratch directory owned by anysched and its ports moved to a random range,
# so that a demo or a test on this machine is not in the way.
log "--- the installed central-scheduler as anysched, on loopback"
run=$scratch/center
install -d -o anysched -g anysched -m 0750 "$run" "$run/keys"
base=$(( 20000 + RANDOM % 20000 ))
sed -e "s#/tmp/anysched-loopback#$run#g" \
  -e "s#127.0.0.1:12379#127.0.0.1:$base#; s#127.0.0.1:12380#127.0.0.1:$((base + 1))#" \
  -e "s#127.0.0.1:19090#127.0.0.1:$((base + 2))#; s#127.0.0.1:19100#127.0.0.1:$((base + 3))#" \
  -e "s#127.0.0.1:18080#127.0.0.1:$((base + 4))#; s#127.0.0.1:15353#127.0.0.1:$((base + 5))#" \
  deploy/examples/loopback/center.yaml >"$run/center.yaml"
grep -q "127.0.0.1:$((base + 5))" "$run/center.yaml" || die "deploy/examples/loopback/center.yaml changed its ports: update the rewriting above"
chown root:anysched "$run/center.yaml"
chmod 0640 "$run/center.yaml"
grpc=127.0.0.1:$((base + 2)) admin=127.0.0.1:$((base + 3))
as_anysched schedctl keygen --signing "$run/keys/topology-signing" >/dev/null
as_anysched /usr/bin/central-scheduler --config "$run/center.yaml" --check-config ||
  die "central-scheduler --check-config on the loopback configuration failed (above)"
# setpriv itself, not the function: $! is then the daemon (setpriv execs it).
setpriv --reuid=anysched --regid=anysched --init-groups --inh-caps=-all -- \
  /usr/bin/central-scheduler --config "$run/center.yaml" >"$run/log" 2>&1 &
daemon_pid=$!
t0=$(date +%s)
until timeout 5 schedctl --server "$grpc" whoami >/dev/null 2>&1; do
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$run/log" >&2; die "central-scheduler exited before its admin API answered (log above)"; }
  [ $(( $(date +%s) - t0 )) -lt 60 ] || { tail -20 "$run/log" >&2; die "the admin API did not answer within 60s"; }
  sleep 0.3
done
timeout 30 schedctl --server "$grpc" apply --yes -f deploy/examples/topology.yaml >/dev/null ||
  { tail -20 "$run/log" >&2; die "schedctl apply of deploy/examples/topology.yaml failed"; }
until [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$admin/readyz")" = 200 ]; do
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$run/log" >&2; die "central-scheduler exited before it was ready (log above)"; }
  [ $(( $(date +%s) - t0 )) -lt 60 ] || { tail -20 "$run/log" >&2; die "/readyz did not answer 200 within 60s: $(curl -s "http://$admin/readyz")"; }
  sleep 0.3
done
log "ready after $(( $(date +%s) - t0 ))s"
# Read whole before grep: grep -q leaves at the first match, and under
# pipefail curl's next write into the closed pipe would fail the check.
metrics=$(curl -s --max-time 5 "http://$admin/metrics") || die "/metrics: curl exit $?"
grep -q "^anysched_build_info{.*version=\"$stamp\"" <<<"$metrics" ||
  die "/metrics has no anysched_build_info with version \"$stamp\""
kill -TERM "$daemon_pid"
rc=0
timeout 30 tail --pid="$daemon_pid" -f /dev/null || { tail -20 "$run/log" >&2; die "central-scheduler did not exit within 30s of SIGTERM"; }
wait "$daemon_pid" || rc=$?
daemon_pid=""
[ $rc -eq 0 ] || { tail -20 "$run/log" >&2; die "central-scheduler exited $rc after SIGTERM, want 0"; }
log "stopped by SIGTERM, exit 0"

# --- remove, then purge ------------------------------------------------------------
log "--- dpkg -r, dpkg --purge"
dpkg -r "${packages[@]}" >/dev/null
for p in "${!examples[@]}"; do
  for e in ${examples[$p]}; do [ -e "/etc/anysched/$e" ] || die "dpkg -r removed the conffile /etc/anysched/$e (only purge may)"; done
done
# What dpkg -r left (its conffiles) is purged; a package with none is gone already.
mapfile -t removed < <(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "${packages[@]}" 2>/dev/null | awk '$1 == "rc" { print $2 }')
dpkg --purge "${removed[@]}" >/dev/null
left=()
for p in "${packages[@]}"; do
  while IFS= read -r f; do
    if [ -e "$f" ] && [ ! -d "$f" ]; then left+=("$f"); fi
  done <"$scratch/$p.list"
done
for d in /etc/anysched /var/lib/anysched /usr/share/doc/anysched-common; do
  [ ! -e "$d" ] || left+=("$d")
done
[ ${#left[@]} -eq 0 ] || die "left after dpkg --purge: ${left[*]}"
getent passwd anysched >/dev/null || die "the user anysched is gone after the purge (Debian keeps system users)"
log "purged: nothing left but the user anysched"
