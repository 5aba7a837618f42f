package allocator

import (
	"math"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
)

// Planning a city of 600,000: the model cannot tell apart viewers at the
// same place (a zone's location) with the same profile, channel and
// previous choice, so they need not cost a user each. A class of n such
// viewers is solved as a few users standing for powers of two of them
// (qoe.User.Count), whose sums give every split of the class from 0 to n
// (the solver may spread a class over several servers and rungs, as it
// would its viewers one by one). The relaxation, and so the certified
// bound, is that of the viewers one by one (qoe keeps every option one
// viewer fits).

// class is what the model knows of a session.
type class struct {
	loc      topology.Location
	profile  qoe.Profile
	channel  int32   // its number in the solve
	prev     int     // site it was on, -1 for none
	prevKbps float64 // its bitrate, 0 for a new session
}

// static is what a session cannot change without becoming another one
// (table.touch replaces it): its place, profile and channel.
type static struct {
	loc     topology.Location
	profile qoe.Profile
	channel int32
}

// staticKey and classKey are static and class as map keys of plain bits:
// hashed as memory, not float by float, and a NaN is equal to itself.
type staticKey struct {
	lat, lon, desired, danmaku, gift uint64
	channel                          int32
}

// variant is what tells a class from the others of its static class:
// the site it was on and its bitrate (as bits), and the next class of the
// same static (-1: none).
type variant struct {
	prev, next int32
	kbps       uint64
}

// pre is what the grouping reads of one session: its static class's
// number (-1: to be numbered; notMine: another service's session), the
// position and site it was on and its bitrate.
type pre struct {
	static, prev, site int32
	kbps               uint64
}

const notMine = -2

// grouped is a service's sessions as the solve's users: user v stands for
// the sessions mine[order[start[v]:start[v+1]]].
type grouped struct {
	users   []qoe.User
	classes []class
	mine    []*session // the service's sessions this solve
	classOf []int32    // by session
	// prev is, by session, the position it was on; -1 for none (a new
	// session, the fallback), -2 for a server no longer in the plan.
	prev  []int32
	order []int32
	start []int32
	room  []float64 // Fbar by channel number
	// present are the channels with a viewer this solve.
	present []int32

	// The numbering of channels and static classes, kept from solve to
	// solve and remembered by each session (session.numberedBy), so that
	// a steady period hashes only the viewers that are new. numbering
	// names it; a new one starts when it has grown well past what is live.
	numbering  uint32
	chanNum    map[string]int32
	chanName   []string
	staticNum  map[staticKey]int32
	statics    []static
	used       []uint64 // by static: the last solve (stamp) that had it
	head       []int32  // by static: its first class this solve (when used)
	stamp      uint64
	liveStatic int
	slack      int // statics past twice the live ones that start a new numbering (0: 4096)

	// variants, sizes, first, next and count are the grouping's own
	// scratch. A service's grouped is kept from solve to solve (solveMu:
	// one at a time; nothing of it outlives the solve), so that a city of
	// 600,000 does not make a few hundred MB of garbage a period.
	variants           []variant // by class
	sizes, first, next []int32
	count              []int32 // viewers by channel number
	parts              []int
}

// reset empties g for a solve, keeping its arrays, and starts a new
// numbering when the kept one has grown past twice what was live.
func (g *grouped) reset(numberings *uint32) {
	slack := g.slack
	if slack == 0 {
		slack = 4096
	}
	if g.numbering == 0 || len(g.statics) > 2*g.liveStatic+slack || len(g.chanName) > 2*len(g.present)+slack/4 {
		*numberings++
		g.numbering = *numberings
		g.chanNum, g.staticNum = map[string]int32{}, map[staticKey]int32{}
		g.chanName, g.statics, g.used, g.head = g.chanName[:0], g.statics[:0], g.used[:0], g.head[:0]
	}
	g.stamp++
	g.liveStatic = 0
	g.users, g.classes, g.variants, g.sizes = g.users[:0], g.classes[:0], g.variants[:0], g.sizes[:0]
	g.start, g.present = g.start[:0], g.present[:0]
	g.mine, g.classOf, g.prev = g.mine[:0], g.classOf[:0], g.prev[:0]
}

// done lets go of the solve's sessions (the next solve lists its own).
func (g *grouped) done() { clear(g.mine) }

// number gives s its static class's number, a new one when the numbering
// has not seen it.
func (g *grouped) number(s *session) {
	ch, ok := g.chanNum[s.key.channel]
	if !ok {
		ch = int32(len(g.chanName))
		g.chanNum[s.key.channel] = ch
		g.chanName = append(g.chanName, s.key.channel)
	}
	pr := &s.profile
	k := staticKey{math.Float64bits(s.loc.Lat), math.Float64bits(s.loc.Lon), math.Float64bits(pr.DesiredKbps), math.Float64bits(pr.Danmaku), math.Float64bits(pr.Gift), ch}
	st, ok := g.staticNum[k]
	if !ok {
		st = int32(len(g.statics))
		g.staticNum[k] = st
		g.statics = append(g.statics, static{loc: s.loc, profile: s.profile, channel: ch})
		g.used, g.head = append(g.used, 0), append(g.head, -1)
	}
	s.numberedBy, s.static = g.numbering, st
}

