package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/obs"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Connect creates an etcd client for the configured endpoints. It does not
// wait for the cluster: a scheduler must start (and serve its cached
// snapshot) while etcd is down.
func Connect(c config.Etcd, endpoints []string, log *slog.Logger) (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	if c.TLS.Enabled() {
		info := transport.TLSInfo{TrustedCAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, ServerName: c.TLS.ServerName}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("store: etcd.tls: %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  tlsCfg,
		Logger:               obs.ZapLogger(log.With("component", "etcd-client"), zapcore.ErrorLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("store: etcd client: %w", err)
	}
	return cli, nil
}

// Embedded is a single-node etcd inside the central scheduler: the default for
// a lab or a small province. Production provinces run an external cluster.
type Embedded struct {
	ClientURL string

	mu      sync.Mutex
	etcd    *embed.Etcd
	cfg     config.Embedded
	opts    EmbeddedOptions
	log     *slog.Logger
	stopped bool          // deliberately stopped (a drill): Err stays quiet
	changed chan struct{} // closed and replaced on every stop/start
}

// EmbeddedOptions adds knobs the daemons' configuration does not have.
type EmbeddedOptions struct {
	ClientTLS transport.TLSInfo // serve clients over TLS (tests of the TLS client)
	// InitialCluster makes the server one member of a multi-member cluster
	// ("name1=http://peer1,name2=http://peer2,..."; the lab's etcd members).
	// Empty: a single-node cluster of its own. A member restarted on its
	// data directory takes its membership from there.
	InitialCluster string
	ClusterToken   string
}

// StartEmbedded starts etcd and waits until it serves.
func StartEmbedded(ctx context.Context, c config.Embedded, opts EmbeddedOptions, log *slog.Logger) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = c.Name
	cfg.Dir = c.Dir
	scheme := "http"
	if !opts.ClientTLS.Empty() {
		scheme = "https"
		cfg.ClientTLSInfo = opts.ClientTLS
	}
	cu := url.URL{Scheme: scheme, Host: c.ClientListen}
	pu := url.URL{Scheme: "http", Host: c.PeerListen}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if opts.InitialCluster != "" {
		cfg.InitialCluster, cfg.InitialClusterToken = opts.InitialCluster, opts.ClusterToken
	}
	// Keep an hour of history: readers fetch chunks at the pointer's revision.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(obs.ZapLogger(log.With("component", "etcd"), zapcore.WarnLevel))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("store: embedded etcd in %s: not ready after 60s (a cluster member is ready once a quorum of members runs)", c.Dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	// Port 0 (tests) binds whatever the kernel gives: read the addresses
	// back, and keep them so that a restart (a drill) comes back on them.
	if len(e.Clients) > 0 {
		c.ClientListen = e.Clients[0].Addr().String()
		cu.Host = c.ClientListen
	}
	if len(e.Peers) > 0 {
		c.PeerListen = e.Peers[0].Listener.Addr().String()
	}
	log.Info("embedded etcd ready", "component", "etcd", "client_url", cu.String(), "dir", c.Dir)
	return &Embedded{etcd: e, ClientURL: cu.String(), cfg: c, opts: opts, log: log, changed: make(chan struct{})}, nil
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
	// Raft first, as a crash would: a cluster member leaves the quorum at
	// once (Close alone first drains client requests for seconds while the
	// member still votes, and hands leadership over).
	e.etcd.Server.HardStop()
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
	e.etcd, e.stopped = n.etcd, false
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

// Close stops the server for good.
func (e *Embedded) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped {
		e.etcd.Close()
		e.stopped = true
	}
}
