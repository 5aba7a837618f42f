package certstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCurl: the real curl, checking the chain against the CA, reaches a
// net/http server using TLSConfig, over HTTP/1.1 even when it offers h2,
// for an exact name and a wildcard one.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl on PATH")
	}
	ca, dir := newTestCA(t), t.TempDir()
	s, err := New(Options{Pairs: []Pair{
		install(t, dir, "live", ca.sign(t, leafSpec{names: []string{"live.iptv.example"}})),
		install(t, dir, "wild", ca.sign(t, leafSpec{names: []string{"*.iptv.example"}, rsa: true})),
	}})
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{
		TLSConfig: s.TLSConfig(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s", r.Proto, r.TLS.ServerName)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("ServeTLS: %v", err)
		}
	})
	for _, c := range []struct {
		host string
		args []string
	}{
		{"live.iptv.example", nil},
		{"live.iptv.example", []string{"--http2"}},
		{"live.iptv.example", []string{"--tlsv1.2", "--tls-max", "1.2"}},
		{"news.iptv.example", nil},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := append([]string{"-sS", "--noproxy", "*", "--max-time", "10",
			"--resolve", c.host + ":" + port + ":127.0.0.1", "--cacert", caFile,
			"-w", " curl:%{http_version}"}, c.args...)
		out, err := exec.CommandContext(ctx, curl, append(args, "https://"+c.host+":"+port+"/")...).CombinedOutput()
		cancel()
		if want := "HTTP/1.1 " + c.host + " curl:1.1"; err != nil || string(out) != want {
			t.Errorf("curl %s %s: %q (%v), want %q", c.host, strings.Join(c.args, " "), out, err, want)
		}
	}
}
