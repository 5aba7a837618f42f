// Package etcdserver is the embedded etcd member a center (or a lab's etcd
// member) runs, and the drill endpoint that stops it for a while. It is apart
// from internal/province/store, the client side, so that only the binaries that run a
// member link the etcd server.
package etcdserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver/embedcfg"
	"github.com/anysched/anysched/internal/wiring/obs"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Embedded is a single-node etcd inside the central scheduler: the default for
// a lab or a small province. Production provinces run an external cluster.
type Embedded struct {
	ClientURL string

	mu      sync.Mutex
	etcd    *embed.Etcd
	cfg     embedcfg.Config
	opts    EmbeddedOptions
	log     *slog.Logger
	closing *atomic.Bool  // set before a deliberate stop: etcd's "serving failed" is expected then
	stopped bool          // deliberately stopped (a drill): Err stays quiet
	changed chan struct{} // closed and replaced on every stop/start
}

// EmbeddedOptions adds knobs the daemons' configuration does not have.
type EmbeddedOptions struct {
	// ClientTLS serves clients over TLS; with ClientCertAuth and
	// TrustedCAFile only clients with a certificate of that CA get in, and
	// with etcd's auth on (internal/etcd/etcdauth) the certificate's CN is the
	// user. Empty: from the configuration's tls section, if any.
	ClientTLS transport.TLSInfo
	// PeerTLS serves peers over TLS (a cluster member whose peers are
	// beyond loopback). Empty: plaintext peers.
	PeerTLS transport.TLSInfo
	// InitialCluster makes the server one member of a multi-member cluster
	// ("name1=http://peer1,name2=http://peer2,..."; the lab's etcd members).
	// Empty: a single-node cluster of its own. A member restarted on its
	// data directory takes its membership from there.
	InitialCluster string
	ClusterToken   string
	// KeepRevisions is the member's own auto-compaction, by revision:
	// the history it keeps at least (0: etcdhousekeep.DefaultKeepRevisions).
	// The center passes etcd.housekeeping.keep_revisions, so that etcd's
	// compactor never keeps less than the housekeeper (which bounds the
	// history by time as well).
	KeepRevisions int64
	// QuotaBackendBytes is the backend quota, at which etcd raises NOSPACE
	// (0: etcd's default, 2 GiB). Tests fill a small one.
	QuotaBackendBytes int64
}

// AutoCompaction sets cfg's auto-compaction from the options: by
// revision, keeping opts.KeepRevisions. Not by time: the province's plan
// state is megabytes a second, so an hour of it is far over the quota,
// while the housekeeper bounds the time (docs/design.md, "etcd
// housekeeping").
func AutoCompaction(cfg *embed.Config, opts EmbeddedOptions) {
	keep := opts.KeepRevisions
	if keep <= 0 {
		keep = etcdhousekeep.DefaultKeepRevisions
	}
	cfg.AutoCompactionMode = embed.CompactorModeRevision
	cfg.AutoCompactionRetention = strconv.FormatInt(keep, 10)
	cfg.QuotaBackendBytes = opts.QuotaBackendBytes
}

