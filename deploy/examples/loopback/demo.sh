#!/usr/bin/env bash
# Loopback demo: the central scheduler with embedded etcd and three regional
# schedulers on 127.0.0.1, the sample province applied, STB traffic from five
# cities (three with their own scheduler, two served by the center), and a
# summary table.
# Run from the repository root after `make build` (make demo does both).
set -euo pipefail
cd "$(dirname "$0")/../../.."
here=deploy/examples/loopback
state=/tmp/anysched-loopback
logs=$state/logs
rm -rf "$state"; mkdir -p "$logs"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

step() { printf '\n== %s\n' "$*"; }
ctl() { bin/schedctl --server 127.0.0.1:19090 "$@"; }

step "the topology signing key: the center signs every applied document, every scheduler checks it"
mkdir -p "$state/keys"
bin/schedctl keygen --signing "$state/keys/topology-signing"

step "starting the central scheduler (embedded etcd on 127.0.0.1:12379, admin API on 127.0.0.1:19090)"
bin/central-scheduler --config $here/center.yaml >"$logs/center.log" 2>&1 & pids+=($!)
for _ in $(seq 100); do ctl status >/dev/null 2>&1 && break; sleep 0.2; done
ctl status >/dev/null || { echo "center did not come up; see $logs/center.log"; exit 1; }

step "starting regional schedulers: hefei, wuhu, bengbu"
for city in hefei wuhu bengbu; do
  bin/regional-scheduler --config $here/regional-$city.yaml >"$logs/$city.log" 2>&1 & pids+=($!)
done

step "who the admin API takes this caller for (a plaintext caller on loopback is \"local\")"
ctl whoami

step "validating the sample province (dry run), then applying it"
ctl apply --dry-run -f deploy/examples/topology.yaml
ctl apply --yes -f deploy/examples/topology.yaml

step "a broken document is rejected whole, every problem named"
broken=$state/broken.yaml
sed -e '0,/address: 10\.1\.1\.10:8080/s//address: 10.1.1.10/' -e '0,/lat: 31.82/s//lat: 131.82/' \
    -e '0,/region: hefei/s//region: hefie/' deploy/examples/topology.yaml >"$broken"
ctl apply --yes -f "$broken" || true

step "waiting until every scheduler holds the applied revision"
for _ in $(seq 50); do
  ready=$(ctl status -o json | grep -c '"state": "ready"' || true)
  [ "$ready" -ge 4 ] && break; sleep 0.2
done
ctl status
step "how the center would answer an STB of huainan (a city without its own scheduler)"
ctl explain --client-ip 100.76.0.20 --host live.iptv.example --path /ch1/index.m3u8 >"$state/explain.txt"
head -9 "$state/explain.txt"

step "one STB request by hand: curl through the hefei scheduler"
curl -s -o /dev/null -D - -H 'X-Anysched-Debug: 1' -H 'Host: live.iptv.example' -H 'X-Forwarded-For: 100.64.0.7' http://127.0.0.1:18081/ch1/index.m3u8 \
  | grep -iE '^(HTTP|Location|X-Anysched|Server-Timing)'

if command -v dig >/dev/null; then
  step "the same through DNS: wuhu's scheduler, asked for a client of wuhu (EDNS Client Subnet) and one of hefei"
  echo "wuhu client:  $(dig @127.0.0.1 -p 15355 live.iptv.example A +short +subnet=100.68.0.0/24)"
  echo "hefei client: $(dig @127.0.0.1 -p 15355 live.iptv.example A +short +subnet=100.64.0.0/24)"
fi

step "STB traffic: hefei, wuhu, bengbu reach their own schedulers; huainan and anqing reach the center"
bin/stbload --topology deploy/examples/topology.yaml --cities hefei,wuhu,bengbu,huainan,anqing \
  --route hefei=127.0.0.1:18081,wuhu=127.0.0.1:18082,bengbu=127.0.0.1:18083 --default 127.0.0.1:18080 \
  --requests "${DEMO_REQUESTS:-5000}" --concurrency 16
printf '\nlogs are in %s\n' "$logs"
