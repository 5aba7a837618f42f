package steer

import (
	"fmt"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/balance"
	"github.com/anysched/anysched/internal/health"
	"github.com/anysched/anysched/internal/topology"
)

// Inputs is everything an engine is built from besides the snapshot. Every
// scheduler builds its engine with Build, and the admin API's explain
// answers from that very engine, so an explanation cannot differ from what
// an STB gets.
type Inputs struct {
	// DefaultRegion serves clients in no coverage zone (see Options).
	DefaultRegion string
	// Avail is the merged health and drains; nil: every server available.
	Avail *health.Availability
	// Balance is the in-node balance policy in force.
	Balance balance.Config
	// Prev is the balance table in service: slow start, adaptive weights and
	// consistent-hash assignments carry over from it. May be nil.
	Prev *balance.Table
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
	o := Options{DefaultRegion: in.DefaultRegion, StripQuery: in.StripQuery}
	av := in.Avail
	if av != nil {
		o.Available = func(i int32) bool { return av.Available[i] }
		o.Why = func(i int32) string { return av.Why[i] }
		o.NodeRank = nodeRanker(snap, av, in.Balance.Rank)
	}
	var err error
	if uses := balanceSelections(snap); len(uses) > 0 {
		o.Balance, err = balanceTable(snap, av, uses, in)
		if err != nil {
			err = fmt.Errorf("steer: building balance tables (services fall back to nearest): %w", err)
		}
	}
	return New(snap, o), err
}

// balanceSelections lists the in-node policies the services use besides
// nearest and qoe (the allocator refines the nearest decision).
func balanceSelections(snap *topology.Snapshot) []topology.Selection {
	var out []topology.Selection
	for _, sv := range snap.Services {
		if sel := sv.Selection; sel != topology.SelectNearest && sel != topology.SelectQoE && !slices.Contains(out, sel) {
			out = append(out, sel)
		}
	}
	return out
}

// nodeRanker ranks a region's nodes with balance.RankNodes from what the
// checkers measured on their servers.
func nodeRanker(snap *topology.Snapshot, av *health.Availability, opts balance.RankOptions) func([]int32, topology.Location) []int32 {
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

// balanceTable builds the policy tables from the snapshot and merged health.
func balanceTable(snap *topology.Snapshot, av *health.Availability, uses []topology.Selection, in Inputs) (*balance.Table, error) {
	nodes := make([]balance.NodeInput, len(snap.Nodes))
	for ni, nv := range snap.Nodes {
		n := balance.NodeInput{Servers: make([]balance.Server, len(nv.Servers)), Loads: make([]balance.Load, len(nv.Servers))}
		for j, si := range nv.Servers {
			sv := &snap.Servers[si]
			n.Servers[j] = balance.Server{Index: si, Name: sv.Name, Weight: float64(sv.Weight)}
			n.Loads[j] = balance.Load{Healthy: true, CapacityMbps: sv.Capacity.BandwidthMbps}
			if av == nil {
				continue
			}
			f := av.Figures[si]
			n.Loads[j] = balance.Load{
				Healthy: av.Available[si], CPU: f.Load.CPU, BandwidthMbps: f.Load.BandwidthMbps, CapacityMbps: sv.Capacity.BandwidthMbps,
				Connections: f.Load.Connections, RTT: f.RTT, Loss: f.Loss, Since: f.Since,
				Failures: int(f.Loss*20 + 0.5), // failed probes among the checker's last 20
			}
		}
		nodes[ni] = n
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	return balance.BuildTable(balance.TableInput{Nodes: nodes, Use: uses, Config: in.Balance, Now: now}, in.Prev)
}

// Balance is the engine's in-node policy table (nil when no service uses
// one), to be lent to the next Build.
func (e *Engine) Balance() *balance.Table { return e.balance }

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
