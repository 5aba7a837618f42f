package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/stb/certstore"
	"github.com/anysched/anysched/internal/stb/httpd"
)

// errNoHTTPS: the anysched side of the HTTPS comparison is not available
// (kept for builds whose front end has no TLS listener).
var errNoHTTPS = errors.New("internal/stb/httpd has no HTTPS listener in this build")

// tlsFiles is what the HTTPS servers are given.
type tlsFiles struct {
	cert, key string // PEM files: an ECDSA P-256 certificate and its key
	resume    bool   // offer session resumption (tickets); false: full handshakes only
}

// anyschedHTTPS is the anysched side of the HTTPS comparison, as the daemon
// serves https.listen: the same httpd server core over TLS (net/http), the
// certificate from internal/stb/certstore, with the engine and access log of
// w, the plain listener's configuration c, and the certificate nginx
// serves too.
func anyschedHTTPS(w *world, c httpd.Config, t tlsFiles) (func(ctx context.Context, ln net.Listener) error, error) {
	cs, err := certstore.New(certstore.Options{Pairs: []certstore.Pair{{CertFile: t.cert, KeyFile: t.key}}, ReloadInterval: -1})
	if err != nil {
		return nil, err
	}
	cfg := cs.TLSConfig()
	if !t.resume {
		perClient := cfg.GetConfigForClient
		cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := perClient(h)
			if err != nil || cc == nil {
				return cc, err
			}
			cc = cc.Clone()
			cc.SessionTicketsDisabled = true
			return cc, nil
		}
	}
	srv := httpd.New(c, w.engineFunc, w.rec, nil)
	return func(ctx context.Context, ln net.Listener) error {
		return srv.Serve(ctx, tls.NewListener(ln, cfg))
	}, nil
}

// writeCert creates a self-signed ECDSA P-256 certificate for the service
// name and 127.0.0.1, as PEM files in dir, and returns their paths and the
// certificate (the HTTPS checks trust it).
func writeCert(dir string) (certFile, keyFile string, cert *x509.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return "", "", nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: topogen.Hostname},
		DNSNames:              []string{topogen.Hostname},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // self-signed: it is its own trust anchor
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, err
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return "", "", nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600); err != nil {
		return "", "", nil, err
	}
	return certFile, keyFile, cert, nil
}
