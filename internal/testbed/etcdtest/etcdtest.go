// Package etcdtest runs a real single-node etcd (the embed package) on
// loopback in a test's temporary directory, and can stop and restart it to
// inject a store outage.
//
// Ports: the client and peer ports are held for the whole test (package
// port: bound on 127.0.0.1:0 by the kernel, read back, never released until
// the test ends) and etcd listens on them with SO_REUSEPORT. So no other
// test on the machine can be handed them, and Restart comes back on the same
// endpoint, which the clients made before the outage keep dialing. This is
// why the server is configured here rather than through
// etcdserver.StartEmbedded: the daemon's wrapper neither takes socket options
// nor reports the addresses it bound.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/wiring/obs"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Etcd is a test etcd server.
type Etcd struct {
	t      testing.TB
	dir    string
	opts   etcdserver.EmbeddedOptions
	client *port.Held
	peer   *port.Held
	etcd   *embed.Etcd

	Logger  *slog.Logger
	Prefix  string
	Running bool
}

// Start runs etcd until the test ends.
func Start(t testing.TB) *Etcd { return StartWith(t, etcdserver.EmbeddedOptions{}) }

// StartWith runs etcd with extra options: client TLS, the quota, the
// auto-compaction's revisions. It is always a
// single-node cluster (InitialCluster must be empty).
func StartWith(t testing.TB, opts etcdserver.EmbeddedOptions) *Etcd {
	t.Helper()
	if opts.InitialCluster != "" {
		t.Fatal("etcdtest: a single-node etcd; start cluster members with etcdserver.StartEmbedded")
	}
	e := &Etcd{
		t: t, dir: t.TempDir(), opts: opts, Prefix: "/anysched/",
		client: port.Hold(t), peer: port.Hold(t),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	e.startNow()
	t.Cleanup(e.Stop) // before the ports are released (cleanups run last-in first-out)
	return e
}

func (e *Etcd) config() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "test", e.dir
	scheme := "http"
	if !e.opts.ClientTLS.Empty() {
		scheme = "https"
		cfg.ClientTLSInfo = e.opts.ClientTLS
	}
	cu := url.URL{Scheme: scheme, Host: e.client.Addr()}
	pu := url.URL{Scheme: "http", Host: e.peer.Addr()}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.SocketOpts = transport.SocketOpts{ReusePort: true} // listen on the held ports
	// As etcdserver.StartEmbedded: compaction by revision, the quota.
	etcdserver.AutoCompaction(cfg, e.opts)
	// Tests that turn auth on log in with passwords; each token etcd
	// issues costs a bcrypt comparison, at its default cost tens of
	// milliseconds and seconds under -race. The cheapest cost keeps them
	// quick; nothing here guards a real secret.
	cfg.BcryptCost = 4 // bcrypt.MinCost
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(obs.ZapLogger(e.Logger.With("component", "etcd"), zapcore.WarnLevel))
	return cfg
}

func (e *Etcd) startNow() {
	e.t.Helper()
	emb, err := embed.StartEtcd(e.config())
	if err != nil {
		e.t.Fatalf("start etcd in %s: %v", e.dir, err)
	}
	select {
	case <-emb.Server.ReadyNotify():
	case err := <-emb.Err():
		emb.Close()
		e.t.Fatalf("etcd in %s: %v", e.dir, err)
	case <-time.After(60 * time.Second):
		emb.Close()
		e.t.Fatalf("etcd in %s: not ready after 60s", e.dir)
	}
	// The listeners etcd reports are the held ports (read back, not assumed).
	if got := emb.Clients[0].Addr().String(); got != e.client.Addr() {
		emb.Close()
		e.t.Fatalf("etcd listens for clients on %s, not on the held %s", got, e.client.Addr())
	}
	if got := emb.Peers[0].Listener.Addr().String(); got != e.peer.Addr() {
		emb.Close()
		e.t.Fatalf("etcd listens for peers on %s, not on the held %s", got, e.peer.Addr())
	}
	e.etcd, e.Running = emb, true
}

// Endpoint is the client URL; it stays the same across Stop and Restart.
func (e *Etcd) Endpoint() string {
	scheme := "http"
	if !e.opts.ClientTLS.Empty() {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s", scheme, e.client.Addr())
}

// ClientAddr is the client listener's host:port.
func (e *Etcd) ClientAddr() string { return e.client.Addr() }

// Stop stops the server (idempotent). Its ports stay held: clients get
// "connection refused" until Restart.
func (e *Etcd) Stop() {
	if e.Running {
		e.etcd.Close()
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

// Wipe loses the store whole: etcd is stopped, its data deleted, and it
// starts again empty on the same ports, as a rebuilt store does (its
// revisions numbered anew).
func (e *Etcd) Wipe() {
	e.t.Helper()
	e.Stop()
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Fatal(err)
	}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		e.t.Fatal(err)
	}
	e.startNow()
}

// Client returns a plain client closed at the end of the test.
func (e *Etcd) Client() *clientv3.Client {
	e.t.Helper()
	// A plain loopback client, not etcdclient.Connect: that takes the
	// daemons' configuration, which composes the allocator's, whose tests
	// use this package.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second,
		Logger: obs.ZapLogger(e.Logger.With("component", "etcd-client"), zapcore.ErrorLevel)})
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

// FillToNoSpace writes 256 KiB values to keys prefix+"fill/<n>", n
// cycling through keys of them, until etcd refuses a write for its quota
// (StartWith's QuotaBackendBytes: a few MiB) and raises NOSPACE. With a
// few keys the history of the overwritten values fills it, as the
// province's plan state does (compaction makes room); with as many keys as
// writes, live data does (it does not). It returns the bytes written.
func FillToNoSpace(t testing.TB, cli *clientv3.Client, prefix string, keys int) int64 {
	t.Helper()
	val := strings.Repeat("x", 256<<10)
	var n int64
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := cli.Put(ctx, fmt.Sprintf("%sfill/%d", prefix, i%keys), val)
		cancel()
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			return n
		case err != nil:
			t.Fatalf("filling etcd: %v", err)
		case n > 1<<30:
			t.Fatal("filling etcd: 1 GiB written and no NOSPACE (is QuotaBackendBytes set?)")
		}
		n += int64(len(val))
	}
}
