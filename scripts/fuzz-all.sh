#!/usr/bin/env bash
# Runs every fuzz target of the module for a short time (default 10s each),
# starting from its committed seed corpus. A crash fails the run and leaves the
# reproducer under the package's testdata/fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
t=${1:-10s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go 2>/dev/null | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort -u); do
    echo "fuzz: $pkg $target ($t)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >/dev/null || { echo "fuzz: $target FAILED"; go test -run "^${target}\$" "$pkg"; exit 1; }
  done
done
