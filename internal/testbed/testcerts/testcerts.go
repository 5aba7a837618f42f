// Package testcerts writes a throwaway CA with a server and a client
// certificate for TLS tests (loopback only).
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the PEM files written by Write.
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// OtherCA signed OtherClientCert/Key: a client the server must refuse.
	OtherClientCert, OtherClientKey string
}

// Write creates the certificates in dir.
func Write(t testing.TB, dir string) Files {
	t.Helper()
	ca, caKey := newCA(t, "anysched test CA")
	other, otherKey := newCA(t, "some other CA")
	f := Files{CA: filepath.Join(dir, "ca.pem")}
	writePEM(t, f.CA, "CERTIFICATE", ca.Raw)
	f.ServerCert, f.ServerKey = leaf(t, dir, "server", ca, caKey, x509.ExtKeyUsageServerAuth)
	f.ClientCert, f.ClientKey = leaf(t, dir, "client", ca, caKey, x509.ExtKeyUsageClientAuth)
	f.OtherClientCert, f.OtherClientKey = leaf(t, dir, "other-client", other, otherKey, x509.ExtKeyUsageClientAuth)
	return f
}

// Host writes a CA and a server certificate for names (signed by it), as
// an operator's STB-facing HTTPS certificate: ca is what clients trust.
func Host(t testing.TB, dir string, names ...string) (ca, cert, key string) {
	t.Helper()
	c, cKey := newCA(t, "anysched test STB CA")
	ca = filepath.Join(dir, "stb-ca.pem")
	writePEM(t, ca, "CERTIFICATE", c.Raw)
	cert, key = leaf(t, dir, "stb-"+names[0], c, cKey, x509.ExtKeyUsageServerAuth, names...)
	return ca, cert, key
}

func newCA(t testing.TB, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leaf(t testing.TB, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage, dnsNames ...string) (string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames:    []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if len(dnsNames) > 0 {
		tpl.DNSNames, tpl.IPAddresses = dnsNames, nil
	}
	if usage == x509.ExtKeyUsageClientAuth {
		// Admin callers' role (pki.RoleURIPrefix): the admin API refuses a
		// certificate without one. etcd ignores it.
		tpl.URIs = []*url.URL{{Scheme: "urn", Opaque: "anysched:role:admin"}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return cert, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
