package certstore

import (
	"crypto/tls"
	"strings"
	"testing"
)

// TestPickBySNI: exact names, one-label wildcards, case and trailing dot,
// and the first pair as the default for no SNI and unknown names.
func TestPickBySNI(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	def := ca.sign(t, leafSpec{names: []string{"default.example"}})
	live := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}, rsa: true})
	wild := ca.sign(t, leafSpec{names: []string{"*.iptv.example", "vod.Other.Example"}})
	s, err := New(Options{Pairs: []Pair{install(t, dir, "def", def), install(t, dir, "live", live), install(t, dir, "wild", wild)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sni  string
		want leaf
	}{
		{"", def},
		{"default.example", def},
		{"live.iptv.example", live},  // exact beats the wildcard
		{"LIVE.Iptv.EXAMPLE", live},  // case-insensitive
		{"live.iptv.example.", live}, // trailing dot
		{"news.iptv.example", wild},  // wildcard: one label
		{"news.iptv.example.", wild}, //
		{"vod.other.example", wild},  // the certificate's name was mixed case
		{"iptv.example", def},        // a wildcard does not match its parent
		{"a.b.iptv.example", def},    // nor two labels
		{".iptv.example", def},       // nor an empty label
		{"unknown.example", def},     // unknown: the default
		{"127.0.0.1", def},           // an address is no name
		{"*.iptv.example", wild},     // a literal "*" label is one label
		{"live.iptv.example..", def}, // only one trailing dot is tolerated
		{strings.Repeat("a.", 200), def},
	} {
		got, err := s.GetCertificate(&tls.ClientHelloInfo{ServerName: c.sni})
		if err != nil || serialOf(got) != c.want.serial {
			t.Errorf("SNI %q: got serial %s (err %v), want %s", c.sni, serialOf(got), err, c.want.serial)
		}
	}
}

// TestPickByKeyType: with an ECDSA and an RSA certificate for one name, a
// client that accepts ECDSA gets the first listed, one that does not (TLS
// 1.2 with RSA suites only, as old STBs) gets the RSA one.
func TestPickByKeyType(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	ec := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})
	rs := ca.sign(t, leafSpec{names: []string{"live.iptv.example"}, rsa: true})
	s, err := New(Options{Pairs: []Pair{install(t, dir, "ec", ec), install(t, dir, "rsa", rs)}})
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsServer(t, s.TLSConfig())
	for _, c := range []struct {
		name   string
		suites []uint16
		want   leaf
	}{
		{"any", nil, ec},
		{"rsa only", []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}, rs},
		{"ecdsa only", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, ec},
	} {
		cfg := &tls.Config{RootCAs: ca.pool, ServerName: "live.iptv.example", CipherSuites: c.suites}
		if c.suites != nil {
			cfg.MaxVersion = tls.VersionTLS12
		}
		cs, err := dial(addr, cfg)
		if err != nil || peerSerial(cs) != c.want.serial {
			t.Errorf("%s: got %s (err %v), want %s", c.name, peerSerial(cs), err, c.want.serial)
		}
	}
}

// FuzzLookup: any SNI name gets a certificate, the same whatever its case.
func FuzzLookup(f *testing.F) {
	ca, dir := newTestCA(f), f.TempDir()
	s, err := New(Options{Pairs: []Pair{
		install(f, dir, "def", ca.sign(f, leafSpec{names: []string{"default.example"}})),
		install(f, dir, "wild", ca.sign(f, leafSpec{names: []string{"*.iptv.example", "live.iptv.example"}})),
	}})
	if err != nil {
		f.Fatal(err)
	}
	for _, n := range []string{"", ".", "..", "live.iptv.example.", "x.IPTV.example", "*.", "a.b"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, name string) {
		got, err := s.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
		if err != nil || got == nil {
			t.Fatalf("%q: %v, %v", name, got, err)
		}
		if up, _ := s.GetCertificate(&tls.ClientHelloInfo{ServerName: strings.ToUpper(name)}); up != got && strings.EqualFold(strings.ToUpper(name), name) {
			t.Fatalf("%q and its upper case get different certificates", name)
		}
	})
}
