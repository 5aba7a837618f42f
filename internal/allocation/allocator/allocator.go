// Package allocator runs the QoE-aware allocation (internal/allocation/qoe) live inside
// a regional scheduler: it keeps the
// region's sessions (user, channel) seen in STB requests, re-solves the
// region every period with internal/allocation/qoe's Lagrangian solver, sends a returning STB
// to its planned server and bitrate, prices a new one at the solve's dual
// prices among servers with capacity left, and shares the region's capacity
// with the other instances of the region through leased claims in etcd.
//
// The hot path (Allocate) reads an immutable plan through an atomic pointer
// and does no I/O; verifying a token and pricing a new session are its only
// costly steps.
package allocator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/prometheus/client_golang/prometheus"
)

// Selection is the service selection the allocator serves.
const Selection = topology.SelectQoE

// Auth modes.
const (
	AuthOptional = "optional" // no token: the default profile, keyed by the STB's address
	AuthRequired = "required" // no token: 403
)

// Config configures an Allocator. Zero fields take the defaults below; the
// fields with yaml keys are a scheduler's alloc section, which decodes over
// DefaultConfig and is checked by Validate (config.go).
type Config struct {
	Region   string `yaml:"-"` // the region this scheduler allocates
	Instance string `yaml:"-"` // this instance's id in the region's claims
	// Period between two solves of the region.
	Period time.Duration `yaml:"period"`
	// SessionTTL: a session not seen for this long has ended.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// SolveTimeout bounds one solve; default Period/2, at most 2 s.
	SolveTimeout time.Duration `yaml:"solve_timeout"`
	// ColdSolveTimeout bounds a solve with no plan of this instance's
	// viewers to start from (the first after a start or an idle spell, a
	// takeover): it builds every group and option from nothing, and its
	// viewers have only the steer decision meanwhile, so it may take
	// longer to be certified. Default max(SolveTimeout, min(Period/2, 5 s)).
	ColdSolveTimeout time.Duration `yaml:"cold_solve_timeout"`
	// TargetGap ends a solve once its plan is certified within this
	// relative gap of the optimum (the Lagrangian bound): a period's warm
	// solve usually is after a few iterations, and going on to
	// solve_timeout would only spend the period's CPU.
	TargetGap float64 `yaml:"target_gap"`
	// MaxSessions bounds the session table; beyond it new sessions are
	// answered (priced) but not planned.
	MaxSessions int    `yaml:"max_sessions"`
	Auth        string `yaml:"auth"` // optional | required
	// Verifier checks tokens; nil accepts no token (then Auth must be optional).
	Verifier *token.Verifier `yaml:"-"`
	// Default is the profile of a session without a token, and fills the
	// fields a token leaves out; DesiredKbps 0 means the top of the ladder.
	Default qoe.Profile `yaml:"default_profile"`
	// RoomMean is Fbar for a channel the last solve did not see.
	RoomMean float64 `yaml:"-"`
	// ArrivalReserve is the share (0 to MaxArrivalReserve) of each
	// server's capacity, of what this instance may use, that the solve
	// leaves for sessions arriving before the next one; 0 leaves none.
	ArrivalReserve float64 `yaml:"arrival_reserve"`
	// Params is the QoE model; zero: qoe.DefaultParams.
	Params qoe.Params `yaml:"model"`
	// Rank is this instance's place in the region's route preference: 0
	// for the primary, 1 for the first standby, and so on (store.Claims).
	// A scheduler's file gives it apart (alloc.rank), with a default that
	// depends on the announcement.
	Rank int `yaml:"-"`
	// IdleAfter: an instance that received no STB of its region for this
	// long is idle: it plans nothing and gives its claims back but for
	// the arrival reserve. Default 2 periods, at least 5 s.
	IdleAfter time.Duration `yaml:"idle_after"`
	// Routed reports whether routers can bring the region's STBs to this
	// instance (its route is announced); nil: always. Not routed is idle.
	Routed func() bool `yaml:"-"`
	// States: where plans are published for, and read from, the region's
	// other planners (nil: no handover). StateInterval: how often an
	// active instance publishes (default max(Period, 30 s)); it also does
	// when it goes idle and when it stops, and every period while it
	// stands in for a better-ranked instance that is up.
	States        StateStore    `yaml:"-"`
	StateInterval time.Duration `yaml:"state_interval"`
	// Gate, if set, checks the viewer tokens (shared by a center's
	// planners); nil: the allocator makes its own from Auth and Verifier.
	Gate *Gate `yaml:"-"`
	// IdleNoReserve: idle, claim nothing, not even the arrival reserve (a
	// center's planner: its first STBs of a city get the gate's answer
	// until it plans, so a reserve would only take from the city).
	IdleNoReserve bool `yaml:"-"`
}

