#!/usr/bin/env bash
# A stand-in for `go` that records which tests skipped, and why:
#
#   GOAUDIT_SKIPS=/path/skips.txt make test GO=$PWD/scripts/ci-goaudit.sh
#
# Every command but `go test` (and `go test -fuzz`) is passed to go unchanged.
# `go test` runs with -json; what a plain `go test` prints is printed (the
# package lines, and the whole output of failed tests and of build failures),
# and one line per skipped test, "package test: reason", is appended to
# $GOAUDIT_SKIPS. The exit status is go test's.
#
# scripts/ci-cleanroot.sh uses it: in a fresh Debian root a test that skips
# because a tool is missing means scripts/install-deps.sh forgot a package.
set -uo pipefail
real=${GOAUDIT_GO:-go}
if [ "${1-}" != test ]; then exec "$real" "$@"; fi
for a in "$@"; do
  case "$a" in -fuzz|-fuzz=*|-test.fuzz*|-json|-v|-v=*) exec "$real" "$@" ;; esac
done
: "${GOAUDIT_SKIPS:?set GOAUDIT_SKIPS to the file that collects skipped tests}"
shift

dir=${GOAUDIT_DIR:-${TMPDIR:-/tmp}/anysched-goaudit}
mkdir -p "$dir"
filter="$dir/filter"
if [ ! -x "$filter" ]; then
  src=$(mktemp -d)
  cat >"$src/main.go" <<'EOF'
// filter reads go test -json on stdin, prints what go test without -json
// prints, and appends "package test: reason" for each skipped test to the
// file named by its argument.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

func main() {
	skips, err := os.OpenFile(os.Args[1], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer skips.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	buf := map[string][]string{} // package+test -> its output so far
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, in.Text()) // not an event: pass it on
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Test == "":
			if e.Action == "output" && e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			buf[key] = append(buf[key], e.Output)
		case e.Action == "fail":
			for _, l := range buf[key] {
				fmt.Fprint(out, l)
			}
			delete(buf, key)
		case e.Action == "skip":
			var reason []string
			for _, l := range buf[key] {
				t := strings.TrimSpace(l)
				if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
					continue
				}
				reason = append(reason, t)
			}
			fmt.Fprintf(skips, "%s %s: %s\n", e.Package, e.Test, strings.Join(reason, " | "))
			delete(buf, key)
		case e.Action == "pass":
			delete(buf, key)
		}
		out.Flush()
	}
}
EOF
  # Built outside any module, with no dependencies but the standard library.
  (cd "$src" && GO111MODULE=off GOFLAGS= "$real" build -o "$filter.tmp" main.go) && mv "$filter.tmp" "$filter"
  rc=$?
  rm -rf "$src"
  [ $rc -eq 0 ] || exit $rc
fi

"$real" test -json "$@" | "$filter" "$GOAUDIT_SKIPS"
st=("${PIPESTATUS[@]}")
[ "${st[1]}" -eq 0 ] || exit "${st[1]}"
exit "${st[0]}"
