package allocator

import (
	"context"
	"maps"
	"math"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/qoe"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/topology"
)

// unlimited stands for a capacity the topology does not state.
const unlimited = 1e15

// wholeRegionM is the coverage radius of a server that states none: it
// covers its whole region.
const wholeRegionM = 2e7

// Run re-solves the region every period (and when kicked) until ctx ends,
// then withdraws this instance's claims so its peers get the capacity.
func (a *Allocator) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Period)
	defer t.Stop()
	if w, ok := a.board.(watcher); ok {
		go a.watchPeers(ctx, w)
	}
	for {
		a.Solve(ctx)
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			a.solveMu.Lock()
			if p := a.plan.Load(); p != nil && !p.idle && !p.stats.SafeMode {
				// The next planner of the region starts from here.
				a.publishState(rctx, p, a.sessions.sweep(a.now().Add(-a.cfg.SessionTTL).UnixNano()), a.now())
			}
			a.solveMu.Unlock()
			if err := a.board.Release(rctx); err != nil {
				a.log.Warn("releasing capacity claims failed; they expire with their lease", "err", err)
			}
			return nil
		case <-t.C:
		case <-a.kick:
			// Kicks come from STBs and peers: at most one solve per
			// eighth of a period, so two instances cannot drive each other.
			select {
			case <-ctx.Done():
			case <-time.After(a.cfg.Period / 8):
			}
		}
	}
}

// watcher is a Board that reports its peers' changes (store.ClaimBoard).
type watcher interface {
	Watch(ctx context.Context, fn func(instance string, c *store.Claims)) error
}

// watchPeers solves at once when a peer of the region goes idle or
// active, starts or stops, or is starved: capacity changes hands then,
// and waiting for the next period would leave STBs without it.
func (a *Allocator) watchPeers(ctx context.Context, w watcher) {
	type flags struct {
		idle, starved bool
		rank          int
	}
	seen := map[string]flags{}
	_ = w.Watch(ctx, func(id string, c *store.Claims) {
		old, had := seen[id]
		if c == nil {
			delete(seen, id)
			if had {
				a.Kick()
			}
			return
		}
		f := flags{c.Idle, c.Starved, c.Rank}
		seen[id] = f
		if had && f.idle && !old.idle {
			// It published its sessions as it went idle: take the ones it
			// saw last (the STBs it had that have not asked here yet).
			a.adoptNext.Store(true)
		}
		if !had || f != old {
			a.Kick()
		}
	})
}

