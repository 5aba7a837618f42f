package ctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/token"
)

func TestFlagSet(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--timeout", "5s", "drill"}, true},
		{[]string{"drill"}, false},
		{[]string{"--server", "x:1", "drill"}, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Duration("timeout", time.Minute, "")
		fs.String("server", "", "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if got := flagSet(fs, "timeout"); got != tc.want {
			t.Errorf("%v: flagSet = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// schedctl token signs what the schedulers verify; bad use is a usage error.
func TestTokenCommand(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "k.key")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"token", "--key-id", "k1", "--secret-file", secret, "--sub", "v1", "--desired-kbps", "2500"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	v, err := token.NewVerifier([]token.Key{{ID: "k1", Secret: []byte("0123456789abcdef0123456789abcdef")}}, token.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(strings.TrimSpace(out.String()))
	if err != nil || c.Subject != "v1" || c.DesiredKbps != 2500 {
		t.Fatalf("token %q: %+v %v", out.String(), c, err)
	}
	if err := Run(context.Background(), []string{"token", "--key-id", "k1"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Fatalf("missing flags: %v", err)
	}
}
