// Package healthd is the health-check agent daemon's wiring: it assembles
// the agent (internal/province/health), its snapshot syncer and its admin listener and
// runs them under one errgroup. It is apart from internal/wiring/app, the
// schedulers' wiring, so that the healthcheck binary links neither the
// route announcement (GoBGP) nor the embedded etcd server.
package healthd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/snapshot"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/anysched/anysched/internal/wiring/version"
)

// Run runs the healthcheck daemon until ctx ends: it follows the topology
// (with its own disk cache, so it knows what to probe while etcd is down),
// probes its region's servers and publishes verdicts.
func Run(ctx context.Context, c config.Checker, log *slog.Logger, opts ...daemon.Option) error {
	id := c.CheckerID
	if id == "" {
		id, _ = os.Hostname()
	}
	log = log.With("role", "healthcheck", "checker", id)
	reg := obs.NewRegistry()
	meter := etcdclient.NewWriteMeter(c.Etcd.Prefix)
	reg.MustRegister(meter)
	cli, err := etcdclient.Connect(c.Etcd, c.Etcd.Endpoints, log, etcdclient.WithWriteMeter(meter))
	if err != nil {
		return err
	}
	defer cli.Close()
	st := store.New(cli, c.Etcd.Prefix, log)
	agent, err := health.NewAgent(cli, c.Etcd.Prefix, health.AgentOptions{CheckerID: id, Region: c.Region, Servers: c.Servers, Checker: c.CheckerOptions}, reg, log)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	syncer := &snapshot.Syncer{Source: st, CacheFile: c.Snapshot.CacheFile, ConfirmInterval: c.Snapshot.ConfirmInterval,
		MaxStaleness: c.Snapshot.MaxStaleness, Logger: log.With("component", "snapshot"), OnSwap: agent.SetSnapshot,
		Limits: topology.LoosestLimits, // a checker announces nothing: any province's limits will do
		Shared: func(ctx context.Context) (string, error) { return etcdclient.Shared(ctx, cli) }}
	syncer.Register(reg)
	if syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	if err := syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	admin := &obs.Admin{Gatherer: reg, Logger: log.With("component", "admin"), Ready: syncer.Ready}
	if admin.TLS, err = daemon.AdminTLS(c.Admin); err != nil {
		return err
	}
	serveAdmin := admin.Run // no address: it waits for the end
	var l daemon.Listeners
	if c.Admin.Listen != "" {
		ln, err := net.Listen("tcp", c.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin listener: %w", err)
		}
		l.Admin = ln.Addr().String()
		serveAdmin = func(ctx context.Context) error { return admin.Serve(ctx, ln) }
	}
	log.Info("healthcheck starting", "version", version.String(), "region", c.Region, "interval", c.Interval, "etcd", c.Etcd.Endpoints)
	daemon.CollectOptions(opts).Listening(l)
	follow := func(ctx context.Context) error {
		return daemon.ConfigIf(syncer.Run(ctx), snapshot.ErrNeedsTrustedKeys)
	}
	return daemon.RunAll(ctx, follow, serveAdmin, agent.Run)
}
