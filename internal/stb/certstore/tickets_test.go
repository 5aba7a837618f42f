package certstore

import (
	"crypto/tls"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// frozenCache keeps the first session ticket it is given and offers it on
// every dial, ignoring the fresh tickets a resumed handshake brings.
type frozenCache struct {
	mu sync.Mutex
	cs *tls.ClientSessionState
}

func (f *frozenCache) Get(string) (*tls.ClientSessionState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cs, f.cs != nil
}

func (f *frozenCache) Put(_ string, cs *tls.ClientSessionState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cs == nil && cs != nil {
		f.cs = cs
	}
}

// TestTicketRotation: a ticket resumes while its key is among the TicketKeys
// kept, across rotations, and not once the key is dropped; over TLS 1.2
// and 1.3, through a clone of TLSConfig as net/http's ServeTLS makes.
func TestTicketRotation(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	p := install(t, dir, "live", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}}))
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		for _, keep := range []int{2, DefaultTicketKeys} {
			t.Run(fmt.Sprintf("%s/keep%d", tls.VersionName(version), keep), func(t *testing.T) {
				s, err := New(Options{Pairs: []Pair{p}, TicketKeys: keep})
				if err != nil {
					t.Fatal(err)
				}
				addr := tlsServer(t, s.TLSConfig().Clone())
				cache := &frozenCache{}
				cfg := &tls.Config{RootCAs: ca.pool, ServerName: "live.iptv.example", MinVersion: version, MaxVersion: version, ClientSessionCache: cache}
				cs, err := dial(addr, cfg)
				if err != nil || cs.DidResume {
					t.Fatalf("first handshake: resumed %v, err %v", cs.DidResume, err)
				}
				if _, ok := cache.Get(""); !ok {
					t.Fatal("the server gave no session ticket")
				}
				for r := 0; r <= keep; r++ {
					if r > 0 {
						s.RotateTicketKeys()
					}
					cs, err := dial(addr, cfg)
					if err != nil {
						t.Fatalf("after %d rotations: %v", r, err)
					}
					if want := r < keep; cs.DidResume != want {
						t.Errorf("after %d rotations (%d keys kept): resumed %v, want %v", r, keep, cs.DidResume, want)
					}
				}
				if n := testutil.ToFloat64(s.m.rotations); n != float64(keep) {
					t.Errorf("rotations = %v, want %d", n, keep)
				}
			})
		}
	}
}

// TestRunRotates: Run rotates every TicketRotation and keeps TicketKeys.
func TestRunRotates(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	s, err := New(Options{Pairs: []Pair{install(t, dir, "live", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}}))}, TicketRotation: 2 * time.Millisecond, ReloadInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	first := s.conf.Load()
	runStore(t, s)
	eventually(t, 10*time.Second, "4 rotations", func() bool { return testutil.ToFloat64(s.m.rotations) >= 4 })
	s.mu.Lock()
	n := len(s.keys)
	s.mu.Unlock()
	if n != DefaultTicketKeys {
		t.Errorf("%d keys kept, want %d", n, DefaultTicketKeys)
	}
	if s.conf.Load() == first {
		t.Error("the per-handshake configuration was not replaced")
	}
}

// TestTLSParameters: what TLSConfig accepts and refuses.
func TestTLSParameters(t *testing.T) {
	ca, dir := newTestCA(t), t.TempDir()
	s, err := New(Options{Pairs: []Pair{
		install(t, dir, "ec", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})),
		install(t, dir, "rsa", ca.sign(t, leafSpec{names: []string{"rsa.iptv.example"}, rsa: true})),
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsServer(t, s.TLSConfig())
	type check func(tls.ConnectionState) error
	version := func(v uint16) check {
		return func(cs tls.ConnectionState) error {
			if cs.Version != v {
				return fmt.Errorf("version %s, want %s", tls.VersionName(cs.Version), tls.VersionName(v))
			}
			return nil
		}
	}
	for _, c := range []struct {
		name   string
		client *tls.Config
		ok     bool
		check  check
	}{
		{"TLS 1.3 with X25519", &tls.Config{}, true, func(cs tls.ConnectionState) error {
			if cs.Version != tls.VersionTLS13 || cs.CurveID != tls.X25519 {
				return fmt.Errorf("%s %v", tls.VersionName(cs.Version), cs.CurveID)
			}
			return nil
		}},
		{"P-256 only", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP256}}, true, func(cs tls.ConnectionState) error {
			if cs.CurveID != tls.CurveP256 {
				return fmt.Errorf("curve %v", cs.CurveID)
			}
			return nil
		}},
		{"P-384 only", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP384}}, false, nil},
		{"ALPN h2 and http/1.1", &tls.Config{NextProtos: []string{"h2", "http/1.1"}}, true, func(cs tls.ConnectionState) error {
			if cs.NegotiatedProtocol != "http/1.1" {
				return fmt.Errorf("ALPN %q", cs.NegotiatedProtocol)
			}
			return nil
		}},
		{"ALPN h2 only", &tls.Config{NextProtos: []string{"h2"}}, false, nil},
		{"TLS 1.2 ECDSA AES-GCM", &tls.Config{MaxVersion: tls.VersionTLS12}, true, version(tls.VersionTLS12)},
		{"TLS 1.2 RSA ChaCha20", &tls.Config{MaxVersion: tls.VersionTLS12, ServerName: "rsa.iptv.example", CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}}, true, func(cs tls.ConnectionState) error {
			if cs.CipherSuite != tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 {
				return fmt.Errorf("suite %s", tls.CipherSuiteName(cs.CipherSuite))
			}
			return nil
		}},
		{"TLS 1.2 CBC only", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false, nil},
		{"TLS 1.2 RSA key exchange", &tls.Config{MaxVersion: tls.VersionTLS12, ServerName: "rsa.iptv.example", CipherSuites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256}}, false, nil},
		{"TLS 1.1", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, false, nil},
	} {
		cfg := c.client.Clone()
		cfg.RootCAs = ca.pool
		if cfg.ServerName == "" {
			cfg.ServerName = "live.iptv.example"
		}
		cs, err := dial(addr, cfg)
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && err == nil:
			t.Errorf("%s: handshake succeeded (%s, %s)", c.name, tls.VersionName(cs.Version), tls.CipherSuiteName(cs.CipherSuite))
		case c.ok && c.check != nil:
			if err := c.check(cs); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}
