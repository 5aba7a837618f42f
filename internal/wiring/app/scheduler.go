// Package app is wiring only: it assembles a scheduler from its components
// (the snapshot syncer, the health merger, the operator-state watcher, the
// front ends, the route announcer, the instance registration, the admin
// listener and console) and runs them under one errgroup. How a routing
// decision is made, and when an engine is rebuilt, lives in internal/stb/steer
// (steer.Builder); when the route is announced and how a scheduler stops, in
// internal/routing/announce. RunRegional is a city's scheduler; the center's own
// wiring (embedded etcd, admin gRPC API, planners of fallen cities) is
// internal/wiring/app/center, apart so that regional-scheduler links no etcd
// server. The health-check agent's wiring is internal/wiring/healthd; what all
// share (listeners, admin TLS, RunAll) is in internal/wiring/daemon.
//
// regional.go is the city's scheduler, engine.go rebuilds the routing engine
// and applies drills, policy.go evaluates overflow and ejection, announce.go
// builds the route announcement.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/snapshot"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/routing/announce"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/certstore"
	"github.com/anysched/anysched/internal/stb/dnsd"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/anysched/anysched/internal/wiring/version"
	"github.com/anysched/anysched/internal/wiring/watchdog"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
)

// Scheduler is what both roles share.
type Scheduler struct {
	ID       string
	Role     instance.Role
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

	Merger *health.Merger   // health verdicts
	Ops    *opstate.Watcher // drains, drills, balance policy

	// QoE prices new STBs: the city's allocator, or the center's token
	// gate or planner of fallen cities; nil: none. Set before Components.
	QoE httpd.Allocator
	// Planning is a center's planner of fallen cities, whose plans the
	// instance registry publishes; nil: none.
	Planning Planner

	announcer *announcer // nil when announce.mode is none
	watchdog  *watchdog.Watchdog

	engine       atomic.Pointer[steer.Engine]
	refusedRoute atomic.Pointer[topology.Snapshot] // the snapshot whose route was last refused (said once)
	avail        atomic.Pointer[avail.Availability]
	common       config.Common
	started      time.Time

	rebuildMu  sync.Mutex                 // serialises engine rebuilds (snapshot swaps, health and operator-state changes)
	builder    steer.Builder              // what the engine was last built from (under rebuildMu)
	policy     *policy                    // ejections, overflow, GeoIP
	kick       chan struct{}              // refresh the registration now
	allocator  *allocator.Allocator       // regional schedulers only
	bound      bound                      // the sockets, bound before serving
	listeners  daemon.Listeners           // their addresses
	httpServer *httpd.Server              // nil without http.listen
	dnsServer  *dnsd.Server               // nil without dns.listen
	certs      *certstore.Store           // nil without https.listen
	accessErr  error                      // access_log.file did not open: the start fails
	policyErr  error                      // outlier or geoip configuration failed: the start fails
	swapHooks  []func(*topology.Snapshot) // more work on a new snapshot (the embedded checker)
}

func (s *Scheduler) onSwap(snap *topology.Snapshot) {
	s.rebuildEngine()
	for _, h := range s.swapHooks {
		h(snap)
	}
}

// New builds the shared components over a connected store.
func New(role instance.Role, region string, c config.Common, st *store.Store, log *slog.Logger) *Scheduler {
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
		OnSwap: s.onSwap, Limits: c.Anycast.Limits(), Endpoints: st.Client().Endpoints(),
		Shared: func(ctx context.Context) (string, error) { return etcdclient.Shared(ctx, st.Client()) },
	}
	s.Merger = &health.Merger{
		Client: st.Client(), Prefix: c.Etcd.Prefix, Logger: log,
		Options:  c.Health.MergerOptions,
		OnChange: s.rebuildEngine,
	}
	s.Merger.Register(s.Registry)
	s.Ops = &opstate.Watcher{Client: st.Client(), Prefix: c.Etcd.Prefix, Logger: log, OnChange: s.rebuildEngine, OnDrill: s.onDrill}
	s.Ops.Register(s.Registry)
	s.Syncer.Register(s.Registry)
	s.Recorder, s.accessErr = newRecorder(s.Registry, c.AccessLog)
	s.policyErr = s.newPolicy()
	s.announcer = s.newAnnouncer(c)
	s.watchdog = s.newWatchdog()
	s.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "anysched_scheduler_ready_bool", Help: "1 when the scheduler is ready to answer set-top boxes.",
	}, func() float64 {
		if s.Ready() == nil {
			return 1
		}
		return 0
	}))
	s.Admin = &obs.Admin{Gatherer: s.Registry, Ready: s.Ready, ReadyDetail: s.routeLines, Logger: log.With("component", "admin"),
		Extra: map[string]http.Handler{"/debug/snapshot": http.HandlerFunc(s.serveSnapshotInfo)}}
	return s
}

