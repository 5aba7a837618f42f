package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/version"
	"github.com/prometheus/client_golang/prometheus"
)

// RunRegional runs a city scheduler until ctx ends.
func RunRegional(ctx context.Context, c config.Regional, log *slog.Logger, opts ...daemon.Option) error {
	log = log.With("role", instance.Regional.String(), "region", c.Region)
	meter := etcdclient.NewWriteMeter(c.Etcd.Prefix)
	cli, err := etcdclient.Connect(c.Etcd, c.Etcd.Endpoints, log, etcdclient.WithWriteMeter(meter))
	if err != nil {
		return err
	}
	defer cli.Close()
	s := New(instance.Regional, c.Region, c.Common, store.New(cli, c.Etcd.Prefix, log), log)
	s.Registry.MustRegister(meter)
	agent, err := embeddedAgent(s, c, s.Registry)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.allocator, err = s.newAllocator(c.Alloc, allocRank(c.Alloc, c.Announce)); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.Syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	s.VerifyOpstate(c.Snapshot.OpstateSignatures)
	s.QoE = s.allocator
	// The console, read-only: a city scheduler has no admin API of its own,
	// so it reads the province (Status, History) from the store it follows.
	// A local caller is a viewer: nothing more is offered here.
	roSvc := &adminapi.Service{Store: s.Store, Logger: log.With("component", "console"), Engine: s.Engine, Health: s.Availability, Drains: s.Ops.Drains}
	con, err := s.MountConsole(roSvc, adminapi.NewGate(nil, log.With("component", "console")), authz.Viewer, true, nil)
	if err != nil {
		return err
	}
	s.swapHooks = append(s.swapHooks, s.warnUnknownRegion)
	if s.announcer != nil {
		// The city's last plan goes to etcd before its route is withdrawn:
		// the planner its STBs reach next starts from it at once.
		s.announcer.BeforeWithdraw = func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s.allocator.HandOn(ctx)
		}
	}
	comps := append(s.Components(), s.allocator.Run, con.Run)
	if agent != nil {
		s.swapHooks = append(s.swapHooks, agent.SetSnapshot)
		comps = append(comps, agent.Run)
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	l, err := s.Listen()
	if err != nil {
		return err
	}
	log.Info("regional scheduler starting", "id", s.ID, "version", version.String(), "etcd", c.Etcd.Endpoints, "embedded_checker", agent != nil, "announce", c.Announce.Mode)
	daemon.CollectOptions(opts).Listening(l)
	return s.Serve(ctx, comps...)
}

// embeddedAgent returns the checker a small site runs inside its regional
// scheduler, or nil when health.embedded is off.
func embeddedAgent(s *Scheduler, c config.Regional, reg prometheus.Registerer) (*health.Agent, error) {
	if !c.Health.Embedded {
		return nil, nil
	}
	return health.NewAgent(s.Store.Client(), c.Etcd.Prefix, health.AgentOptions{CheckerID: s.ID, Region: c.Region, Checker: c.Health.Check}, reg, s.Logger)
}

// newAllocator builds the live QoE allocation of the scheduler's region:
// token keys, the region's claim board in etcd, a re-solve on every new
// snapshot and its status on the admin listener.
func (s *Scheduler) newAllocator(c config.Alloc, rank int) (*allocator.Allocator, error) {
	v, err := NewVerifier(c.Viewers)
	if err != nil {
		return nil, err
	}
	board := &store.ClaimBoard{Store: s.Store, Region: s.Region, Instance: s.ID, TTL: max(3*c.Period, 10*time.Second)}
	cfg := c.Config
	cfg.Region, cfg.Instance, cfg.Verifier, cfg.Rank, cfg.States, cfg.Routed = s.Region, s.ID, v, rank, s.Store, s.routed
	a, err := allocator.New(cfg, board, s.Engine, s.Registry, s.Logger)
	if err != nil {
		return nil, err
	}
	s.swapHooks = append(s.swapHooks, func(*topology.Snapshot) { a.Kick() })
	s.Admin.Extra["/debug/alloc"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a.Status())
	})
	return a, nil
}

// routed reports whether routers bring STBs here: the route is announced,
// or routing is the host's business (announce.mode none).
func (s *Scheduler) routed() bool {
	if s.announcer == nil {
		return true
	}
	announced, _ := s.announcer.Controller.State()
	return announced
}

// allocRank is the scheduler's place in its city's route preference:
// alloc.rank, or by default the AS-path prepend a BGP standby announces.
func allocRank(c config.Alloc, an announcecfg.Config) int {
	switch {
	case c.Rank >= 0:
		return c.Rank
	case an.Mode == announcecfg.ModeBGP:
		return an.BGP.ASPathPrepend
	}
	return 0
}

// NewVerifier builds the viewer-token verifier; nil without keys.
func NewVerifier(c config.Viewers) (*token.Verifier, error) {
	if len(c.Keys) == 0 {
		return nil, nil
	}
	keys, err := c.ReadKeys("alloc.")
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return token.NewVerifier(keys, c.Options)
}
