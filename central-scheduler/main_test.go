package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/wiring/daemon"
)

func TestCheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("grpc:\n  listen: 127.0.0.1:19999\n"), 0o644)
	os.WriteFile(bad, []byte("grpc:\n  listen: nowhere\n  tsl: {}\nlog:\n  level: loud\n"), 0o644)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{"valid", []string{"--config", good, "--check-config"}, 0, []string{"configuration OK"}},
		{"invalid file reports every problem", []string{"--config", bad, "--check-config"}, 2, []string{"grpc.tsl: unknown field"}},
		{"flag makes it invalid", []string{"--config", good, "--log-level", "loud", "--check-config"}, 2, []string{"log.level"}},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml"), "--check-config"}, 2, []string{"no such file"}},
		{"unknown flag", []string{"--bogus"}, 2, []string{"flag provided but not defined"}},
		{"stray argument", []string{"--check-config", "extra"}, 2, []string{"unexpected arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), tt.args, &out, &errb)
			code := daemon.ExitCode(err)
			if errors.Is(err, daemon.ErrCheckedOnly) {
				code = 0
			}
			if code != tt.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", code, err, tt.wantCode)
			}
			text := out.String() + errb.String()
			if err != nil {
				text += err.Error()
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// TestBinaryExitCodes runs the built binary: exit 2 on a bad config, 0 on --check-config of a good one.
func TestBinaryExitCodes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "central-scheduler")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("nonsense: true\n"), 0o644)
	cmd := exec.Command(bin, "--config", bad)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "nonsense: unknown field") {
		t.Fatalf("bad config: %v, output %s; want exit 2 naming the field", err, out)
	}
	if out, err := exec.Command(bin, "--check-config").CombinedOutput(); err != nil {
		t.Fatalf("--check-config with defaults: %v\n%s", err, out)
	}
	// --help: exit 0, the usage on stdout, nothing on stderr.
	cmd = exec.Command(bin, "--help")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "-grpc-listen host:port") || stderr.Len() != 0 {
		t.Fatalf("--help: %v, stdout %s, stderr %s", err, out, stderr.String())
	}
}
