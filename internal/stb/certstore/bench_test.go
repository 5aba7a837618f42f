package certstore

import (
	"crypto/tls"
	"testing"
)

// BenchmarkGetCertificate: the per-handshake lookup, exact, wildcard,
// mixed case and unknown names.
func BenchmarkGetCertificate(b *testing.B) {
	ca, dir := newTestCA(b), b.TempDir()
	s, err := New(Options{Pairs: []Pair{
		install(b, dir, "def", ca.sign(b, leafSpec{names: []string{"default.example"}})),
		install(b, dir, "live", ca.sign(b, leafSpec{names: []string{"live.iptv.example"}})),
		install(b, dir, "wild", ca.sign(b, leafSpec{names: []string{"*.iptv.example"}})),
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"live.iptv.example", "news.iptv.example", "Live.IPTV.example", "unknown.example"} {
		b.Run(name, func(b *testing.B) {
			hello := &tls.ClientHelloInfo{ServerName: name}
			b.ReportAllocs()
			for b.Loop() {
				s.GetCertificate(hello)
			}
		})
	}
}

// BenchmarkHandshake: new connections over loopback with an ECDSA P-256
// or RSA 2048 certificate, full or resumed (TLS 1.3 and 1.2); client and
// server share the process, so the figure is both sides' cost.
func BenchmarkHandshake(b *testing.B) {
	ca, dir := newTestCA(b), b.TempDir()
	s, err := New(Options{Pairs: []Pair{
		install(b, dir, "ec", ca.sign(b, leafSpec{names: []string{"ec.iptv.example"}})),
		install(b, dir, "rsa", ca.sign(b, leafSpec{names: []string{"rsa.iptv.example"}, rsa: true})),
	}})
	if err != nil {
		b.Fatal(err)
	}
	addr := tlsServer(b, s.TLSConfig())
	for _, key := range []string{"ec", "rsa"} {
		for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
			for _, resume := range []bool{false, true} {
				name := key + "/" + tls.VersionName(v) + "/full"
				cfg := &tls.Config{RootCAs: ca.pool, ServerName: key + ".iptv.example", MaxVersion: v}
				if resume {
					name = key + "/" + tls.VersionName(v) + "/resumed"
					cfg.ClientSessionCache = &frozenCache{}
					if _, err := dial(addr, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						cs, err := dial(addr, cfg)
						if err != nil || cs.DidResume != resume {
							b.Fatalf("resumed %v, err %v", cs.DidResume, err)
						}
					}
				})
			}
		}
	}
}
