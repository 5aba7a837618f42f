// Package etcdclient dials the province's etcd as the etcd section of a
// daemon's configuration says. It is apart from store so that the
// components built on store (the allocator) do not import the configuration
// that composes their own.
package etcdclient

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/obs"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// Option is an optional setting of Connect.
type Option func(*options)

type options struct{ meter *WriteMeter }

// WithWriteMeter counts the client's writes in m.
func WithWriteMeter(m *WriteMeter) Option { return func(o *options) { o.meter = m } }

// Connect creates an etcd client for the configured endpoints. It does not
// wait for the cluster: a scheduler must start (and serve its cached
// snapshot) while etcd is down.
//
// etcd.tls with an http:// endpoint is refused: the client would dial that
// endpoint in plaintext, silently dropping the certificate. An https://
// endpoint without etcd.tls.ca_file verifies the server against the
// system's roots.
func Connect(c config.Etcd, endpoints []string, log *slog.Logger, opts ...Option) (*clientv3.Client, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	secure := false
	for _, ep := range endpoints {
		switch {
		case strings.HasPrefix(ep, "http://") && c.TLS.Enabled():
			return nil, fmt.Errorf("etcdclient: etcd endpoint %s: http:// with etcd.tls set: use https://", ep)
		case strings.HasPrefix(ep, "https://"):
			secure = true
		}
	}
	var tlsCfg *tls.Config
	if c.TLS.Enabled() || secure {
		info := transport.TLSInfo{TrustedCAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, ServerName: c.TLS.ServerName}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("etcdclient: etcd.tls: %w", err)
		}
	}
	var dial []grpc.DialOption
	if o.meter != nil {
		dial = o.meter.DialOptions()
	}
	cli, err := clientv3.New(clientv3.Config{
		DialOptions:          dial,
		Endpoints:            endpoints,
		DialTimeout:          c.DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  tlsCfg,
		Logger:               obs.ZapLogger(log.With("component", "etcd-client"), zapcore.ErrorLevel),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdclient: etcd client: %w", err)
	}
	return cli, nil
}
