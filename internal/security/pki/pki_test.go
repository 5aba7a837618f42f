package pki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"
)

func TestIssueChainsAndCarriesRole(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, caKey, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := LoadCA(caFile, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf, err := again.WriteLeaf(dir, "alice", Leaf{CN: "alice", Role: "operator", Client: true, Hosts: []string{"127.0.0.1", "center.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{kf, caKey} {
		st, err := os.Stat(f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
	pair, err := tls.LoadX509KeyPair(cf, kf)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("leaf does not chain to the CA: %v", err)
	}
	if leaf.Subject.CommonName != "alice" || len(leaf.URIs) != 1 || leaf.URIs[0].String() != "urn:anysched:role:operator" {
		t.Errorf("identity %q, URIs %v", leaf.Subject.CommonName, leaf.URIs)
	}
	if len(leaf.IPAddresses) != 1 || len(leaf.DNSNames) != 1 {
		t.Errorf("hosts: IPs %v, names %v", leaf.IPAddresses, leaf.DNSNames)
	}
	if _, _, err := ca.Issue(Leaf{CN: "x"}); err == nil {
		t.Error("a leaf for neither server nor client was issued")
	}
}
