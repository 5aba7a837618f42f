#!/usr/bin/env bash
# make test: everything a user runs, in the least time two cores allow.
#
#   race              go test -race over every package whose code starts
#                     goroutines (scripts/testreport race-packages; -short
#                     there: the race detector looks for races, the plain
#                     run below runs every test at its full size)
#   plain             go test over the rest at full size, and over the race
#                     packages' tests that -short leaves out; as root this
#                     includes the privileged end-to-end tests (the lab)
#   fuzz              every fuzz target for FUZZTIME (scripts/fuzz-all.sh),
#                     one worker each
#   lint              golangci-lint with .golangci.yml (scripts/lint.sh); its
#                     govet runs go vet's analyzers over every package, so
#                     there is no separate go vet stage (it compiled the
#                     whole module once more on the busier lane), and go
#                     test runs vet's high-confidence subset on each package
#
# The lab's tests wait on routers, timers and drills far more than they
# compute, so the race run and lint run beside the plain stage at a
# lower priority (nice) and take the cores the lab leaves idle; the lab's
# daemons keep theirs. The fuzz targets follow the plain stage. At the
# end: each stage's result and duration, and the ten slowest tests, test
# packages and fuzz targets.
#
# env: GO (default go), FUZZTIME (default 10s, the one place the fuzz
#      budget is set: make passes its FUZZTIME), ANYSCHED_TEST_SKIPS (a file
#      that collects "package test: reason" per skipped test; CI's clean
#      root fails on a skip for want of a tool), ANYSCHED_TEST_SERIAL=1 (run
#      the stages one after another, e.g. to time one alone)
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Test binaries without DWARF (-w): nothing reads it, and leaving it out
# takes a third off each link (about 130 test binaries, some 45 MB under
# -race); stack traces and race reports come from the symbol table and
# pclntab, which stay. The caller's GOFLAGS come after, so they win.
export GOFLAGS="-ldflags=-w${GOFLAGS:+ $GOFLAGS}"
fuzztime=${FUZZTIME:-10s}
skips=${ANYSCHED_TEST_SKIPS:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/anysched-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
times=$work/times
: >"$times"

"$GO" build -o "$work/testreport" ./scripts/testreport || exit 1
report=$work/testreport

# stage NAME CMD...: runs CMD, writes "name<TAB>seconds<TAB>exit" to
# $work/stages.
stage() {
  local name=$1 t rc=0
  shift
  t=$(date +%s)
  echo "test: --- $name"
  "$@" || rc=$?
  printf '%s\t%d\t%d\n' "$name" $(( $(date +%s) - t )) "$rc" >>"$work/stages"
  echo "test: --- $name: $([ $rc -eq 0 ] && echo ok || echo "FAILED ($rc)") in $(( $(date +%s) - t ))s"
  return $rc
}
# gotest SKIPS ARGS...: go test -json ARGS through the filter, which appends
# the skipped tests to the file SKIPS (empty: nowhere); go test's status.
gotest() {
  local to=$1
  shift
  "$GO" test -json "$@" | "$report" filter -times "$times" ${to:+-skips "$to"}
  local st=("${PIPESTATUS[@]}")
  [ "${st[1]}" -eq 0 ] || return "${st[1]}"
  return "${st[0]}"
}

start=$(date +%s)

mapfile -t all < <("$GO" list ./...)
mapfile -t race < <("$report" race-packages ./...)
declare -A raced=()
for p in "${race[@]}"; do raced[$p]=1; done
rest=()
for p in "${all[@]}"; do [ -n "${raced[$p]:-}" ] || rest+=("$p"); done
echo "test: race detector on ${#race[@]} packages that start goroutines; ${#rest[@]} packages run plain"

# skipped_plain: the tests the race run skipped (-short leaves out those too
# large to race, other skips are for want of root or a tool), plain and at
# full size, a go test per package.
skipped_plain() {
  local pkg tests rc=0
  while read -r pkg tests; do
    gotest "$skips" -count=1 -timeout 15m -run "^(${tests})\$" "$pkg" || rc=$?
  done < <(awk '{ t = $2; sub(/:$/, "", t); sub(/\/.*/, "", t); if (!seen[$1 " " t]++) list[$1] = list[$1] (list[$1] == "" ? "" : "|") t }
                END { for (p in list) print p, list[p] }' "$work/race-skips" | sort)
  return $rc
}
: >"$work/race-skips"
# Two lanes. The lab lane: every test of the packages that start no
# goroutines, with the lab as root (mostly waiting on routers, timers and
# drills), then the fuzz targets, then the tests the race run skipped. The
# CPU lane, at nice 10 so that the lab's daemons keep their cores: the
# race run, then lint.
#
# The tests the race run skipped need its list, so they wait for it; they
# run on the lab lane after the fuzz targets, which end about when the race
# run does, while lint (the CPU lane's last stage) runs beside them.
lab_lane() {
  local rc=0
  stage "plain: go test (${#rest[@]} packages, full size)" gotest "$skips" -count=1 -timeout 25m "${rest[@]}" || rc=$?
  # One fuzzing worker: the niced lane keeps the other core (two workers
  # left it starved for the whole stage, which made it the longer lane).
  stage "fuzz: every target for $fuzztime, one worker" env FUZZ_WORKERS=1 scripts/fuzz-all.sh "$fuzztime" "$times" || rc=$?
  # (the CPU lane gone without marking it: no race list to wait for)
  while [ ! -e "$work/race-done" ] && { [ -z "${cpupid:-}" ] || kill -0 "$cpupid" 2>/dev/null; }; do sleep 1; done
  stage "plain: the tests the race run skipped, full size" skipped_plain || rc=$?
  return $rc
}
cpu_lane() {
  local rc=0
  stage "race: go test -race -short (${#race[@]} packages)" \
    gotest "$work/race-skips" -count=1 -race -short -timeout 20m "${race[@]}" || rc=$?
  touch "$work/race-done"
  stage "lint: golangci-lint (.golangci.yml)" scripts/lint.sh || rc=$?
  return $rc
}

if [ "${ANYSCHED_TEST_SERIAL:-}" = 1 ]; then
  cpu_lane
  lab_lane
else
  # nice 10, not 19: a niced test still runs often enough that no deadline
  # of its own, nor Go's 10 s fuzz hang watchdog (golang/go#56238), takes it
  # for hung.
  ( renice -n 10 -p "$BASHPID" >/dev/null 2>&1; cpu_lane ) >"$work/cpu.log" 2>&1 &
  cpupid=$!
  lab_lane
  wait "$cpupid"
  cat "$work/cpu.log"
fi

echo
echo "test: where the time went ($(nproc) cores; $( [ "${ANYSCHED_TEST_SERIAL:-}" = 1 ] && echo "one stage after another" || echo "two lanes: plain, fuzz, then the race run's skipped tests; beside them, niced, race, lint"))"
failed=0
while IFS=$'\t' read -r name secs rc; do
  if [ "$rc" = 0 ]; then s=ok; else s="FAILED ($rc)"; failed=1; fi
  printf '  %-60s %-12s %5ds\n' "$name" "$s" "$secs"
done <"$work/stages"
printf '  %-60s %-12s %5ds\n' "make test (after deps and build)" "" $(( $(date +%s) - start ))
"$report" top -n 10 "$times" | sed 's/^/  /'
if [ $failed -ne 0 ]; then
  echo "test: FAILED"
  exit 1
fi
echo "test: every stage passed"
