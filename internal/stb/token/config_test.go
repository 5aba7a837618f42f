package token

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Validate names every problem by its key under the section's path, and
// joins them; ReadKeys names the key whose secret it cannot read.
func TestConfigValidate(t *testing.T) {
	secret := func(body string) string {
		p := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, short := secret(strings.Repeat("k", MinSecretBytes)+"\n"), secret("k")
	c := DefaultConfig()
	c.Keys = []KeyFile{{ID: "k1", SecretFile: good}}
	if err := c.Validate("alloc."); err != nil {
		t.Fatalf("defaults with a key: %v", err)
	}
	if keys, err := c.ReadKeys("alloc."); err != nil || len(keys) != 1 || keys[0].ID != "k1" || len(keys[0].Secret) != MinSecretBytes {
		t.Fatalf("ReadKeys = %v, %v", keys, err)
	}
	c.Keys = append(c.Keys, KeyFile{ID: "k1", SecretFile: short}, KeyFile{})
	c.Leeway, c.MaxLifetime, c.Issuer, c.CacheSize = time.Hour, 0, " iss", -1
	err := c.Validate("alloc.")
	for _, want := range []string{
		`alloc.keys[1].id: duplicate key id "k1"`, "alloc.keys[1].secret_file: " + short + ": secret is 1 bytes",
		"alloc.keys[2].id: required", "alloc.keys[2].secret_file: required",
		"alloc.leeway: 1h0m0s is out of range [0, 5m]", "alloc.max_token_lifetime: 0s is out of range [1m, 744h]",
		`alloc.token_issuer: " iss" must be at most 256 bytes`, "alloc.token_cache: -1 is out of range [0, 16777216]",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
	if _, err := c.ReadKeys("alloc."); err == nil || !strings.HasPrefix(err.Error(), "alloc.keys[1].secret_file: ") {
		t.Errorf("ReadKeys = %v, want alloc.keys[1].secret_file: ...", err)
	}
}
