package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/security/signing"
)

func TestApplyAndTrustedKeysValidation(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "topology.key"), filepath.Join(dir, "topology.pub")
	if _, err := signing.WriteKeyPair(priv, pub); err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(dir, "readable.key")
	data, _ := os.ReadFile(priv)
	if err := os.WriteFile(readable, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Center)
		want string // "" valid
	}{
		{"defaults", func(*Center) {}, ""},
		{"signing key and trusted key", func(c *Center) { c.Apply.SigningKeyFile, c.Snapshot.TrustedKeys = priv, []string{pub} }, ""},
		{"share 0", func(c *Center) { c.Apply.MaxRemovalShare = 0 }, "apply.max_removal_share: 0 is out of range (0, 1]"},
		{"share above 1", func(c *Center) { c.Apply.MaxRemovalShare = 1.5 }, "apply.max_removal_share: 1.5 is out of range"},
		{"history of 1", func(c *Center) { c.Apply.HistoryKeep = 1 }, "apply.history_keep: 1 is out of range [2, 1000]"},
		{"readable signing key", func(c *Center) { c.Apply.SigningKeyFile = readable }, "apply.signing_key_file: " + readable + " is readable by group/others"},
		{"missing signing key", func(c *Center) { c.Apply.SigningKeyFile = filepath.Join(dir, "nope") }, "apply.signing_key_file: cannot read"},
		{"private key as trusted key", func(c *Center) { c.Snapshot.TrustedKeys = []string{priv} }, "snapshot.trusted_keys[0]: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultCenter()
			c.edit(&cfg)
			err := cfg.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}
