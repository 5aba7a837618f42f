// Package etcdtest runs a real single-node etcd (the embed package) on
// loopback ports in a test's temporary directory, and can stop and restart it
// to inject a store outage.
package etcdtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/store"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Etcd is a test etcd server.
type Etcd struct {
	t       testing.TB
	cfg     config.Embedded
	opts    store.EmbeddedOptions
	emb     *store.Embedded
	Logger  *slog.Logger
	Prefix  string
	Running bool
}

// FreePort returns a loopback host:port that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Start runs etcd until the test ends.
func Start(t testing.TB) *Etcd { return StartWith(t, store.EmbeddedOptions{}) }

// StartWith runs etcd with extra options (e.g. client TLS).
func StartWith(t testing.TB, opts store.EmbeddedOptions) *Etcd {
	t.Helper()
	e := &Etcd{
		t: t, opts: opts, Prefix: "/anysched/",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		cfg: config.Embedded{
			Dir: t.TempDir(), Name: "test",
			ClientListen: FreePort(t), PeerListen: FreePort(t),
		},
	}
	e.startNow()
	t.Cleanup(e.Stop)
	return e
}

func (e *Etcd) startNow() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	emb, err := store.StartEmbedded(ctx, e.cfg, e.opts, e.Logger)
	if err != nil {
		e.t.Fatalf("start etcd: %v", err)
	}
	e.emb, e.Running = emb, true
}

// Endpoint is the client URL.
func (e *Etcd) Endpoint() string {
	scheme := "http"
	if !e.opts.ClientTLS.Empty() {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s", scheme, e.cfg.ClientListen)
}

// Stop stops the server (idempotent).
func (e *Etcd) Stop() {
	if e.Running {
		e.emb.Close()
		e.Running = false
	}
}

// Restart starts a stopped server again on the same ports and data.
func (e *Etcd) Restart() {
	e.t.Helper()
	if !e.Running {
		e.startNow()
	}
}

// Client returns a plain client closed at the end of the test.
func (e *Etcd) Client() *clientv3.Client {
	e.t.Helper()
	cli, err := store.Connect(config.Etcd{DialTimeout: 5 * time.Second}, []string{e.Endpoint()}, e.Logger)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cli.Close() })
	return cli
}

// Store returns a store over a new client.
func (e *Etcd) Store() *store.Store { return store.New(e.Client(), e.Prefix, e.Logger) }

// TLSInfo is a convenience for StartWith.
type TLSInfo = transport.TLSInfo
