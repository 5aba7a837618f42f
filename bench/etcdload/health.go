package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"golang.org/x/sync/errgroup"
)

// healthWriter runs the province's checkers: checkersPerCity agents a city
// (as deploy/ has them: two a city, each probing all of its city's
// servers, so each server has that many verdicts), each the real
// health.Checker (its report rule) on the simulated clock feeding the real
// health.Publisher, with probes answered by simulated edges instead of the
// network.
func healthWriter(b *bench) (*writer, error) {
	w := &writer{name: "health verdicts"}
	cli, err := b.client(w)
	if err != nil {
		return nil, err
	}
	edges := newEdges(b.cities, b.clock, b.cfg)
	type agent struct {
		c *health.Checker
		p *health.Publisher
	}
	var agents []agent
	per := b.cfg.Checkers / len(b.cities)
	for _, c := range b.cities {
		var targets []health.Target
		for _, s := range c.servers {
			targets = append(targets, health.Target{Server: s, URL: "http://" + s + "/health", CapacityMbps: topogen.BandwidthMbps})
		}
		for k := 1; k <= per; k++ {
			id := fmt.Sprintf("chk-%s-%d", c.name, k)
			p := &health.Publisher{Client: cli, Prefix: b.prefix, TTL: 3 * time.Second, Logger: b.log,
				Info: avail.CheckerInfo{ID: id, Region: c.name, StartedAt: b.clock.Now().UTC()}}
			chk, err := health.NewChecker(health.CheckerOptions{ID: id, Interval: b.cfg.ProbeInterval, RefreshInterval: b.cfg.HealthRefresh,
				Clock: b.clock, OnReport: p.Publish}, edges, b.log)
			if err != nil {
				return nil, err
			}
			chk.SetTargets(targets)
			p.SetTargetCount(len(targets))
			agents = append(agents, agent{chk, p})
		}
	}
	w.run = func(ctx context.Context) error {
		g, gctx := errgroup.WithContext(ctx)
		for _, a := range agents {
			g.Go(func() error { return a.c.Run(gctx) })
			g.Go(func() error { return a.p.Run(gctx) })
		}
		return g.Wait()
	}
	return w, nil
}

// edges answers the checkers' probes as the province's edge servers would
// at prime time: each serves its share of its city's viewers (about 3
// Mbit/s each, one connection each), its figures wandering around that as
// an Ornstein-Uhlenbeck process (relative spread loadNoise, correlation
// time loadTau) plus 1% of noise between two probes; CPU, memory and the
// load average follow the bandwidth. A server fails (probes refused) about
// once a simulated day for one to three minutes.
type edges struct {
	clock   *simClock
	noise   float64
	tau     time.Duration
	servers map[string]*edge // never written after newEdges
}

type edge struct {
	mu        sync.Mutex
	rng       *rand.Rand
	baseMbps  float64
	x         float64 // the OU state: relative deviation from the base
	at        time.Time
	downFrom  time.Time
	downUntil time.Time
	requests  int64
}

func newEdges(cities []city, clock *simClock, cfg config) *edges {
	e := &edges{clock: clock, noise: cfg.LoadNoise, tau: cfg.LoadTau, servers: map[string]*edge{}}
	now := clock.Now()
	for _, c := range cities {
		per := float64(c.viewers) / float64(max(1, len(c.servers)))
		for i, s := range c.servers {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(c.index)<<20|uint64(i)))
			ed := &edge{rng: rng, baseMbps: per * 3 * (0.7 + 0.6*rng.Float64()), at: now, x: cfg.LoadNoise * rng.NormFloat64()}
			ed.scheduleFailure(now)
			e.servers[s] = ed
		}
	}
	return e
}

func (ed *edge) scheduleFailure(after time.Time) {
	ed.downFrom = after.Add(time.Duration(ed.rng.ExpFloat64() * float64(24*time.Hour)))
	ed.downUntil = ed.downFrom.Add(time.Minute + time.Duration(ed.rng.Float64()*float64(2*time.Minute)))
}

// Probe implements health.TargetProber.
func (e *edges) Probe(_ context.Context, t health.Target) health.Result {
	ed := e.servers[t.Server]
	if ed == nil {
		return health.Result{Err: "unknown server", Kind: health.KindConnect}
	}
	now := e.clock.Now()
	ed.mu.Lock()
	defer ed.mu.Unlock()
	if !now.Before(ed.downUntil) {
		ed.scheduleFailure(now)
	}
	if !now.Before(ed.downFrom) {
		return health.Result{RTT: 200 * time.Microsecond, Err: "connection refused", Kind: health.KindRefused}
	}
	if dt := now.Sub(ed.at); dt > 0 && e.tau > 0 {
		a := math.Exp(-float64(dt) / float64(e.tau))
		ed.x = ed.x*a + e.noise*math.Sqrt(1-a*a)*ed.rng.NormFloat64()
		ed.at = now
	}
	rel := max(0, 1+ed.x) * (1 + 0.01*ed.rng.NormFloat64())
	bw := ed.baseMbps * rel
	ed.requests += int64(bw / 3 * 2) // a couple of segment requests a second each
	cpu := min(1, 0.1+0.6*bw/topogen.BandwidthMbps)
	return health.Result{OK: true, RTT: time.Millisecond + time.Duration(ed.rng.Float64()*float64(100*time.Microsecond)), HasLoad: true,
		Load: avail.Load{BandwidthMbps: bw, Connections: int(bw / 3), CPU: cpu, Memory: 0.55 + 0.01*ed.rng.NormFloat64(), LoadAvg: 8 * cpu, Requests: ed.requests}}
}
