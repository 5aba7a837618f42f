package balance

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Bounded loads with replication by popularity.
//
// Counting every request as lasting load and walking clockwise past any
// server over (1+epsilon) x the mean (Mirrokni, Thorup and Zadimoghaddam's
// bounded loads) spills a channel as soon as its server has taken a few
// more requests than the others, even on an idle node, and scatters a hot
// channel over every neighbour in turn. Here loads are recent requests that
// fade in time, the bound has a floor, and a hot key is replicated over as
// many servers as its demand needs:
//
//   - load_j is server j's recent requests (chash_decay.go). Its bound is
//     max(MinLoad x w_j / mean w, (1+epsilon) x share_j x total): share_j
//     its effective (slow-start) weight share, total the node's recent
//     requests as added up at the last tick. Below the floor a server is
//     never full, so a quiet node sends every request for a channel to its
//     ring owner, however fast they come.
//   - demand_k is key k's recent requests (keyDemand). It gets
//     copies = ceil(demand_k / budget) servers, budget = max(MinLoad,
//     copyFill x (1+epsilon) x total / N): 1 for a cold key, more the
//     hotter it is, at most N.
//   - A key's servers, in order: 0 its ring owner; 1 the next distinct
//     server clockwise (so a server that leaves hands its keys to the server
//     that was already their second); i >= 2 the owner of ring position
//     mix(key + i x golden) read on a coarser copy of the ring (the grid, at
//     most 2^16 owners), skipping the first two, so that any of them costs
//     one array lookup however many copies a key has. Each is a function of
//     the ring alone: a server leaving moves only what it held.
//   - A key with one copy goes to its owner while the owner is under
//     coldShare of its bound; then to its second server under coldShare;
//     then to either, owner first, under the bound.
//   - A key with c >= 2 copies goes to the less loaded (load / bound) of its
//     first two with room, else to the less loaded of two of its servers
//     2..c-1 drawn at random (the power of two choices among its replicas)
//     with room.
//   - Past that, a key walks on through its servers (c, c+1, ... or 2, 3,
//     ...) to the first under its fair share (bound / (1+epsilon)), leaving
//     the margin above it to the keys the server is first or second for;
//     if maxWalk in a row are not, the least loaded of them and of two more
//     of its servers drawn at random takes it.
//
// So a cold key stays on one server, or two when its owner is full; a hot
// key fills its first two and spreads the rest evenly over its few
// replicas, which stay put while its popularity does; and every server
// stays within its bound but for races between pickers and a node so
// overloaded that every server tried is full. The first two servers of
// the hot keys, filled first, are where affinity is won or lost: under
// Zipf(1.1) over 64 servers 0.807 of the requests are served at their
// channel's first two, where no assignment within the bound can serve more
// than 0.811 (a maximum flow, chash_affinity_test.go).
//
// Per pick: one ring search and two compare-and-swaps (the key's counter,
// the server's) for a key that stays on its owner; a spreading key reads
// one to four more servers' counters and draws its replicas from the grid.
// The node's total is re-added (a load per server) by the pick that moves
// the clock to a new tick and, during a burst within one tick, on a few of
// a hot key's picks (totalGate).

// The pick's thresholds, as fractions of a server's bound.
const (
	// coldShare: a key with one copy leaves its owner for its second
	// server once the owner is past this (and the second is not), keeping
	// the top of every server for the keys hot enough to need it as one of
	// their first two: a cold key that moves keeps its affinity (its
	// second server), a hot key's overflow past its first two loses it.
	coldShare = 0.95
	// copyFill: a hot key gets a copy per copyFill x the bound of a server
	// of mean weight, so that its replicas have room for it beside what
	// they already carry.
	copyFill = 0.5
	// maxWalk bounds how many of a key's further servers a pick tries
	// before it settles for the least loaded it saw.
	maxWalk = 24
)

