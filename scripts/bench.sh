#!/usr/bin/env bash
# Runs the Go benchmarks (each beside its baseline, in the same run) and
# rewrites the generated section of docs/benchmarks.md. BENCHTIME overrides
# the per-benchmark duration (default 1s; province-scale ones use counts).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchmem -benchtime "${BENCHTIME:-1s}" -timeout 30m ./... 2>&1 | tee "$out" | grep -E '^(Benchmark|ok|FAIL|---)' || true
grep -q '^FAIL' "$out" && { echo "bench: a benchmark failed" >&2; exit 1; }
go run ./bench/benchdoc -doc docs/benchmarks.md <"$out"
echo "bench: docs/benchmarks.md updated"
# Both address families (-family both, the default): IPv4 on 127.0.0.1,
# then IPv6 on [::1], each against its own baselines.
go run ./bench/frontends -doc docs/benchmarks.md