// Defaults.
const (
	DefaultPeriod      = 10 * time.Second
	DefaultSessionTTL  = 2 * time.Minute
	DefaultMaxSessions = 1_000_000
	DefaultTargetGap   = 0.01
	// DefaultRoomMean is the middle of the QoE allocation paper's measured room means
	// (0.01-0.13 danmaku per capita per hour).
	DefaultRoomMean = 0.05
)

// DefaultProfile is a viewer the platform said nothing about: the median
// viewer of the QoE allocation paper (1 danmaku an hour, no gifts), wanting the top rung.
func DefaultProfile() qoe.Profile { return qoe.Profile{DesiredKbps: 0, Danmaku: 1, Gift: 0} }

func (c Config) withDefaults() Config {
	if c.Period <= 0 {
		c.Period = DefaultPeriod
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.SolveTimeout <= 0 {
		c.SolveTimeout = min(c.Period/2, 2*time.Second)
	}
	if c.ColdSolveTimeout <= 0 {
		c.ColdSolveTimeout = max(c.SolveTimeout, min(c.Period/2, 5*time.Second))
	}
	if c.TargetGap <= 0 {
		c.TargetGap = DefaultTargetGap
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	if c.Auth == "" {
		c.Auth = AuthOptional
	}
	if c.RoomMean <= 0 {
		c.RoomMean = DefaultRoomMean
	}
	if c.Params == (qoe.Params{}) {
		c.Params = qoe.DefaultParams()
	}
	if c.IdleAfter <= 0 {
		c.IdleAfter = max(2*c.Period, 5*time.Second)
	}
	if c.StateInterval <= 0 {
		c.StateInterval = max(c.Period, 30*time.Second)
	}
	return c
}

// Board is where instances of a region publish their claims (store.ClaimBoard).
type Board interface {
	Peers(ctx context.Context) (map[string]store.Claims, int64, error)
	Commit(ctx context.Context, c store.Claims, rev int64) (bool, error)
	Release(ctx context.Context) error
}

// Allocator is the live allocation of one region. Allocate is safe for
// concurrent use; Run drives the periodic solve.
type Allocator struct {
	cfg    Config
	board  Board
	engine func() *steer.Engine
	log    *slog.Logger
	met    *metrics
	gate   *Gate
	now    func() time.Time

	plan     atomic.Pointer[plan]
	figures  atomic.Pointer[figures] // the peers' claims last read
	sessions *table
	kick     chan struct{}
	// lastSTB: when (unix nanoseconds) an STB of the region last reached
	// this instance, to the nearest 100 ms; 0 for never.
	lastSTB atomic.Int64

	solveMu sync.Mutex    // one Solve at a time; guards the fields below
	gen     uint64        // plans made
	own     store.Claims  // the claims last committed
	peers   int           // peers at the last read of the claims
	failing bool          // the claims cannot be read (said once)
	budget  time.Duration // the current solve's: solve_timeout or cold_solve_timeout
	idle    bool          // the last solve found no STB lately (said once)
	// statePublished: when this instance last published its state;
	// activeUntil: when it last made a plan with STBs (a published state
	// older than that is not news to it).
	statePublished, activeUntil time.Time
	adoptNext                   atomic.Bool // a peer went idle: adopt its last state at the next solve
	// seeds: an adopted plan's prices, by service and server name, for the
	// next solve's subgradient to start from.
	seeds      map[string]map[string]qoe.Price
	planners   map[string]*qoe.Planner // by service name: warm starts across periods
	grouping   map[string]*grouped     // by service name: the grouping's arrays, reused
	numberings uint32                  // the groupings' numberings made (grouped.numbering)

	// The drain forecasts of the plan last summarised, made when a summary
	// asks for them rather than on the solve goroutine: at 600,000
	// sessions they cost a fifth of a period's solve, and only the
	// instance registry (every few seconds) and dry runs read them.
	forecastMu sync.Mutex
	drains     *drainForecasts
}

// New builds an allocator. engine returns the scheduler's current routing
// engine (nil before the first snapshot); reg may be nil.
func New(cfg Config, board Board, engine func() *steer.Engine, reg prometheus.Registerer, log *slog.Logger) (*Allocator, error) {
	cfg = cfg.withDefaults()
	switch {
	case cfg.Region == "":
		return nil, errors.New("allocator: no region")
	case !reserveInRange(cfg.ArrivalReserve):
		return nil, fmt.Errorf("allocator: arrival reserve %v is out of range [0, %g]", cfg.ArrivalReserve, MaxArrivalReserve)
	}
	gate := cfg.Gate
	if gate == nil {
		var err error
		if gate, err = NewGate(cfg.Auth, cfg.Verifier, cfg.Default, reg); err != nil {
			return nil, err
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Allocator{
		cfg: cfg, board: board, engine: engine, log: log.With("component", "allocator"),
		met: newMetrics(reg), gate: gate, now: time.Now, sessions: newTable(cfg.MaxSessions), kick: make(chan struct{}, 1),
		planners: map[string]*qoe.Planner{}, grouping: map[string]*grouped{}, idle: true,
	}
	return a, nil
}

// Kick asks for a solve now (a new snapshot makes the plan stale).
func (a *Allocator) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Allocate refines d, the steer engine's decision for req, when d's service
// selects by QoE: the token (tok, "" for none) is verified, the session is
// recorded, and d's server and bitrate become the plan's (a returning
// session), the best priced choice (a new one) or the region's fallback.
// It returns an error (wrapping ErrForbidden) only to refuse the request.
func (a *Allocator) Allocate(eng *steer.Engine, d *steer.Decision, req steer.Request, tok string) error {
	snap := eng.Snapshot()
	if d.Service < 0 || snap.Services[d.Service].Selection != Selection {
		return nil
	}
	ladder := snap.Services[d.Service].BitratesKbps
	user, prof, err := a.gate.viewer(tok, req.Client)
	if err != nil {
		return err
	}
	if prof.DesiredKbps <= 0 {
		prof.DesiredKbps = float64(ladder[len(ladder)-1])
	}
	// Until a plan says otherwise (another city's STB, no plan yet), the
	// viewer's own rung.
	d.BitrateKbps = Rung(ladder, prof.DesiredKbps)
	k := key{service: d.Service, user: user, addr: req.Client}
	switch d.Result {
	case steer.ResultCZ, steer.ResultDefault, steer.ResultFallback, steer.ResultGeo:
	default:
		return nil // OVERFLOW: the spill stands; MISS, ERROR: nothing to plan
	}
	p := a.plan.Load()
	region := int32(-1)
	if p != nil && p.snap == snap {
		region = p.region
	} else if r, ok := snap.Region(a.cfg.Region); ok {
		region = r
	}
	if d.ClientRegion != region || region < 0 {
		return nil // another city's STB: not ours to plan
	}
	now := a.now().UnixNano()
	if now-a.lastSTB.Load() > int64(100*time.Millisecond) { // one shared write per 100 ms
		a.lastSTB.Store(now)
	}
	k.channel = eng.Channel(d.Service, req.Path, req.Query) // the service's pattern, as the redirect renders it
	loc, zone := snap.Regions[region].Loc, int32(-1)
	if d.Zone >= 0 {
		loc, zone = snap.Zones[d.Zone].Loc, d.Zone
	}
	s, ended := a.sessions.touch(k, prof, loc, snap, now)
	var sp *servicePlan
	if p != nil && p.snap == snap {
		sp = p.services[d.Service]
		if ended != nil {
			p.release(ended)
		}
	}
	if sp == nil {
		// No plan for this snapshot yet, or the first STB after a quiet
		// spell (plan now): the steer decision stands, and the session is
		// in the next solve.
		if p != nil && p.idle {
			a.Kick()
		}
		a.met.decisions[kindUnplanned].Inc()
		return nil
	}
	if s != nil && s.released.Load() != p.gen {
		if as := p.plannedOf(s); as != nil && (as.server == qoe.Fallback || eng.AvailableTo(d, as.server)) {
			a.apply(eng, d, req, sp, s, as, kindPlanned)
			return nil
		}
		// Priced onto a server earlier in this plan's period: it keeps that
		// place (its capacity is taken already). One priced to the fallback is
		// priced again, since capacity may have come free since.
		if as := s.cur.Load(); as != nil && as.gen == p.gen && as.snap == p.snap && as.server >= 0 && eng.AvailableTo(d, as.server) {
			a.apply(eng, d, req, sp, s, as, kindPlanned)
			return nil
		}
	}
	// New (or its planned server went away): the best choice at the prices.
	as := p.price(eng, sp, s, k.channel, prof, loc, zone)
	if as.server >= 0 && !eng.AvailableTo(d, as.server) {
		// Priced onto a server without an address of the client's family
		// (family_fallback skip): the steer decision, which has one, stands.
		a.met.decisions[kindUnplanned].Inc()
		return nil
	}
	kind := kindPriced
	if as.server == qoe.Fallback {
		kind = kindFallback
	}
	a.apply(eng, d, req, sp, s, as, kind)
	return nil
}

// apply writes as into d and records it as the session's current place.
func (a *Allocator) apply(eng *steer.Engine, d *steer.Decision, req steer.Request, sp *servicePlan, s *session, as *assignment, kind int) {
	if as.server == qoe.Fallback {
		eng.Elsewhere(d, req)
		d.BitrateKbps = int(sp.inst.Ladder[a.cfg.Params.FallbackRung])
		if kind == kindPlanned {
			kind = kindFallback
		}
	} else {
		d.Server = as.server
		d.Node = eng.Snapshot().Servers[as.server].Node
		d.Region = eng.Snapshot().Servers[as.server].Region
		d.BitrateKbps = int(as.kbps)
	}
	if s != nil {
		s.cur.Store(as)
		s.placed.Store(s.seen.Load()) // the request's time, taken by touch
	}
	a.met.decisions[kind].Inc()
}

// Status is the current plan, for operators (/debug/alloc) and tests.
type Status struct {
	Region     string  `json:"region"`
	Instance   string  `json:"instance"`
	Planned    bool    `json:"planned"`
	Generation uint64  `json:"generation,omitempty"`
	MadeAt     string  `json:"made_at,omitempty"`
	Revision   int64   `json:"snapshot_revision,omitempty"`
	Sessions   int     `json:"sessions"` // live in the table
	PlannedN   int     `json:"planned_sessions"`
	Fallback   int     `json:"fallback_sessions"`
	Objective  float64 `json:"objective"`
	Bound      float64 `json:"bound"`
	SolveMS    float64 `json:"solve_ms"`
	Peers      int     `json:"peers"`
	SafeMode   bool    `json:"safe_mode,omitempty"`
	Idle       bool    `json:"idle,omitempty"`
	Rank       int     `json:"rank"`
	// Quality and stability of the plan: sessions on a server at their
	// desired bitrate, moved to another server and to a lower bitrate than
	// before it, and sent to the fallback for lack of capacity.
	AtDesired int `json:"at_desired_sessions"`
	Switches  int `json:"switches"`
	Drops     int `json:"drops"`
	Starved   int `json:"starved_sessions"`
	// Bandwidth this instance may use on the region's servers, and their total.
	HeldKbps     float64 `json:"held_kbps"`
	CapacityKbps float64 `json:"capacity_kbps"`
	// Origin pulls: (server, channel) pairs with a viewer, and what they
	// stream from the origin.
	OriginPulls int     `json:"origin_pulls"`
	OriginKbps  float64 `json:"origin_kbps"`
	// Per server of the region: sessions planned, and bandwidth (kbps) and
	// compute used by the plan, claimed by this instance and available to
	// it after the peers' claims.
	Servers []ServerStatus `json:"servers"`
}

// ServerStatus is one server's share of the plan.
type ServerStatus struct {
	Name          string     `json:"name"`
	Sessions      int        `json:"sessions"`
	Used          [2]float64 `json:"used"`
	Claimed       [2]float64 `json:"claimed,omitempty"`
	Capacity      [2]float64 `json:"capacity,omitempty"`
	LeftBandwidth int64      `json:"headroom_kbps"`
}

// Summary is the plan in brief, for the instance registry (schedctl
// status); nil before the first plan.
func (a *Allocator) Summary() *store.QoEPlan {
	p := a.plan.Load()
	if p == nil {
		return nil
	}
	st := &p.stats
	q := &store.QoEPlan{
		Region: a.cfg.Region, Sessions: int(a.sessions.count.Load()), Planned: st.Sessions, Fallback: st.Fallback,
		Objective: st.Objective, MadeAt: p.made, Peers: st.Peers, Switches: st.Switches, Drops: st.Drops,
		Starved: st.Starved, SafeMode: st.SafeMode, Idle: p.idle, HeldKbps: st.HeldKbps, CapacityKbps: st.TotalKbps,
	}
	if placed := st.Sessions - st.Fallback; placed > 0 {
		q.AtDesired = float64(st.AtDesired) / float64(placed)
	}
	if !p.idle {
		q.Drain = a.forecast(p)
	}
	q.Gap = st.gap()
	return q
}

// gap is the plan's certified gap: how far its objective may be from the
// best, as a share of the bound; 0 without a bound.
func (st *planStats) gap() float64 {
	if math.IsNaN(st.Bound) || st.Bound == 0 {
		return 0
	}
	return (st.Bound - st.Objective) / math.Max(1, math.Abs(st.Bound))
}

// Status reports the current plan.
func (a *Allocator) Status() Status {
	st := Status{Region: a.cfg.Region, Instance: a.cfg.Instance, Sessions: int(a.sessions.count.Load())}
	p := a.plan.Load()
	if p == nil {
		return st
	}
	s := &p.stats
	st.Planned, st.Generation, st.MadeAt, st.Revision = true, p.gen, p.made.UTC().Format(time.RFC3339Nano), p.snap.Revision
	st.PlannedN, st.Fallback, st.Objective, st.Bound = s.Sessions, s.Fallback, s.Objective, s.Bound
	st.SolveMS, st.Peers, st.SafeMode = float64(s.SolveTime.Microseconds())/1000, s.Peers, s.SafeMode
	st.Idle, st.Rank, st.AtDesired, st.Switches, st.Drops, st.Starved = p.idle, a.cfg.Rank, s.AtDesired, s.Switches, s.Drops, s.Starved
	st.HeldKbps, st.CapacityKbps = s.HeldKbps, s.TotalKbps
	st.OriginPulls, st.OriginKbps = s.OriginPulls, s.OriginKbps
	for pos, si := range p.servers {
		name := p.snap.Servers[si].Name
		st.Servers = append(st.Servers, ServerStatus{
			Name: name, Sessions: s.UsersByServer[name], Used: s.UsageByServer[name],
			Claimed: s.ClaimByServer[name], Capacity: s.CapacityByServer[name], LeftBandwidth: p.bwLeft[pos].Load(),
		})
	}
	return st
}

// figures are the region's claims as last read from etcd.
type figures struct{ peers map[string]store.Claims }

// ServerFigures is what the region's planners hold on each server of snap
// (by snapshot index), for the overflow thresholds: bandwidth claimed by
// every instance of the region (kbps: this one's committed claims and its
// peers' as last read) and sessions this instance's plan keeps there. -1
// marks a server it knows nothing of (another region's, or no plan for
// snap yet).
func (a *Allocator) ServerFigures(snap *topology.Snapshot) (claimedKbps []float64, sessions []int) {
	p := a.plan.Load()
	if p == nil || p.snap != snap {
		return nil, nil
	}
	claimedKbps, sessions = make([]float64, len(snap.Servers)), make([]int, len(snap.Servers))
	for i := range claimedKbps {
		claimedKbps[i], sessions[i] = -1, -1
	}
	var peers map[string]store.Claims
	if f := a.figures.Load(); f != nil {
		peers = f.peers
	}
	for _, si := range snap.Regions[p.region].Servers {
		name := snap.Servers[si].Name
		c := p.stats.ClaimByServer[name][0]
		for _, pc := range peers {
			c += pc.Servers[name].BandwidthKbps
		}
		claimedKbps[si], sessions[si] = c, p.stats.UsersByServer[name]
	}
	return claimedKbps, sessions
}