func (c *CHash) initBounded(o CHashOptions, now time.Time, sumEff, sumW float64) {
	n := len(c.servers)
	c.minLoad, c.halfLife = o.MinLoad, o.HalfLife
	c.perCopy = copyFill * (1 + c.eps) / float64(n)
	// Past its first two, a key only takes a server below its fair share,
	// leaving the margin above it to the keys that server is first for.
	c.beyond = 1 / (1 + c.eps)
	c.floor = make([]float64, n)
	c.share = make([]float64, n)
	meanW := sumW / float64(n)
	for j := range n {
		c.floor[j] = o.MinLoad * c.effective[j] / meanW
		c.share[j] = (1 + c.eps) * c.effective[j] / sumEff
	}
	c.totalMask = 1<<max(6, bits.Len(uint(n-1))) - 1
	c.clock = newCoarseClock(o.HalfLife, now)
	c.keys = newKeyDemand(n, c.clock.tickNs)
	c.loads = make([]paddedWord, n)
}

func (c *CHash) totalLoad() float64 { return math.Float64frombits(c.total.Load()) }

// sumLoads adds the servers' loads up at tick.
func (c *CHash) sumLoads(tick int64) float64 {
	sum := 0.0
	for j := range c.loads {
		sum += counterAt(c.loads[j].w.Load(), tick)
	}
	return sum
}

// addTotal re-adds the servers' loads at tick into the total.
func (c *CHash) addTotal(tick int64) float64 {
	sum := c.sumLoads(tick)
	c.total.Store(math.Float64bits(sum))
	return sum
}

func (c *CHash) bound(j int32, total float64) float64 {
	return max(c.floor[j], c.share[j]*total)
}

func (c *CHash) loadAt(j int32, tick int64) float64 { return counterAt(c.loads[j].w.Load(), tick) }

// copies is how many servers a key with this demand is spread over.
func (c *CHash) copies(demand, total float64) int {
	if demand <= c.minLoad {
		return 1
	}
	budget := max(c.minLoad, c.perCopy*total)
	if demand <= budget {
		return 1
	}
	return int(min(math.Ceil(demand/budget), float64(len(c.servers))))
}

// keyServers enumerates a key's servers in order (see the top of the file).
// It lives on the picker's stack.
type keyServers struct {
	c       *CHash
	keyHash uint64
	k0      int   // the key's ring point
	p0, p1  int32 // its first two servers; p1 < 0 until needed
}

func (s *keyServers) at(i int) int32 {
	if i == 0 {
		return s.p0
	}
	c := s.c
	if s.p1 < 0 {
		s.p1 = s.p0
		for k, n := s.k0, 0; n < len(c.points) && s.p1 == s.p0; n++ {
			if k++; k == len(c.points) {
				k = 0
			}
			s.p1 = c.owner[k]
		}
	}
	if i == 1 {
		return s.p1
	}
	g := mix(s.keyHash+uint64(i)*golden) >> c.gridShift
	for range c.grid {
		if j := int32(c.grid[g]); j != s.p0 && j != s.p1 {
			return j
		}
		g = (g + 1) & uint64(len(c.grid)-1)
	}
	return int32(c.grid[g]) // a node of one or two servers
}

// replicas draws two servers among a key's servers 2..copies-1 (copies >= 3)
// from the random bits r.
func (s *keyServers) replicas(copies int, r uint64) (int32, int32) {
	if copies == 3 {
		return s.at(2), s.at(2)
	}
	i := int(r % uint64(copies-2))
	j := int((r >> 32) % uint64(copies-3))
	if j >= i {
		j++
	}
	return s.at(2 + i), s.at(2 + j)
}

// route is one pick under the bound, shared by Pick and Explain so that an
// explanation cannot tell a different story: it returns the server's
// position. With x nil it counts the request (the key's demand, the
// server's load); with x it counts nothing and writes the account into x.
type route struct {
	c     *CHash
	tick  int64
	total float64
	x     *Explanation
	seen  map[int32]int // Explain: candidate index by server
	// chosen is the server the last successful try took.
	chosen int32
}

// ratio is server j's load over its bound: 1 is full.
func (r *route) ratio(j int32) float64 {
	return r.c.loadAt(j, r.tick) / r.c.bound(j, r.total)
}

// lessLoaded orders two servers by load over bound (multiplied out).
func (r *route) lessLoaded(a, b int32) (int32, int32) {
	if a == b {
		return a, b
	}
	c := r.c
	if c.loadAt(b, r.tick)*c.bound(a, r.total) < c.loadAt(a, r.tick)*c.bound(b, r.total) {
		return b, a
	}
	return a, b
}

