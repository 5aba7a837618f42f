package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTinyRun runs every writer at a tiny size, fast, in both plan-state
// formats, so that the bench cannot rot: each writer wrote, and the
// report and its doc section are written. (Errors are the report's: on a
// loaded machine a claim read may time out.)
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an etcd member for a few seconds")
	}
	for _, format := range []string{"current", "legacy"} {
		t.Run(format, func(t *testing.T) {
			doc := filepath.Join(t.TempDir(), "benchmarks.md")
			if err := os.WriteFile(doc, []byte("# B\n<!-- etcdload-tiny:begin -->\nold\n<!-- etcdload-tiny:end -->\nafter\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			args := []string{"-sessions", "2000", "-servers", "64", "-duration", "90s", "-warmup", "30s", "-sample", "30s", "-speed", "10",
				"-state-format", format, "-audit-per-hour", "3600", "-health-refresh", "20s", "-doc", doc, "-doc-label", "tiny", "-dir", t.TempDir()}
			if err := run(context.Background(), args, &out, &errs); err != nil {
				t.Fatalf("%v\n%s", err, errs.String())
			}
			rep := out.String()
			for _, w := range []string{"health verdicts", "capacity claims", "instance records", "plan state", "audit trail"} {
				line := ""
				for _, l := range strings.Split(rep, "\n") {
					if strings.HasPrefix(l, "| "+w+" |") {
						line = l
					}
				}
				cells := strings.Split(line, " | ")
				if len(cells) < 8 || cells[3] == "0.00" {
					t.Errorf("%s: no keys written: %q\n%s", w, line, rep)
				}
			}
			got, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), "| health verdicts |") || strings.Contains(string(got), "old\n") || !strings.HasSuffix(string(got), "<!-- etcdload-tiny:end -->\nafter\n") {
				t.Errorf("doc section not replaced:\n%s", got)
			}
		})
	}
}

// TestFlags: bad settings are refused naming the flag.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-checkers", "20"}, {"-speed", "0"}, {"-warmup", "20m"}, {"-state-format", "xml"}, {"-writers", "health,nope"}} {
		var errs bytes.Buffer
		if _, _, _, err := parse(args, &errs); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[0], "-")) {
			t.Errorf("%v: %v", args, err)
		}
	}
}
