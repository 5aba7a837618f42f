package certstore

import (
	"crypto/tls"
	"strings"
)

// certSet is one immutable generation of certificates, indexed by name.
type certSet struct {
	entries []*entry                      // configuration order; entries[0] is the default
	exact   map[string][]*tls.Certificate // "live.iptv.example"
	wild    map[string][]*tls.Certificate // "iptv.example" for "*.iptv.example"
}

func newCertSet(entries []*entry) *certSet {
	cs := &certSet{entries: entries, exact: map[string][]*tls.Certificate{}, wild: map[string][]*tls.Certificate{}}
	for _, e := range entries {
		for _, n := range e.names {
			m, key := cs.exact, n
			if suffix, ok := strings.CutPrefix(n, "*."); ok {
				m, key = cs.wild, suffix
			}
			if l := m[key]; len(l) == 0 || l[len(l)-1] != e.cert { // a name listed twice in one certificate
				m[key] = append(l, e.cert)
			}
		}
	}
	return cs
}

// pick chooses the certificate for a ClientHello: by SNI, else the default.
func (cs *certSet) pick(hello *tls.ClientHelloInfo) *tls.Certificate {
	cands := cs.lookup(hello.ServerName)
	switch len(cands) {
	case 0:
		return cs.entries[0].cert
	case 1:
		return cands[0]
	}
	for _, c := range cands {
		if hello.SupportsCertificate(c) == nil {
			return c
		}
	}
	return cands[0] // the handshake fails with crypto/tls's own explanation
}

// lookup returns the certificates for a server name: exact ones, else the
// wildcard ones for its parent.
func (cs *certSet) lookup(name string) []*tls.Certificate {
	name = normalise(name)
	if name == "" {
		return nil
	}
	if c, ok := cs.exact[name]; ok {
		return c
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		return cs.wild[name[i+1:]]
	}
	return nil
}

// normalise lower-cases a DNS name and drops one trailing dot, without
// allocating for the common, already lower-case name.
func normalise(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// validPattern: no '*' except as the whole first label of a name with a
// parent ("*.iptv.example"), as browsers match them.
func validPattern(n string) bool {
	if rest, ok := strings.CutPrefix(n, "*."); ok {
		return rest != "" && !strings.Contains(rest, "*")
	}
	return !strings.Contains(n, "*")
}
