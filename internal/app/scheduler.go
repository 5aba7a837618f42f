// Package scheduler assembles a scheduler daemon from its components (the
// snapshot syncer, the instance registration, the admin listener and, at the
// center, the embedded etcd and the admin gRPC API) and runs them under one
// errgroup. The daemon mains only parse flags and call RunCenter or RunRegional.
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/accesslog"
	"github.com/anysched/anysched/internal/adminapi"
	"github.com/anysched/anysched/internal/allocator"
	"github.com/anysched/anysched/internal/announce"
	"github.com/anysched/anysched/internal/balance"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/dnsd"
	"github.com/anysched/anysched/internal/health"
	"github.com/anysched/anysched/internal/httpd"
	"github.com/anysched/anysched/internal/obs"
	"github.com/anysched/anysched/internal/qoe"
	"github.com/anysched/anysched/internal/snapshot"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Roles of a scheduler instance.
const (
	RoleCentral  = "central"
	RoleRegional = "regional"
)

// Scheduler is what both roles share.
type Scheduler struct {
	ID       string
	Role     string
	Region   string
	Store    *store.Store
	Syncer   *snapshot.Syncer
	Admin    *obs.Admin
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// DefaultRegion serves STBs in no coverage zone: the regional
	// scheduler's own region, the center's default_region.
	DefaultRegion string
	Recorder      *accesslog.Recorder

	Merger *health.Merger

	announcer *announcer // nil when announce.mode is none

	engine  atomic.Pointer[steer.Engine]
	avail   atomic.Pointer[health.Availability]
	common  config.Common
	started time.Time

	rebuildMu  sync.Mutex // serialises engine rebuilds (snapshot swaps and health changes)
	builtFor   *topology.Snapshot
	table      *balance.Table             // the balance tables in service, lent to the next build
	badBalance string                     // the last invalid balance configuration reported
	drilled    time.Time                  // the failover drill already applied
	kick       chan struct{}              // refresh the registration now
	allocator  *allocator.Allocator       // regional schedulers only
	qoe        httpd.Allocator            // the allocator (city) or the token gate (center)
	httpServer *httpd.Server              // nil without http.listen
	dnsServer  *dnsd.Server               // nil without dns.listen
	swapHooks  []func(*topology.Snapshot) // more work on a new snapshot (the embedded checker)
}

func (s *Scheduler) onSwap(snap *topology.Snapshot) {
	s.rebuildEngine()
	for _, h := range s.swapHooks {
		h(snap)
	}
}

// New builds the shared components over a connected store.
func New(role, region string, c config.Common, st *store.Store, log *slog.Logger) *Scheduler {
	s := &Scheduler{
		ID: c.InstanceID, Role: role, Region: region, Store: st, DefaultRegion: region,
		Registry: obs.NewRegistry(), Logger: log, common: c, started: time.Now().UTC(),
		kick: make(chan struct{}, 1),
	}
	if s.ID == "" {
		s.ID = DefaultInstanceID(role, region)
	}
	s.Syncer = &snapshot.Syncer{
		Source: st, CacheFile: c.Snapshot.CacheFile,
		ConfirmInterval: c.Snapshot.ConfirmInterval, MaxStaleness: c.Snapshot.MaxStaleness,
		Logger: log.With("component", "snapshot"),
		OnSwap: s.onSwap,
	}
	s.Merger = &health.Merger{
		Client: st.Client(), Prefix: c.Etcd.Prefix, Logger: log,
		Options:  health.MergerOptions{Rule: c.Health.Merge, Grace: c.Health.Grace, PanicThreshold: c.Health.PanicThreshold},
		OnChange: s.rebuildEngine,
	}
	s.Merger.Register(s.Registry)
	s.Syncer.Register(s.Registry)
	var accessOut io.Writer = os.Stdout
	if !c.AccessLog.Enabled {
		accessOut = io.Discard
	}
	s.Recorder = accesslog.New(s.Registry, accessOut, accesslog.Options{SampleEvery: c.AccessLog.SampleEvery})
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "anysched_scheduler_ready_bool", Help: "1 when the scheduler is ready to answer set-top boxes.",
	}, func() float64 {
		if s.Ready() == nil {
			return 1
		}
		return 0
	}))
	s.Admin = &obs.Admin{Addr: c.Admin.Listen, Gatherer: s.Registry, Ready: s.Ready, Logger: log.With("component", "admin"),
		Extra: map[string]http.Handler{"/debug/snapshot": http.HandlerFunc(s.serveSnapshotInfo)}}
	return s
}

