package store

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
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
			return nil, fmt.Errorf("etcd.tls: %w", err)
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
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// Embedded is a single-node etcd inside the central scheduler: the default for
// a lab or a small province. Production provinces run an external cluster.
type Embedded struct {
	etcd      *embed.Etcd
	ClientURL string
}

// EmbeddedOptions adds test-only knobs to the configuration.
type EmbeddedOptions struct {
	ClientTLS transport.TLSInfo // serve clients over TLS (tests of the TLS client)
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
	// Keep an hour of history: readers fetch chunks at the pointer's revision.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(obs.ZapLogger(log.With("component", "etcd"), zapcore.WarnLevel))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", c.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s: not ready after 60s", c.Dir)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	log.Info("embedded etcd ready", "component", "etcd", "client_url", cu.String(), "dir", c.Dir)
	return &Embedded{etcd: e, ClientURL: cu.String()}, nil
}

// Err reports a fatal etcd server error.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the server.
func (e *Embedded) Close() { e.etcd.Close() }