// tryPair tries the less loaded (load over bound) of a and b, then the
// other, each up to its bound. It is lessLoaded and try with each server's
// counter read once.
func (r *route) tryPair(a, b int32, why string) bool {
	if r.x != nil || a == b {
		a, b = r.lessLoaded(a, b)
		return r.try(a, 1, why) || (b != a && r.try(b, 1, why))
	}
	c := r.c
	ca, cb := &c.loads[a].w, &c.loads[b].w
	wa, wb := ca.Load(), cb.Load()
	na, va := bumpValue(wa, r.tick)
	nb, vb := bumpValue(wb, r.tick)
	ba, bb := c.bound(a, r.total), c.bound(b, r.total)
	if float64(vb-unit)*ba < float64(va-unit)*bb {
		a, b, ca, cb, wa, wb, na, nb, va, vb, ba, bb = b, a, cb, ca, wb, wa, nb, na, vb, va, bb, ba
	}
	if va <= uint64(ba*unit) && (ca.CompareAndSwap(wa, na) || r.try(a, 1, why)) {
		r.chosen = a
		return true
	}
	if vb <= uint64(bb*unit) && (cb.CompareAndSwap(wb, nb) || r.try(b, 1, why)) {
		r.chosen = b
		return true
	}
	return false
}

// try counts the request on server j if that keeps j within frac of its
// bound, atomically; Explain only checks, and notes the candidate.
func (r *route) try(j int32, frac float64, why string) bool {
	if r.x != nil {
		return r.check(j, frac, why)
	}
	ctr := &r.c.loads[j].w
	limit := uint64(r.c.bound(j, r.total) * frac * unit)
	for {
		w := ctr.Load()
		next, v := bumpValue(w, r.tick)
		if v > limit {
			return false
		}
		if ctr.CompareAndSwap(w, next) {
			r.chosen = j
			return true
		}
	}
}

func (r *route) check(j int32, frac float64, why string) bool {
	_, v := bumpValue(r.c.loads[j].w.Load(), r.tick)
	ok := v <= uint64(r.c.bound(j, r.total)*frac*unit)
	state := "full"
	if ok {
		state = "has room"
		r.chosen = j
	}
	r.note(j, fmt.Sprintf("%s, up to %.0f%% of its bound: %s", why, 100*frac, state), ok)
	return ok
}

// force counts the request on server j whatever its load.
func (r *route) force(j int32) {
	if r.x != nil {
		r.x.Notes = append(r.x.Notes, "every server tried is full: the least loaded of them (and of two drawn at random) takes it")
		r.note(j, "least loaded", true)
		return
	}
	ctr := &r.c.loads[j].w
	for {
		w := ctr.Load()
		next, _, _ := bump(w, r.tick)
		if ctr.CompareAndSwap(w, next) {
			return
		}
	}
}

// note records server j as a candidate in the explanation.
func (r *route) note(j int32, what string, chosen bool) {
	c, x := r.c, r.x
	i, ok := r.seen[j]
	if !ok {
		if r.seen == nil {
			r.seen = map[int32]int{}
		}
		load, b := c.loadAt(j, r.tick), c.bound(j, r.total)
		x.Candidates = append(x.Candidates, Candidate{Server: c.servers[j].Index, Name: c.servers[j].Name,
			Weight: c.servers[j].Weight, Effective: c.effective[j], Score: load / b,
			Note: fmt.Sprintf("%.1f recent requests, bound %.1f", load, b)})
		i = len(x.Candidates) - 1
		r.seen[j] = i
	}
	x.Candidates[i].Note += "; " + what
	if chosen {
		x.Candidates[i].Chosen = true
		x.Pick = c.servers[j].Index
	}
}

