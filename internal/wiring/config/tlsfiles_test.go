package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/testbed/testcerts"
)

// TestGarbageTLSFilesRefused: a certificate, key or CA file that the daemon
// could not use fails validation (--check-config) with its field path, not
// the daemon's start.
func TestGarbageTLSFilesRefused(t *testing.T) {
	dir := t.TempDir()
	good := testcerts.Write(t, dir)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	expiredCert, expiredKey, err := ca.WriteLeaf(dir, "expired", pki.Leaf{CN: "old", Server: true, Validity: -time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	notPEM := write("garbage.pem", "this is not a certificate\n")
	badDER := write("bad-der.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")

	for _, tt := range []struct {
		name           string
		cert, key, cca string
		want           string // "" valid
	}{
		{"valid", good.ServerCert, good.ServerKey, good.CA, ""},
		{"certificate not PEM", notPEM, good.ServerKey, good.CA, "admin.tls.cert_file: " + notPEM + " holds no PEM certificate"},
		{"certificate does not parse", badDER, good.ServerKey, good.CA, "admin.tls.cert_file: " + badDER + ": certificate 1 does not parse"},
		{"key is a certificate", good.ServerCert, good.ServerCert, good.CA, "admin.tls.key_file: " + good.ServerCert + " is not the key of " + good.ServerCert},
		{"key not PEM", good.ServerCert, notPEM, good.CA, "admin.tls.key_file: " + notPEM + " holds no PEM private key"},
		{"key of another certificate", good.ServerCert, good.ClientKey, good.CA, "admin.tls.key_file: " + good.ClientKey + " is not the key of " + good.ServerCert},
		{"expired certificate", expiredCert, expiredKey, good.CA, `admin.tls.cert_file: ` + expiredCert + `: certificate "old" expired on `},
		{"CA not PEM", good.ServerCert, good.ServerKey, notPEM, "admin.tls.client_ca_file: " + notPEM + " holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultRegional()
			c.Region, c.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
			c.Admin.TLS = ServerTLS{CertFile: tt.cert, KeyFile: tt.key, ClientCAFile: tt.cca}
			got := problems(t, c.Validate())
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", got, tt.want)
			}
		})
	}

	// The client side: etcd.tls's CA, certificate and key.
	c := DefaultRegional()
	c.Region, c.Etcd.Endpoints = "hefei", []string{"https://127.0.0.1:2379"}
	c.Etcd.TLS = ClientTLS{CAFile: notPEM, CertFile: good.ClientCert, KeyFile: good.ServerKey}
	got := problems(t, c.Validate())
	for _, want := range []string{"etcd.tls.ca_file: " + notPEM + " holds no PEM certificate", "etcd.tls.key_file: " + good.ServerKey + " is not the key of " + good.ClientCert} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one containing %q", got, want)
		}
	}
}