// serveSnapshotInfo tells operators (and tests) which snapshot this instance
// answers from.
func (s *Scheduler) serveSnapshotInfo(w http.ResponseWriter, _ *http.Request) {
	info := struct {
		ID       string           `json:"id"`
		Role     instance.Role    `json:"role"`
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

// Availability returns the merged health behind the current engine.
func (s *Scheduler) Availability() *avail.Availability { return s.avail.Load() }

// Engine returns the current routing engine, nil before the first snapshot.
func (s *Scheduler) Engine() *steer.Engine { return s.engine.Load() }

// DefaultInstanceID is hostname-role[-region].
func DefaultInstanceID(role instance.Role, region string) string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown"
	}
	id := h + "-" + role.String()
	if region != "" {
		id += "-" + region
	}
	return id
}

// Ready reports whether this scheduler can answer: it holds a snapshot that
// is fresh enough, has a server to send STBs to and, for a regional
// scheduler, names its region.
func (s *Scheduler) Ready() error {
	if err := s.Syncer.Ready(); err != nil {
		return err
	}
	snap := s.Syncer.Snapshot()
	// With no server anywhere every answer would be a 503: not ready, so
	// that the announcer withdraws and STBs go to a scheduler that can
	// answer (or fail over visibly) instead.
	if !hasServers(snap) {
		return fmt.Errorf("topology revision %d has no servers in any region: every answer would be 503", snap.Revision)
	}
	if s.Region != "" {
		if _, ok := snap.Region(s.Region); !ok {
			return fmt.Errorf("region %q is not in topology revision %d", s.Region, snap.Revision)
		}
	}
	return nil
}

// hasServers reports whether some region of snap has a server.
func hasServers(snap *topology.Snapshot) bool {
	for _, r := range snap.Regions {
		if len(r.Servers) > 0 {
			return true
		}
	}
	return false
}

func (s *Scheduler) instance() store.Instance {
	in := store.Instance{
		ID: s.ID, Role: s.Role, Region: s.Region, Version: version.String(),
		AdminAddress: s.listeners.Admin, StartedAt: s.started, SnapshotAge: s.Syncer.Age().Seconds(),
	}
	in.Hostname, _ = os.Hostname()
	var peers []announce.PeerStatus
	var fams []announce.FamilyState
	in.Announced, in.AnnounceWhy, fams, peers = s.AnnounceState(context.Background())
	var prefixes []string
	for _, t := range s.anycastTargets(s.announceConfig()) {
		if t.Err == nil {
			prefixes = append(prefixes, t.Prefix.String())
		}
	}
	in.Announces = strings.Join(prefixes, " ")
	for _, f := range fams {
		r := store.Route{Family: string(f.Family), Announced: f.Announced, Why: f.Why}
		if f.Prefix.IsValid() {
			r.Prefix = f.Prefix.String()
		}
		in.Routes = append(in.Routes, r)
		if in.Announced && !f.Announced && in.AnnounceWhy == "" { // one family down: say so
			in.AnnounceWhy = fmt.Sprintf("%s not announced: %s", f.Family, f.Why)
		}
	}
	for _, p := range peers {
		in.Peers = append(in.Peers, store.Peer{Address: p.Address, ASN: p.ASN, State: p.State})
	}
	if s.allocator != nil {
		in.QoE = s.allocator.Summary()
	}
	if s.Planning != nil {
		in.Planning = s.Planning.Summaries()
	}
	// What this scheduler answered, by the STBs' region: a center's is how
	// drills and rollouts see it take a city over; a city's own, how the
	// console shows who answered whom.
	in.Traffic = s.Traffic()
	switch snap := s.Syncer.Snapshot(); {
	case snap == nil:
		in.State = instance.Starting
	case s.Ready() != nil:
		in.SnapshotRevision, in.SnapshotDigest = snap.Revision, s.Syncer.Digest()
		in.State = instance.Stale
	default:
		in.SnapshotRevision, in.SnapshotDigest = snap.Revision, s.Syncer.Digest()
		in.State = instance.Ready
	}
	return in
}

// Planner is a center's planner of fallen cities as the instance registry
// reads it (allocator.Regions).
type Planner interface {
	Summaries() []store.QoEPlan
}

// Traffic is what this scheduler answered by the STBs' region.
func (s *Scheduler) Traffic() []store.RegionTraffic {
	var out []store.RegionTraffic
	for _, t := range s.Recorder.Traffic() {
		out = append(out, store.RegionTraffic{ClientRegion: t.ClientRegion, Answered: t.Answered, Failed: t.Failed, RunStart: t.RunStart, Last: t.Last})
	}
	return out
}