// serveSnapshotInfo tells operators (and tests) which snapshot this instance
// answers from.
func (s *Scheduler) serveSnapshotInfo(w http.ResponseWriter, _ *http.Request) {
	info := struct {
		ID       string           `json:"id"`
		Role     string           `json:"role"`
		Region   string           `json:"region,omitempty"`
		Revision int64            `json:"revision"`
		AgeS     float64          `json:"age_seconds"`
		Ready    bool             `json:"ready"`
		Why      string           `json:"not_ready_because,omitempty"`
		Counts   *topology.Counts `json:"counts,omitempty"`
	}{ID: s.ID, Role: s.Role, Region: s.Region, AgeS: s.Syncer.Age().Seconds()}
	if snap := s.Syncer.Snapshot(); snap != nil {
		c := snap.Counts()
		info.Revision, info.Counts = snap.Revision, &c
	}
	if err := s.Ready(); err != nil {
		info.Why = err.Error()
	} else {
		info.Ready = true
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(info)
}

// rebuildEngine builds the routing tables from the current snapshot and the
// merged health and drains, off the hot path, and swaps them in. It is
// called on every snapshot swap and health change; when neither the snapshot
// nor availability changed it does nothing.
func (s *Scheduler) rebuildEngine() {
	s.rebuildMu.Lock()
	defer s.rebuildMu.Unlock()
	snap := s.Syncer.Snapshot()
	if snap == nil {
		return
	}
	if !s.Merger.Synced() && time.Since(s.started) < mergerGrace {
		// Drains and health not read yet (a restart): answering now could
		// send STBs to a drained server. The merger's first read rebuilds;
		// without etcd the grace timer does (from the cached snapshot).
		return
	}
	av := s.Merger.Compute(snap)
	s.applyDrill()
	uses := balanceSelections(snap)
	if prev := s.avail.Load(); len(uses) == 0 && snap == s.builtFor && prev != nil && slices.Equal(prev.Available, av.Available) &&
		slices.Equal(prev.Why, av.Why) && slices.Equal(prev.Figures, av.Figures) && string(prev.BalanceConfig) == string(av.BalanceConfig) {
		s.avail.Store(av) // keep checker liveness current for status
		return
	}
	var table *balance.Table
	if len(uses) > 0 {
		// Policies that follow load (swrr's adaptive weights and slow start,
		// p2c) are rebuilt on every health tick, about once a second.
		table = s.buildBalance(snap, av, uses)
	}
	s.engine.Store(steer.New(snap, steer.Options{
		DefaultRegion: s.DefaultRegion,
		Available:     func(i int32) bool { return av.Available[i] },
		Why:           func(i int32) string { return av.Why[i] },
		Balance:       table,
		NodeRank:      s.nodeRanker(snap, av),
	}))
	s.avail.Store(av)
	s.builtFor, s.table = snap, table
}

// mergerGrace is how long a starting scheduler waits for the health merger's
// first read of drains and verdicts before answering without them (etcd is
// unreachable: the cached snapshot is served, with every server available).
const mergerGrace = 5 * time.Second

// answerAfterGrace builds the routing tables once mergerGrace has passed,
// whether or not the merger could read etcd by then.
func (s *Scheduler) answerAfterGrace(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(time.Until(s.started.Add(mergerGrace))):
	}
	if !s.Merger.Synced() {
		s.Logger.Warn("drains and health verdicts not read from etcd yet; answering from the snapshot without them", "component", "health-merger", "waited", mergerGrace)
	}
	s.rebuildEngine()
	<-ctx.Done()
	return nil
}

