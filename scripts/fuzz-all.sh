#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (default 10s each),
# starting from its committed seed corpus. A crash fails the run and leaves the
# reproducer under the package's testdata/fuzz/. A failure of the fuzzing
# engine itself (no reproducer written, e.g. a worker that went away on a
# loaded machine) is shown and the target is run once more.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
corpus() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "fuzz: $pkg $target ($t)"
    before=$(corpus "$dir/testdata/fuzz/$target")
    ok=0
    for attempt in 1 2; do
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >"$log" 2>&1; then
        ok=1
        break
      fi
      tail -n 40 "$log"
      if [ "$(corpus "$dir/testdata/fuzz/$target")" -gt "$before" ]; then
        echo "fuzz: $target FAILED: a new reproducer is in $dir/testdata/fuzz/$target"
        go test -run "^${target}\$" "$pkg" || true
        exit 1
      fi
      [ "$attempt" = 1 ] && echo "fuzz: $target: the fuzzing engine failed without a reproducer (output above); running it once more"
    done
    if [ "$ok" != 1 ]; then
      echo "fuzz: $target FAILED twice without a reproducer"
      exit 1
    fi
  done
done