// Solve makes a new plan for the region now: read the peers' claims, solve
// every QoE service on the capacity they leave, commit this instance's
// claims, publish the plan. On a claim conflict it reads and solves once
// more; when etcd cannot be read it solves within the claims it holds
// already and commits nothing.
func (a *Allocator) Solve(ctx context.Context) {
	a.solveMu.Lock()
	defer a.solveMu.Unlock()
	eng := a.engine()
	if eng == nil {
		return
	}
	snap := eng.Snapshot()
	region, ok := snap.Region(a.cfg.Region)
	now := a.now()
	live := a.sessions.sweep(now.Add(-a.cfg.SessionTTL).UnixNano())
	a.met.sessions.Set(float64(len(live)))
	if !ok || !hasQoE(snap) {
		a.plan.Store(nil)
		return
	}
	quiet := now.UnixNano()-a.lastSTB.Load() > int64(a.cfg.IdleAfter)
	unrouted := a.cfg.Routed != nil && !a.cfg.Routed()
	for attempt := 0; attempt < 2; attempt++ {
		m := mode{idle: quiet || unrouted}
		rctx, cancel := context.WithTimeout(ctx, a.etcdTimeout())
		peers, rev, err := a.board.Peers(rctx)
		cancel()
		safe := err != nil
		if safe {
			a.met.claimErrors.Inc()
			m.safe = true
			// Routers send the region's STBs to the most preferred instance
			// that announces: the one ranked before every peer it knows of
			// may plan on the whole capacity (its peers receive no STBs, so
			// they hand none out); the others stay within their claims.
			m.whole = !m.idle && a.firstInRank()
			if !a.failing { // said once per outage
				a.failing = true
				switch {
				case m.whole:
					a.log.Warn("cannot read the region's capacity claims; ranked first among the region's instances, planning on its whole capacity until etcd answers", "err", err, "rank", a.cfg.Rank)
				case a.own.Servers == nil:
					a.log.Warn("cannot read the region's capacity claims and hold none; STBs get the steer decision until etcd answers", "err", err)
				default:
					a.log.Warn("cannot read the region's capacity claims; solving within the claims held until etcd answers", "err", err)
				}
			}
		} else {
			if a.failing {
				a.failing = false
				a.log.Info("reading the region's capacity claims again")
			}
			a.figures.Store(&figures{peers: peers})
			// A better-ranked peer taking STBs has the route: yield to it
			// (its STBs are no longer ours, whatever arrives meanwhile);
			// not to one whose claims stay old (frozen, cut off: it hands
			// nothing out).
			me := a.asTaking(now)
			for _, pc := range peers {
				if me.Yielding(pc, a.freshClaims()) {
					m.idle, m.yield = true, true
				}
			}
		}
		if attempt == 0 {
			live = a.transition(ctx, snap, m, quiet, unrouted, live, now)
			if !m.idle && !m.safe && a.adoptNext.Swap(false) {
				a.adoptState(ctx, snap, now, true)
				live = a.sessions.sweep(now.Add(-a.cfg.SessionTTL).UnixNano())
			}
		}
		if safe && a.own.Servers == nil && !m.whole && !m.idle {
			return
		}
		p, claims := a.build(ctx, eng, snap, region, live, peers, m, now)
		if safe {
			p.stats.SafeMode = true
			a.publish(p)
			return
		}
		cctx, cancel := context.WithTimeout(ctx, a.etcdTimeout())
		committed, err := a.board.Commit(cctx, claims, rev)
		cancel()
		if err != nil {
			a.met.claimErrors.Inc()
			if ctx.Err() == nil {
				a.log.Warn("committing capacity claims failed; keeping the previous plan", "err", err)
			}
			return
		}
		if !committed {
			a.met.conflicts.Inc()
			continue // a peer committed after our read: read again
		}
		a.own = claims
		a.publish(p)
		if !p.idle {
			// What a drain would do, for schedctl drain --dry-run: after
			// the plan is out, on the solve goroutine (tens of ms per
			// 10,000 sessions).
			a.drains.Store(&drainForecasts{gen: p.gen, list: forecastDrains(p, eng, live)})
		}
		if !p.idle && now.Sub(a.statePublished) >= a.stateInterval(peers) {
			a.publishState(ctx, p, live, now)
		}
		return
	}
	a.log.Info("capacity claims kept conflicting with a peer's; keeping the previous plan until the next period")
}

// transition handles the instance going idle (it publishes the state of
// its last active plan for the next planner) and becoming active again (it
// adopts a fresher state another planner published); it returns the live
// sessions, adopted ones included.
func (a *Allocator) transition(ctx context.Context, snap *topology.Snapshot, m mode, quiet, unrouted bool, live []*session, now time.Time) []*session {
	if m.idle == a.idle {
		return live
	}
	a.idle = m.idle
	if m.idle {
		why := "no STB of the region lately"
		switch {
		case m.yield:
			why = "a better-ranked instance of the region takes its STBs"
		case unrouted:
			why = "the route is not announced"
		}
		a.log.Info("idle: giving the capacity claims back but for the arrival reserve", "why", why, "idle_after", a.cfg.IdleAfter)
		if p := a.plan.Load(); p != nil && !p.idle && !m.safe {
			a.publishState(ctx, p, live, now)
		}
		return live
	}
	a.log.Info("STBs of the region: planning")
	if m.safe {
		return live
	}
	a.adoptNext.Store(false)
	a.adoptState(ctx, snap, now, false)
	return a.sessions.sweep(now.Add(-a.cfg.SessionTTL).UnixNano())
}

// drainForecasts are the drain forecasts of plan generation gen.
type drainForecasts struct {
	gen  uint64
	list []store.DrainForecast
}

// mode is how one solve may use the region's capacity.
type mode struct {
	yield bool // idle: a better-ranked peer takes the STBs
	safe  bool // the claims could not be read
	whole bool // safe, and ranked first: the whole capacity
	idle  bool // no STB lately: plan nobody, claim the reserve only
}

// firstInRank reports whether this instance was ranked before every peer
// whose claims it last read (false before it read any).
func (a *Allocator) firstInRank() bool {
	f := a.figures.Load()
	if f == nil {
		return false
	}
	for _, pc := range f.peers {
		if pc.Rank <= a.cfg.Rank {
			return false
		}
	}
	return true
}

// asTaking is this instance's claims as of now, taking STBs: what the
// rank rules (store.Claims.Yielding, Outdated) compare peers with.
func (a *Allocator) asTaking(now time.Time) store.Claims {
	return store.Claims{Rank: a.cfg.Rank, Made: now.UnixMilli()}
}