// nodeRanker ranks a region's nodes with balance.RankNodes: by distance, or
// by the RTT + loss network distance (balance config rank.by: rtt_loss) where
// the checkers measured them; nodes over capacity or below the panic
// threshold go last.
func (s *Scheduler) nodeRanker(snap *topology.Snapshot, av *health.Availability) func([]int32, topology.Location) []int32 {
	opts := s.balanceConfig(av).Rank
	states := make([]balance.NodeState, len(snap.Nodes))
	for ni, nv := range snap.Nodes {
		st := balance.NodeState{Index: int32(ni), Loc: balance.Point{Lat: nv.Loc.Lat, Lon: nv.Loc.Lon}}
		var rtt time.Duration
		var loss float64
		measured := 0
		for _, si := range nv.Servers {
			if snap.Servers[si].Weight > 0 {
				st.Servers++
				if av.Available[si] {
					st.Healthy++
				}
			}
			f := av.Figures[si]
			st.LoadMbps += f.Load.BandwidthMbps
			st.CapacityMbps += snap.Servers[si].Capacity.BandwidthMbps
			if f.Measured && av.Available[si] {
				rtt += f.RTT
				loss += f.Loss
				measured++
			}
		}
		if measured > 0 {
			st.RTT, st.Loss, st.Measured = rtt/time.Duration(measured), loss/float64(measured), true
		}
		if st.LoadMbps == 0 {
			st.CapacityMbps = 0 // no load figures: never "over capacity"
		}
		states[ni] = st
	}
	return func(nodes []int32, from topology.Location) []int32 {
		sub := make([]balance.NodeState, len(nodes))
		for i, n := range nodes {
			sub[i] = states[n]
		}
		ranked := balance.RankNodes(sub, balance.Point{Lat: from.Lat, Lon: from.Lon}, opts)
		out := make([]int32, len(ranked))
		for i, r := range ranked {
			out[i] = r.Index
		}
		return out
	}
}

// applyDrill withdraws this scheduler's route while a failover drill for its
// region (the center's: "center") is in force.
func (s *Scheduler) applyDrill() {
	if s.announcer == nil {
		return
	}
	region := s.Region
	if s.Role == RoleCentral {
		region = "center"
	}
	until := s.Merger.DrillUntil(region)
	if until.After(time.Now()) && !until.Equal(s.drilled) {
		s.drilled = until
		s.Logger.Warn("failover drill: withdrawing the route", "component", "announce", "until", until.Format(time.RFC3339))
		s.announcer.ctrl.Withdraw(time.Until(until))
	}
}

// balanceSelections lists the in-node policies the services use besides
// nearest and qoe (the allocator refines the nearest decision).
func balanceSelections(snap *topology.Snapshot) []balance.Selection {
	var out []balance.Selection
	for _, sv := range snap.Services {
		if sel, err := balance.ParseSelection(sv.Selection); err == nil && sel != balance.SelectNearest && sel != balance.SelectQoE && !slices.Contains(out, sel) {
			out = append(out, sel)
		}
	}
	return out
}

// balanceConfig is the stored balance configuration, or the defaults when
// there is none or it is invalid (said once).
func (s *Scheduler) balanceConfig(av *health.Availability) balance.Config {
	if av.BalanceConfig == nil {
		return balance.DefaultConfig()
	}
	c, err := balance.ParseConfig(av.BalanceConfig)
	if err != nil {
		if string(av.BalanceConfig) != s.badBalance {
			s.badBalance = string(av.BalanceConfig)
			s.Logger.Error("stored balance configuration is invalid; using the defaults", "component", "balance", "err", err)
		}
		return balance.DefaultConfig()
	}
	return c
}

