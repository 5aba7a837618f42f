package certstore

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/syncbuf"
)

// testCA signs the test certificates; pool trusts it.
type testCA struct {
	cert *x509.Certificate
	key  crypto.Signer
	pool *x509.CertPool
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leafSpec describes a test leaf; zero dates mean valid from an hour ago
// for an hour.
type leafSpec struct {
	names               []string
	rsa                 bool
	notBefore, notAfter time.Time
}

// leaf is a signed certificate: PEM of the leaf and the CA (a chain), PEM
// of its key (PKCS#8), and its serial to recognise it in a handshake.
type leaf struct {
	certPEM, keyPEM []byte
	serial          string
}

func (ca *testCA) sign(t testing.TB, s leafSpec) leaf {
	t.Helper()
	var key crypto.Signer
	var err error
	if s.rsa {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.notBefore.IsZero() {
		s.notBefore = time.Now().Add(-time.Hour)
	}
	if s.notAfter.IsZero() {
		s.notAfter = time.Now().Add(time.Hour)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		t.Fatal(err)
	}
	cn := "no name"
	if len(s.names) > 0 {
		cn = s.names[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     s.names,
		NotBefore:    s.notBefore,
		NotAfter:     s.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...)
	return leaf{certPEM: chain, keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), serial: serial.String()}
}

// writeAtomic replaces path as a deployment tool does: a temporary file in
// the same directory, renamed over it.
func writeAtomic(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Chmod(perm); err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// install writes l as <name>.pem and <name>-key.pem in dir, the key first.
func install(t testing.TB, dir, name string, l leaf) Pair {
	t.Helper()
	p := Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	writeAtomic(t, p.KeyFile, l.keyPEM, 0o600)
	writeAtomic(t, p.CertFile, l.certPEM, 0o644)
	return p
}

// serialOf is the serial of the leaf a certificate carries.
func serialOf(c *tls.Certificate) string {
	if c == nil || c.Leaf == nil {
		return "<none>"
	}
	return c.Leaf.SerialNumber.String()
}

// logBuffer collects log lines written from several goroutines.
type logBuffer struct{ syncbuf.Buffer }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// runStore runs s until the test ends.
func runStore(t testing.TB, s *Store) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// tlsServer accepts TLS connections on 127.0.0.1:0 with cfg, completes
// the handshake, writes one byte (which carries TLS 1.3 session tickets to
// the client ahead of it) and closes. It stops when the test ends.
func tlsServer(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := c.(*tls.Conn).Handshake(); err != nil {
					t.Logf("server handshake: %v", err)
				} else {
					c.Write([]byte{'x'})
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// dial completes a handshake with addr and reads the server's byte.
func dial(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// The byte may come with the server's close_notify: n 1, err io.EOF.
	if n, err := c.Read(make([]byte, 1)); n != 1 {
		return tls.ConnectionState{}, fmt.Errorf("reading the server's byte: %w", err)
	}
	return c.ConnectionState(), nil
}

func peerSerial(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return "<none>"
	}
	return cs.PeerCertificates[0].SerialNumber.String()
}