// pickBounded is Pick under the bound: the server's position. It does the
// common case itself, a key with one copy whose owner has room (two
// compare-and-swaps); spread does the rest.
func (c *CHash) pickBounded(keyHash, h uint64, k int, clientHash uint64) int32 {
	tick := c.clock.tick.Load()
	slot := c.keys.slot(h)
	var raw uint64
	var n uint32
	var demand float64
	for {
		w := slot.Load()
		raw, n, demand = bump(w, tick)
		if slot.CompareAndSwap(w, raw) {
			break
		}
	}
	total := c.totalLoad()
	p0 := c.owner[k]
	if demand <= c.minLoad || demand <= c.perCopy*total {
		ctr := &c.loads[p0].w
		limit := uint64(c.bound(p0, total) * (coldShare * unit))
		for {
			w := ctr.Load()
			next, v := bumpValue(w, tick)
			if v > limit {
				break
			}
			if ctr.CompareAndSwap(w, next) {
				return p0
			}
		}
	}
	r := route{c: c, tick: tick, total: total}
	return r.spread(keyHash, k, clientHash, slot, demand, n, raw)
}

// explainBounded is pickBounded for Explain: it counts nothing and writes
// its account into x.
func (c *CHash) explainBounded(keyHash, h uint64, k int, clientHash uint64, x *Explanation) {
	r := route{c: c, tick: c.clock.tick.Load(), total: c.totalLoad(), x: x}
	slot := c.keys.slot(h)
	raw, n, demand := bump(slot.Load(), r.tick)
	copies := c.copies(demand, r.total)
	x.Notes = append(x.Notes, fmt.Sprintf("key demand %.1f recent requests with this one, a copy per %.1f: %d server(s)",
		demand, max(c.minLoad, c.perCopy*r.total), copies))
	if copies == 1 && r.try(c.owner[k], coldShare, "ring owner") {
		return
	}
	r.spread(keyHash, k, clientHash, slot, demand, n, raw)
}

// spread is the pick of a key that did not simply stay on its owner: a hot
// key, or a cold one whose owner is full (see the top of the file).
func (r *route) spread(keyHash uint64, k int, clientHash uint64, slot *atomic.Uint64, demand float64, n uint32, raw uint64) int32 {
	c, x := r.c, r.x
	p0 := c.owner[k]
	copies := c.copies(demand, r.total)
	// The key is about to leave its owner. A stale clock overstates
	// demand and loads, so look at the time first: always while the
	// owner's bound is its floor (a quiet node, so few picks get here),
	// else when clockGate says so; and re-add the total when the tick moved
	// or a burst is on. Explain works out the same without storing either.
	if quiet := c.share[p0]*r.total < c.floor[p0]; quiet || clockGate(n, raw) {
		var now int64
		var advanced bool
		if x == nil {
			now, advanced = c.clock.refresh()
		} else {
			now = c.clock.peek()
			advanced = now > r.tick
		}
		if advanced || totalGate(n, raw, c.totalMask) {
			r.tick = now
			if x == nil {
				r.total = c.addTotal(now)
				demand = counterAt(slot.Load(), now)
			} else {
				r.total = c.sumLoads(now)
				demand = counterAt(raw, now)
				x.Notes = append(x.Notes, fmt.Sprintf("the pick reads the clock and re-adds the node's recent requests: %.0f; key demand %.1f", r.total, demand))
			}
			copies = c.copies(demand, r.total)
			if copies == 1 && r.try(p0, coldShare, "ring owner") {
				return p0
			}
		}
	}
	s := keyServers{c: c, keyHash: keyHash, k0: k, p0: p0, p1: -1}
	start := 2
	if copies == 1 {
		p1 := s.at(1)
		if r.try(p1, coldShare, "second server") || r.try(p0, 1, "ring owner") || r.try(p1, 1, "second server") {
			return r.chosen
		}
	} else {
		// Its first two, the less loaded first, then two of its replicas.
		if r.tryPair(s.at(0), s.at(1), "first two") {
			return r.chosen
		}
		if copies > 2 {
			if a, b := s.replicas(copies, mix(clientHash^raw)); r.tryPair(a, b, "replica") {
				return r.chosen
			}
			start = copies
		}
	}
	if len(c.servers) <= 2 { // no servers past the first two
		best, _ := r.lessLoaded(p0, s.at(1))
		r.force(best)
		return best
	}
	best, bestRatio := int32(-1), math.Inf(1)
	for i := start; i < start+maxWalk; i++ {
		j := s.at(i)
		if r.try(j, c.beyond, "further server") {
			return j
		}
		if q := r.ratio(j); q < bestRatio {
			best, bestRatio = j, q
		}
	}
	// Full all along: two more of the key's servers drawn at random past
	// the walk, among as many again as it has replicas and walked, may
	// have room (a fixed walk would pile a hot key's overflow on the same
	// few; drawing from the whole ring would scatter it over every server).
	rnd := mix(clientHash ^ raw ^ golden)
	span := uint64(start + maxWalk)
	for _, j := range [2]int32{s.at(start + maxWalk + int(rnd%span)), s.at(start + maxWalk + int((rnd>>32)%span))} {
		if q := r.ratio(j); q < bestRatio {
			best, bestRatio = j, q
		}
	}
	r.force(best)
	return best
}

