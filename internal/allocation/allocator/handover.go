package allocator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
)

// StateStore is where the planners of a region publish their plans and
// read the freshest one (store.Store): whoever plans the region next (the
// center when the city falls, the city when it returns) starts from it,
// so viewers keep their server and bitrate across the handover.
type StateStore interface {
	PutAllocState(ctx context.Context, region string, st *store.AllocState) error
	AllocState(ctx context.Context, region, except string) (*store.AllocState, error)
}

// exportState is the region's sessions as this instance placed them
// (where each was last sent) and the prices of plan p.
func (a *Allocator) exportState(p *plan, live []*session, now time.Time) *store.AllocState {
	st := &store.AllocState{Instance: a.cfg.Instance, Made: now, Revision: p.snap.Revision}
	servers := map[string]int32{}
	serverIdx := func(name string) int32 {
		i, ok := servers[name]
		if !ok {
			i = int32(len(st.Servers))
			servers[name] = i
			st.Servers = append(st.Servers, name)
		}
		return i
	}
	for _, si := range p.servers {
		serverIdx(p.snap.Servers[si].Name)
	}
	services := map[string]int32{}
	for svc, sp := range p.services {
		if sp == nil {
			continue
		}
		ss := store.ServiceState{Name: p.snap.Services[svc].Name, Prices: make([][2]float64, len(p.servers))}
		for pos, pr := range sp.prices {
			ss.Prices[pos] = [2]float64{pr.Bandwidth, pr.Compute}
		}
		services[ss.Name] = int32(len(st.Services))
		st.Services = append(st.Services, ss)
	}
	for _, s := range live {
		name := s.snap.Services[s.key.service].Name
		v, ok := services[name]
		if !ok {
			v = int32(len(st.Services))
			services[name] = v
			st.Services = append(st.Services, store.ServiceState{Name: name})
		}
		ss := store.SessionState{Service: v, User: s.key.user, Addr: s.key.addr, Channel: s.key.channel,
			Desired: s.profile.DesiredKbps, Danmaku: s.profile.Danmaku, Gift: s.profile.Gift,
			Lat: s.loc.Lat, Lon: s.loc.Lon, Server: -1, Seen: s.seen.Load() / int64(time.Millisecond)}
		if cur := s.cur.Load(); cur != nil {
			ss.Kbps = cur.kbps
			if cur.server >= 0 {
				ss.Server = serverIdx(cur.snap.Servers[cur.server].Name)
			}
		}
		st.Sessions = append(st.Sessions, ss)
	}
	return st
}

// publishState writes the region's state for the next planner; errors are
// counted and logged at debug level (the next period tries again).
func (a *Allocator) publishState(ctx context.Context, p *plan, live []*session, now time.Time) {
	if a.cfg.States == nil || p == nil {
		return
	}
	st := a.exportState(p, live, now)
	sctx, cancel := context.WithTimeout(ctx, a.etcdTimeout())
	defer cancel()
	if err := a.cfg.States.PutAllocState(sctx, a.cfg.Region, st); err != nil {
		a.met.stateErrors.Inc()
		a.log.Debug("publishing the allocation state failed", "err", err)
		return
	}
	a.statePublished = now
	a.met.statePublished.Set(float64(len(st.Sessions)))
}

// adoptState takes the sessions of the freshest state another instance
// published for the region, if it is newer than this instance's last
// active plan (any, with all), with where they were sent: the next plan
// then counts a move away from there as a switch, as if it had placed
// them itself. A session the table saw more recently keeps its own.
func (a *Allocator) adoptState(ctx context.Context, snap *topology.Snapshot, now time.Time, all bool) {
	if a.cfg.States == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, a.etcdTimeout())
	st, err := a.cfg.States.AllocState(sctx, a.cfg.Region, a.cfg.Instance)
	cancel()
	if err != nil {
		a.met.stateErrors.Inc()
		if newerFormat(err) {
			a.met.newerState.Inc()
		}
		a.log.Warn("cannot read the region's last published plan; planning from this instance's own sessions", "err", err)
		return
	}
	if st == nil || (!all && !st.Made.After(a.activeUntil)) {
		return
	}
	// Its prices: the next solve starts its subgradient there.
	a.seeds = map[string]map[string]qoe.Price{}
	for _, ss := range st.Services {
		byServer := map[string]qoe.Price{}
		for i, pr := range ss.Prices {
			if i < len(st.Servers) {
				byServer[st.Servers[i]] = qoe.Price{Bandwidth: pr[0], Compute: pr[1]}
			}
		}
		a.seeds[ss.Name] = byServer
	}
	cutoff := now.Add(-a.cfg.SessionTTL).UnixMilli()
	region, _ := snap.Region(a.cfg.Region)
	n := 0
	a.sessions.reserve(len(st.Sessions))
	for _, ss := range st.Sessions {
		if ss.Seen < cutoff || int(ss.Service) >= len(st.Services) || !ss.Addr.IsValid() {
			continue
		}
		svc, ok := snap.Service(st.Services[ss.Service].Name)
		if !ok || snap.Services[svc].Selection != Selection {
			continue
		}
		ladder := snap.Services[svc].BitratesKbps
		var cur *assignment
		if ss.Kbps > 0 {
			cur = &assignment{snap: snap, server: qoe.Fallback, rung: a.cfg.Params.FallbackRung, kbps: ss.Kbps}
			if r := slices.Index(ladder, int(ss.Kbps)); r >= 0 {
				cur.rung = r
			}
			if ss.Server >= 0 && int(ss.Server) < len(st.Servers) {
				si, ok := snap.Server(st.Servers[ss.Server])
				if !ok || snap.Servers[si].Region != region {
					continue // a server gone or moved: a new session here
				}
				cur.server = si
			}
		}
		prof := qoe.Profile{DesiredKbps: ss.Desired, Danmaku: ss.Danmaku, Gift: ss.Gift}
		k := key{service: svc, user: ss.User, addr: ss.Addr, channel: ss.Channel}
		if a.sessions.adopt(k, prof, topology.Location{Lat: ss.Lat, Lon: ss.Lon}, snap, ss.Seen*int64(time.Millisecond), cur) {
			n++
		}
	}
	a.log.Info("planning from the region's last published plan", "from", st.Instance, "made", st.Made, "sessions", n, "of", len(st.Sessions))
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
		// etcd unreadable: the region's last published plan is read at
		// the first solve that reads the claims again (Solve), not
		// never: a center's planner started while a stopping city's
		// scheduler took etcd's attention planned the city cold.
		a.adoptNext.Store(true)
		return live
	}
	a.adoptNext.Store(false)
	a.adoptState(ctx, snap, now, false)
	return a.sessions.sweep(now.Add(-a.cfg.SessionTTL).UnixNano())
}

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

// newerFormat reports whether err refuses a document a newer release
// wrote (store.NewerFormatError).
func newerFormat(err error) bool {
	var nf *store.NewerFormatError
	return errors.As(err, &nf)
}
