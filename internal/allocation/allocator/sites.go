package allocator

import (
	"math"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
)

// Servers the model cannot tell apart (one place, one coverage radius, one
// pool: the servers of a node, in a dense city twenty of them) are solved
// as one site with their capacities summed, and the site's viewers are
// then split among its servers. A viewer sees the same value on each, but
// for the switch of one leaving its own server; so the split keeps viewers
// on their server where it has room, and counts a move within the site as
// the switch it is. Solving sites is a relaxation of solving servers (a
// plan of servers is one of sites, worth as much or more), so its bound
// is a bound of the city's; the published objective is the split's.
// With an origin cost the pulls are per server, and servers are solved one
// by one.

// sites maps the solve's positions to sites.
type sites struct {
	of  []int32   // position -> site
	pos [][]int32 // site -> its positions
}

// siteKey is what makes two servers alike to the model.
type siteKey struct {
	lat, lon, radius float64
	excluded         bool
}

// siteServers groups in's servers into sites; every server its own site
// when in has an origin cost or group is false.
func siteServers(in *qoe.Instance, group bool) *sites {
	st := &sites{of: make([]int32, len(in.Servers))}
	at := map[siteKey]int32{}
	for m, s := range in.Servers {
		k := siteKey{s.Lat, s.Lon, s.RadiusM, s.Excluded}
		i, ok := at[k]
		if !ok || in.Params.OriginCost > 0 || !group {
			i = int32(len(st.pos))
			at[k] = i
			st.pos = append(st.pos, nil)
		}
		st.of[m] = i
		st.pos[i] = append(st.pos[i], int32(m))
	}
	return st
}

// alone reports whether every site is one server.
func (st *sites) alone() bool { return len(st.pos) == len(st.of) }

// instance is in over sites: a site's capacities are its servers' summed.
func (st *sites) instance(in *qoe.Instance) *qoe.Instance {
	if st.alone() {
		return &qoe.Instance{Params: in.Params, Ladder: in.Ladder, Servers: in.Servers}
	}
	out := &qoe.Instance{Params: in.Params, Ladder: in.Ladder, Servers: make([]qoe.Server, len(st.pos))}
	for i, ps := range st.pos {
		s := in.Servers[ps[0]]
		s.Bandwidth, s.Compute = 0, 0
		for _, m := range ps {
			s.Bandwidth += in.Servers[m].Bandwidth
			s.Compute += in.Servers[m].Compute
		}
		out.Servers[i] = s
	}
	return out
}

// prices is the sites' prices for each position.
func (st *sites) prices(site []qoe.Price) []qoe.Price {
	out := make([]qoe.Price, len(st.of))
	if len(site) != len(st.pos) {
		return out
	}
	for m, i := range st.of {
		out[m] = site[i]
	}
	return out
}

// posOf is the position in plan p of the server a session whose current
// assignment is cur was last sent to, -1 for none (the fallback, a new
// session, a server gone); and whether it was on a server before p.
func posOf(cur *assignment, snap *topology.Snapshot, p *plan) (pos int, had bool) {
	if cur == nil || cur.server < 0 {
		return -1, false
	}
	si := cur.server
	if cur.snap != snap {
		j, ok := snap.Server(cur.snap.Servers[cur.server].Name)
		if !ok {
			return -1, true
		}
		si = j
	}
	return int(p.pos[si]), true
}

// placing is the split of one solve's sites among their servers.
type placing struct {
	a        *Allocator
	snap     *topology.Snapshot
	p        *plan
	sp       *servicePlan
	in       *qoe.Instance // the service's servers (pricing)
	solveIn  *qoe.Instance // what was solved (sites)
	sites    *sites
	mine     []*session
	g        *grouped
	res      *qoe.Result
	capBw    []float64 // left to the plan, by position
	capCPU   []float64
	useBw    []float64
	useCPU   []float64
	objDelta float64 // the split's objective less the solve's
	pulls    map[pull]struct{}
	room     []float64 // Fbar by channel number
	// groupAt, by class, lists the class's groups (position, rung and
	// index in p.groups[position]): a class goes to one or a few.
	groupAt  []int32 // by class: its first in groupsAt, -1 for none
	groupsAt []groupRef
	// users counts the sessions placed at each position. A user's
	// sessions are taken one after the other and mostly to one place, so
	// the last group and pull taken spare most map lookups.
	users    []int
	placed   []int32 // by session: its place (servicePlan.placeAt)
	lastAt   [3]int32
	lastJ    int32
	lastPull pull
}

