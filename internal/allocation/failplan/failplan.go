// Package failplan plans for the loss of a city before it happens (N-1
// planning): for each city whose servers are gone, whether the cities it
// falls back to can take its viewers, and at what bitrates, solved with
// the QoE model on the sessions the planners published; and, from a solve
// where the nearest cities may serve too, a fallback order and the
// capacity each city of it should hold in reserve.
//
// It reads a snapshot and the published plan states and writes nothing:
// the center answers `schedctl plan failures` and the console with it.
package failplan

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
)

// Input is what a failure plan is made from.
type Input struct {
	Snap *topology.Snapshot
	// Viewers are the regions' viewers by region name, from the freshest
	// plan states their planners publish for a successor (Summarize); a
	// region without any has no viewers the plan knows of.
	Viewers map[string]*Viewers
	// Params is the QoE model (zero: qoe.DefaultParams); RoomMean its
	// room mean for every channel (zero: 0.05, the planners' default).
	Params   qoe.Params
	RoomMean float64
	// Budget bounds each solve (zero: 2 s). A solve cut short answers with
	// the best plan it has; its gap says how far from certain it is.
	Budget time.Duration
	// Up says whether a server serves now (health, drains); nil: all do.
	Up func(server int32) bool
	// Nearest is how many of the nearest other regions the proposal adds to
	// the configured order (zero: 3).
	Nearest int
	// Regions are the cities to plan the loss of (empty: every one).
	Regions []string

	hostPlans map[[2]int32]*hostPlan // by service and region, once per Plan
}

// Report is the plan for every region's loss.
type Report struct {
	Revision int64 // of the topology planned on
	Made     time.Time
	Cities   []City
}

// City is the loss of one region: its viewers, where its configured
// fallback order would put them, and what a solve over the nearest
// regions proposes instead.
type City struct {
	Region  string
	Viewers int      // its live sessions of QoE services (the plan state's)
	Order   []string // the configured fallback regions, in order (the center plans them; it has no servers)
	// Configured: its viewers on the servers of the configured order.
	Configured Outcome
	// Proposed: the regions, by the lost city's bandwidth they take when the
	// nearest regions may serve too, and that solve's outcome.
	Proposed        []string
	ProposedOutcome Outcome
	// Reserves: for each region of Proposed, the capacity to hold free for
	// the lost city's viewers at their desired bitrates, filled in the
	// proposed order from what each region's own viewers leave.
	Reserves []Reserve
	// ShortKbps is the lost city's desired bandwidth no region of the
	// proposal has spare: the province cannot carry it at desired bitrates.
	ShortKbps float64
}

// Outcome is one solve of a lost city's viewers together with the host
// regions' own.
type Outcome struct {
	Planned   int     // the lost city's viewers on a server
	Unplanned int     // given the fallback rung by no server
	AtDesired int     // of Planned: at their desired bitrate (or the top rung)
	MeanKbps  float64 // over Planned
	// HostsAtDesired is the host regions' own viewers' share at their
	// desired bitrate, planned by their own planners on their own servers
	// (which keep their claims: the lost city gets what they leave).
	HostsAtDesired float64
	// Taken is the lost city's viewers and kbps each host region took.
	Taken []Take
	Gap   float64 // the worst certified gap of the solves (NaN: none certified)
}

// Take is a host region's part of a lost city's viewers.
type Take struct {
	Region  string
	Viewers int
	Kbps    float64
}

// Reserve is the capacity a region should hold for a lost city.
type Reserve struct {
	Region      string
	SpareKbps   float64 // its servers' bandwidth its own viewers leave now
	ReserveKbps float64 // the lost city's desired bandwidth placed on it
}

// Plan plans the loss of every region with viewers.
func Plan(ctx context.Context, in Input) (*Report, error) {
	if in.Snap == nil {
		return nil, fmt.Errorf("failplan: no topology")
	}
	in.defaults()
	rep := &Report{Revision: in.Snap.Revision, Made: time.Now()}
	for r := range in.Snap.Regions {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(in.Regions) > 0 && !slices.Contains(in.Regions, in.Snap.Regions[r].Name) {
			continue
		}
		c, err := in.city(ctx, int32(r))
		if err != nil {
			return nil, err
		}
		rep.Cities = append(rep.Cities, c)
	}
	return rep, nil
}

