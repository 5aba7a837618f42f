package allocator

import (
	"context"
	"maps"
	"math"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
	"github.com/anysched/anysched/internal/stb/steer"
)

// Building a plan: the capacity this instance may use, the solve of each
// QoE service on it, and the claims the plan needs.

// unlimited stands for a capacity the topology does not state.
const unlimited = 1e15

// wholeRegionM is the coverage radius of a server that states none: it
// covers its whole region.
const wholeRegionM = 2e7

// build solves the region and returns the plan and the claims it needs.
func (a *Allocator) build(ctx context.Context, eng *steer.Engine, snap *topology.Snapshot, region int32, live []*session, peers map[string]store.Claims, m mode, now time.Time) (*plan, store.Claims) {
	p := a.newPlan(eng, snap, region, m, now)
	st := &p.stats
	st.Peers = len(peers)
	peers = a.inTheWay(peers, m, now)
	left := a.capacityLeft(eng, p, peers, m, fairShare(live, peers))
	n := len(p.servers)
	useBw, useCPU := make([]float64, n), make([]float64, n)
	p.services = make([]*servicePlan, len(snap.Services))
	if m.idle {
		a.keepReserve(p, left)
	} else {
		a.solveAll(ctx, snap, p, live, left.limited, left.bw, left.cpu, useBw, useCPU)
	}
	if m.safe {
		st.Peers = a.peers // unknown without etcd: the last count read
	} else {
		a.peers = st.Peers
	}
	return p, a.claim(p, peers, m, left, useBw, useCPU, now)
}

// newPlan is an empty plan (generation a.gen, counted up) over the
// region's servers that are available and weighted.
func (a *Allocator) newPlan(eng *steer.Engine, snap *topology.Snapshot, region int32, m mode, now time.Time) *plan {
	a.gen++
	p := &plan{gen: a.gen, made: now, budget: a.budget, snap: snap, region: region, pos: make([]int32, len(snap.Servers)), idle: m.idle}
	for i := range p.pos {
		p.pos[i] = -1
	}
	for _, si := range snap.Regions[region].Servers {
		if eng.Available(si) && snap.Servers[si].Weight > 0 {
			p.pos[si] = int32(len(p.servers))
			p.servers = append(p.servers, si)
		}
	}
	return p
}

// inTheWay are the peers whose claims this solve leaves room for. Peers
// ranked after this instance and taking STBs yield to it as soon as they
// see it take STBs (routers prefer it), and better-ranked peers whose
// claims stay old receive none (they would if they announced): neither's
// claims are in its way, so that a handover to it does not start with its
// viewers starved. Idle peers' reserves are respected: the claims that
// count (store.Claims.Yielding, Outdated) never add up above a server's
// capacity.
func (a *Allocator) inTheWay(peers map[string]store.Claims, m mode, now time.Time) map[string]store.Claims {
	peers = maps.Clone(peers)
	if !m.idle {
		me := a.asTaking(now)
		maps.DeleteFunc(peers, func(_ string, pc store.Claims) bool {
			return pc.Yielding(me, a.freshClaims()) || pc.Outdated(me, a.freshClaims())
		})
	}
	return peers
}

// capacities is what one solve may use of each of the plan's servers, by
// position.
type capacities struct {
	bw, cpu         []float64 // left to this instance; after the solve, left unused
	fullBw, fullCPU []float64 // the server's stated capacity (unlimited when none)
	limited         []bool    // the topology states a capacity
}