// fits reports whether rung k fits position m (the solve's own capacity
// tolerance: a plan at a server's exact capacity may round above it).
func (pl *placing) fits(m int32, k int) bool {
	bw, cpu := pl.in.Uses(k)
	return bw <= pl.capBw[m]*(1+1e-9)+1e-6 && cpu <= pl.capCPU[m]*(1+1e-9)+1e-6
}

// take places session i at position m, rung k (m < 0: the fallback).
func (pl *placing) take(i int32, m int32, k int) {
	cl := &pl.g.classes[pl.g.classOf[i]] // the session's profile and bitrate, without reading it
	st := &pl.p.stats
	in := pl.in
	if m >= 0 {
		bw, cpu := in.Uses(k)
		pl.useBw[m] += bw
		pl.useCPU[m] += cpu
		pl.capBw[m] = math.Max(0, pl.capBw[m]-bw)
		pl.capCPU[m] = math.Max(0, pl.capCPU[m]-cpu)
		pl.users[m]++
		if pr := (pull{m, cl.channel}); pr != pl.lastPull {
			pl.pulls[pr] = struct{}{}
			pl.lastPull = pr
		}
		pl.group(i, m, k)
		top := in.Ladder[len(in.Ladder)-1]
		if want := cl.profile.DesiredKbps; in.Ladder[k] >= min(top, want) || want <= 0 {
			st.AtDesired++
		}
	} else {
		k = in.Params.FallbackRung
		st.Fallback++
	}
	if prev := pl.g.prev[i]; prev != -1 && prev != m {
		st.Switches++
	}
	if cl.prevKbps > 0 && in.Ladder[k] < cl.prevKbps {
		st.Drops++
	}
	pl.placed[i] = int32(pl.sp.placeAt(pl.p, m, k))
}

// groupRef is one of a class's groups: at position m, rung k, index j
// in p.groups[m]; next is the class's next (-1: none).
type groupRef struct{ m, k, j, next int32 }

// group counts session i, placed at position m and rung k, in the plan's
// drain-forecast groups.
func (pl *placing) group(i, m int32, k int) {
	c := pl.g.classOf[i]
	key := [3]int32{c, m, int32(k)}
	if key == pl.lastAt {
		pl.p.groups[m][pl.lastJ].n++
		return
	}
	if pl.groupAt == nil {
		pl.groupAt = make([]int32, len(pl.g.classes))
		for c := range pl.groupAt {
			pl.groupAt[c] = -1
		}
	}
	j, ok := int32(-1), false
	for r := pl.groupAt[c]; r >= 0; r = pl.groupsAt[r].next {
		if g := &pl.groupsAt[r]; g.m == m && g.k == int32(k) {
			j, ok = g.j, true
			break
		}
	}
	if !ok {
		cl := &pl.g.classes[c]
		vk := viewerKind{service: pl.sp.svc, loc: cl.loc, profile: cl.profile, room: pl.room[cl.channel], channel: -1, prev: m, prevKbps: pl.in.Ladder[k], rung: int32(k)}
		if pl.in.Params.OriginCost > 0 {
			vk.channel = cl.channel // the pulls it would open differ by channel
		}
		if pl.p.groups == nil {
			pl.p.groups = make([][]group, len(pl.p.servers))
		}
		j = int32(len(pl.p.groups[m]))
		pl.groupsAt = append(pl.groupsAt, groupRef{m: m, k: int32(k), j: j, next: pl.groupAt[c]})
		pl.groupAt[c] = int32(len(pl.groupsAt) - 1)
		pl.p.groups[m] = append(pl.p.groups[m], group{kind: vk})
	}
	pl.p.groups[m][j].n++
	pl.lastAt, pl.lastJ = key, j
}