// freshClaims is how old a peer's claims may be for it to count as
// planning: two periods and a second (clocks differ a little).
func (a *Allocator) freshClaims() time.Duration { return 2*a.cfg.Period + time.Second }

// stateInterval is how long after its last publication this instance
// publishes an active plan again: state_interval, or while it stands in
// for a better-ranked instance that is up (its claims, idle or not, are
// among peers) every periodic plan (half a period: the timer's solves come
// a period apart, give or take). Routers give that instance the STBs back
// as soon as it announces, and it plans from the state published last: one
// state_interval old, that state would lack the sessions of every viewer
// who zapped since and hold the ones they left. The best-ranked planner
// publishes only for a crash, which state_interval bounds. Strictly better
// ranked, unlike firstInRank: the two machines of a city's node share a
// rank and both take STBs, so neither stands in for the other.
func (a *Allocator) stateInterval(peers map[string]store.Claims) time.Duration {
	for _, pc := range peers {
		if pc.Rank < a.cfg.Rank {
			return min(a.cfg.Period/2, a.cfg.StateInterval)
		}
	}
	return a.cfg.StateInterval
}

// etcdTimeout bounds one claims read or commit: an etcd that does not
// answer must not hold the loop for a whole period.
func (a *Allocator) etcdTimeout() time.Duration { return min(a.cfg.Period/4, 2*time.Second) }

func hasQoE(snap *topology.Snapshot) bool {
	for _, sv := range snap.Services {
		if sv.Selection == Selection {
			return true
		}
	}
	return false
}

