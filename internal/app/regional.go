package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/anysched/anysched/internal/adminapi"
	"github.com/anysched/anysched/internal/allocator"
	"github.com/anysched/anysched/internal/authz"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/health"
	"github.com/anysched/anysched/internal/healthd"
	"github.com/anysched/anysched/internal/qoe"
	"github.com/anysched/anysched/internal/signing"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/version"
	"github.com/prometheus/client_golang/prometheus"
)

// RunRegional runs a city scheduler until ctx ends.
func RunRegional(ctx context.Context, c config.Regional, log *slog.Logger, opts ...daemon.Option) error {
	log = log.With("role", RoleRegional, "region", c.Region)
	cli, err := store.Connect(c.Etcd, c.Etcd.Endpoints, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	s := New(RoleRegional, c.Region, c.Common, store.New(cli, c.Etcd.Prefix, log), log)
	agent, err := embeddedAgent(s, c, s.Registry)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.announcer, err = s.newAnnouncer(c.Common); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.allocator, err = s.newAllocator(c.Alloc, allocRank(c.Alloc, c.Announce)); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.Syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	s.qoe = s.allocator
	// The console, read-only: a city scheduler has no admin API of its own,
	// so it reads the province (Status, History) from the store it follows.
	// A local caller is a viewer: nothing more is offered here.
	roSvc := &adminapi.Service{Store: s.Store, Logger: log.With("component", "console"), Engine: s.Engine, Health: s.Availability, Drains: s.Ops.Drains}
	con, err := s.mountConsole(roSvc, adminapi.NewGate(nil, log.With("component", "console")), authz.Viewer, true)
	if err != nil {
		return err
	}
	s.swapHooks = append(s.swapHooks, s.warnUnknownRegion)
	comps := append(s.components(), s.allocator.Run, con.Run)
	if agent != nil {
		s.swapHooks = append(s.swapHooks, agent.SetSnapshot)
		comps = append(comps, agent.Run)
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	l, err := s.listen()
	if err != nil {
		return err
	}
	log.Info("regional scheduler starting", "id", s.ID, "version", version.String(), "etcd", c.Etcd.Endpoints, "embedded_checker", agent != nil, "announce", c.Announce.Mode)
	daemon.CollectOptions(opts).Listening(l)
	return s.runServing(ctx, comps...)
}

// embeddedAgent returns the checker a small site runs inside its regional
// scheduler, or nil when health.embedded is off.
func embeddedAgent(s *Scheduler, c config.Regional, reg prometheus.Registerer) (*health.Agent, error) {
	if !c.Health.Embedded {
		return nil, nil
	}
	return health.NewAgent(s.Store.Client(), c.Etcd.Prefix, health.AgentOptions{CheckerID: s.ID, Region: c.Region, Checker: healthd.CheckerOptions(c.Health.Check)}, reg, s.Logger)
}

// tokenCache is how many verified viewer tokens a regional scheduler keeps
// (about 350 bytes each): a returning STB's token costs a map lookup instead
// of an HMAC and a JSON decode.
const tokenCache = 1 << 16

// newAllocator builds the live QoE allocation of the scheduler's region:
// token keys, the region's claim board in etcd, a re-solve on every new
// snapshot and its status on the admin listener.
func (s *Scheduler) newAllocator(c config.Alloc, rank int) (*allocator.Allocator, error) {
	v, err := newVerifier(c.Viewers)
	if err != nil {
		return nil, err
	}
	board := &store.ClaimBoard{Store: s.Store, Region: s.Region, Instance: s.ID, TTL: max(3*c.Period, 10*time.Second)}
	a, err := allocator.New(allocator.Config{
		Region: s.Region, Instance: s.ID, Period: c.Period, SessionTTL: c.SessionTTL, SolveTimeout: c.SolveTimeout,
		MaxSessions: c.MaxSessions, Auth: c.Auth, Verifier: v, ArrivalReserve: c.ArrivalReserve, Params: ModelParams(c.Model),
		Default: profile(c.DefaultProfile), Rank: rank, IdleAfter: c.IdleAfter,
		States: s.Store, StateInterval: c.StateInterval, Routed: s.routed,
	}, board, s.Engine, s.Registry, s.Logger)
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
	announced, _ := s.announcer.ctrl.State()
	return announced
}

// allocRank is the scheduler's place in its city's route preference:
// alloc.rank, or by default the AS-path prepend a BGP standby announces.
func allocRank(c config.Alloc, an config.Announce) int {
	switch {
	case c.Rank >= 0:
		return c.Rank
	case an.Mode == config.AnnounceBGP:
		return an.BGP.ASPathPrepend
	}
	return 0
}

// newVerifier builds the viewer-token verifier; nil without keys.
func newVerifier(c config.Viewers) (*token.Verifier, error) {
	if len(c.Keys) == 0 {
		return nil, nil
	}
	keys, err := c.TokenKeys()
	if err != nil {
		return nil, err
	}
	return token.NewVerifier(keys, token.Options{
		Leeway: c.Leeway, CacheSize: tokenCache, Issuer: c.TokenIssuer, Audience: c.TokenAudience,
		MaxLifetime: c.MaxTokenLifetime, RequireNetwork: c.RequireNetworkBinding,
	})
}

func profile(p config.Profile) qoe.Profile {
	return qoe.Profile{DesiredKbps: p.DesiredKbps, Danmaku: p.DanmakuPerHour, Gift: p.Gift}
}

// ModelParams is the QoE model: the defaults, with the configured overrides.
func ModelParams(m config.Model) qoe.Params {
	p := qoe.DefaultParams()
	for _, o := range []struct {
		from *float64
		to   *float64
	}{
		{m.A, &p.A}, {m.B, &p.B}, {m.C, &p.C}, {m.D, &p.D}, {m.Theta, &p.Theta}, {m.Lambda, &p.Lambda},
		{m.B1, &p.B1}, {m.K, &p.K}, {m.S, &p.S}, {m.Omega, &p.Omega}, {m.TIngest, &p.TIngest},
		{m.BackboneBase, &p.BackboneBase}, {m.BackbonePerKm, &p.BackbonePerKm}, {m.BackboneOrigin, &p.BackboneOrigin},
		{m.AccessBase, &p.AccessBase}, {m.AccessPerKm, &p.AccessPerKm}, {m.G, &p.G}, {m.H, &p.H},
		{m.FallbackLatency, &p.FallbackLatency}, {m.OriginCost, &p.OriginCost},
	} {
		if o.from != nil {
			*o.to = *o.from
		}
	}
	return p
}