// capacityLeft is the capacity left to this instance: the server's, less
// every peer's claim (in safe mode, exactly what this instance holds, or
// all of it when it ranks first). It adds up the plan's total bandwidth.
func (a *Allocator) capacityLeft(eng *steer.Engine, p *plan, peers map[string]store.Claims, m mode, share float64) capacities {
	n := len(p.servers)
	st := &p.stats
	capBw, capCPU := make([]float64, n), make([]float64, n)
	fullBw, fullCPU := make([]float64, n), make([]float64, n)
	limited := make([]bool, n)
	for pos, si := range p.servers {
		sv := &p.snap.Servers[si]
		capBw[pos], capCPU[pos] = unlimited, unlimited
		if c := sv.Capacity.BandwidthMbps; c > 0 {
			capBw[pos], limited[pos] = c*1000, true
			st.TotalKbps += c * 1000
		}
		if c := sv.Capacity.TranscodeUnits; c > 0 {
			capCPU[pos], limited[pos] = c, true
		}
		fullBw[pos], fullCPU[pos] = capBw[pos], capCPU[pos]
		if m.safe && !m.whole {
			if limited[pos] { // unlimited servers are never claimed
				own := a.own.Servers[sv.Name]
				capBw[pos], capCPU[pos] = math.Min(capBw[pos], own.BandwidthKbps), math.Min(capCPU[pos], own.Compute)
			}
			continue
		}
		// Slow start: a server back in service takes a growing share of
		// its capacity (balance slow_start), as nearest weighs it.
		if f := eng.Ramp(si); f < 1 && limited[pos] {
			capBw[pos], capCPU[pos] = capBw[pos]*f, capCPU[pos]*f
		}
		if m.safe {
			continue // ranked first: the peers' claims (unreadable) aside
		}
		full := [2]float64{capBw[pos], capCPU[pos]}
		for _, pc := range peers {
			c := pc.Servers[sv.Name]
			capBw[pos] = math.Max(0, capBw[pos]-c.BandwidthKbps)
			capCPU[pos] = math.Max(0, capCPU[pos]-c.Compute)
		}
		// A starved peer: keep at most this instance's share of the server,
		// so the peer can grow into what is given back.
		if share < 1 && limited[pos] {
			capBw[pos] = math.Min(capBw[pos], math.Max(full[0]*share, 0))
			capCPU[pos] = math.Min(capCPU[pos], math.Max(full[1]*share, 0))
		}
	}
	return capacities{bw: capBw, cpu: capCPU, fullBw: fullBw, fullCPU: fullCPU, limited: limited}
}

// keepReserve is an idle plan's use of the capacity left: nobody to plan,
// so keep the arrival reserve of each server (of what the peers leave) for
// a failover's first STBs, and give the rest back to the instance the STBs
// reach.
func (a *Allocator) keepReserve(p *plan, left capacities) {
	reserve := a.cfg.ArrivalReserve
	if a.cfg.IdleNoReserve {
		reserve = 0
	}
	for pos := range p.servers {
		if left.limited[pos] {
			left.bw[pos] = math.Min(left.bw[pos], left.fullBw[pos]*reserve)
			left.cpu[pos] = math.Min(left.cpu[pos], left.fullCPU[pos]*reserve)
		}
	}
}

// claim is the claims plan p needs, and sets the plan's headroom counters
// and per-server figures. Claims: the plan's use plus an equal share,
// among the region's instances that receive STBs, of what nobody holds,
// for sessions arriving before the next solve (an idle peer holds its
// reserve).
func (a *Allocator) claim(p *plan, peers map[string]store.Claims, m mode, left capacities, useBw, useCPU []float64, now time.Time) store.Claims {
	n := len(p.servers)
	st := &p.stats
	capBw, capCPU := left.bw, left.cpu
	split := 1.0
	for _, pc := range peers {
		if !pc.Idle {
			split++
		}
	}
	claims := store.Claims{Sessions: st.Sessions, Starved: st.Starved > 0, Rank: a.cfg.Rank, Idle: m.idle, Made: now.UnixMilli(), Servers: map[string]store.Claim{}}
	p.bwLeft, p.cpuLeft = make([]atomic.Int64, n), make([]atomic.Int64, n)
	st.UsageByServer, st.ClaimByServer, st.CapacityByServer = map[string][2]float64{}, map[string][2]float64{}, map[string][2]float64{}
	for pos, si := range p.servers {
		name := p.snap.Servers[si].Name
		cb, cc := useBw[pos], useCPU[pos]
		if !m.safe && !m.idle {
			// capBw, capCPU: what the solve left unused
			cb += capBw[pos] / split
			cc += capCPU[pos] / split
		} else {
			cb, cc = capBw[pos]+useBw[pos], capCPU[pos]+useCPU[pos] // capXxx is what was left after the solve
		}
		if left.limited[pos] {
			claims.Servers[name] = store.Claim{BandwidthKbps: cb, Compute: cc}
			st.ClaimByServer[name] = [2]float64{cb, cc}
			st.HeldKbps += math.Min(cb, left.fullBw[pos])
		}
		p.bwLeft[pos].Store(int64(math.Floor(math.Min(cb-useBw[pos], unlimited))))
		p.cpuLeft[pos].Store(int64(math.Floor(math.Min(cc-useCPU[pos], unlimited) * 1000)))
		st.UsageByServer[name] = [2]float64{useBw[pos], useCPU[pos]}
		if left.limited[pos] {
			st.CapacityByServer[name] = [2]float64{capBw[pos] + useBw[pos], capCPU[pos] + useCPU[pos]}
		}
	}
	return claims
}

