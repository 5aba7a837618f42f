#!/usr/bin/env bash
# golangci-lint with the committed configuration (.golangci.yml), at the
# version pinned here: installed with go install into GOPATH/bin on first
# use (the Go module proxy; a few minutes of compiling, once).
#
#   scripts/lint.sh [golangci-lint run flags]      (make lint; make test runs it)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
version=2.15.0
bin=$("$GO" env GOPATH)/bin/golangci-lint
if ! "$bin" version 2>/dev/null | grep -q "has version $version "; then
  echo "lint: installing golangci-lint v$version"
  GOFLAGS= "$GO" install -trimpath -ldflags="-s -w" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$version"
fi
exec "$bin" run "$@" ./...
