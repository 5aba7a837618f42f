// Package pki makes the certificates a province needs when the operator has
// no PKI of their own: a CA, and leaf certificates carrying an identity (the
// subject common name) and, for admin callers, a role (a URI SAN
// urn:anysched:role:<role>). The lab, the demo and the tests use it;
// `schedctl pki` exposes it to operators.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// RoleURIPrefix starts the URI SAN that carries an admin caller's role.
const RoleURIPrefix = "urn:anysched:role:"

// RoleURI is the URI SAN for a role.
func RoleURI(role string) *url.URL {
	u, _ := url.Parse(RoleURIPrefix + role) // an opaque URN always parses
	return u
}

// CA signs leaf certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// NewCA makes a self-signed CA valid for validity.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"anysched"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// LoadCA reads a CA written by WriteCA (or any PEM certificate and PKCS#8,
// EC or RSA key pair).
func LoadCA(certFile, keyFile string) (*CA, error) {
	cpem, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	b, _ := pem.Decode(cpem)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("pki: %s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", certFile, err)
	}
	key, err := loadKey(keyFile)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(b)}, nil
}

func loadKey(file string) (crypto.Signer, error) {
	kpem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	b, _ := pem.Decode(kpem)
	if b == nil {
		return nil, fmt.Errorf("pki: %s: no PEM key", file)
	}
	var k any
	switch b.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", file, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: %s: not a signing key", file)
	}
	return s, nil
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// CN is the identity: the admin API logs and audits it, etcd takes it
	// as the user name.
	CN string
	// Role, when set, is carried as the URI SAN urn:anysched:role:<role>.
	Role string
	// Hosts are the DNS names and IP addresses a server certificate is for.
	Hosts []string
	// Server and Client select the extended key usages.
	Server, Client bool
	// Validity; 0 means one year.
	Validity time.Duration
}

// Issue signs a leaf certificate; it returns the certificate and its
// (PKCS#8) key as PEM.
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	if l.CN == "" {
		return nil, nil, errors.New("pki: a certificate needs a common name (the identity)")
	}
	if !l.Server && !l.Client {
		return nil, nil, errors.New("pki: a certificate is for a server, a client or both")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	validity := l.Validity
	if validity == 0 {
		validity = 365 * 24 * time.Hour
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.CN, Organization: []string{"anysched"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range l.Hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.AsSlice()))
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if l.Role != "" {
		tmpl.URIs = []*url.URL{RoleURI(l.Role)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: issue %q: %w", l.CN, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// WriteCA writes ca.pem (0644) and ca-key.pem (0600) into dir.
func (ca *CA) WriteCA(dir string) (certFile, keyFile string, err error) {
	kder, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return "", "", fmt.Errorf("pki: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := writeFile(certFile, ca.CertPEM, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writeFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
}

// WriteLeaf issues l and writes <name>.pem (0644) and <name>-key.pem
// (0600) into dir.
func (ca *CA) WriteLeaf(dir, name string, l Leaf) (certFile, keyFile string, err error) {
	c, k, err := ca.Issue(l)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writeFile(certFile, c, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writeFile(keyFile, k, 0o600)
}

// writeFile writes data with exactly perm (whatever the umask), through a
// temporary file, so that a reader never sees half a key.
func writeFile(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer os.Remove(tmp.Name())
	// One err all through: a failed write or sync must stop the rename.
	if err = tmp.Chmod(perm); err == nil {
		_, err = tmp.Write(data)
		if err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
