package httpd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/testcerts"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// ServeTLS answers over HTTPS as Serve does over HTTP, and says in its log
// that it is an HTTPS listener (it used to log itself as the fast path's
// "listener is not TCP" and "http listener up"). The redirect is the
// service's URL template as written: http:// here, over HTTPS too.
func TestServeTLSAnswersAndSaysHTTPS(t *testing.T) {
	ca, cert, key := testcerts.Host(t, t.TempDir(), host)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	rec := logtest.New()
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, rec.Logger())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeTLS(ctx, ln, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeTLS returned %v", err)
		}
	}()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext(ctx, network, ln.Addr().String())
			},
		},
	}
	var resp *http.Response
	wait.For(t, "an answer over https", 5*time.Second, func() bool {
		r, err := c.Get("https://" + host + "/cctv1/index.m3u8")
		if err != nil {
			return false
		}
		r.Body.Close()
		resp = r
		return true
	})
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != locHefei {
		t.Fatalf("over https: %d %q, want 302 %q", resp.StatusCode, resp.Header.Get("Location"), locHefei)
	}
	if up := rec.Containing(slog.LevelInfo, "https listener up"); len(up) != 1 {
		t.Errorf("%d \"https listener up\" lines, want 1: %v", len(up), rec.Records(slog.LevelDebug))
	}
	for _, wrong := range []string{"http listener up", "listener is not TCP"} {
		for _, r := range rec.Containing(slog.LevelDebug, wrong) {
			if r.Message == wrong || r.Message == wrong+"; serving with net/http" {
				t.Errorf("an HTTPS listener logged %q", r.Message)
			}
		}
	}
}
