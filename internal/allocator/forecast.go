package allocator

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/anysched/anysched/internal/opstate"
	"github.com/anysched/anysched/internal/qoe"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/topology"
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
// p was solved for. It is meant for the solve goroutine, once per plan:
// its cost is about one valuation per planned session, covering server
// and rung, less for sessions alike (BenchmarkForecastDrains).
func forecastDrains(p *plan, eng *steer.Engine, live []*session) []store.DrainForecast {
	if p == nil || len(p.servers) == 0 {
		return nil
	}
	snap := p.snap
	n := len(p.servers)
	// The sessions p keeps on each position, in the order of their keys so
	// that the forecast of an unchanged plan does not vary from solve to
	// solve (their real order is that of their next requests).
	on := make([][]placed, n)
	for _, s := range live {
		as := p.assign[s.key]
		if as == nil || as.server < 0 || as.released.Load() || int(s.key.service) >= len(p.services) || p.services[s.key.service] == nil {
			continue
		}
		if pos := p.pos[as.server]; pos >= 0 {
			on[pos] = append(on[pos], placed{s: s, as: as, room: p.services[s.key.service].roomOf(s.key.channel)})
		}
	}
	for _, ps := range on {
		slices.SortFunc(ps, func(a, b placed) int { return compareKeys(&a.s.key, &b.s.key) })
	}
	f := forecaster{p: p, eng: eng, on: on, covers: coversByLoc(p), memos: map[viewerKind]int{},
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
	// the memos serve a session's two drains (its server's, its node's)
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

// placed is a session and where the plan keeps it.
type placed struct {
	s    *session
	as   *assignment
	room float64 // the RoomMean of its price
	memo int     // where its memo starts in forecaster.values
}

// compareKeys orders sessions by service, viewer, STB and channel.
func compareKeys(a, b *key) int {
	return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.user, b.user), a.addr.Compare(b.addr), cmp.Compare(a.channel, b.channel))
}

// forecaster holds one forecastDrains call's state, reused drain after drain.
type forecaster struct {
	p               *plan
	eng             *steer.Engine
	on              [][]placed
	covers          map[topology.Location][]int32
	bwLeft, cpuLeft []atomic.Int64 // the copy of the plan's headroom
	excluded        []bool
	// Values by kind of viewer: the sessions a price cannot tell apart
	// share theirs (memo of choose), across the drains of a node. Each
	// session is priced twice (its server's drain and its node's), most
	// share a zone, a profile and a place with many others, and the
	// values are most of the cost.
	memos  map[viewerKind]int // where its memo starts in values
	values []float64
}

// viewerKind is what a session's price depends on besides the headroom.
type viewerKind struct {
	service  int32
	loc      topology.Location
	profile  qoe.Profile
	room     float64
	prev     int32 // its position in the plan
	prevKbps float64
}

// prepare cuts the memos of the sessions on positions (a node's) out of
// values, one per kind of viewer, all unknown (NaN).
func (f *forecaster) prepare(positions []int32) {
	clear(f.memos)
	size := 0
	for _, pos := range positions {
		for i := range f.on[pos] {
			pl := &f.on[pos][i]
			k := viewerKind{pl.s.key.service, pl.s.loc, pl.s.profile, pl.room, pos, pl.as.kbps}
			at, ok := f.memos[k]
			if !ok {
				at = size
				size += len(f.p.servers)*len(f.p.services[k.service].inst.Ladder) + 1
				f.memos[k] = at
			}
			pl.memo = at
		}
	}
	if cap(f.values) < size {
		f.values = make([]float64, size)
	}
	f.values = f.values[:size]
	for i := range f.values {
		f.values[i] = math.NaN()
	}
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
		for _, pl := range f.on[from] {
			s, as := pl.s, pl.as
			sp := p.services[s.key.service]
			in := sp.inst
			// As plan.price builds it for the session's next request: last
			// on the drained server at the planned bitrate.
			u := qoe.User{Lat: s.loc.Lat, Lon: s.loc.Lon, Profile: s.profile, RoomMean: pl.room, Ingest: -1, PrevServer: int(from), PrevKbps: as.kbps, Channel: sp.channelOf(s.key.channel)}
			memo := f.values[pl.memo : pl.memo+len(p.servers)*len(in.Ladder)+1]
			before := valueOf(in, &u, memo, from, as.rung)
			to, k, after := choose(f.eng, sp, p.servers, f.cover(s.loc, in), f.excluded, f.bwLeft, f.cpuLeft, &u, memo)
			fc.Sessions++
			fc.ObjectiveDelta += after - before
			switch {
			case to < 0:
				fc.ToFallback++
				continue
			case in.Ladder[k] >= as.kbps:
				fc.SameRung++
			default:
				fc.LowerRung++
			}
			bw, cpu := in.Uses(k)
			f.bwLeft[to].Add(-int64(math.Ceil(bw)))
			f.cpuLeft[to].Add(-milli(cpu))
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
		if s := &in.Servers[pos]; qoe.DistanceM(loc.Lat, loc.Lon, s.Lat, s.Lon) <= s.RadiusM {
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
