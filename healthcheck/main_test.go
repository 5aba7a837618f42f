package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/wiring/daemon"
)

// --help exits 0 with every flag on stdout, --log-format and --log-level
// among them as on the schedulers.
func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"--help"}, &out, &errb)
	if daemon.ExitCode(err) != 0 || errb.Len() != 0 {
		t.Fatalf("--help: %v, stderr %q", err, errb.String())
	}
	for _, w := range []string{"usage: healthcheck", "-log-format", "-log-level", "-checker-id name", "-interval duration", "-timeout duration"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("--help lacks %q:\n%s", w, out.String())
		}
	}
}
