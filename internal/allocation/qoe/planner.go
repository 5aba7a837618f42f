package qoe

import (
	"context"
	"slices"
)

// Planner solves one period after another with Solver, each solve
// warm-started from the previous one: the subgradient starts at the
// previous prices (when the servers are the same: positions, radii and
// exclusions; capacities may change), the first plan is every user's
// previous choice as its PrevServer and PrevKbps say (the caller's
// identity of users: the live allocator sets both from the session's
// current server and rung), and the candidate lists of users at an
// unchanged position and the option table's arrays are reused. After 10%
// churn and 20% movement the bound and plan are near-final after one
// iteration; with the default Tol the solve still goes on to the time
// limit, so set Tol (0.01 certifies 1%) when re-solving every period.
//
// A Planner is not safe for concurrent use: keep one per sequence of
// instances (per service of a region). Any instance may be given; one whose
// servers differ from the previous solve's is solved cold.
type Planner struct {
	Solver Lagrangian

	last *plannerMemo
	seed []Price // Seed's prices, for the next solve
}

// Seed makes the next solve start from prices (one per server of the
// next instance, as Result.Prices), instead of its own previous ones or
// zero: another planner's last prices for the same servers, when this
// one takes over from it.
func (p *Planner) Seed(prices []Price) { p.seed = prices }

// plannerMemo is what one solve leaves for the next.
type plannerMemo struct {
	servers []serverGeo
	prices  []Price
	reuse   *candReuse
	opts    *options // the option table, whose arrays the next solve reuses
}

// serverGeo is what a server's candidate lists depend on.
type serverGeo struct {
	lat, lon, radius float64
	excluded         bool
}

// Name implements Solver.
func (p *Planner) Name() string { return p.Solver.Name() }

// Reset forgets the previous solve: the next is cold.
func (p *Planner) Reset() { p.last = nil }

// Solve implements Solver.
func (p *Planner) Solve(ctx context.Context, in *Instance) (*Result, error) {
	geo := make([]serverGeo, len(in.Servers))
	for m, s := range in.Servers {
		geo[m] = serverGeo{s.Lat, s.Lon, s.RadiusM, s.Excluded}
	}
	var w *Warm
	if p.last != nil && sameGeo(p.last.servers, geo) {
		w = &Warm{Prices: p.last.prices}
		if in.cand == nil {
			in.reuse = p.last.reuse
		}
	}
	if len(p.seed) == len(in.Servers) && len(p.seed) > 0 {
		if w == nil {
			w = &Warm{}
		}
		w.Prices = p.seed
	}
	p.seed = nil
	var old *options
	if p.last != nil {
		old = p.last.opts
	}
	res, opts, err := p.Solver.solveWarm(ctx, in, w, old)
	in.reuse = nil
	if err != nil {
		p.last = nil
		return nil, err
	}
	memo := &plannerMemo{servers: geo, prices: res.Prices, opts: opts,
		reuse: &candReuse{at: map[[3]float64]int32{}, cand: in.cand, dist: in.candDist, ing: in.candIng}}
	for v := range in.Users { // users share places: a city's 600,000 viewers stand at its zones
		if k := reuseKey(&in.Users[v]); v == 0 || k != reuseKey(&in.Users[v-1]) {
			memo.reuse.at[k] = int32(v)
		}
	}
	p.last = memo
	return res, nil
}

func sameGeo(a, b []serverGeo) bool { return slices.Equal(a, b) }
