package authz

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"strings"
	"testing"
)

func cert(cn string, uris ...string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	for _, u := range uris {
		p, _ := url.Parse(u)
		c.URIs = append(c.URIs, p)
	}
	return c
}

// TestFromCertificate: the highest known role of the URI SANs; none
// without one; other URIs and unknown roles are ignored.
func TestFromCertificate(t *testing.T) {
	for _, c := range []struct {
		uris []string
		want Role
	}{
		{nil, None},
		{[]string{"urn:anysched:role:viewer"}, Viewer},
		{[]string{"urn:anysched:role:admin", "urn:anysched:role:viewer"}, Admin},
		{[]string{"spiffe://x/y", "urn:anysched:role:operator", "urn:anysched:role:root"}, Operator},
		{[]string{"urn:anysched:role:none", "urn:anysched:role:Admin"}, None},
	} {
		got := FromCertificate(cert("alice", c.uris...), "10.0.0.1:5000")
		if got.Role != c.want || got.Identity != "alice" || got.Peer != "10.0.0.1:5000" {
			t.Errorf("%v: %+v, want role %s", c.uris, got, c.want)
		}
	}
}

// TestCheck: a refusal names the method, the role needed, and the caller.
func TestCheck(t *testing.T) {
	if err := (Caller{Identity: "a", Role: Admin}).Check("/m", Operator); err != nil {
		t.Errorf("admin for operator: %v", err)
	}
	err := Caller{Identity: "bob", Role: Viewer}.Check("/anysched.v1.Admin/Drain", Operator)
	if err == nil || err.Error() != "/anysched.v1.Admin/Drain needs the operator role; CN=bob has the viewer role" {
		t.Errorf("viewer for operator: %v", err)
	}
	err = Caller{Identity: "eve"}.Check("/m", Viewer)
	if err == nil || !strings.HasPrefix(err.Error(), "no anysched role in the client certificate of CN=eve") {
		t.Errorf("no role: %v", err)
	}
	err = Caller{Identity: Local}.Check("/m", Viewer)
	if err == nil || !strings.Contains(err.Error(), "the local caller has the none role") {
		t.Errorf("local without a role: %v", err)
	}
}
