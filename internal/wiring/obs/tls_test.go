package obs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAdminTLSRequiresClientCertificate: with admin.tls, the admin listener
// serves HTTPS and a client without a certificate of the client CA (none,
// or another CA's) fails the handshake; one with it reads /metrics.
func TestAdminTLSRequiresClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("admin CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc, sk, err := ca.WriteLeaf(dir, "server", pki.Leaf{CN: "sched", Hosts: []string{"127.0.0.1"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cc, ck, err := ca.WriteLeaf(dir, "prometheus", pki.Leaf{CN: "prometheus", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := pki.NewCA("other", time.Hour)
	oc, ok, err := other.WriteLeaf(dir, "other", pki.Leaf{CN: "other", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsutil.Server(config.ServerTLS{CertFile: sc, KeyFile: sk, ClientCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	a := &Admin{Gatherer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TLS: tc}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })

	pem, _ := os.ReadFile(caFile)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	get := func(certs ...tls.Certificate) error {
		cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		resp, err := cl.Get("https://" + ln.Addr().String() + "/metrics")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("/metrics: %s", resp.Status)
		}
		return nil
	}
	if err := get(); err == nil {
		t.Error("a client without a certificate read /metrics")
	}
	otherPair, err := tls.LoadX509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(otherPair); err == nil {
		t.Error("a client with another CA's certificate read /metrics")
	}
	pair, err := tls.LoadX509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(pair); err != nil {
		t.Errorf("a client with the CA's certificate: %v", err)
	}
	// Plain HTTP to the HTTPS listener gets nothing useful either.
	if resp, err := http.Get("http://" + ln.Addr().String() + "/metrics"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP read /metrics")
		}
		resp.Body.Close()
	}
}
