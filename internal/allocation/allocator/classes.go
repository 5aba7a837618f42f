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

// grouped is a service's sessions as the solve's users: user v stands for
// the sessions mine[order[start[v]:start[v+1]]].
type grouped struct {
	users   []qoe.User
	classes []class
	classOf []int32 // by session
	// prev is, by session, the position it was on; -1 for none (a new
	// session, the fallback), -2 for a server no longer in the plan.
	prev  []int32
	order []int32
	start []int32
	// byClass, sizes, first and next are the grouping's own scratch. A
	// service's grouped is kept from solve to solve (solveMu: one at a
	// time; nothing of it outlives the solve), so that a city of 600,000
	// does not make a few hundred MB of garbage a period.
	byClass            map[class]int32
	sizes, first, next []int32
	parts              []int
}

// reset empties g for n sessions, keeping its arrays.
func (g *grouped) reset(n int) {
	if g.byClass == nil {
		g.byClass = map[class]int32{}
	}
	clear(g.byClass)
	g.users, g.classes, g.sizes = g.users[:0], g.classes[:0], g.sizes[:0]
	g.start = g.start[:0]
	g.classOf, g.prev, g.order = resize(g.classOf, n), resize(g.prev, n), resize(g.order, n)
}

// resize is s with length n, its array kept when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// groupSessions classes mine (the service's sessions, on channels chOf,
// whose rooms' means are room) into g and cuts each class into users of
// at most max viewers.
func (a *Allocator) groupSessions(g *grouped, snap *topology.Snapshot, p *plan, mine []*session, chOf []int32, room []float64, sites *sites, max int) {
	g.reset(len(mine))
	for i, s := range mine {
		c := class{loc: s.loc, profile: s.profile, channel: chOf[i], prev: -1}
		if cur := s.cur.Load(); cur != nil {
			c.prevKbps = cur.kbps
		}
		pos, had := prevPos(s, snap, p)
		g.prev[i] = int32(pos)
		if had && pos < 0 {
			g.prev[i] = -2
		}
		if pos >= 0 {
			c.prev = int(sites.of[pos]) // its site: the solve tells no server of one from another
		}
		k, ok := g.byClass[c]
		if !ok {
			k = int32(len(g.classes))
			g.byClass[c] = k
			g.classes = append(g.classes, c)
			g.sizes = append(g.sizes, 0)
		}
		g.classOf[i] = k
		g.sizes[k]++
	}
	// the sessions in the order of their classes
	nc := len(g.classes)
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
		u := qoe.User{Lat: c.loc.Lat, Lon: c.loc.Lon, Profile: c.profile, RoomMean: room[c.channel], Ingest: -1, PrevServer: c.prev, PrevKbps: c.prevKbps, Channel: c.channel}
		at := g.first[k]
		g.parts = appendChunkSizes(g.parts[:0], int(g.sizes[k]), max)
		for _, n := range g.parts {
			u.Count = int32(n)
			g.users = append(g.users, u)
			g.start = append(g.start, at)
			at += int32(n)
		}
	}
	g.start = append(g.start, int32(len(mine)))
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
