package config

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdguard"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/stb/netutil"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// validate checks the etcd client and, when the center runs one
// (embeddedAllowed and no endpoints), the embedded server; the center's
// housekeeping. Everything beyond loopback is authenticated: https with a
// client certificate.
func (e Etcd) validate(errs *yamlstrict.Errors, embeddedAllowed bool) {
	needCert := ""
	for i, ep := range e.Endpoints {
		p := fmt.Sprintf("etcd.endpoints[%d]", i)
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.Add(p, "not an http(s) URL: %q", ep)
			continue
		}
		loopback := netutil.LoopbackHost(u.Hostname())
		switch {
		case u.Scheme == "http" && e.TLS.Enabled():
			// The etcd client would dial it in plaintext, dropping etcd.tls.
			errs.Add(p, "http:// with etcd.tls set: use https://")
		case u.Scheme == "http" && !loopback:
			errs.Add(p, "%q is plaintext beyond loopback: use https:// with a client certificate (etcd.tls)", ep)
		case u.Scheme == "https" && !loopback && e.TLS.CertFile == "" && needCert == "":
			needCert = ep
		}
	}
	if needCert != "" {
		errs.Add("etcd.tls.cert_file", "required: %s is beyond loopback, and the province's etcd knows its clients by their certificates", needCert)
	}
	if e.DialTimeout <= 0 {
		errs.Add("etcd.dial_timeout", "must be > 0")
	}
	if !strings.HasPrefix(e.Prefix, "/") || !strings.HasSuffix(e.Prefix, "/") {
		errs.Add("etcd.prefix", "%q must start and end with '/'", e.Prefix)
	}
	validateClientTLS(errs, "etcd.tls", e.TLS)
	if len(e.Endpoints) == 0 && embeddedAllowed {
		validateEmbedded(errs, e.Embedded, e.TLS)
	}
	switch {
	case embeddedAllowed: // the center
		if es, ok := yamlstrict.AsErrors(e.Housekeeping.Validate("etcd.housekeeping.")); ok {
			*errs = append(*errs, es...)
		}
	case e.Housekeeping != etcdhousekeep.DefaultConfig():
		errs.Add("etcd.housekeeping", "only the central scheduler keeps etcd's house; leave it out here")
	}
	switch {
	case embeddedAllowed:
		if es, ok := yamlstrict.AsErrors(e.WriteGuard.Validate("etcd.write_guard.")); ok {
			*errs = append(*errs, es...)
		}
	case e.WriteGuard != etcdguard.DefaultConfig():
		errs.Add("etcd.write_guard", "only the central scheduler guards etcd's writers; leave it out here")
	}
}

// Shared says why the province's etcd may be written by others than this
// host ("" when nothing in the configuration says so): an endpoint or the
// embedded etcd's client listener beyond loopback, more than one endpoint
// (a cluster's members), or a client certificate (etcd authenticates its
// users, so there are others). Then only a signed topology is to be
// believed. A loopback endpoint of a cluster's member says none of this:
// the daemons ask etcd itself before believing an unsigned document
// (etcdclient.Shared).
func (e Etcd) Shared(embeddedAllowed bool) string {
	for _, ep := range e.Endpoints {
		if u, err := url.Parse(ep); err == nil && !netutil.LoopbackHost(u.Hostname()) {
			return fmt.Sprintf("etcd endpoint %s is beyond loopback", ep)
		}
	}
	switch {
	case len(e.Endpoints) > 1:
		return fmt.Sprintf("etcd.endpoints name %d members", len(e.Endpoints))
	case e.TLS.CertFile != "":
		return "etcd.tls.cert_file is set: etcd authenticates its users, so others may write it"
	case len(e.Endpoints) > 0 || !embeddedAllowed:
		return ""
	}
	if h, ok := listenHost(e.Embedded.ClientListen); ok && !netutil.LoopbackHost(h) {
		return fmt.Sprintf("etcd.embedded.client_listen %s is beyond loopback", e.Embedded.ClientListen)
	}
	if e.Embedded.TLS.Enabled() {
		return "etcd.embedded.tls is set: the embedded etcd authenticates its users, so others may write it"
	}
	return ""
}

// validate checks the embedded etcd; client is the center's own etcd
// client, which talks to it.
func validateEmbedded(errs *yamlstrict.Errors, m Embedded, client ClientTLS) {
	if m.Dir == "" {
		errs.Add("etcd.embedded.dir", "required when etcd.endpoints is empty")
	}
	hostPort(errs, "etcd.embedded.client_listen", m.ClientListen, true)
	hostPort(errs, "etcd.embedded.peer_listen", m.PeerListen, true)
	if m.Name == "" {
		errs.Add("etcd.embedded.name", "required")
	}
	// A single member never talks to peers: its peer port only lets
	// strangers try to join.
	if h, ok := listenHost(m.PeerListen); ok && !netutil.LoopbackHost(h) {
		errs.Add("etcd.embedded.peer_listen", "%q must be a loopback address: a single-node etcd has no peers", m.PeerListen)
	}
	validateServerTLS(errs, "etcd.embedded.tls", m.TLS)
	complete := m.TLS.CertFile != "" && m.TLS.KeyFile != "" && m.TLS.ClientCAFile != ""
	if m.TLS.Enabled() && m.TLS.ClientCAFile == "" {
		errs.Add("etcd.embedded.tls.client_ca_file", "required: the embedded etcd knows its clients by their certificates (the CN is the etcd user)")
	}
	if h, ok := listenHost(m.ClientListen); ok && !netutil.LoopbackHost(h) && !complete {
		errs.Add("etcd.embedded.tls", "etcd.embedded.client_listen %q is beyond loopback: it needs cert_file, key_file and client_ca_file (https with client certificates and etcd's RBAC)", m.ClientListen)
	}
	if !m.TLS.Enabled() {
		if client.Enabled() {
			errs.Add("etcd.tls", "the embedded etcd serves plaintext: set etcd.embedded.tls as well, or leave etcd.tls out")
		}
		if len(m.Identities) > 0 {
			errs.Add("etcd.embedded.identities", "only with etcd.embedded.tls: without it the embedded etcd has no users")
		}
		return
	}
	// The center provisions users and roles at every start, so its own
	// client must be the root-capable anysched-center.
	for _, f := range []struct{ key, file string }{{"ca_file", client.CAFile}, {"cert_file", client.CertFile}, {"key_file", client.KeyFile}} {
		if f.file == "" {
			errs.Add("etcd.tls."+f.key, "required with etcd.embedded.tls: the center's own etcd client authenticates as %s", etcdauth.CenterIdentity)
		}
	}
	if client.CertFile != "" {
		// A file that is no certificate is ClientTLS.validate's to report.
		if cn, err := certCN(client.CertFile); err == nil && cn != etcdauth.CenterIdentity {
			errs.Add("etcd.tls.cert_file", "CN %q: the center's etcd certificate must have CN %s (the etcd user it provisions as)", cn, etcdauth.CenterIdentity)
		}
	}
	seen := map[string]bool{}
	for i, s := range m.Identities {
		p := fmt.Sprintf("etcd.embedded.identities[%d]", i)
		id, err := etcdauth.ParseIdentity(s)
		switch {
		case err != nil:
			errs.Add(p, "%v", err)
		case seen[id.Name]:
			errs.Add(p, "%q listed twice", id.Name)
		}
		seen[id.Name] = true
	}
}

// certCN reads the subject CN of the first certificate in a PEM file.
func certCN(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return "", fmt.Errorf("%s: no PEM certificate", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	return c.Subject.CommonName, nil
}
