package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/mmdbtest"
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
		{"public key as signing key", func(c *Center) { c.Apply.SigningKeyFile = private(t, pub) }, "apply.signing_key_file: "},
		{"private key as trusted key", func(c *Center) { c.Snapshot.TrustedKeys = []string{priv} }, "snapshot.trusted_keys[0]: "},
		{"operator state signatures required", func(c *Center) { c.Snapshot.TrustedKeys, c.Snapshot.OpstateSignatures = []string{pub}, OpstateRequired }, ""},
		{"operator state signatures required without keys", func(c *Center) { c.Snapshot.OpstateSignatures = OpstateRequired }, "snapshot.opstate_signatures: required needs snapshot.trusted_keys"},
		{"operator state signatures misspelt", func(c *Center) { c.Snapshot.OpstateSignatures = "yes" }, `snapshot.opstate_signatures: "yes" is not transition or required`},
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

// private is a copy of file with mode 0600, so that only its content is
// wrong.
func private(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(file)+".0600")
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// --check-config opens the GeoIP database as the start does: a missing
// file or one that is not a MaxMind DB fails validation, not the start.
func TestGeoIPDatabaseOpened(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "city.mmdb")
	if err := mmdbtest.Write(good, []mmdbtest.Entry{{Network: netip.MustParsePrefix("203.0.113.0/24"), Lat: 31.34, Lon: 118.40, City: "Wuhu"}}); err != nil {
		t.Fatal(err)
	}
	notMMDB := filepath.Join(dir, "city.csv")
	if err := os.WriteFile(notMMDB, []byte("network,lat,lon\n203.0.113.0/24,31.34,118.40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, db, want string // want "": valid
	}{
		{"none", "", ""},
		{"a City database", good, ""},
		{"missing", filepath.Join(dir, "nope.mmdb"), "geoip.database: geoip: open "},
		{"not a MaxMind DB", notMMDB, "geoip.database: geoip: " + notMMDB + " is not a MaxMind DB"},
		{"relative", "city.mmdb", "geoip.database: \"city.mmdb\" is not an absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultRegional()
			cfg.Region, cfg.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
			cfg.GeoIP.Database = c.db
			if c.want == "" {
				expectErrs(t, c.name, cfg.Validate())
				return
			}
			expectErrs(t, c.name, cfg.Validate(), c.want)
		})
	}
}
