package allocator

import (
	"context"
	"math"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
)

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
			a.HandOn(rctx)
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
	began := time.Now()
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
		// solve_timeout bounds the plan from here (the claims read has its
		// own bound), not only the solver's iterations: what is left of it
		// once the sessions are grouped and the option table built is the
		// solver's, which always makes one feasible, certified plan.
		budget := a.cfg.SolveTimeout
		if last := a.plan.Load(); last == nil || last.idle {
			budget = a.cfg.ColdSolveTimeout // nothing of these viewers to start from
		}
		a.budget = budget
		sctx, cancelSolve := context.WithTimeout(ctx, budget)
		defer cancelSolve()
		safe := err != nil
		if safe {
			a.met.claimErrors.Inc()
			if newerFormat(err) {
				a.met.newerClaims.Inc()
			}
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
		p, claims := a.build(sctx, eng, snap, region, live, peers, m, now)
		if safe {
			p.stats.SafeMode = true
			p.stats.PlanTime = time.Since(began)
			a.settleSwitches(p)
			a.publish(p)
			a.settleSwitches(p)
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
		p.stats.PlanTime = time.Since(began)
		a.settleSwitches(p)
		a.publish(p)
		a.settleSwitches(p)
		if !p.idle && now.Sub(a.statePublished) >= a.stateInterval(peers) {
			a.publishState(ctx, p, live, now)
		}
		return
	}
	a.log.Info("capacity claims kept conflicting with a peer's; keeping the previous plan until the next period")
}

// settleSwitches brings plan p up to date with the viewers who switched
// channel while it was made: it was solved from the sessions swept
// before, so it holds the places of the sessions they left and not of the
// ones they switched to (both were settled only in the plan before).
// Each left session's place is given back (its release mark keeps that
// from counting twice), and each new session priced by the plan before
// keeps its server and rung in p when they fit. Without this a zapping
// storm during a solve (a second at a large city's size, or a claims read
// waiting for etcd in safe mode) left the new plan a session short per
// switch, and the next arrivals found the servers full. Called before p
// is published (no request reads it yet), then once after it for the
// switches in between; those only give back, a request prices the rest.
func (a *Allocator) settleSwitches(p *plan) {
	published := a.plan.Load() == p
	for _, sw := range a.sessions.takeEnded() {
		p.release(sw.ended)
		if !published && sw.next != nil {
			p.carry(sw.next)
		}
	}
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

// publish makes p the plan requests use and exports its figures.
func (a *Allocator) publish(p *plan) {
	first := a.plan.Load() == nil
	a.plan.Store(p)
	if !p.idle {
		a.activeUntil = p.made
	}
	st := &p.stats
	a.met.objective.Set(st.Objective)
	gap := st.gap()
	a.met.gap.Set(gap)
	if !p.idle && gap > a.cfg.TargetGap {
		a.met.uncertified.Inc()
	}
	if !p.idle && st.PlanTime > p.budget {
		a.met.overruns.Inc()
	}
	a.met.solve.Observe(st.PlanTime.Seconds())
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
		a.log.Info("first allocation plan", "sessions", st.Sessions, "servers", len(p.servers), "objective", st.Objective, "gap", gap, "solve", st.SolveTime, "plan", st.PlanTime)
	} else {
		a.log.Debug("allocation plan", "gen", p.gen, "sessions", st.Sessions, "objective", st.Objective, "gap", gap, "solve", st.SolveTime, "plan", st.PlanTime)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// HandOn publishes the region's plan state now, for the planner that takes
// the region's STBs next: when the scheduler stops, before its route is
// withdrawn (announce.Route.BeforeWithdraw), since the next planner
// adopts the freshest state as soon as the first STB reaches it, and
// again when the planner ends. Nothing without an active plan (idle, or in
// safe mode: not this instance's to hand on). A solve under way is waited
// for only until ctx ends: the withdrawal it runs before is not held up
// longer than its caller allows, and the next planner then adopts the
// last plan published.
func (a *Allocator) HandOn(ctx context.Context) {
	if !a.lockSolve(ctx) {
		a.log.Warn("plan state not handed on: a solve outlasted the hand-on's time", "err", ctx.Err())
		return
	}
	defer a.solveMu.Unlock()
	if p := a.plan.Load(); p != nil && !p.idle && !p.stats.SafeMode {
		a.publishState(ctx, p, a.sessions.sweep(a.now().Add(-a.cfg.SessionTTL).UnixNano()), a.now())
	}
}

// lockSolve takes solveMu unless ctx ends first. It polls: a solve holds
// the lock for at most its budget, and this runs once per withdrawal.
func (a *Allocator) lockSolve(ctx context.Context) bool {
	if a.solveMu.TryLock() {
		return true
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			if a.solveMu.TryLock() {
				return true
			}
		}
	}
}
