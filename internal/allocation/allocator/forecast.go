package allocator

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
	"github.com/anysched/anysched/internal/stb/steer"
)

// roomOf is Fbar of channel's room as the solve measured it, or the
// configured mean for a channel it did not see.
func (sp *servicePlan) roomOf(channel string) float64 {
	if room, ok := sp.rooms[channel]; ok {
		return room
	}
	return sp.room0
}

// choose is the rule that prices a session between two solves (plan.price)
// without reserving anything: among the positions of cover available for
// the service and not excluded (nil: none is), the server and rung of the
// highest value for u net of sp's prices whose use fits the headroom in
// bwLeft, cpuLeft. pos is -1 for the fallback: when nothing fits, or when
// the best that fits would serve the viewer no better than the fallback
// (capacity left between two solves is for arrivals, and idle otherwise).
// value is u's gross value at the choice (the fallback's for -1). memo, if
// not nil, keeps u's values from one call to the next (valueOf).
func choose(eng *steer.Engine, sp *servicePlan, servers, cover []int32, excluded []bool, bwLeft, cpuLeft []atomic.Int64, u *qoe.User, memo []float64) (pos int32, rung int, value float64) {
	in := sp.inst
	fallback := valueOf(in, u, memo, qoe.Fallback, 0)
	bestPos, bestK := int32(-1), 0
	best, bestGross := math.Inf(-1), 0.0
	for _, pos := range cover {
		if (excluded != nil && excluded[pos]) || !eng.AvailableFor(sp.svc, servers[pos]) {
			continue
		}
		pr := sp.prices[pos]
		for k := range in.Ladder {
			bw, cpu := in.Uses(k)
			if bwLeft[pos].Load() < int64(math.Ceil(bw)) || cpuLeft[pos].Load() < milli(cpu) {
				continue
			}
			gross := valueOf(in, u, memo, pos, k)
			if c := in.Params.OriginCost; c > 0 && !sp.pulls[pull{pos, u.Channel}] {
				gross -= c // this viewer would make the server pull the channel
			}
			if v := gross - pr.Bandwidth*bw - pr.Compute*cpu; v > best {
				best, bestGross, bestPos, bestK = v, gross, pos, k
			}
		}
	}
	if bestPos < 0 || bestGross <= fallback {
		return -1, in.Params.FallbackRung, fallback
	}
	return bestPos, bestK, bestGross
}

// valueOf is in.ValueFor(u, pos, k), pos qoe.Fallback for the fallback.
// memo, when not nil, holds u's values already computed, NaN for the
// others: at pos*len(in.Ladder)+k, the fallback's last.
func valueOf(in *qoe.Instance, u *qoe.User, memo []float64, pos int32, k int) float64 {
	if memo == nil {
		return in.ValueFor(u, int(pos), k)
	}
	i := len(memo) - 1
	if pos != qoe.Fallback {
		i = int(pos)*len(in.Ladder) + k
	}
	if v := memo[i]; !math.IsNaN(v) {
		return v
	}
	v := in.ValueFor(u, int(pos), k)
	memo[i] = v
	return v
}

// forecastDrains tells, for each server of p and each node with servers in
// p, what draining it would do to the sessions p keeps there: each is
// priced as its next request would be once the server (or every server of
// the node) is unavailable (choose, from where the plan put it, so the
// switch and the bitrate drop count), one after the other, each move
// taking headroom from a copy of p's, so that the moves do not all fit
// into the same headroom; p itself is not changed. live are the sessions
// p was solved for. Allocator.forecast makes it once per plan.
//
// Sessions a price cannot tell apart (a group: same kind of viewer, same
// place in the plan) are priced together: one after the other, each would
// take the same choice as long as it fits (the prices and values do not
// change, only that choice's headroom shrinks), so a group costs one
// choice per server it spills onto, not one per session. The plan's solve
// made the groups (placing.take); at 600,000 sessions, about 10^5.
func forecastDrains(p *plan, eng *steer.Engine) []store.DrainForecast {
	if p == nil || len(p.servers) == 0 {
		return nil
	}
	snap := p.snap
	n := len(p.servers)
	on := make([][]group, n)
	for pos, gs := range p.groups {
		// In the order of their kinds, so that the forecast of an
		// unchanged plan does not vary from solve to solve (their real
		// order is that of their next requests).
		on[pos] = slices.Clone(gs)
		slices.SortFunc(on[pos], func(a, b group) int { return compareKinds(&a.kind, &b.kind) })
	}
	f := forecaster{p: p, eng: eng, on: on, covers: coversByLoc(p), memos: map[viewerKind]int{}, dist: map[topology.Location][]float64{},
		bwLeft: make([]atomic.Int64, n), cpuLeft: make([]atomic.Int64, n), excluded: make([]bool, n)}

	var nodes []int32 // of p's servers, in the order of their first server
	byNode := map[int32][]int32{}
	for pos, si := range p.servers {
		nd := snap.Servers[si].Node
		if byNode[nd] == nil {
			nodes = append(nodes, nd)
		}
		byNode[nd] = append(byNode[nd], int32(pos))
	}
	// The servers first, then the nodes; computed node by node, so that
	// the memos serve a group's two drains (its server's, its node's)
	// and then go.
	out := make([]store.DrainForecast, n+len(nodes))
	for i, nd := range nodes {
		f.prepare(byNode[nd])
		for _, pos := range byNode[nd] {
			out[pos] = f.drain(opstate.DrainServer, snap.Servers[p.servers[pos]].Name, []int32{pos})
		}
		out[n+i] = f.drain(opstate.DrainNode, snap.Nodes[nd].Name, byNode[nd])
	}
	return out
}