// StartEmbedded starts etcd and waits until it serves.
func StartEmbedded(ctx context.Context, c embedcfg.Config, opts EmbeddedOptions, log *slog.Logger) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	scheme := "http"
	if ct := clientTLS(c, opts); !ct.Empty() {
		scheme = "https"
		cfg.ClientTLSInfo = ct
		// The HTTP/JSON gateway reaches the server through a client of its
		// own: one more way in that the gRPC clients never need.
		cfg.EnableGRPCGateway = false
	}
	cu := url.URL{Scheme: scheme, Host: c.ClientListen}
	pu := url.URL{Scheme: "http", Host: c.PeerListen}
	if !opts.PeerTLS.Empty() {
		pu.Scheme = "https"
		cfg.PeerTLSInfo = opts.PeerTLS
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if opts.InitialCluster != "" {
		cfg.InitialCluster, cfg.InitialClusterToken = opts.InitialCluster, opts.ClusterToken
	}
	AutoCompaction(cfg, opts)
	// What etcd logs of a deliberate Close is no problem: each listener's
	// end ("setting up serving from embedded etcd failed." at ERROR, its gRPC
	// server "stopping"/"stopped ... due to error" at WARN: the listener
	// closed), and, closed before its first term is applied (a stop within
	// a second of the start), its storage-version monitor's "failed to
	// update storage version" (missing term information) and its
	// cluster-version update's "failed to update cluster version"
	// (request cancelled). Demoted while closing, so that a clean stop
	// logs no warning.
	closing := new(atomic.Bool)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(obs.ZapLoggerDemoting(log.With("component", "etcd"), zapcore.WarnLevel, func(e zapcore.Entry) bool {
		return closing.Load() && demotedWhileClosing(e.Message)
	}))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start embedded etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcdserver: embedded etcd in %s: not ready after 60s (a cluster member is ready once a quorum of members runs)", c.Dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	// Port 0 (tests) binds whatever the kernel gives: read the addresses
	// back, and keep them so that a restart (a drill) comes back on them.
	if len(e.Clients) > 0 {
		c.ClientListen = e.Clients[0].Addr().String()
		cu.Host = dialable(c.ClientListen)
	}
	if len(e.Peers) > 0 {
		c.PeerListen = e.Peers[0].Listener.Addr().String()
	}
	log.Info("embedded etcd ready", "component", "etcd", "client_url", cu.String(), "dir", c.Dir)
	return &Embedded{etcd: e, ClientURL: cu.String(), cfg: c, opts: opts, log: log, closing: closing, changed: make(chan struct{})}, nil
}

// clientTLS is how the server meets its clients: the options' TLS, else the
// configuration's (https, client certificates of client_ca_file required).
func clientTLS(c embedcfg.Config, opts EmbeddedOptions) transport.TLSInfo {
	if !opts.ClientTLS.Empty() || !c.TLS.Enabled() {
		return opts.ClientTLS
	}
	return transport.TLSInfo{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, TrustedCAFile: c.TLS.ClientCAFile, ClientCertAuth: true}
}

// dialable is the address a local client dials for a listener: loopback
// for a wildcard listener (whose server certificate must then name
// 127.0.0.1, or the client set etcd.tls.server_name).
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	// Go's wildcard listeners are dual-stack: 127.0.0.1 reaches "[::]" too.
	if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return listen
}

// Err reports a fatal etcd server error; after a deliberate Stop it never
// fires. Changed tells when to ask again (the server was stopped or started).
func (e *Embedded) Err() (errs <-chan error, changed <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return nil, e.changed
	}
	return e.etcd.Err(), e.changed
}

// Name is the member's name.
func (e *Embedded) Name() string { return e.cfg.Name }

// Stop stops the server for a while (an etcd-loss drill), abruptly; Start
// brings it back.
func (e *Embedded) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	e.stopped = true
	close(e.changed)
	e.changed = make(chan struct{})
	// Close stops serving clients before it stops the server: stopping
	// raft first (HardStop) closes the backend under the gRPC servers, and
	// with auth on a watch created meanwhile reads users from the closed
	// backend and panics the process (etcd 3.7's isWatchPermitted). The
	// member drains clients for up to ~2 s and hands leadership over
	// before it leaves the quorum.
	e.closing.Store(true)
	e.etcd.Close()
	e.log.Warn("embedded etcd stopped", "component", "etcd")
}

// Start restarts a stopped server with the same configuration and data.
func (e *Embedded) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		return nil
	}
	n, err := StartEmbedded(ctx, e.cfg, e.opts, e.log)
	if err != nil {
		return err
	}
	e.etcd, e.closing, e.stopped = n.etcd, n.closing, false
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

// Close stops the server for good.
func (e *Embedded) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		e.closing.Store(true)
		e.etcd.Close()
		e.stopped = true
	}
}

// demotedWhileClosing reports whether msg is one etcd logs of a
// deliberate Close.
func demotedWhileClosing(msg string) bool {
	switch msg {
	case "setting up serving from embedded etcd failed.",
		"failed to update storage version", "failed to update cluster version",
		"stopping insecure grpc server due to error", "stopped insecure grpc server due to error",
		"stopping secure grpc server due to error", "stopped secure grpc server due to error":
		return true
	}
	return false
}