// Components returns the shared components' run functions; Listen has
// bound their sockets.
func (s *Scheduler) Components() []func(context.Context) error {
	reg := &store.Registration{Store: s.Store, TTL: 10 * time.Second, Interval: 2 * time.Second, Current: s.instance, Kick: s.kick}
	if s.Role == instance.Regional {
		// A city's record carries its plan's drain forecasts: its answer
		// counts and snapshot age alone are written every 10 s. A center's
		// answers are how drills see it take a city over: every 2 s.
		reg.Refresh = 10 * time.Second
	}
	follow := func(ctx context.Context) error {
		return daemon.ConfigIf(s.Syncer.Run(ctx), snapshot.ErrNeedsTrustedKeys)
	}
	comps := []func(context.Context) error{follow, s.serveAdmin, reg.Run, s.Recorder.Run, s.Merger.Run, s.Ops.Run, s.answerAfterGrace, s.runPolicy, s.watchdog.Run}
	if p := s.policy; p.geo != nil {
		comps = append(comps, p.geo.Run)
	}
	if c := s.common.HTTP; c.Listen != "" {
		h := s.newHTTP()
		s.httpServer = h
		comps = append(comps, func(ctx context.Context) error { return h.Serve(ctx, s.bound.http) })
	}
	if s.common.HTTPS.Listen != "" {
		h := s.httpServer
		if h == nil {
			h = s.newHTTP()
		}
		// s.certs is loaded by Listen, which runs before any component.
		comps = append(comps, func(ctx context.Context) error { return s.certs.Run(ctx) }, func(ctx context.Context) error {
			return h.ServeTLS(ctx, s.bound.https, s.certs.TLSConfig())
		})
	}
	comps = append(comps, daemon.Hangups(s.Logger.With("component", "reload"), s.reloads()...))
	if c := s.common.DNS; c.Listen != "" {
		d := dnsd.New(dnsd.Config{
			Listen: c.Listen, TTL: c.TTL, InstanceID: s.ID,
			TrustedResolvers: c.TrustedResolverPrefixes(), MaxTCPConnections: c.MaxTCPConnections,
			UDPSockets: c.UDPSockets, UDPReaders: c.UDPReaders,
		}, s.Engine, s.Recorder, s.Logger)
		d.Register(s.Registry)
		s.dnsServer = d
		comps = append(comps, func(ctx context.Context) error { return d.ServeSockets(ctx, s.bound.dnsUDP, s.bound.dnsTCP) })
	}
	return comps
}

// newWatchdog feeds the service manager's watchdog (WatchdogSec in the
// systemd unit: WATCHDOG_USEC and NOTIFY_SOCKET in the environment) while
// the STB front ends answer; without a service manager it does nothing.
func (s *Scheduler) newWatchdog() *watchdog.Watchdog {
	log := s.Logger.With("component", "watchdog")
	timeout, err := sddaemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("the service manager's watchdog setting is unusable; running without the watchdog", "err", err)
	}
	w := &watchdog.Watchdog{
		Timeout: timeout, Logger: s.Logger, Dump: os.Stderr,
		Notify: func(state string) error { _, err := sddaemon.SdNotify(false, state); return err },
		Probes: func() []watchdog.Probe { // the listeners are bound by now
			var ps []watchdog.Probe
			if a := s.listeners.HTTP; a != "" {
				ps = append(ps, watchdog.HTTP(a))
			}
			if a := s.listeners.DNS; a != "" {
				ps = append(ps, watchdog.DNS(a))
			}
			return ps
		},
	}
	w.Register(s.Registry)
	return w
}

// newRecorder is the access log as configured: lines to access_log.file,
// or to stdout without one, or none when disabled (the counters still
// count). A file that cannot be opened is returned as the error, with a
// recorder without lines, so that the metrics are registered whatever
// happens (the daemon then stops at its start).
func newRecorder(reg prometheus.Registerer, c accesslog.Config) (*accesslog.Recorder, error) {
	o := c.Options
	switch {
	case !c.Enabled:
		return accesslog.New(reg, nil, o), nil
	case c.File == "":
		return accesslog.New(reg, os.Stdout, o), nil
	}
	r, err := accesslog.NewFile(reg, c.File, o)
	if err != nil {
		return accesslog.New(reg, nil, o), &daemon.ConfigError{Err: fmt.Errorf("access_log.file: %w", err)}
	}
	return r, nil
}

// newHTTP is the STB-facing HTTP server (http.listen and https.listen
// serve the same answers, under one connection cap).
func (s *Scheduler) newHTTP() *httpd.Server {
	c := s.common.HTTP
	hc := httpd.Config{Listen: c.Listen, TrustedProxies: c.TrustedPrefixes(), InstanceID: s.ID, MaxConnections: c.MaxConnections,
		Server: c.Server, AcceptLoops: c.AcceptLoops,
		// Always there: the topology turns steering on per service.
		Steering: pathway.New(s.Registry)}
	if s.QoE != nil {
		hc.Allocator = s.QoE
	}
	if s.policy.eject != nil {
		hc.Observer = s.policy
	}
	h := httpd.New(hc, s.Engine, s.Recorder, s.Logger)
	h.Register(s.Registry)
	return h
}

// reloads are what SIGHUP reloads.
func (s *Scheduler) reloads() []daemon.Reload {
	r := []daemon.Reload{{What: "access log", Do: s.Recorder.Reopen}}
	if s.common.HTTPS.Listen != "" {
		r = append(r, daemon.Reload{What: "https certificates", Do: func() error { return s.certs.Reload() }})
	}
	if s.policy.geo != nil {
		r = append(r, daemon.Reload{What: "geoip database", Do: s.policy.geo.Reload})
	}
	return r
}