// group is n sessions the plan keeps at one place that a price cannot
// tell apart.
type group struct {
	kind viewerKind
	n    int
	memo int // where its memo starts in forecaster.values
}

// compareKinds orders kinds of viewers field by field.
func compareKinds(a, b *viewerKind) int {
	return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.loc.Lat, b.loc.Lat), cmp.Compare(a.loc.Lon, b.loc.Lon),
		cmp.Compare(a.profile.DesiredKbps, b.profile.DesiredKbps), cmp.Compare(a.profile.Danmaku, b.profile.Danmaku), cmp.Compare(a.profile.Gift, b.profile.Gift),
		cmp.Compare(a.room, b.room), cmp.Compare(a.channel, b.channel), cmp.Compare(a.prev, b.prev), cmp.Compare(a.prevKbps, b.prevKbps), cmp.Compare(a.rung, b.rung))
}

// forecaster holds one forecastDrains call's state, reused drain after drain.
type forecaster struct {
	p               *plan
	eng             *steer.Engine
	on              [][]group
	covers          map[topology.Location][]int32
	bwLeft, cpuLeft []atomic.Int64 // the copy of the plan's headroom
	excluded        []bool
	// Values by kind of viewer (memo of choose), across the drains of a
	// node: each group is priced twice (its server's drain and its
	// node's), and the values are most of the cost.
	memos  map[viewerKind]int // where its memo starts in values
	values []float64
	dist   map[topology.Location][]float64 // distances, by place
}

// viewerKind is what a session's price depends on besides the headroom:
// where the plan keeps it (position, rung and bitrate) and what the model
// knows of the viewer; channel only with an origin cost (-1 without).
type viewerKind struct {
	service  int32
	loc      topology.Location
	profile  qoe.Profile
	room     float64
	channel  int32
	prev     int32 // its position in the plan
	prevKbps float64
	rung     int32
}

// prepare cuts the memos of the groups on positions (a node's) out of
// values, one per kind of viewer, all unknown (NaN).
func (f *forecaster) prepare(positions []int32) {
	clear(f.memos)
	size := 0
	for _, pos := range positions {
		for i := range f.on[pos] {
			g := &f.on[pos][i]
			k := g.kind
			k.channel = -1          // values do not depend on it (the origin cost is choose's)
			k.prev, k.rung = -1, -1 // values are the same wherever it was in the node (drained: a switch from anywhere)
			at, ok := f.memos[k]
			if !ok {
				at = size
				size += len(f.p.servers)*len(f.p.services[k.service].inst.Ladder) + 1
				f.memos[k] = at
			}
			g.memo = at
		}
	}
	if cap(f.values) < size {
		f.values = make([]float64, size)
	}
	f.values = f.values[:size]
	// Every value of every kind at once: the distances are the place's
	// (a few tens of places), the rest one logarithm per rung.
	for k, at := range f.memos {
		in := f.p.services[k.service].inst
		u := k.drained(len(in.Servers))
		in.ValuesFor(&u, f.distances(k.loc, in), f.values[at:at+len(in.Servers)*len(in.Ladder)+1])
	}
}

// user is the viewer a kind stands for, as plan.price builds it for the
// session's next request: last on its server at its bitrate.
func (k *viewerKind) user() qoe.User {
	return qoe.User{Lat: k.loc.Lat, Lon: k.loc.Lon, Profile: k.profile, RoomMean: k.room, Ingest: -1, PrevServer: int(k.prev), PrevKbps: k.prevKbps, Channel: k.channel}
}

// drained is the kind's viewer once its server is drained: every server
// it may go to is a switch, whichever of the node's servers it was on
// (PrevServer is ns, no server), so its values are one memo per node.
func (k *viewerKind) drained(ns int) qoe.User {
	u := k.user()
	u.PrevServer = ns
	return u
}