// resize is s with length n, its array kept when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// groupSessions classes the sessions of live that are service svc's into
// g (one pass over them: a city's 600,000 are read once a period), works
// out the rooms' means and cuts each class into users of at most max
// viewers.
func (a *Allocator) groupSessions(g *grouped, snap *topology.Snapshot, svc int32, p *plan, live []*session, sites *sites, max int) {
	g.reset(&a.numberings)
	name := snap.Services[svc].Name
	// First, in parallel, what each session's class needs of it (the
	// pass that reads the sessions: cache misses, not work); then, in
	// order, the classes.
	// (pre is a period's: pointer-free garbage, 24 bytes a session, not
	// kept between periods.)
	pres := make([]pre, len(live))
	inParallel(len(live), 16384, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s, r := live[i], &pres[i]
			if s.key.service != svc || s.snap.Services[svc].Name != name {
				r.static = notMine
				continue
			}
			r.static = -1
			if s.numberedBy == g.numbering {
				r.static = s.static
			}
			cur := s.cur.Load()
			var kbps float64
			if cur != nil {
				kbps = cur.kbps
			}
			r.kbps = math.Float64bits(kbps)
			pos, had := posOf(cur, snap, p)
			r.prev, r.site = int32(pos), -1
			if had && pos < 0 {
				r.prev = -2
			}
			if pos >= 0 {
				r.site = sites.of[pos] // its site: the solve tells no server of one from another
			}
		}
	})
	for i, s := range live {
		r := &pres[i]
		if r.static == notMine {
			continue
		}
		if r.static < 0 {
			g.number(s)
			r.static = s.static
		}
		// Its class: one of those of its static class this solve (a
		// short list: by site and bitrate), or a new one.
		k := int32(-1)
		if g.used[r.static] == g.stamp {
			for j := g.head[r.static]; j >= 0; j = g.variants[j].next {
				if v := &g.variants[j]; v.prev == r.site && v.kbps == r.kbps {
					k = j
					break
				}
			}
		} else {
			g.used[r.static], g.head[r.static] = g.stamp, -1
			g.liveStatic++
		}
		if k < 0 {
			k = int32(len(g.classes))
			st := &g.statics[r.static]
			g.classes = append(g.classes, class{loc: st.loc, profile: st.profile, channel: st.channel, prev: int(r.site), prevKbps: math.Float64frombits(r.kbps)})
			g.variants = append(g.variants, variant{prev: r.site, next: g.head[r.static], kbps: r.kbps})
			g.head[r.static] = k
			g.sizes = append(g.sizes, 0)
		}
		g.mine = append(g.mine, s)
		g.classOf, g.prev = append(g.classOf, k), append(g.prev, r.prev)
		g.sizes[k]++
	}
	// Fbar of each room: the mean danmaku rate of its viewers
	nch := len(g.chanName)
	g.room, g.count = resize(g.room, nch), resize(g.count, nch)
	clear(g.room)
	clear(g.count)
	for k := range g.classes {
		c, n := &g.classes[k], g.sizes[k]
		g.room[c.channel] += float64(n) * c.profile.Danmaku
		g.count[c.channel] += n
	}
	for ch, n := range g.count {
		if n > 0 {
			g.room[ch] /= float64(n)
			g.present = append(g.present, int32(ch))
		}
	}
	// the sessions in the order of their classes
	nc := len(g.classes)
	g.order = resize(g.order, len(g.mine))
	g.first = resize(g.first, nc+1)
	g.first[0] = 0
	for k, n := range g.sizes {
		g.first[k+1] = g.first[k] + n
	}
	g.next = append(g.next[:0], g.first[:nc]...)
	for i, k := range g.classOf {
		g.order[g.next[k]] = int32(i)
		g.next[k]++
	}
	for k, c := range g.classes {
		u := qoe.User{Lat: c.loc.Lat, Lon: c.loc.Lon, Profile: c.profile, RoomMean: g.room[c.channel], Ingest: -1, PrevServer: c.prev, PrevKbps: c.prevKbps, Channel: c.channel}
		at := g.first[k]
		g.parts = appendChunkSizes(g.parts[:0], int(g.sizes[k]), max)
		for _, n := range g.parts {
			u.Count = int32(n)
			g.users = append(g.users, u)
			g.start = append(g.start, at)
			at += int32(n)
		}
	}
	g.start = append(g.start, int32(len(g.mine)))
}

// chunkSizes cuts n viewers into powers of two of at most max (a power of
// two) whose subset sums are every count from 0 to n: 1, 2, 4, ... while
// they fit, then as many of max as fit, then the rest in binary. Each
// part is at most one more than the sum of those before it, which keeps
// the sums contiguous.
func chunkSizes(n, max int) []int { return appendChunkSizes(nil, n, max) }

// appendChunkSizes appends chunkSizes(n, max) to out.
func appendChunkSizes(out []int, n, max int) []int {
	sum := 0
	for c := 1; c <= max && sum+c <= n; c *= 2 {
		out = append(out, c)
		sum += c
	}
	for n-sum >= max {
		out = append(out, max)
		sum += max
	}
	for r, c := n-sum, max; r > 0; c /= 2 {
		if r >= c {
			out = append(out, c)
			r -= c
		}
	}
	return out
}

// maxChunk is the most viewers one user of the solve stands for: a power
// of two no more than a thirty-second of the smallest server's stated
// bandwidth at the top rung, so that a chunk that does not fit loses
// little (at 10 Gbps and 5 Mbps, 32 viewers, 1.6% of a server), and 1 (a
// user per viewer) where servers are small.
func maxChunk(snap *topology.Snapshot, p *plan, top float64) int {
	least := math.Inf(1)
	for _, si := range p.servers {
		if c := snap.Servers[si].Capacity.BandwidthMbps; c > 0 {
			least = math.Min(least, c*1000)
		}
	}
	c := 64
	for c > 1 && float64(c)*top*32 > least {
		c /= 2
	}
	return c
}