// buildBalance builds the policy tables from the snapshot and merged health;
// on a bad stored balance configuration it keeps the defaults and says so once.
func (s *Scheduler) buildBalance(snap *topology.Snapshot, av *health.Availability, uses []balance.Selection) *balance.Table {
	cfg := s.balanceConfig(av)
	nodes := make([]balance.NodeInput, len(snap.Nodes))
	for ni, nv := range snap.Nodes {
		in := balance.NodeInput{Servers: make([]balance.Server, len(nv.Servers)), Loads: make([]balance.Load, len(nv.Servers))}
		for j, si := range nv.Servers {
			sv := &snap.Servers[si]
			f := av.Figures[si]
			in.Servers[j] = balance.Server{Index: si, Name: sv.Name, Weight: float64(sv.Weight)}
			in.Loads[j] = balance.Load{
				Healthy: av.Available[si], CPU: f.Load.CPU, BandwidthMbps: f.Load.BandwidthMbps, CapacityMbps: sv.Capacity.BandwidthMbps,
				Connections: f.Load.Connections, RTT: f.RTT, Loss: f.Loss, Since: f.Since,
				Failures: int(f.Loss*20 + 0.5), // failed probes among the checker's last 20
			}
		}
		nodes[ni] = in
	}
	t, err := balance.BuildTable(balance.TableInput{Nodes: nodes, Use: uses, Config: cfg, Now: time.Now()}, s.table)
	if err != nil {
		s.Logger.Error("building balance tables failed; services fall back to nearest", "component", "balance", "err", err)
		return nil
	}
	return t
}

// Availability returns the merged health behind the current engine.
func (s *Scheduler) Availability() *health.Availability { return s.avail.Load() }

// Engine returns the current routing engine, nil before the first snapshot.
func (s *Scheduler) Engine() *steer.Engine { return s.engine.Load() }

// DefaultInstanceID is hostname-role[-region].
func DefaultInstanceID(role, region string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown"
	}
	id := h + "-" + role
	if region != "" {
		id += "-" + region
	}
	return id
}

// Ready reports whether this scheduler can answer: it holds a snapshot that
// is fresh enough and, for a regional scheduler, names its region.
func (s *Scheduler) Ready() error {
	if err := s.Syncer.Ready(); err != nil {
		return err
	}
	if s.Region != "" {
		snap := s.Syncer.Snapshot()
		if _, ok := snap.Region(s.Region); !ok {
			return fmt.Errorf("region %q is not in topology revision %d", s.Region, snap.Revision)
		}
	}
	return nil
}

func (s *Scheduler) instance() store.Instance {
	in := store.Instance{
		ID: s.ID, Role: s.Role, Region: s.Region, Version: version.String(),
		AdminAddress: s.Admin.Addr, StartedAt: s.started, SnapshotAge: s.Syncer.Age().Seconds(),
	}
	in.Hostname, _ = os.Hostname()
	var peers []announce.PeerStatus
	in.Announced, in.AnnounceWhy, peers = s.AnnounceState(context.Background())
	if p, ok := s.anycastPrefix(); ok {
		in.Announces = p.String()
	}
	for _, p := range peers {
		in.Peers = append(in.Peers, store.Peer{Address: p.Address, ASN: p.ASN, State: p.State})
	}
	if s.allocator != nil {
		in.QoE = s.allocator.Summary()
	}
	if s.Role == RoleCentral {
		in.Traffic = s.traffic()
	}
	switch snap := s.Syncer.Snapshot(); {
	case snap == nil:
		in.State = "starting"
	case s.Ready() != nil:
		in.SnapshotRevision = snap.Revision
		in.State = "stale"
	default:
		in.SnapshotRevision = snap.Revision
		in.State = "ready"
	}
	return in
}