// Reads names the regions whose viewers Plan reads: each city in
// in.Regions (every one when empty) and the regions that may take its
// viewers. The caller reads only their plan state: a province's is
// millions of sessions.
func (in Input) Reads() []string {
	in.defaults()
	need := make([]bool, len(in.Snap.Regions))
	for r := range in.Snap.Regions {
		if len(in.Regions) > 0 && !slices.Contains(in.Regions, in.Snap.Regions[r].Name) {
			continue
		}
		need[r] = true
		for _, h := range in.proposalHosts(int32(r)) {
			need[h] = true
		}
	}
	var out []string
	for r, ok := range need {
		if ok {
			out = append(out, in.Snap.Regions[r].Name)
		}
	}
	return out
}

func (in *Input) defaults() {
	if in.Params == (qoe.Params{}) {
		in.Params = qoe.DefaultParams()
	}
	if in.RoomMean <= 0 {
		in.RoomMean = 0.05
	}
	if in.Budget <= 0 {
		in.Budget = 2 * time.Second
	}
	if in.Nearest <= 0 {
		in.Nearest = 3
	}
	if in.Up == nil {
		in.Up = func(int32) bool { return true }
	}
	in.hostPlans = map[[2]int32]*hostPlan{}
}

// city plans region lost's loss.
func (in *Input) city(ctx context.Context, lost int32) (City, error) {
	snap := in.Snap
	c := City{Region: snap.Regions[lost].Name}
	for _, f := range snap.Regions[lost].Fallback {
		c.Order = append(c.Order, snap.Regions[f].Name)
	}
	c.Viewers = in.viewers(lost)
	if c.Viewers == 0 {
		return c, nil
	}
	var err error
	if c.Configured, err = in.solve(ctx, lost, snap.Regions[lost].Fallback); err != nil {
		return c, err
	}
	hosts := in.proposalHosts(lost)
	if c.ProposedOutcome, err = in.solve(ctx, lost, hosts); err != nil {
		return c, err
	}
	taken := slices.Clone(c.ProposedOutcome.Taken)
	slices.SortStableFunc(taken, func(a, b Take) int { return cmp.Compare(b.Kbps, a.Kbps) })
	for _, t := range taken {
		if t.Viewers > 0 {
			c.Proposed = append(c.Proposed, t.Region)
		}
	}
	c.Reserves, c.ShortKbps = in.reserves(lost, c.Proposed)
	return c, nil
}

// viewers counts region r's sessions of QoE services.
func (in *Input) viewers(r int32) int {
	if v := in.Viewers[in.Snap.Regions[r].Name]; v != nil {
		return v.Count
	}
	return 0
}

// eachGroup calls f with each of region r's viewer groups.
func (in *Input) eachGroup(r int32, f func(g *viewerGroup, v *Viewers)) {
	v := in.Viewers[in.Snap.Regions[r].Name]
	if v == nil {
		return
	}
	for i := range v.groups {
		f(&v.groups[i], v)
	}
}

// proposalHosts is the configured order and the Nearest other regions
// closest to lost (by their centres), in that order.
func (in *Input) proposalHosts(lost int32) []int32 {
	snap := in.Snap
	hosts := slices.Clone(snap.Regions[lost].Fallback)
	var others []int32
	for r := range snap.Regions {
		if r := int32(r); r != lost && !slices.Contains(hosts, r) {
			others = append(others, r)
		}
	}
	at := snap.Regions[lost].Loc
	dist := func(r int32) float64 {
		l := snap.Regions[r].Loc
		return geo.DistanceM(at.Lat, at.Lon, l.Lat, l.Lon)
	}
	slices.SortStableFunc(others, func(a, b int32) int { return cmp.Compare(dist(a), dist(b)) })
	return append(hosts, others[:min(in.Nearest, len(others))]...)
}

