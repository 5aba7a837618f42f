package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/wiring/daemon"
)

func TestCheckConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(cfg, []byte("etcd:\n  endpoints: [http://127.0.0.1:2379]\n"), 0o644)
	var out bytes.Buffer
	// region is required; the flag supplies it.
	err := run(context.Background(), []string{"--config", cfg, "--check-config"}, &out, &out)
	if daemon.ExitCode(err) != 2 || !strings.Contains(err.Error(), "region: required") {
		t.Fatalf("without region: %v", err)
	}
	err = run(context.Background(), []string{"--config", cfg, "--region", "hefei", "--check-config"}, &out, &out)
	if !errors.Is(err, daemon.ErrCheckedOnly) {
		t.Fatalf("with --region: %v", err)
	}
}