// traffic is what this scheduler answered by the STBs' region.
func (s *Scheduler) traffic() []store.RegionTraffic {
	var out []store.RegionTraffic
	for _, t := range s.Recorder.Traffic() {
		out = append(out, store.RegionTraffic{ClientRegion: t.ClientRegion, Answered: t.Answered, Failed: t.Failed, RunStart: t.RunStart, Last: t.Last})
	}
	return out
}

// components returns the shared components' run functions.
func (s *Scheduler) components() []func(context.Context) error {
	reg := &store.Registration{Store: s.Store, TTL: 10 * time.Second, Interval: 2 * time.Second, Current: s.instance, Kick: s.kick}
	comps := []func(context.Context) error{s.Syncer.Run, s.Admin.Run, reg.Run, s.Recorder.Run, s.Merger.Run, s.answerAfterGrace}
	if c := s.common.HTTP; c.Listen != "" {
		var trusted []netip.Prefix
		for _, p := range c.TrustedProxies {
			pfx, _ := config.ParsePrefixOrAddr(p) // validated with the config
			trusted = append(trusted, pfx)
		}
		hc := httpd.Config{Listen: c.Listen, TrustedProxies: trusted, InstanceID: s.ID}
		if s.qoe != nil {
			hc.Allocator = s.qoe
		}
		h := httpd.New(hc, s.Engine, s.Recorder, s.Logger)
		s.httpServer = h
		comps = append(comps, h.Run)
	}
	if c := s.common.DNS; c.Listen != "" {
		d := dnsd.New(dnsd.Config{Listen: c.Listen, TTL: c.TTL, InstanceID: s.ID}, s.Engine, s.Recorder, s.Logger)
		s.dnsServer = d
		comps = append(comps, d.Run)
	}
	return comps
}