// place splits every user's choice among the servers of its site: first
// the viewers whose own server is in the site and has room keep it, then
// the others go where most bandwidth is left; a viewer no server of the
// site has room for (the site's capacity is a sum: what is left on each
// server may be less than a viewer's) goes to the fallback.
func (pl *placing) place() {
	st := &pl.p.stats
	cand := pl.solveIn.Candidates()
	later := make([]bool, len(pl.mine))
	pl.placed = make([]int32, len(pl.mine))
	for i := range pl.placed {
		pl.placed[i] = -1 // none: keeps the place of an earlier plan, which is not this one's
	}
	pl.users = make([]int, len(pl.p.servers))
	pl.lastAt, pl.lastPull = [3]int32{-1, -1, -1}, pull{-1, -1}
	for pass := 0; pass < 2; pass++ {
		for v, c := range pl.res.Assign {
			members := pl.g.order[pl.g.start[v]:pl.g.start[v+1]]
			if c.Server == qoe.Fallback {
				if pass == 0 {
					for _, i := range members {
						pl.take(i, -1, 0)
					}
					if len(cand[v]) > 0 {
						st.Starved += len(members) // a server covers them: they lacked capacity
					}
				}
				continue
			}
			ps := pl.sites.pos[c.Server]
			for _, i := range members {
				if pass == 0 {
					if prev := pl.g.prev[i]; prev >= 0 && pl.sites.of[prev] == int32(c.Server) && (len(ps) == 1 || pl.fits(int32(prev), c.Rung)) {
						pl.take(i, int32(prev), c.Rung)
					} else {
						later[i] = true
					}
					continue
				}
				if !later[i] {
					continue
				}
				best := int32(-1)
				for _, m := range ps {
					if (len(ps) == 1 || pl.fits(m, c.Rung)) && (best < 0 || pl.capBw[m] > pl.capBw[best]) {
						best = m
					}
				}
				// The solve valued the viewer on the site; the split may move it
				// off its own server in the site (a switch) or find no room.
				if prev := pl.g.prev[i]; best < 0 || (prev >= 0 && pl.sites.of[prev] == int32(c.Server)) {
					pl.objDelta += pl.valueAt(i, best, c.Rung, false) - pl.valueAt(i, ps[0], c.Rung, true)
				}
				if best < 0 {
					st.Starved++
				}
				pl.take(i, best, c.Rung)
			}
		}
	}
	// The sessions learn their places in parallel, after the split: the
	// only pass of it that reads or writes them (the plan is not out yet).
	gen := pl.p.gen
	inParallel(len(pl.mine), 16384, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if pl.placed[i] >= 0 {
				pl.mine[i].planned.Store(planned(gen, int(pl.placed[i])))
			}
		}
	})
	for m, n := range pl.users {
		if n > 0 {
			st.UsersByServer[pl.snap.Servers[pl.p.servers[m]].Name] += n
		}
	}
}

// valueAt is one viewer's value for session i at position m (-1: the
// fallback) at rung k: as the solve saw it (solved: no switch within the
// site of the viewer's own server) or as it is.
func (pl *placing) valueAt(i, m int32, k int, solved bool) float64 {
	s := pl.mine[i]
	prev := int(max(pl.g.prev[i], -1))
	u := qoe.User{Lat: s.loc.Lat, Lon: s.loc.Lon, Profile: s.profile, RoomMean: pl.sp.roomOf(s.key.channel), Ingest: -1, PrevServer: prev}
	if cur := s.cur.Load(); cur != nil {
		u.PrevKbps = cur.kbps
	}
	if m < 0 {
		return pl.in.ValueFor(&u, qoe.Fallback, 0)
	}
	if solved && prev >= 0 && pl.sites.of[prev] == pl.sites.of[m] {
		u.PrevServer = int(m)
	}
	return pl.in.ValueFor(&u, int(m), k)
}