// build solves the region and returns the plan and the claims it needs.
func (a *Allocator) build(ctx context.Context, eng *steer.Engine, snap *topology.Snapshot, region int32, live []*session, peers map[string]store.Claims, m mode, now time.Time) (*plan, store.Claims) {
	a.gen++
	p := &plan{gen: a.gen, made: now, snap: snap, region: region, assign: map[key]*assignment{}, pos: make([]int32, len(snap.Servers)), idle: m.idle}
	for i := range p.pos {
		p.pos[i] = -1
	}
	for _, si := range snap.Regions[region].Servers {
		if eng.Available(si) && snap.Servers[si].Weight > 0 {
			p.pos[si] = int32(len(p.servers))
			p.servers = append(p.servers, si)
		}
	}
	n := len(p.servers)
	st := &p.stats
	st.Peers = len(peers)
	// Peers ranked after this instance and taking STBs yield to it as soon
	// as they see it take STBs (routers prefer it), and better-ranked peers
	// whose claims stay old receive none (they would if they announced):
	// neither's claims are in its way, so that a handover to it does not
	// start with its viewers starved. Idle peers' reserves are respected:
	// the claims that count (store.Claims.Yielding, Outdated) never add up
	// above a server's capacity.
	peers = maps.Clone(peers)
	if !m.idle {
		me := a.asTaking(now)
		maps.DeleteFunc(peers, func(_ string, pc store.Claims) bool {
			return pc.Yielding(me, a.freshClaims()) || pc.Outdated(me, a.freshClaims())
		})
	}
	share := fairShare(live, peers)
	// Capacity left to this instance: the server's, less every peer's claim
	// (in safe mode, exactly what this instance holds, or all of it when
	// it ranks first).
	capBw, capCPU := make([]float64, n), make([]float64, n)
	fullBw, fullCPU := make([]float64, n), make([]float64, n)
	limited := make([]bool, n)
	for pos, si := range p.servers {
		sv := &snap.Servers[si]
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
	useBw, useCPU := make([]float64, n), make([]float64, n)
	p.services = make([]*servicePlan, len(snap.Services))
	if m.idle {
		// Nobody to plan: keep the arrival reserve of each server (of what
		// the peers leave) for a failover's first STBs, and give the rest
		// back to the instance the STBs reach.
		reserve := a.cfg.ArrivalReserve
		if a.cfg.IdleNoReserve {
			reserve = 0
		}
		for pos := range p.servers {
			if limited[pos] {
				capBw[pos] = math.Min(capBw[pos], fullBw[pos]*reserve)
				capCPU[pos] = math.Min(capCPU[pos], fullCPU[pos]*reserve)
			}
		}
	} else {
		a.solveAll(ctx, snap, p, live, limited, capBw, capCPU, useBw, useCPU)
	}
	if m.safe {
		st.Peers = a.peers // unknown without etcd: the last count read
	} else {
		a.peers = st.Peers
	}

	// Claims: the plan's use plus an equal share, among the region's
	// instances that receive STBs, of what nobody holds, for sessions
	// arriving before the next solve (an idle peer holds its reserve).
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
		name := snap.Servers[si].Name
		cb, cc := useBw[pos], useCPU[pos]
		if !m.safe && !m.idle {
			// capBw, capCPU: what the solve left unused
			cb += capBw[pos] / split
			cc += capCPU[pos] / split
		} else {
			cb, cc = capBw[pos]+useBw[pos], capCPU[pos]+useCPU[pos] // capXxx is what was left after the solve
		}
		if limited[pos] {
			claims.Servers[name] = store.Claim{BandwidthKbps: cb, Compute: cc}
			st.ClaimByServer[name] = [2]float64{cb, cc}
			st.HeldKbps += math.Min(cb, fullBw[pos])
		}
		p.bwLeft[pos].Store(int64(math.Floor(math.Min(cb-useBw[pos], unlimited))))
		p.cpuLeft[pos].Store(int64(math.Floor(math.Min(cc-useCPU[pos], unlimited) * 1000)))
		st.UsageByServer[name] = [2]float64{useBw[pos], useCPU[pos]}
		if limited[pos] {
			st.CapacityByServer[name] = [2]float64{capBw[pos] + useBw[pos], capCPU[pos] + useCPU[pos]}
		}
	}
	return p, claims
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
	var mine []*session
	sum, cnt := map[string]float64{}, map[string]int{}
	for _, s := range live {
		if s.key.service == svc && s.snap.Services[svc].Name == sv.Name {
			mine = append(mine, s)
			sum[s.key.channel] += s.profile.Danmaku
			cnt[s.key.channel]++
		}
	}
	sp := &servicePlan{svc: svc, inst: in, rooms: make(map[string]float64, len(sum)), room0: a.cfg.RoomMean, chans: map[string]int32{}, pulls: map[pull]bool{}}
	for ch, x := range sum {
		sp.rooms[ch] = x / float64(cnt[ch])
	}
	in.Users = make([]qoe.User, len(mine))
	had := make([]bool, len(mine)) // on a server before this plan (it may be gone)
	for v, s := range mine {
		// Channels are numbered per solve: the origin pulls are counted
		// (and, with the model's origin cost, charged) by them.
		ch, ok := sp.chans[s.key.channel]
		if !ok {
			ch = int32(len(sp.chans))
			sp.chans[s.key.channel] = ch
		}
		u := qoe.User{Lat: s.loc.Lat, Lon: s.loc.Lon, Profile: s.profile, RoomMean: sp.rooms[s.key.channel], Ingest: -1, PrevServer: -1, Channel: ch}
		if cur := s.cur.Load(); cur != nil {
			u.PrevKbps = cur.kbps
			had[v] = cur.server >= 0
			if cur.server >= 0 {
				si := cur.server
				if cur.snap != snap {
					si = -1
					if j, ok := snap.Server(cur.snap.Servers[cur.server].Name); ok {
						si = j
					}
				}
				if si >= 0 {
					u.PrevServer = int(p.pos[si])
				}
			}
		}
		in.Users[v] = u
	}
	// One planner per service, kept across periods: a period's solve starts
	// from the last one's prices, plan and option table (solveMu: one at a
	// time).
	pl := a.planners[sv.Name]
	if pl == nil {
		pl = &qoe.Planner{}
		a.planners[sv.Name] = pl
	}
	pl.Solver = qoe.Lagrangian{TimeLimit: a.cfg.SolveTimeout}
	if seed, ok := a.seeds[sv.Name]; ok { // an adopted plan's prices
		delete(a.seeds, sv.Name)
		prices := make([]qoe.Price, len(p.servers))
		for pos, si := range p.servers {
			prices[pos] = seed[snap.Servers[si].Name]
		}
		pl.Seed(prices)
	}
	res, err := pl.Solve(ctx, in)
	if err != nil {
		// Only an invalid instance fails; every session goes unplanned.
		a.log.Error("QoE solve failed", "service", sv.Name, "err", err)
		sp.prices = make([]qoe.Price, len(p.servers))
		return sp, 0
	}
	sp.prices = res.Prices
	if len(sp.prices) != len(p.servers) {
		sp.prices = make([]qoe.Price, len(p.servers))
	}
	st := &p.stats
	cand := in.Candidates()
	top := in.Ladder[len(in.Ladder)-1]
	for v, c := range res.Assign {
		as := &assignment{snap: snap, gen: p.gen, server: qoe.Fallback, rung: in.Params.FallbackRung, kbps: in.Ladder[in.Params.FallbackRung]}
		u := &in.Users[v]
		if had[v] && (u.PrevServer < 0 || c.Server != u.PrevServer) {
			st.Switches++
		}
		if c.Server != qoe.Fallback {
			as.server, as.rung, as.kbps = p.servers[c.Server], c.Rung, in.Ladder[c.Rung]
			if in.Params.OriginCost > 0 {
				sp.pulls[pull{int32(c.Server), u.Channel}] = true
			}
			if want := u.Profile.DesiredKbps; as.kbps >= min(top, want) || want <= 0 {
				st.AtDesired++
			}
			bw, cpu := in.Uses(c.Rung)
			useBw[c.Server] += bw
			useCPU[c.Server] += cpu
			capBw[c.Server] = math.Max(0, capBw[c.Server]-bw)
			capCPU[c.Server] = math.Max(0, capCPU[c.Server]-cpu)
			st.UsersByServer[snap.Servers[as.server].Name]++
		} else {
			st.Fallback++
			if len(cand[v]) > 0 {
				st.Starved++ // a server covers it: it lacked capacity
			}
		}
		if u.PrevKbps > 0 && as.kbps < u.PrevKbps {
			st.Drops++
		}
		p.assign[mine[v].key] = as
	}
	st.Objective += res.Objective
	st.Bound += res.Bound
	pulls, kbps := qoe.OriginPulls(in, res.Assign)
	st.OriginPulls += pulls
	st.OriginKbps += kbps
	return sp, len(mine)
}

