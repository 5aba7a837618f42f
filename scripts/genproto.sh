#!/usr/bin/env bash
# Generates the Go code of proto/ into OUT (default: proto, in place). The
# plugins are built from the versions go.mod pins, so every machine generates
# the same code; the staleness test runs this into a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-proto}
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
go build -o "$tools/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
mkdir -p "$out"
protoc -I proto \
  --plugin=protoc-gen-go="$tools/protoc-gen-go" --plugin=protoc-gen-go-grpc="$tools/protoc-gen-go-grpc" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  $(cd proto && find . -name "*.proto" | sed "s|^\./|proto/|" | sort)