// RunRegional runs a city scheduler until ctx ends.
func RunRegional(ctx context.Context, c config.Regional, log *slog.Logger) error {
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
	if s.allocator, err = s.newAllocator(c.Alloc); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	s.qoe = s.allocator
	comps := append(s.components(), s.allocator.Run)
	if agent != nil {
		s.swapHooks = append(s.swapHooks, agent.SetSnapshot)
		comps = append(comps, agent.Run)
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	log.Info("regional scheduler starting", "id", s.ID, "version", version.String(), "etcd", c.Etcd.Endpoints, "embedded_checker", agent != nil, "announce", c.Announce.Mode)
	return s.runServing(ctx, comps...)
}

// tokenCache is how many verified viewer tokens a regional scheduler keeps
// (about 350 bytes each): a returning STB's token costs a map lookup instead
// of an HMAC and a JSON decode.
const tokenCache = 1 << 16

// newAllocator builds the live QoE allocation of the scheduler's region:
// token keys, the region's claim board in etcd, a re-solve on every new
// snapshot and its status on the admin listener.
func (s *Scheduler) newAllocator(c config.Alloc) (*allocator.Allocator, error) {
	v, err := newVerifier(c.Viewers)
	if err != nil {
		return nil, err
	}
	board := &store.ClaimBoard{Store: s.Store, Region: s.Region, Instance: s.ID, TTL: max(3*c.Period, 10*time.Second)}
	a, err := allocator.New(allocator.Config{
		Region: s.Region, Instance: s.ID, Period: c.Period, SessionTTL: c.SessionTTL, SolveTimeout: c.SolveTimeout,
		MaxSessions: c.MaxSessions, Auth: c.Auth, Verifier: v, ArrivalReserve: c.ArrivalReserve, Params: ModelParams(c.Model),
		Default: profile(c.DefaultProfile),
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

// newVerifier builds the viewer-token verifier; nil without keys.
func newVerifier(c config.Viewers) (*token.Verifier, error) {
	if len(c.Keys) == 0 {
		return nil, nil
	}
	keys, err := c.TokenKeys()
	if err != nil {
		return nil, err
	}
	return token.NewVerifier(keys, token.Options{Leeway: c.Leeway, CacheSize: tokenCache})
}

func profile(p config.Profile) qoe.Profile {
	return qoe.Profile{DesiredKbps: p.DesiredKbps, Danmaku: p.DanmakuPerHour, Gift: p.Gift}
}

// newGate builds the center's viewer-token gate for QoE services.
func (s *Scheduler) newGate(c config.Viewers) (*allocator.Gate, error) {
	v, err := newVerifier(c)
	if err != nil {
		return nil, err
	}
	return allocator.NewGate(c.Auth, v, profile(c.DefaultProfile), s.Registry)
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
		{m.FallbackLatency, &p.FallbackLatency},
	} {
		if o.from != nil {
			*o.to = *o.from
		}
	}
	return p
}

// RunCenter runs the central scheduler until ctx ends.
func RunCenter(ctx context.Context, c config.Center, log *slog.Logger) error {
	log = log.With("role", RoleCentral)
	endpoints := c.Etcd.Endpoints
	var emb *store.Embedded
	if len(endpoints) == 0 {
		var err error
		emb, err = store.StartEmbedded(ctx, c.Etcd.Embedded, store.EmbeddedOptions{}, log)
		if err != nil {
			return err
		}
		defer emb.Close()
		endpoints = []string{emb.ClientURL}
	}
	cli, err := store.Connect(c.Etcd, endpoints, log)
	if err != nil {
		return err
	}
	defer cli.Close()
	st := store.New(cli, c.Etcd.Prefix, log)
	s := New(RoleCentral, "", c.Common, st, log)
	s.DefaultRegion = c.DefaultRegion
	if s.announcer, err = s.newAnnouncer(c.Common); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.qoe, err = s.newGate(c.Alloc); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	grpcSrv, hs, err := adminapi.NewServer(c.GRPC, &adminapi.Service{Store: st, Logger: log.With("component", "adminapi"), Engine: s.Engine, Health: s.Availability, Drains: s.Merger.Drains, Lab: c.Lab, Etcd: emb, LabEtcdMembers: c.LabEtcdMembers, ID: s.ID, Traffic: s.traffic}, log)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	ln, err := net.Listen("tcp", c.GRPC.Listen)
	if err != nil {
		return fmt.Errorf("grpc listener: %w", err)
	}
	log.Info("central scheduler starting", "id", s.ID, "version", version.String(), "grpc", ln.Addr().String(), "etcd", endpoints, "embedded_etcd", emb != nil)
	serveGRPC := func(ctx context.Context) error {
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		errc := make(chan error, 1)
		go func() { errc <- grpcSrv.Serve(ln) }()
		select {
		case err := <-errc:
			return fmt.Errorf("grpc: %w", err)
		case <-ctx.Done():
			hs.Shutdown()
			stopped := make(chan struct{})
			go func() { grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				grpcSrv.Stop()
			}
			return nil
		}
	}
	comps := append(s.components(), serveGRPC)
	if emb != nil {
		comps = append(comps, func(ctx context.Context) error {
			for {
				errc, changed := emb.Err()
				select {
				case err := <-errc:
					return fmt.Errorf("embedded etcd: %w", err)
				case <-changed: // stopped or restarted by a drill
				case <-ctx.Done():
					return nil
				}
			}
		})
	}
	return s.runServing(ctx, comps...)
}

// runAll runs components until ctx ends or one fails; a component's clean
// return before ctx ends is a failure too, since all of them should run for
// the life of the daemon.
func runAll(ctx context.Context, comps ...func(context.Context) error) error {
	g, gctx := errgroup.WithContext(ctx)
	goAll(gctx, g, comps)
	return g.Wait()
}

// goAll starts each component in g under ctx.
func goAll(ctx context.Context, g *errgroup.Group, comps []func(context.Context) error) {
	for _, run := range comps {
		g.Go(func() error {
			err := run(ctx)
			if err == nil && ctx.Err() == nil {
				return errors.New("component stopped unexpectedly")
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		})
	}
}