// distances is the distance from loc to each of the solve's servers.
func (f *forecaster) distances(loc topology.Location, in *qoe.Instance) []float64 {
	if d, ok := f.dist[loc]; ok {
		return d
	}
	d := make([]float64, len(in.Servers))
	for m := range in.Servers {
		d[m] = geo.DistanceM(loc.Lat, loc.Lon, in.Servers[m].Lat, in.Servers[m].Lon)
	}
	f.dist[loc] = d
	return d
}

// drain forecasts draining the servers at positions.
func (f *forecaster) drain(kind opstate.DrainKind, name string, positions []int32) store.DrainForecast {
	p := f.p
	fc := store.DrainForecast{Kind: kind, Name: name}
	for pos := range p.servers {
		f.bwLeft[pos].Store(p.bwLeft[pos].Load())
		f.cpuLeft[pos].Store(p.cpuLeft[pos].Load())
	}
	for _, pos := range positions {
		f.excluded[pos] = true
	}
	for _, from := range positions {
		for _, g := range f.on[from] {
			vk := &g.kind
			sp := p.services[vk.service]
			in := sp.inst
			at := vk.user()
			before := in.ValueFor(&at, int(from), int(vk.rung))
			u := vk.drained(len(in.Servers))
			memo := f.values[g.memo : g.memo+len(p.servers)*len(in.Ladder)+1]
			cover := f.cover(vk.loc, in)
			for left := g.n; left > 0; {
				to, k, after := choose(f.eng, sp, p.servers, cover, f.excluded, f.bwLeft, f.cpuLeft, &u, memo)
				moved := left
				if to >= 0 {
					// as many as the choice has room for, one after the other
					bw, cpu := in.Uses(k)
					b, c := int64(math.Ceil(bw)), milli(cpu)
					if b > 0 {
						moved = min(moved, int(f.bwLeft[to].Load()/b))
					}
					if c > 0 {
						moved = min(moved, int(f.cpuLeft[to].Load()/c))
					}
					moved = max(moved, 1) // choose found it fits once
					f.bwLeft[to].Add(-b * int64(moved))
					f.cpuLeft[to].Add(-c * int64(moved))
				}
				left -= moved
				fc.Sessions += moved
				fc.ObjectiveDelta += float64(moved) * (after - before)
				switch {
				case to < 0:
					fc.ToFallback += moved
				case in.Ladder[k] >= vk.prevKbps:
					fc.SameRung += moved
				default:
					fc.LowerRung += moved
				}
			}
		}
	}
	for _, pos := range positions {
		f.excluded[pos] = false
	}
	return fc
}

// cover is the positions covering a session at loc: the plan's list for
// the zone (or the region's centre) at loc. A session placed where no zone
// of the plan's snapshot is (the zones moved since its last request) gets
// the servers whose coverage radius, as the solve saw it, contains loc.
func (f *forecaster) cover(loc topology.Location, in *qoe.Instance) []int32 {
	if c, ok := f.covers[loc]; ok {
		return c
	}
	var c []int32
	for pos := range in.Servers {
		if s := &in.Servers[pos]; geo.DistanceM(loc.Lat, loc.Lon, s.Lat, s.Lon) <= s.RadiusM {
			c = append(c, int32(pos))
		}
	}
	f.covers[loc] = c
	return c
}

// coversByLoc indexes p's coverage lists by the location they were made
// for: a session keeps its zone's location (or the region's centre), not
// the zone.
func coversByLoc(p *plan) map[topology.Location][]int32 {
	snap := p.snap
	m := map[topology.Location][]int32{snap.Regions[p.region].Loc: p.coverCentre}
	for z := range snap.Zones {
		if snap.Zones[z].Region == p.region && z < len(p.cover) {
			m[snap.Zones[z].Loc] = p.cover[z]
		}
	}
	return m
}

// drainForecasts are the drain forecasts of plan generation gen.
type drainForecasts struct {
	gen  uint64
	list []store.DrainForecast
}

// forecast is what a drain would do to plan p (for schedctl drain
// --dry-run), made once per plan, by the first summary that asks: tens of
// ms per 10,000 sessions, off the solve goroutine. A plan, once
// published, is not changed except for its headroom counters, which the
// forecaster copies.
func (a *Allocator) forecast(p *plan) []store.DrainForecast {
	a.forecastMu.Lock()
	defer a.forecastMu.Unlock()
	if d := a.drains; d != nil && d.gen == p.gen {
		return d.list
	}
	eng := a.engine()
	if eng == nil || eng.Snapshot() != p.snap {
		return nil // a new topology: the plan's positions mean nothing to it; the next plan's forecast

	}
	a.drains = &drainForecasts{gen: p.gen, list: forecastDrains(p, eng)}
	return a.drains.list
}
