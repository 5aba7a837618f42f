package steer

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
)

// Inputs is everything an engine is built from besides the snapshot. Every
// scheduler builds its engine with Build, and the admin API's explain
// answers from that very engine, so an explanation cannot differ from what
// an STB gets.
type Inputs struct {
	// DefaultRegion serves clients in no coverage zone (see Options).
	DefaultRegion string
	// Avail is the merged health and drains; nil: every server available.
	Avail *avail.Availability
	// Balance is the in-node balance policy in force.
	Balance balance.Config
	// Prev is the balance tables in service: slow start, adaptive weights and
	// consistent-hash assignments carry over from them. May be nil.
	Prev *Balances
	// Back is when each server (snapshot index) came back into service
	// (health or undrain) as the scheduler saw it; the zero time (or a nil
	// slice): long in service. Slow start ramps from the later of this and
	// the health verdict's change.
	Back []time.Time
	// Locate, Overflow and Count: see Options.
	Locate   func(netip.Addr) (topology.Location, bool)
	Overflow Overflow
	Count    Counter
	// Now dates slow starts.
	Now time.Time
	// StripQuery: query parameters {query} leaves out (see Options).
	StripQuery []string
}

// Build builds the engine for snap: node ranking by distance or by the
// RTT + loss network distance (balance rank.by: rtt_loss) where checkers
// measured it, nodes over capacity or in panic last; the in-node policy
// tables of the services that select by swrr, chash or p2c. When the
// balance tables cannot be built it still returns an engine (those services
// then pick as nearest does) along with the error.
func Build(snap *topology.Snapshot, in Inputs) (*Engine, error) {
	o := Options{DefaultRegion: in.DefaultRegion, StripQuery: in.StripQuery, Locate: in.Locate, Overflow: in.Overflow, Count: in.Count}
	av := in.Avail
	if av != nil {
		o.Available = func(i int32) bool { return av.Available[i] }
		o.Why = func(i int32) string { return av.Why[i] }
		// Drained and healthy is the one way to be unavailable and still
		// serve: the drain moves sessions away, it does not stop them.
		o.Down = func(i int32) bool {
			return !(int(i) < len(av.Drained) && av.Drained[i] && int(i) < len(av.Healthy) && av.Healthy[i])
		}
		o.NodeRank = nodeRanker(snap, av, in.Balance.Rank)
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	since := backSince(snap, av, in.Back)
	ramp := make([]float64, len(snap.Servers))
	rampUntil := time.Time{}
	for i := range snap.Servers {
		ramp[i] = in.Balance.SlowStart.Factor(since[i], now)
		if end := in.Balance.SlowStart.Ends(since[i], now); end.After(rampUntil) {
			rampUntil = end
		}
	}
	o.Weight = func(i int32) float64 { return float64(snap.Servers[i].Weight) * ramp[i] }
	var errs []error
	prev := in.Prev
	if prev == nil {
		prev = &Balances{}
	}
	if uses := balanceSelections(snap, -1); len(uses) > 0 {
		t, err := balanceTable(snap, av, since, uses, in, now, nil, nil, prev.All)
		o.Balance = t
		errs = append(errs, err)
	}
	o.PoolBalance = make([]*balance.Table, len(snap.Pools))
	for p := range snap.Pools {
		if uses := balanceSelections(snap, int32(p)); len(uses) > 0 {
			pv := &snap.Pools[p]
			t, err := balanceTable(snap, av, since, uses, in, now, pv.Has, nil, prev.Pools[pv.Name])
			o.PoolBalance[p] = t
			if err != nil {
				err = fmt.Errorf("pool %s: %w", snap.Pools[p].Name, err)
			}
			errs = append(errs, err)
		}
	}
	if av != nil && av.FamilyDown != nil {
		down := av.FamilyDown
		o.FamilyUp = func(i int32, v6 bool) bool { return !down[b2i(v6)][i] }
	}
	o.FamilyBalance = func(p int32, v6 bool, up []bool) *balance.Table {
		uses := balanceSelections(snap, p)
		key := familyKey(snap, p, v6)
		member := func(si int32) bool {
			_, _, has := snap.Servers[si].AddrFor(v6)
			return has && (p < 0 || snap.Pools[p].Has(si))
		}
		t, err := balanceTable(snap, av, since, uses, in, now, member, func(si int32) bool { return up[si] }, prev.Family[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return t
	}
	e := New(snap, o)
	e.ramp, e.rampUntil = ramp, rampUntil
	if err := errors.Join(errs...); err != nil {
		return e, fmt.Errorf("steer: building balance tables (services fall back to nearest): %w", err)
	}
	return e, nil
}

// backSince is when each server came back into service: the later of its
// health verdict's change and back (undrain, the end of an ejection).
func backSince(snap *topology.Snapshot, av *avail.Availability, back []time.Time) []time.Time {
	out := make([]time.Time, len(snap.Servers))
	for i := range out {
		if av != nil {
			out[i] = av.Figures[i].Since
		}
		if i < len(back) && back[i].After(out[i]) {
			out[i] = back[i]
		}
	}
	return out
}

// balanceSelections lists the in-node policies the services of pool p (-1:
// every server) use besides nearest and qoe (the allocator refines the
// nearest decision).
func balanceSelections(snap *topology.Snapshot, p int32) []topology.Selection {
	var out []topology.Selection
	for _, sv := range snap.Services {
		if sel := sv.Selection; sv.Pool == p && sel != topology.SelectNearest && sel != topology.SelectQoE && !slices.Contains(out, sel) {
			out = append(out, sel)
		}
	}
	return out
}

// Balances are an engine's in-node policy tables, lent to the next Build.
type Balances struct {
	All   *balance.Table            // services that may use every server
	Pools map[string]*balance.Table // by pool name
	// Family: the tables of a pool restricted to one family's servers
	// (family_fallback skip), by familyKey.
	Family map[string]*balance.Table
}

// familyKey names pool p (-1: every server) restricted to family v6.
func familyKey(snap *topology.Snapshot, p int32, v6 bool) string {
	name := ""
	if p >= 0 {
		name = snap.Pools[p].Name
	}
	if v6 {
		return name + "/ipv6"
	}
	return name + "/ipv4"
}

// Ramp is the share of its weight (0..1] slow start gives server now:
// nearest weighs it so, and the QoE planner scales its capacity so.
func (e *Engine) Ramp(server int32) float64 {
	if e.ramp == nil {
		return 1
	}
	return e.ramp[server]
}

// RampingUntil is when the last server ramping up reaches its full weight
// (zero: none is): the engine must be rebuilt until then for the ramp to
// advance.
func (e *Engine) RampingUntil() time.Time {
	t := e.rampUntil
	for _, pl := range e.pools {
		if pl.balance != nil && pl.balance.RampingUntil().After(t) {
			t = pl.balance.RampingUntil()
		}
	}
	return t
}

// nodeRanker ranks a region's nodes with balance.RankNodes from what the
// checkers measured on their servers.
func nodeRanker(snap *topology.Snapshot, av *avail.Availability, opts balance.RankOptions) func([]int32, topology.Location) []int32 {
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

// balanceTable builds the policy tables of the servers member accepts
// (nil: every server) from the snapshot and merged health; up, when not
// nil, overrides the merged health's availability (a family's addresses).
func balanceTable(snap *topology.Snapshot, av *avail.Availability, since []time.Time, uses []topology.Selection, in Inputs, now time.Time, member, up func(int32) bool, prev *balance.Table) (*balance.Table, error) {
	nodes := make([]balance.NodeInput, len(snap.Nodes))
	for ni, nv := range snap.Nodes {
		var n balance.NodeInput
		for _, si := range nv.Servers {
			if member != nil && !member(si) {
				continue
			}
			sv := &snap.Servers[si]
			n.Servers = append(n.Servers, balance.Server{Index: si, Name: sv.Name, Weight: float64(sv.Weight)})
			l := balance.Load{Healthy: true, CapacityMbps: sv.Capacity.BandwidthMbps, Since: since[si]}
			if av != nil {
				f := av.Figures[si]
				l = balance.Load{
					Healthy: av.Available[si], CPU: f.Load.CPU, BandwidthMbps: f.Load.BandwidthMbps, CapacityMbps: sv.Capacity.BandwidthMbps,
					Connections: f.Load.Connections, RTT: f.RTT, Loss: f.Loss, Since: since[si],
					Failures: int(f.Loss*20 + 0.5), // failed probes among the checker's last 20
				}
			}
			if up != nil {
				l.Healthy = up(si)
			}
			n.Loads = append(n.Loads, l)
		}
		if n.Loads == nil {
			n.Loads = []balance.Load{}
		}
		nodes[ni] = n
	}
	return balance.BuildTable(balance.TableInput{Nodes: nodes, Use: uses, Config: in.Balance, Now: now}, prev)
}

// Balance is the engine's in-node policy tables (nil when no service uses
// one), to be lent to the next Build.
func (e *Engine) Balance() *Balances {
	b := &Balances{All: e.balance, Pools: map[string]*balance.Table{}, Family: map[string]*balance.Table{}}
	for p, pl := range e.pools[1 : 1+len(e.snap.Pools)] {
		if pl.balance != nil {
			b.Pools[e.snap.Pools[p].Name] = pl.balance
		}
	}
	for i, fp := range e.famPools {
		if pl := &e.pools[1+len(e.snap.Pools)+i]; pl.balance != nil {
			b.Family[familyKey(e.snap, fp.base-1, fp.v6)] = pl.balance
		}
	}
	if b.All == nil && len(b.Pools) == 0 && len(b.Family) == 0 {
		return nil
	}
	return b
}

// AsRegion is the same engine answering as region's scheduler does: clients
// in no coverage zone go to region. Everything else, availability, ranking
// and the policy tables, is shared, so the answer is the one that
// scheduler gives when its merged health is the same.
func (e *Engine) AsRegion(region string) (*Engine, bool) {
	r, ok := e.snap.Region(region)
	if !ok {
		return nil, false
	}
	c := *e
	c.defaultRegion = r
	return &c, true
}
