#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (default 10s each),
# starting from its committed seed corpus. A crash fails the run and leaves the
# reproducer under the package's testdata/fuzz/.
#
#   scripts/fuzz-all.sh [FUZZTIME [TIMES]]
#
# TIMES, if given, gets a record per target ("fuzz<TAB>package<TAB>target<TAB>
# seconds", build and run) for scripts/testreport's report. FUZZ_WORKERS, if
# set, is the number of fuzzing workers (-test.parallel; default one per
# core): make test uses one, so that the stages beside it keep a core.
#
# The fuzzing engine itself sometimes fails on a loaded machine ("fuzzing
# process hung or terminated unexpectedly", golang/go#56238), with no
# reproducer or with one that does not reproduce. Such a failure is shown,
# the input it wrote (if any) removed, and the target run once more; a second
# failure fails the run, unless it is the coordinator's race at the end of
# -fuzztime (a bare "context deadline exceeded" with no input written,
# golang/go#75804, fixed in Go 1.27), which reports no finding.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
times=${2:-/dev/null}
workers=()
[ -z "${FUZZ_WORKERS:-}" ] || workers=(-test.parallel "$FUZZ_WORKERS")
log=$(mktemp)
stamp=$(mktemp)
bin=$(mktemp -d)
trap 'rm -rf "$log" "$stamp" "$bin"' EXIT
cache=$(go env GOCACHE)/fuzz
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  # One instrumented test binary a package, run once per target from the
  # package's directory as go test would (the same corpus cache): a go test
  # -fuzz per target linked the same binary again for every target.
  testbin=
  for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "fuzz: $pkg $target ($t)"
    began=$(date +%s.%N)
    if [ -z "$testbin" ]; then
      testbin=$bin/$(basename "$pkg").test
      go test -c -o "$testbin" -fuzz "^${target}\$" "$pkg"
    fi
    corpus="$dir/testdata/fuzz/$target"
    for attempt in 1 2; do
      touch "$stamp"
      if (cd "$dir" && "$testbin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$t" -test.fuzzcachedir "$cache/$pkg" \
            -test.timeout 10m -test.paniconexit0 "${workers[@]}") >"$log" 2>&1; then
        break
      fi
      tail -n 40 "$log"
      written=$( [ -d "$corpus" ] && find "$corpus" -type f -newer "$stamp" || true )
      if [ -n "$written" ]; then
        if ! go test -run "^${target}\$" "$pkg"; then
          echo "fuzz: $target FAILED: the reproducer is in $corpus"
          exit 1
        fi
        echo "fuzz: $target: the input the engine wrote does not reproduce; removing it"
        rm -f $written
      fi
      if [ "$attempt" = 2 ]; then
        if [ -z "$written" ] && grep -qx '    context deadline exceeded' "$log"; then
          echo "fuzz: $target: the engine's end-of-run race again (golang/go#75804), no input written: not a finding"
          break
        fi
        echo "fuzz: $target FAILED twice in the fuzzing engine"
        exit 1
      fi
      echo "fuzz: $target: the fuzzing engine failed (output above); running it once more"
    done
    awk -v p="$pkg" -v t="$target" -v a="$began" -v b="$(date +%s.%N)" 'BEGIN { printf "fuzz\t%s\t%s\t%.2f\n", p, t, b - a }' >>"$times"
  done
done
