package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// TestPrivateFileModes: key and secret files readable by everyone used to
// be accepted. A private key or token secret that group or others may
// read is a config error naming the field, the file and its mode;
// certificates and CA files may be world-readable.
func TestPrivateFileModes(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("0123456789abcdef0123456789abcdef\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	cert, key := file("c.crt", 0o644), file("c.key", 0o600)
	openKey, groupKey := file("open.key", 0o644), file("group.key", 0o640)
	secret, openSecret := file("s.key", 0o400), file("open-s.key", 0o604)

	check := func(t *testing.T, f func(errs *yamlstrict.Errors), want string) {
		t.Helper()
		var errs yamlstrict.Errors
		f(&errs)
		got := errs.Error()
		if want == "" && strings.Contains(got, "readable") {
			t.Fatalf("refused: %v", got)
		}
		if want != "" && !strings.Contains(got, want) {
			t.Fatalf("errors %q, want one containing %q", got, want)
		}
	}
	t.Run("server key 0600", func(t *testing.T) {
		check(t, func(e *yamlstrict.Errors) {
			validateServerTLS(e, "grpc.tls", ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: cert})
		}, "")
	})
	t.Run("server key 0644", func(t *testing.T) {
		check(t, func(e *yamlstrict.Errors) {
			validateServerTLS(e, "grpc.tls", ServerTLS{CertFile: cert, KeyFile: openKey, ClientCAFile: cert})
		},
			"grpc.tls.key_file: "+openKey+" is readable by group/others (mode 0644): chmod 600")
	})
	t.Run("client key 0640", func(t *testing.T) {
		check(t, func(e *yamlstrict.Errors) {
			validateClientTLS(e, "etcd.tls", ClientTLS{CAFile: cert, CertFile: cert, KeyFile: groupKey})
		},
			"etcd.tls.key_file: "+groupKey+" is readable by group/others (mode 0640)")
	})
	t.Run("client key 0600", func(t *testing.T) {
		check(t, func(e *yamlstrict.Errors) {
			validateClientTLS(e, "etcd.tls", ClientTLS{CAFile: cert, CertFile: cert, KeyFile: key})
		}, "")
	})
	t.Run("token secret 0400", func(t *testing.T) {
		a := DefaultAlloc()
		a.Keys = []token.KeyFile{{ID: "k1", SecretFile: secret}}
		check(t, a.validate, "")
	})
	t.Run("token secret 0604", func(t *testing.T) {
		a := DefaultAlloc()
		a.Keys = []token.KeyFile{{ID: "k1", SecretFile: secret}, {ID: "k2", SecretFile: openSecret}}
		check(t, a.validate, "alloc.keys[1].secret_file: "+openSecret+" is readable by group/others (mode 0604): chmod 600")
	})
	t.Run("https key 0644", func(t *testing.T) {
		h := DefaultRegional().HTTPS
		h.Listen = "127.0.0.1:8443"
		h.Certificates = []CertificateFiles{{CertFile: cert, KeyFile: key}, {CertFile: cert, KeyFile: openKey}}
		check(t, h.validate, "https.certificates[1].key_file: "+openKey+" is readable by group/others (mode 0644): chmod 600")
	})
}

// The HTTPS listener needs a certificate, and its settings have ranges.
func TestHTTPSValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(h *HTTPS)
		want []string
	}{
		{"off by default", func(h *HTTPS) {}, nil},
		{"listen without certificates", func(h *HTTPS) { h.Listen = ":443" }, []string{"https.certificates: required with https.listen"}},
		{"half a pair", func(h *HTTPS) {
			h.Listen = ":443"
			h.Certificates = []CertificateFiles{{CertFile: "/nonexistent/c.pem"}}
		}, []string{"https.certificates[0]: cert_file and key_file are both required", `https.certificates[0].cert_file: cannot read "/nonexistent/c.pem"`}},
		{"ranges", func(h *HTTPS) {
			h.TicketRotation, h.TicketKeys, h.ReloadInterval = time.Second, 0, time.Millisecond
		}, []string{"https.ticket_rotation: 1s is out of range [1m, 168h]", "https.ticket_keys: 0 is out of range [1, 16]", "https.reload_interval: 1ms is below 1s"}},
		{"bad listen", func(h *HTTPS) { h.Listen = "nohost" }, []string{"https.listen"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := DefaultRegional().HTTPS
			c.edit(&h)
			var errs yamlstrict.Errors
			h.validate(&errs)
			if len(c.want) == 0 && len(errs) > 0 {
				t.Fatalf("refused: %v", errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs.Error(), w) {
					t.Errorf("errors %q, want one containing %q", errs.Error(), w)
				}
			}
		})
	}
}