// solveAll solves every QoE service of the region in turn, each on what
// the previous left. A share of each limited server is held out of the
// solve: the STBs that arrive before the next solve are priced into it
// (the plan itself would otherwise fill a server that demand exceeds to
// the last kbps). On return capBw, capCPU are what the plan leaves unused
// (the held share included).
func (a *Allocator) solveAll(ctx context.Context, snap *topology.Snapshot, p *plan, live []*session, limited []bool, capBw, capCPU, useBw, useCPU []float64) {
	n := len(p.servers)
	heldBw, heldCPU := make([]float64, n), make([]float64, n)
	for pos := range p.servers {
		if limited[pos] {
			heldBw[pos], heldCPU[pos] = capBw[pos]*a.cfg.ArrivalReserve, capCPU[pos]*a.cfg.ArrivalReserve
			capBw[pos] -= heldBw[pos]
			capCPU[pos] -= heldCPU[pos]
		}
	}
	p.cover, p.coverCentre = coverage(snap, p.region, p.servers)
	st := &p.stats
	st.UsersByServer = map[string]int{}
	start := time.Now()
	for svc, sv := range snap.Services {
		if sv.Selection != Selection {
			continue
		}
		sp, users := a.solveService(ctx, snap, int32(svc), p, live, capBw, capCPU, useBw, useCPU)
		p.services[svc] = sp
		st.Sessions += users
	}
	for name := range a.planners { // a service gone or no longer qoe: its warm start too
		if i, ok := snap.Service(name); !ok || snap.Services[i].Selection != Selection {
			delete(a.planners, name)
			delete(a.grouping, name)
		}
	}
	st.SolveTime = time.Since(start)
	for pos := range p.servers {
		capBw[pos] += heldBw[pos]
		capCPU[pos] += heldCPU[pos]
	}
}

