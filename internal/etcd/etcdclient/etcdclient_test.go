package etcdclient

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/wiring/config"
)

// TestConnectRefusesTLSOverHTTP: etcd.tls with an http:// endpoint used to
// dial it in plaintext, dropping the certificate without a word.
func TestConnectRefusesTLSOverHTTP(t *testing.T) {
	c := config.Etcd{DialTimeout: time.Second, TLS: config.ClientTLS{CAFile: "/nonexistent/ca.pem"}}
	_, err := Connect(c, []string{"https://127.0.0.1:1", "http://127.0.0.1:2"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:2: http:// with etcd.tls set: use https://") {
		t.Fatalf("err = %v", err)
	}
}
