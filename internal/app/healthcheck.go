package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/health"
	"github.com/anysched/anysched/internal/obs"
	"github.com/anysched/anysched/internal/signing"
	"github.com/anysched/anysched/internal/snapshot"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/version"
	"github.com/prometheus/client_golang/prometheus"
)

// checkerOptions maps the configuration onto the checker's options.
func checkerOptions(c config.Check) health.CheckerOptions {
	return health.CheckerOptions{Interval: c.Interval, Timeout: c.Timeout, Rise: c.Rise, Fall: c.Fall, BandwidthThreshold: c.BandwidthThreshold}
}

// RunHealthcheck runs the healthcheck daemon: it follows the topology (with
// its own disk cache, so it knows what to probe while etcd is down), probes
// its region's servers and publishes verdicts.
func RunHealthcheck(ctx context.Context, c config.Checker, log *slog.Logger, opts ...Option) error {
	id := c.CheckerID
	if id == "" {
		id, _ = os.Hostname()
	}
	log = log.With("role", "healthcheck", "checker", id)
	cli, err := store.Connect(c.Etcd, c.Etcd.Endpoints, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	st := store.New(cli, c.Etcd.Prefix, log)
	reg := obs.NewRegistry()
	agent, err := health.NewAgent(cli, c.Etcd.Prefix, health.AgentOptions{CheckerID: id, Region: c.Region, Servers: c.Servers, Checker: checkerOptions(c.Check)}, reg, log)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	syncer := &snapshot.Syncer{Source: st, CacheFile: c.Snapshot.CacheFile, ConfirmInterval: c.Snapshot.ConfirmInterval,
		MaxStaleness: c.Snapshot.MaxStaleness, Logger: log.With("component", "snapshot"), OnSwap: agent.SetSnapshot,
		Limits: topology.LoosestLimits} // a checker announces nothing: any province's limits will do
	syncer.Register(reg)
	if syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	if err := syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	admin := &obs.Admin{Gatherer: reg, Logger: log.With("component", "admin"), Ready: syncer.Ready}
	if admin.TLS, err = adminTLS(c.Admin); err != nil {
		return err
	}
	serveAdmin := admin.Run // no address: it waits for the end
	var l Listeners
	if c.Admin.Listen != "" {
		ln, err := net.Listen("tcp", c.Admin.Listen)
		if err != nil {
			return fmt.Errorf("admin listener: %w", err)
		}
		l.Admin = ln.Addr().String()
		serveAdmin = func(ctx context.Context) error { return admin.Serve(ctx, ln) }
	}
	log.Info("healthcheck starting", "version", version.String(), "region", c.Region, "interval", c.Interval, "etcd", c.Etcd.Endpoints)
	collect(opts).listening(l)
	return runAll(ctx, syncer.Run, serveAdmin, agent.Run)
}

// embeddedAgent returns the checker a small site runs inside its regional
// scheduler, or nil when health.embedded is off.
func embeddedAgent(s *Scheduler, c config.Regional, reg prometheus.Registerer) (*health.Agent, error) {
	if !c.Health.Embedded {
		return nil, nil
	}
	return health.NewAgent(s.Store.Client(), c.Etcd.Prefix, health.AgentOptions{CheckerID: s.ID, Region: c.Region, Checker: checkerOptions(c.Health.Check)}, reg, s.Logger)
}