// Loads returns the servers' recent requests (rounded) by server position
// and their sum, for tests, metrics and explain; zeros without a bound.
func (c *CHash) Loads() (perServer []int64, total int64) {
	perServer = make([]int64, len(c.servers))
	if c.loads == nil {
		return perServer, 0
	}
	tick := c.clock.tick.Load()
	for j := range c.loads {
		perServer[j] = int64(math.Round(c.loadAt(int32(j), tick)))
		total += perServer[j]
	}
	return perServer, total
}

// Inherit carries prev's recent loads over for the servers both hold, and
// its keys' demand, so the bound's history survives the rebuilds that follow
// every health change. When the servers are unchanged the two share their
// counters outright (picks still in flight on prev count for c). Call it
// before c is published.
func (c *CHash) Inherit(prev *CHash) {
	if prev == nil || c.loads == nil || prev.loads == nil {
		return
	}
	prevTick, tick := prev.clock.tick.Load(), c.clock.tick.Load()
	same := prev.clock.tickNs == c.clock.tickNs
	if same && prev.sameRing(c.servers) {
		c.loads, c.keys = prev.loads, prev.keys
		c.addTotal(tick)
		return
	}
	at := make(map[string]int, len(prev.servers))
	for j := range prev.servers {
		at[identity(&prev.servers[j])] = j
	}
	common := 0
	for j := range c.servers {
		if k, ok := at[identity(&c.servers[j])]; ok {
			common++
			if v := uint64(counterAt(prev.loads[k].w.Load(), prevTick) * unit); v > 0 {
				c.loads[j].w.Store(packWord(uint32(tick), 0, v))
			}
		}
	}
	// Keys' demand is the node's, whatever its servers; but a prev with no
	// server in common is another node's policy.
	if common > 0 {
		if same && len(prev.keys.slots) == len(c.keys.slots) {
			c.keys = prev.keys
		} else {
			c.keys.inherit(prev.keys, prevTick, tick)
		}
	}
	c.addTotal(tick)
}

// Explain implements Policy: the key's ring position and owner, and under
// the bound its demand, its copies and every server the pick would try,
// with its recent requests over its bound as the score. It changes nothing,
// not even the clock.
func (c *CHash) Explain(keyHash, clientHash uint64) Explanation {
	x := Explanation{Policy: c.Name(), Pick: -1, Panic: c.panicked}
	if len(c.points) == 0 {
		x.Notes = append(x.Notes, "no eligible server")
		return x
	}
	h := mix(keyHash)
	k := c.search(h)
	x.Notes = append(x.Notes, fmt.Sprintf("key hash %016x at ring point %d of %d", h, k, len(c.points)))
	if c.panicked {
		x.Notes = append(x.Notes, "fewer healthy servers than the panic threshold: health ignored")
	}
	if c.eps == 0 {
		j := c.owner[k]
		x.Pick = c.servers[j].Index
		x.Notes = append(x.Notes, "unbounded: the ring owner takes the key")
		x.Candidates = append(x.Candidates, Candidate{Server: x.Pick, Name: c.servers[j].Name, Weight: c.servers[j].Weight,
			Effective: c.effective[j], Chosen: true, Note: "ring owner"})
		return x
	}
	x.Notes = append(x.Notes, fmt.Sprintf("bounded loads, epsilon %.3g: score = recent requests (halving every %v) / bound, bound = max(%.0f x weight / mean weight, %.3g x weight share x the node's recent requests, %.0f at the last tick)",
		c.eps, c.halfLife, c.minLoad, 1+c.eps, c.totalLoad()))
	c.explainBounded(keyHash, h, k, clientHash, &x)
	return x
}
