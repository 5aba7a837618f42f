package config

import (
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/testbed/testcerts"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// tlsFiles writes a server certificate, its key and its CA (Validate
// parses them).
func tlsFiles(t *testing.T) (cert, key, ca string) {
	t.Helper()
	f := testcerts.Write(t, t.TempDir())
	return f.ServerCert, f.ServerKey, f.CA
}

// problems is Validate's field errors as "path: message" lines.
func problems(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	errs, ok := yamlstrict.AsErrors(err)
	if !ok {
		t.Fatalf("not field errors: %v", err)
	}
	var lines []string
	for _, e := range errs {
		lines = append(lines, e.Path+": "+e.Msg)
	}
	return strings.Join(lines, "\n")
}

// TestAdminAPINeedsMutualTLSBeyondLoopback: a grpc.listen beyond loopback
// (a wildcard included) without TLS, or with TLS but no client CA, is a
// config error at grpc.tls.client_ca_file; loopback stays plaintext.
func TestAdminAPINeedsMutualTLSBeyondLoopback(t *testing.T) {
	cert, key, ca := tlsFiles(t)
	for _, c := range []struct {
		listen   string
		tls      ServerTLS
		wantPath string // "" when valid
	}{
		{"127.0.0.1:9090", ServerTLS{}, ""},
		{"[::1]:9090", ServerTLS{}, ""},
		{"localhost:9090", ServerTLS{}, ""},
		{"0.0.0.0:9090", ServerTLS{}, "grpc.tls.client_ca_file"},
		{"[::]:9090", ServerTLS{}, "grpc.tls.client_ca_file"},
		{":9090", ServerTLS{}, "grpc.tls.client_ca_file"},
		{"172.16.0.21:9090", ServerTLS{}, "grpc.tls.client_ca_file"},
		{"172.16.0.21:9090", ServerTLS{CertFile: cert, KeyFile: key}, "grpc.tls.client_ca_file"},
		{"172.16.0.21:9090", ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: ca}, ""},
		// A wildcard also listens on the anycast service address.
		{"0.0.0.0:9090", ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: ca}, "grpc.listen"},
		{"[::]:9090", ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: ca}, "grpc.listen"},
	} {
		cfg := DefaultCenter()
		cfg.GRPC.Listen, cfg.GRPC.TLS = c.listen, c.tls
		got := problems(t, cfg.Validate())
		switch {
		case c.wantPath == "" && got != "":
			t.Errorf("%s %+v: %s", c.listen, c.tls, got)
		case c.wantPath != "" && !strings.HasPrefix(got, c.wantPath+": "):
			t.Errorf("%s %+v: %q, want a problem at %s", c.listen, c.tls, got, c.wantPath)
		}
	}
}

// TestAdminListenerRules: admin.listen is never a wildcard, beyond loopback
// it needs mutual TLS, and it never shares the STB-facing address.
func TestAdminListenerRules(t *testing.T) {
	cert, key, ca := tlsFiles(t)
	mtls := ServerTLS{CertFile: cert, KeyFile: key, ClientCAFile: ca}
	for _, c := range []struct {
		admin, http, dns string
		tls              ServerTLS
		want             string // a substring of the problems, "" when valid
	}{
		{"127.0.0.1:9101", "198.18.0.1:80", "198.18.0.1:53", ServerTLS{}, ""},
		{"127.0.0.1:9101", "127.0.0.1:80", "", ServerTLS{}, ""},
		{"0.0.0.0:9101", "198.18.0.1:80", "", mtls, "admin.listen: \"0.0.0.0:9101\" listens on every address"},
		{":9101", "", "", mtls, "admin.listen: \":9101\" listens on every address"},
		{"172.16.1.2:9101", "198.18.0.1:80", "", ServerTLS{}, "admin.tls.client_ca_file: admin.listen \"172.16.1.2:9101\" is beyond loopback"},
		{"172.16.1.2:9101", "198.18.0.1:80", "", ServerTLS{CertFile: cert, KeyFile: key}, "admin.tls.client_ca_file: required"},
		{"172.16.1.2:9101", "198.18.0.1:80", "198.18.0.1:53", mtls, ""},
		{"198.18.0.1:9101", "198.18.0.1:80", "", mtls, "admin.listen: shares its address with http.listen"},
		{"198.18.0.1:9101", "", "198.18.0.1:53", mtls, "admin.listen: shares its address with dns.listen"},
		{"172.16.1.2:9101", "0.0.0.0:80", "", mtls, "admin.listen: shares its address with http.listen \"0.0.0.0:80\""},
	} {
		r := DefaultRegional()
		r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
		r.Admin.Listen, r.HTTP.Listen, r.DNS.Listen, r.Admin.TLS = c.admin, c.http, c.dns, c.tls
		got := problems(t, r.Validate())
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("admin %s http %s dns %s tls %v: %q, want %q", c.admin, c.http, c.dns, c.tls != ServerTLS{}, got, c.want)
		}
	}
	// The checker's admin listener follows the same rule.
	ch := DefaultChecker()
	ch.Admin.Listen = "10.0.0.5:9102"
	if got := problems(t, ch.Validate()); !strings.Contains(got, "admin.tls.client_ca_file") {
		t.Errorf("checker admin beyond loopback without TLS: %q", got)
	}
}

// TestAdminAPILimits: grpc.max_request_bytes, grpc.local_role and the
// audit retention are checked.
func TestAdminAPILimits(t *testing.T) {
	c := DefaultCenter()
	if c.GRPC.MaxRequestBytes != 16<<20 || c.GRPC.LocalRole != "admin" || c.Audit.Keep != 10000 || c.Drills.AllowProduction {
		t.Errorf("defaults: %+v %+v %+v", c.GRPC, c.Audit, c.Drills)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	c.GRPC.MaxRequestBytes, c.GRPC.LocalRole, c.Audit.Keep, c.Audit.MaxAge = 512<<10, "root", 0, 0
	got := problems(t, c.Validate())
	for _, w := range []string{"grpc.max_request_bytes: 524288 is out of range", "grpc.local_role: \"root\"", "audit.keep", "audit.max_age"} {
		if !strings.Contains(got, w) {
			t.Errorf("%q lacks %q", got, w)
		}
	}
}
