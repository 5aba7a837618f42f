package store

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/obs"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
)

// Connect creates an etcd client for the configured endpoints. It does not
// wait for the cluster: a scheduler must start (and serve its cached
// snapshot) while etcd is down.
//
// etcd.tls with an http:// endpoint is refused: the client would dial that
// endpoint in plaintext, silently dropping the certificate. An https://
// endpoint without etcd.tls.ca_file verifies the server against the
// system's roots.
func Connect(c config.Etcd, endpoints []string, log *slog.Logger) (*clientv3.Client, error) {
	secure := false
	for _, ep := range endpoints {
		switch {
		case strings.HasPrefix(ep, "http://") && c.TLS.Enabled():
			return nil, fmt.Errorf("store: etcd endpoint %s: http:// with etcd.tls set: use https://", ep)
		case strings.HasPrefix(ep, "https://"):
			secure = true
		}
	}
	var tlsCfg *tls.Config
	if c.TLS.Enabled() || secure {
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