// fairShare is this instance's share of a server when a peer is starved:
// in proportion to the sessions each plans (this instance's counted now),
// so an idle standby yields everything; 1 when no peer is starved.
func fairShare(live []*session, peers map[string]store.Claims) float64 {
	starved, total := false, 0
	for _, pc := range peers {
		starved = starved || pc.Starved
		total += pc.Sessions
	}
	switch {
	case !starved:
		return 1
	case len(live)+total == 0:
		return 1 // a starved peer planning nothing: nothing to divide by
	}
	return float64(len(live)) / float64(len(live)+total)
}

// coverage lists, for every zone of the region and for the region's centre,
// the positions of the servers whose coverage contains it.
func coverage(snap *topology.Snapshot, region int32, servers []int32) ([][]int32, []int32) {
	covers := func(loc topology.Location) []int32 {
		var out []int32
		for pos, si := range servers {
			s := &snap.Servers[si]
			if s.CoverageRadiusM <= 0 || qoe.DistanceM(loc.Lat, loc.Lon, s.Loc.Lat, s.Loc.Lon) <= s.CoverageRadiusM {
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

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// publish makes p the plan requests use and exports its figures.
func (a *Allocator) publish(p *plan) {
	first := a.plan.Load() == nil
	a.plan.Store(p)
	if !p.idle {
		a.activeUntil = p.made
	}
	st := &p.stats
	a.met.objective.Set(st.Objective)
	gap := a.Summary().Gap
	a.met.gap.Set(gap)
	a.met.solve.Observe(st.SolveTime.Seconds())
	a.met.planned.Set(float64(st.Sessions))
	a.met.fallback.Set(float64(st.Fallback))
	a.met.starved.Set(float64(st.Starved))
	a.met.originPulls.Set(float64(st.OriginPulls))
	a.met.originKbps.Set(st.OriginKbps)
	a.met.held.Set(st.HeldKbps / math.Max(st.TotalKbps, 1))
	a.met.idle.Set(b2f(p.idle))
	a.met.safe.Set(b2f(st.SafeMode))
	if placed := st.Sessions - st.Fallback; placed > 0 {
		a.met.atDesired.Set(float64(st.AtDesired) / float64(placed))
	}
	a.met.switches.Add(float64(st.Switches))
	a.met.drops.Add(float64(st.Drops))
	a.met.serverUsers.Reset()
	for _, si := range p.servers {
		name := p.snap.Servers[si].Name
		a.met.serverUsers.WithLabelValues(name).Set(float64(st.UsersByServer[name]))
	}
	a.met.lastSolve.SetToCurrentTime()
	if first {
		a.log.Info("first allocation plan", "sessions", st.Sessions, "servers", len(p.servers), "objective", st.Objective, "gap", gap, "solve", st.SolveTime)
	} else {
		a.log.Debug("allocation plan", "gen", p.gen, "sessions", st.Sessions, "objective", st.Objective, "gap", gap, "solve", st.SolveTime)
	}
}