// solve plans lost's viewers on what hosts' servers have left once each
// host region's planner has planned its own viewers on them, as the
// center planning a fallen city does: the hosts' planners keep their
// claims, the center plans in the capacity left (a first period; the fair
// share a starved planner is later given back is not modelled, so the
// lost city's figures are its worst).
func (in *Input) solve(ctx context.Context, lost int32, hosts []int32) (Outcome, error) {
	out := Outcome{Gap: math.NaN()}
	at := in.Snap.Regions[lost].Loc
	taken := make([]Take, len(hosts))
	var hostsAt, hostsN int
	for svc := range in.Snap.Services {
		svc := int32(svc)
		if in.Snap.Services[svc].Selection.OrDefault() != topology.SelectQoE {
			continue
		}
		p := in.newProblem(svc)
		for _, h := range hosts {
			own, err := in.hostPlan(ctx, svc, h)
			if err != nil {
				return out, err
			}
			hostsAt, hostsN = hostsAt+own.atDesired, hostsN+own.viewers
			out.Gap = worse(out.Gap, own.gap)
			p.addServers(own, at)
		}
		in.eachGroup(lost, func(g *viewerGroup, v *Viewers) {
			if g.svc == svc {
				p.addViewers(g, v, -1, at.Lat, at.Lon)
			}
		})
		if len(p.inst.Users) == 0 {
			continue
		}
		res, err := in.solveOne(ctx, p.inst)
		if err != nil {
			return out, err
		}
		out.Gap = worse(out.Gap, res.Gap())
		t := p.tally(res)
		out.Planned += t.planned
		out.Unplanned += t.unplanned
		out.AtDesired += t.atDesired
		out.MeanKbps += t.kbps // a sum until the end
		for i, h := range hosts {
			taken[i].Viewers += t.byRegion[h].Viewers
			taken[i].Kbps += t.byRegion[h].Kbps
		}
	}
	if out.Planned > 0 {
		out.MeanKbps /= float64(out.Planned)
	}
	out.HostsAtDesired = share(hostsAt, hostsN)
	for i, h := range hosts {
		taken[i].Region = in.Snap.Regions[h].Name
	}
	out.Taken = taken
	return out, nil
}

func (in *Input) solveOne(ctx context.Context, inst *qoe.Instance) (*qoe.Result, error) {
	if len(inst.Users) == 0 {
		return &qoe.Result{Bound: math.NaN()}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, in.Budget)
	defer cancel()
	res, err := qoe.Lagrangian{TimeLimit: in.Budget}.Solve(sctx, inst)
	if err != nil {
		return nil, fmt.Errorf("failplan: %w", err)
	}
	return res, nil
}

// reserves fills the lost city's desired bandwidth into the proposed
// regions in order, each up to what its own viewers leave of its servers.
func (in *Input) reserves(lost int32, order []string) ([]Reserve, float64) {
	demand := 0.0
	in.eachGroup(lost, func(g *viewerGroup, _ *Viewers) {
		// at their desired bitrate: the rung an unplanned answer gives
		demand += float64(allocator.Rung(in.Snap.Services[g.svc].BitratesKbps, g.desired)) * float64(g.count)
	})
	var out []Reserve
	for _, name := range order {
		r, _ := in.Snap.Region(name)
		spare := 0.0
		for _, si := range in.Snap.Regions[r].Servers {
			if in.Up(si) && in.Snap.Servers[si].Weight > 0 {
				spare += in.Snap.Servers[si].Capacity.BandwidthMbps * 1000
			}
		}
		in.eachGroup(r, func(g *viewerGroup, _ *Viewers) {
			if g.server >= 0 {
				spare -= g.kbps * float64(g.count)
			}
		})
		spare = math.Max(0, spare)
		take := math.Min(spare, demand)
		demand -= take
		out = append(out, Reserve{Region: name, SpareKbps: spare, ReserveKbps: take})
	}
	return out, demand
}

func share(n, of int) float64 {
	if of == 0 {
		return math.NaN()
	}
	return float64(n) / float64(of)
}

// worse is the larger gap, NaN counting as none.
func worse(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Max(a, b)
}