// solveService solves one QoE service's sessions on the capacity left
// (capBw, capCPU are reduced by what the plan uses, and useBw, useCPU grow).
func (a *Allocator) solveService(ctx context.Context, snap *topology.Snapshot, svc int32, p *plan, live []*session, capBw, capCPU, useBw, useCPU []float64) (*servicePlan, int) {
	sv := &snap.Services[svc]
	in := &qoe.Instance{Params: a.cfg.Params, Ladder: make([]float64, len(sv.BitratesKbps))}
	for i, b := range sv.BitratesKbps {
		in.Ladder[i] = float64(b)
	}
	if in.Params.FallbackRung >= len(in.Ladder) {
		in.Params.FallbackRung = 0
	}
	in.Servers = make([]qoe.Server, len(p.servers))
	for pos, si := range p.servers {
		s := &snap.Servers[si]
		r := s.CoverageRadiusM
		if r <= 0 {
			r = wholeRegionM
		}
		in.Servers[pos] = qoe.Server{Lat: s.Loc.Lat, Lon: s.Loc.Lon, RadiusM: r, Bandwidth: capBw[pos], Compute: capCPU[pos], Excluded: !snap.InPool(svc, si)}
	}
	sp := &servicePlan{svc: svc, inst: in, room0: a.cfg.RoomMean, pulls: map[pull]bool{}}
	chunk := maxChunk(snap, p, in.Ladder[len(in.Ladder)-1])
	// Sites where servers are large (a chunk of viewers is a small part
	// of one): where a few viewers fill a server, what is left on each of
	// a site's servers is too often less than a viewer, and the split
	// would strand some.
	sites := siteServers(in, chunk > 1)
	solveIn := sites.instance(in)
	g := a.grouping[sv.Name]
	if g == nil {
		g = &grouped{}
		a.grouping[sv.Name] = g
	}
	// The service's sessions, their classes and channels: the origin pulls
	// are counted (and, with the model's origin cost, charged) by channel.
	a.groupSessions(g, snap, svc, p, live, sites, chunk)
	defer g.done()
	mine := g.mine
	sp.chans, sp.rooms = make(map[string]int32, len(g.present)), make(map[string]float64, len(g.present))
	for _, ch := range g.present {
		name := g.chanName[ch]
		sp.chans[name], sp.rooms[name] = ch, g.room[ch]
	}
	solveIn.Users = g.users
	// One planner per service, kept across periods: a period's solve starts
	// from the last one's prices, plan and option table (solveMu: one at a
	// time).
	pl := a.planners[sv.Name]
	if pl == nil {
		pl = &qoe.Planner{}
		a.planners[sv.Name] = pl
	}
	pl.Solver = qoe.Lagrangian{TimeLimit: a.budget, Tol: a.cfg.TargetGap}
	if seed, ok := a.seeds[sv.Name]; ok { // an adopted plan's prices
		delete(a.seeds, sv.Name)
		prices := make([]qoe.Price, len(sites.pos))
		for i, ps := range sites.pos {
			prices[i] = seed[snap.Servers[p.servers[ps[0]]].Name]
		}
		pl.Seed(prices)
	}
	res, err := pl.Solve(ctx, solveIn)
	if err != nil {
		// Only an invalid instance fails; every session goes unplanned.
		a.log.Error("QoE solve failed", "service", sv.Name, "err", err)
		sp.prices = make([]qoe.Price, len(p.servers))
		return sp, 0
	}
	sp.prices = sites.prices(res.Prices)
	split := &placing{a: a, snap: snap, p: p, sp: sp, in: in, solveIn: solveIn, sites: sites, mine: mine, g: g, res: res, room: g.room,
		capBw: capBw, capCPU: capCPU, useBw: useBw, useCPU: useCPU, pulls: map[pull]struct{}{}}
	split.place()
	st := &p.stats
	st.Objective += res.Objective + split.objDelta
	st.Bound += res.Bound
	if in.Params.OriginCost > 0 {
		for pr := range split.pulls {
			sp.pulls[pr] = true
		}
	}
	st.OriginPulls += len(split.pulls)
	st.OriginKbps += float64(len(split.pulls)) * in.Ladder[len(in.Ladder)-1]
	return sp, len(mine)
}

// coverage lists, for every zone of the region and for the region's centre,
// the positions of the servers whose coverage contains it.
func coverage(snap *topology.Snapshot, region int32, servers []int32) ([][]int32, []int32) {
	covers := func(loc topology.Location) []int32 {
		var out []int32
		for pos, si := range servers {
			s := &snap.Servers[si]
			if s.CoverageRadiusM <= 0 || geo.DistanceM(loc.Lat, loc.Lon, s.Loc.Lat, s.Loc.Lon) <= s.CoverageRadiusM {
				out = append(out, int32(pos))
			}
		}
		return out
	}
	cover := make([][]int32, len(snap.Zones))
	for z := range snap.Zones {
		if snap.Zones[z].Region == region {
			cover[z] = covers(snap.Zones[z].Loc)
		}
	}
	return cover, covers(snap.Regions[region].Loc)
}
