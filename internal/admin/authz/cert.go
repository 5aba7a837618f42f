package authz

import (
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/anysched/anysched/internal/security/pki"
)

// Local is the identity of a plaintext caller on a loopback listener.
const Local = "local"

// FromCertificate is the caller a verified client certificate describes:
// the subject CN is the identity, the role is the highest of its
// urn:anysched:role:<role> URI SANs (None without one). Unknown role names
// are ignored, so that a certificate made for a newer release still works
// with the roles this one knows.
func FromCertificate(cert *x509.Certificate, peerAddr string) Caller {
	c := Caller{Identity: cert.Subject.CommonName, Role: None, Peer: peerAddr}
	for _, u := range cert.URIs {
		name, ok := strings.CutPrefix(u.String(), pki.RoleURIPrefix)
		if !ok {
			continue
		}
		if r, err := ParseRole(name); err == nil && r > c.Role {
			c.Role = r
		}
	}
	return c
}

// Name names the caller in messages: "CN=alice", or "the local caller".
func (c Caller) Name() string {
	if c.Identity == Local {
		return "the local caller"
	}
	return "CN=" + c.Identity
}

// Check returns nil when c holds at least need, else why not, naming the
// method, the role needed and the caller.
func (c Caller) Check(method string, need Role) error {
	switch {
	case c.Role >= need:
		return nil
	case c.Role == None && c.Identity != Local:
		return fmt.Errorf("no anysched role in the client certificate of CN=%s (want a URI SAN %s%s for %s)", c.Identity, pki.RoleURIPrefix, need, method)
	default:
		return fmt.Errorf("%s needs the %s role; %s has the %s role", method, need, c.Name(), c.Role)
	}
}
