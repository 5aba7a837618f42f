package qoe

import (
	"math"
	"slices"
)

// The shared origin cost (Params.OriginCost = c > 0): a server pulls a
// channel from the origin once for all its viewers of that channel, so the
// objective is
//
//	F(x) = sum_v Y_v*QoE(v, x_v) - c * #{(m, h) : some viewer of channel h is on m}
//
// The bound. Keep, besides each user's one choice, the constraints that
// the viewers of one channel on a server fit the server (implied by the
// capacities), and dualise the capacities with prices as without the
// cost. For prices >= 0, the relaxation's value is >= max F over feasible
// plans (a feasible plan is a relaxed one, and its priced slack is >= 0),
// and it splits per channel (a user without a channel stays alone): it is
// prices*capacities + sum_h S_h with
//
//	S_h = max over the choices of h's viewers of
//	      sum_{v in h} rv(v, x_v) - c * #servers used,  each server's h-load fitting it
//
// where rv is an option's value less its priced use (the fallback's value
// for the fallback, which pulls nothing). Three upper bounds on S_h; the
// evaluator takes the smallest, channel by channel:
//
//   - the dual of the facility location's LP relaxation (the h-loads
//     dropped): for any t_v >= fb_v with sum_{v in h} max(0, best_vm - t_v)
//     <= c for every server m (best_vm: v's best rv on m), S_h <= sum_v
//     t_v. For a choice x using the servers O, rv(v, x_v) <= t_v for a
//     viewer on the fallback and <= t_v + max(0, best_vm - t_v) for one on
//     m, so sum_v rv(v, x_v) <= sum_v t_v + c|O|. descend finds a good t by
//     Erlenkotter's dual ascent (DUALOC), for a maximisation: every t_v
//     starts at v's best and falls, one breakpoint per pass, while the
//     servers it would charge have slack left. With c = 0 nothing falls
//     and this is the bound without the cost.
//   - the pull charged per kbps: a server m used by h carries at most D_m
//     of h's bitrates, so c >= c * (h-load on m)/D_m and S_h <= sum_v
//     max(fb_v, max_i rv_i - c*r_i/D_m(i));
//   - the same per compute unit, with (R - r_i)*H and C_m.
//
// (D_m and C_m as the solver's states allow them, with capTol.) The first
// is the better for a channel of few viewers (a lone viewer pays all of
// c), the others for a popular one (where at most a server's worth of its
// viewers can share a pull).
//
// The relaxed choice for the subgradient and the repair is the chosen
// bound's: for the dual ascent Erlenkotter's primal (the pairs whose slack
// is used up are pulled, every viewer takes its best option on a pulled
// server, or the fallback), for the others each viewer's maximiser.
//
// The primal heuristics charge the pull: repair and the local search by
// the exact change of the objective (a move that opens a pair pays c, one
// that empties a pair gains c), the greedy by an amortised share (c divided
// by the viewers the plan it starts from had on that pair, at most c,
// nothing once the pair is pulled), and the local search gains moves that
// close a pair with few viewers by moving all of them (closePairs), gather
// a channel's viewers onto a server (gatherPairs), and ejections whose
// pulls are counted (ejectOrigin).

// origin is the option table's view of the shared origin cost: the pairs
// (server, channel) that some option can pull, each option's pair, the
// users grouped by channel and, per user, its options grouped by server.
type origin struct {
	cost    float64
	pair    []int32 // per option: its pair; -1 for a user without a channel
	pairSrv []int32 // per pair: its server
	// units: one channel's users (pairs [unitPair[u], unitPair[u+1])), or
	// one user without a channel (no pairs): users ord[unitStart[u]:unitStart[u+1]]
	ord       []int32
	unitStart []int32
	unitPair  []int32
	groups    []int32 // the evaluator's chunks: units [groups[g], groups[g+1])
	// slots: a user's options on one server (contiguous: options are
	// sorted by server); user v's are [slotStart[v], slotStart[v+1]), slot
	// s's options [slotOpt[s], slotOpt[s+1])
	slotStart []int32
	slotOpt   []int32
	// per pair p, the slots of its channel's users on its server:
	// pairSlot[pairSlotStart[p]:pairSlotStart[p+1]], with slotUser their users
	pairSlotStart []int32
	pairSlot      []int32
	slotUser      []int32
}

// buildOrigin builds o's origin view (in.Params.OriginCost > 0).
func buildOrigin(in *Instance, o *options) *origin {
	n, total := len(in.Users), len(o.srv)
	g := &origin{cost: in.Params.OriginCost, pair: make([]int32, total)}
	// channels, densely numbered in ascending order of their values
	var chans []int32
	for v := range in.Users {
		if c := in.Users[v].Channel; c >= 0 {
			chans = append(chans, c)
		}
	}
	slices.Sort(chans)
	chans = slices.Compact(chans)
	first := make([]int32, len(chans)+1) // counting sort of the users by channel
	dense := make([]int32, n)
	nless := 0
	for v := range in.Users {
		dense[v] = -1
		if c := in.Users[v].Channel; c >= 0 {
			h, _ := slices.BinarySearch(chans, c)
			dense[v] = int32(h)
			first[h+1]++
		} else {
			nless++
		}
	}
	for h := range chans {
		first[h+1] += first[h]
	}
	g.ord = make([]int32, n)
	at := slices.Clone(first[:len(chans)])
	rest := int(first[len(chans)])
	for v := range in.Users {
		if h := dense[v]; h >= 0 {
			g.ord[at[h]] = int32(v)
			at[h]++
		} else {
			g.ord[rest] = int32(v)
			rest++
		}
	}
	nunits := len(chans) + nless
	g.unitStart = make([]int32, nunits+1)
	g.unitPair = make([]int32, nunits+1)
	copy(g.unitStart, first)
	for u := len(chans); u <= nunits; u++ {
		g.unitStart[u] = first[len(chans)] + int32(u-len(chans))
	}
	// pairs, channel by channel, in order of first appearance
	stamp := make([]int32, len(in.Servers)) // channel+1 that last saw the server
	pid := make([]int32, len(in.Servers))
	for h := range chans {
		g.unitPair[h] = int32(len(g.pairSrv))
		for _, v := range g.ord[first[h]:first[h+1]] {
			for i := o.start[v]; i < o.start[v+1]; i++ {
				m := o.srv[i]
				if stamp[m] != int32(h+1) {
					stamp[m], pid[m] = int32(h+1), int32(len(g.pairSrv))
					g.pairSrv = append(g.pairSrv, m)
				}
				g.pair[i] = pid[m]
			}
		}
	}
	for u := len(chans); u <= nunits; u++ {
		g.unitPair[u] = int32(len(g.pairSrv))
	}
	for _, v := range g.ord[first[len(chans)]:] {
		for i := o.start[v]; i < o.start[v+1]; i++ {
			g.pair[i] = -1
		}
	}
	// slots
	g.slotStart = make([]int32, n+1)
	for v := 0; v < n; v++ {
		g.slotStart[v] = int32(len(g.slotOpt))
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if i == o.start[v] || o.srv[i] != o.srv[i-1] {
				g.slotOpt = append(g.slotOpt, i)
			}
		}
	}
	g.slotStart[n] = int32(len(g.slotOpt))
	g.slotOpt = append(g.slotOpt, int32(total))
	g.slotUser = make([]int32, len(g.slotOpt)-1)
	g.pairSlotStart = make([]int32, g.npairs()+1)
	for v := 0; v < n; v++ {
		for s := g.slotStart[v]; s < g.slotStart[v+1]; s++ {
			g.slotUser[s] = int32(v)
			if p := g.pair[g.slotOpt[s]]; p >= 0 {
				g.pairSlotStart[p+1]++
			}
		}
	}
	for p := 0; p < g.npairs(); p++ {
		g.pairSlotStart[p+1] += g.pairSlotStart[p]
	}
	g.pairSlot = make([]int32, g.pairSlotStart[g.npairs()])
	fill := slices.Clone(g.pairSlotStart[:g.npairs()])
	for s := range g.slotUser {
		if p := g.pair[g.slotOpt[s]]; p >= 0 {
			g.pairSlot[fill[p]] = int32(s)
			fill[p]++
		}
	}
	// chunks of about evalChunk users, whole units
	g.groups = append(g.groups, 0)
	for u, size := 0, int32(0); u < nunits; u++ {
		size += g.unitStart[u+1] - g.unitStart[u]
		if size >= evalChunk || u == nunits-1 {
			g.groups = append(g.groups, int32(u+1))
			size = 0
		}
	}
	return g
}

// npairs is the number of (server, channel) pairs.
func (g *origin) npairs() int { return len(g.pairSrv) }

// OriginPulls returns the origin pulls of an assignment: the number of
// distinct (server, channel) pairs with at least one viewer (users with a
// Channel >= 0 on a server; invalid choices are skipped), and the origin
// traffic in kbps. A pull streams the channel's source, the top rung R,
// whatever rungs its viewers get: the server transcodes down from R (the
// model's compute (R - r)*H), so kbps = pulls * R. It counts by Channel
// whatever Params.OriginCost is (with the zero value of Channel every user
// watches channel 0).
func OriginPulls(in *Instance, assign []Choice) (pulls int, kbps float64) {
	seen := make(map[[2]int64]struct{})
	for v, c := range assign {
		if v >= len(in.Users) || in.Users[v].Channel < 0 || c.Server < 0 || c.Server >= len(in.Servers) {
			continue
		}
		seen[[2]int64{int64(c.Server), int64(in.Users[v].Channel)}] = struct{}{}
	}
	pulls = len(seen)
	if len(in.Ladder) > 0 {
		kbps = float64(pulls) * in.Ladder[len(in.Ladder)-1]
	}
	return pulls, kbps
}

// originScratch is the evaluator's per-solve scratch for the per-channel
// subproblems (nil without an origin cost).
type originScratch struct {
	// per user's slots, ordered by value, descending: the best reduced
	// value on the slot's server, its pair and the option that has it
	val  []float64
	pair []int32
	best []int32
	t    []float64 // per user: the dual value t_v
	ptr  []int32   // per user: end of its slots with value >= t_v
	act  []int32   // per unit's users: those whose t_v may still fall
	// per pair: c - sum_v max(0, best_vm - t_v)
	slack []float64
	// per (server, rung): the pull charged per kbps of D_m, per unit of C_m
	chargeB, chargeC []float64
}

func newOriginScratch(in *Instance, g *origin) *originScratch {
	n, ns, nk := len(in.Users), len(g.slotOpt)-1, len(in.Ladder)
	x := &originScratch{val: make([]float64, ns), pair: make([]int32, ns), best: make([]int32, ns),
		t: make([]float64, n), ptr: make([]int32, n), act: make([]int32, n), slack: make([]float64, g.npairs()),
		chargeB: make([]float64, len(in.Servers)*nk), chargeC: make([]float64, len(in.Servers)*nk)}
	for m, s := range in.Servers {
		for k := range in.Ladder {
			// per unit of the capacity as the solver's states allow it;
			// an option that uses none of a capacity is charged nothing
			// (one using more than the capacity is no option)
			if u := in.bwUse(k); u > 0 {
				x.chargeB[m*nk+k] = g.cost * u / (s.Bandwidth * (1 + capTol))
			}
			if u := in.cpuUse(k); u > 0 {
				x.chargeC[m*nk+k] = g.cost * u / (s.Compute * (1 + capTol))
			}
		}
	}
	return x
}

// chunkOrigin is the evaluator's function with an origin cost: chunk gc is
// a group of whole units (channels, users without one).
func (e *evaluator) chunkOrigin(w, gc, _, _ int) {
	g := e.o.org
	sum := 0.0
	for u := g.groups[gc]; u < g.groups[gc+1]; u++ {
		users := g.ord[g.unitStart[u]:g.unitStart[u+1]]
		if g.unitPair[u] == g.unitPair[u+1] {
			// a user without a channel (or a channel without an option):
			// each user alone, as bestOptions
			for _, v := range users {
				sum += e.alone(w, int(v))
			}
			continue
		}
		// the smallest of the three bounds, and its relaxed choice
		b, bb, bc := e.descend(u, users)
		switch {
		case bb < b && bb <= bc:
			b = e.charged(users, e.org.chargeB)
		case bc < b:
			b = e.charged(users, e.org.chargeC)
		}
		sum += b
		cnt := e.count[w]
		for _, v := range users {
			if i := e.sel[v]; i >= 0 {
				cnt[e.o.cix[i]]++
			}
		}
	}
	e.part[gc] = sum
}

// charged is a channel's bound with the pull charged per unit of a
// server's capacity, sum_v max(fb_v, max_i rv_i - charge[i's server and
// rung]); the maximisers are the users' relaxed choice.
func (e *evaluator) charged(users []int32, charge []float64) float64 {
	o := e.o
	sum := 0.0
	for _, v := range users {
		bv, bi := o.fb[v], int32(-1)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if rv := o.val[i] - e.cost[o.cix[i]] - charge[o.cix[i]]; rv > bv {
				bv, bi = rv, i
			}
		}
		e.sel[v] = bi
		sum += bv
	}
	return sum
}

// alone sets user v's best option at the current costs, counts it and
// returns its reduced value.
func (e *evaluator) alone(w, v int) float64 {
	o := e.o
	bv, bi := o.fb[v], int32(-1)
	for i := o.start[v]; i < o.start[v+1]; i++ {
		if rv := o.val[i] - e.cost[o.cix[i]]; rv > bv {
			bv, bi = rv, i
		}
	}
	e.sel[v] = bi
	if bi >= 0 {
		e.count[w][o.cix[bi]]++
	}
	return bv
}

// descend solves unit u's (one channel's) dual by dual descent (see the
// top of the file), sets its users' relaxed choice (their best option on
// a server whose slack is used up, or the fallback) and returns sum_v t_v,
// an upper bound on the channel's subproblem at the current prices, and,
// from the same scan of the options, the bounds with the pull charged per
// kbps and per compute unit (charged).
func (e *evaluator) descend(u int32, users []int32) (bound, boundB, boundC float64) {
	o, g, x := e.o, e.o.org, e.org
	c := g.cost
	tight := 1e-12 * c
	for p := g.unitPair[u]; p < g.unitPair[u+1]; p++ {
		x.slack[p] = c
	}
	// per user, its slots by value, descending: value, pair, best option
	val, pair, best := x.val, x.pair, x.best
	act := x.act[g.unitStart[u]:g.unitStart[u+1]][:0]
	for _, v := range users {
		t := o.fb[v]
		tb, tc := t, t
		s0, s1 := g.slotStart[v], g.slotStart[v+1]
		for s := s0; s < s1; s++ {
			bv, bi := math.Inf(-1), int32(-1)
			for i := g.slotOpt[s]; i < g.slotOpt[s+1]; i++ {
				ci := o.cix[i]
				rv := o.val[i] - e.cost[ci]
				if rv > bv {
					bv, bi = rv, i
				}
				tb = max(tb, rv-x.chargeB[ci])
				tc = max(tc, rv-x.chargeC[ci])
			}
			k := s // insertion, descending
			for k > s0 && val[k-1] < bv {
				val[k], pair[k], best[k] = val[k-1], pair[k-1], best[k-1]
				k--
			}
			val[k], pair[k], best[k] = bv, g.pair[bi], bi
			t = max(t, bv)
		}
		x.t[v] = t
		boundB += tb
		boundC += tc
		p := s0
		for p < s1 && val[p] >= t {
			p++
		}
		x.ptr[v] = p
		if t > o.fb[v] {
			act = append(act, v)
		}
	}
	// passes: each user falls to its next breakpoint, or until a server it
	// charges has no slack left (then it is done and leaves act)
	for len(act) > 0 {
		n := 0
		for _, v := range act {
			s0, s1, p := g.slotStart[v], g.slotStart[v+1], x.ptr[v]
			next := o.fb[v]
			if p < s1 && val[p] > next {
				next = val[p]
			}
			ms, arg := math.Inf(1), int32(-1)
			for k := s0; k < p; k++ {
				if q := pair[k]; x.slack[q] < ms {
					ms, arg = x.slack[q], q
				}
			}
			if ms <= tight {
				continue // done
			}
			t := x.t[v]
			d := t - next
			if ms < d { // a server runs out of slack: done
				x.t[v] = t - ms
				for k := s0; k < p; k++ {
					x.slack[pair[k]] -= ms
				}
				x.slack[arg] = 0
				continue
			}
			for k := s0; k < p; k++ {
				x.slack[pair[k]] -= d
			}
			x.t[v] = next
			for p < s1 && val[p] >= next {
				p++
			}
			x.ptr[v] = p
			if next > o.fb[v] {
				act[n] = v
				n++
			}
		}
		act = act[:n]
	}
	for _, v := range users {
		bound += x.t[v]
		bi := int32(-1)
		for k := g.slotStart[v]; k < g.slotStart[v+1]; k++ {
			if val[k] <= o.fb[v] {
				break
			}
			if x.slack[pair[k]] <= tight {
				bi = best[k]
				break
			}
		}
		e.sel[v] = bi
	}
	return bound, boundB, boundC
}

// closeMax: closePairs tries the pairs with at most this many viewers.
const closeMax = 8

// pairOf is option i's pair (-1: the fallback or a user without a channel).
func (st *state) pairOf(i int32) int32 {
	if i < 0 {
		return -1
	}
	return st.pair[i]
}

// pullDelta is the change of the objective's pull term (-c per pull) when
// a user moves from option cur to option j as the state stands.
func (st *state) pullDelta(cur, j int32) float64 {
	a, b := st.pairOf(cur), st.pairOf(j)
	if a == b {
		return 0
	}
	d := 0.0
	if a >= 0 && st.pcnt[a] == 1 {
		d += st.oc
	}
	if b >= 0 && st.pcnt[b] == 0 {
		d -= st.oc
	}
	return d
}

// movePair updates the pull counts for a user moving from option i to j.
func (st *state) movePair(i, j int32) {
	if a := st.pairOf(i); a >= 0 {
		st.pcnt[a]--
		if st.pcnt[a] == 0 {
			st.open--
		}
	}
	if b := st.pairOf(j); b >= 0 {
		if st.pcnt[b] == 0 {
			st.open++
		}
		st.pcnt[b]++
	}
}

// closePairs tries to close every pulled pair with at most closeMax
// viewers: they move, one after the other, to their best option off its
// server as the state stands (one on a server that pulls the channel
// already costs no pull), and the moves stay if, the pull saved included,
// they gain; else they are undone. Single moves cannot close a pair of two
// viewers or more: moving either alone only loses. Returns whether
// anything improved.
func (st *state) closePairs(b *budget) bool {
	o := st.o
	const eps = 1e-9
	improved := false
	var vs, from []int32
	for p := range st.pcnt {
		if k := st.pcnt[p]; k == 0 || k > closeMax {
			continue
		}
		m := st.org.pairSrv[p]
		if b.spend(int64(len(st.users[m])) + 1) {
			return improved
		}
		vs, from = vs[:0], from[:0]
		for _, u := range st.users[m] {
			if st.pair[st.sel[u]] == int32(p) {
				vs = append(vs, u)
			}
		}
		gain := 0.0
		for _, u := range vs {
			cur := st.sel[u]
			best, bj := o.fb[u]+st.pullDelta(cur, -1), int32(-1)
			for j := o.start[u]; j < o.start[u+1]; j++ {
				if o.srv[j] == m {
					continue
				}
				if g := o.val[j] + st.pullDelta(cur, j); g > best && st.fitsAfter(cur, j) {
					best, bj = g, j
				}
			}
			b.spend(int64(o.start[u+1]-o.start[u]) + 1)
			gain += best - o.val[cur]
			from = append(from, cur)
			st.move(int(u), bj)
		}
		if gain > eps {
			improved = true
			continue
		}
		for x := len(vs) - 1; x >= 0; x-- { // in reverse: each undo fits
			st.move(int(vs[x]), from[x])
		}
	}
	return improved
}

// bestMove is improve's single move with an origin cost: user v's (now on
// cur, of value cv) best option that fits, its gain counting the pull it
// opens and the one it empties; -1 for the fallback, -2 for none better.
func (st *state) bestMove(v int, cur int32, cv float64) int32 {
	o := st.o
	const eps = 1e-9
	best, bj := eps, int32(-2)
	if g := o.fb[v] - cv + st.pullDelta(cur, -1); g > best {
		best, bj = g, -1
	}
	for j := o.start[v]; j < o.start[v+1]; j++ {
		if j == cur {
			continue
		}
		if g := o.val[j] - cv + st.pullDelta(cur, j); g > best && st.fitsAfter(cur, j) {
			best, bj = g, j
		}
	}
	return bj
}

// greedyOrigin is greedy with an origin cost: an option on a pair not
// pulled yet is charged the pair's amortised share, c divided by the
// viewers the starting plan (the relaxed choice, or the warm plan) has on
// it (c if none), and nothing once the pair is pulled. The regrets are at
// the start's charges; each user's option is chosen at the charges as the
// placement stands.
func (st *state) greedyOrigin(cost []float64, keep bool) {
	o := st.o
	n := len(st.sel)
	share := make([]float64, len(st.pcnt))
	for p, k := range st.pcnt {
		share[p] = st.oc / float64(max(k, 1))
	}
	if !keep {
		for v := 0; v < n; v++ {
			st.move(v, -1)
		}
	}
	charge := func(i int32) float64 {
		if p := st.pair[i]; p >= 0 && st.pcnt[p] == 0 {
			return share[p]
		}
		return 0
	}
	var todo []int32 // keep: the users to place
	for v := 0; v < n; v++ {
		if !keep || st.sel[v] < 0 {
			todo = append(todo, int32(v))
		}
	}
	ord := make([]regret, len(todo))
	newPool(len(todo), 4096, 0).run(func(_, _, lo, hi int) {
		for x := lo; x < hi; x++ {
			v := int(todo[x])
			b1, b2, m1 := o.fb[v], math.Inf(-1), int32(-1)
			for i := o.start[v]; i < o.start[v+1]; i++ {
				rv := o.val[i] - cost[o.cix[i]] - charge(i)
				if rv > b1 {
					if o.srv[i] != m1 {
						b2 = b1
					}
					b1, m1 = rv, o.srv[i]
				} else if rv > b2 && o.srv[i] != m1 {
					b2 = rv
				}
			}
			if m1 >= 0 && o.fb[v] > b2 {
				b2 = o.fb[v]
			}
			ord[x] = regret{b1 - b2, int32(v), -1}
		}
	})
	sortRegrets(ord)
	for _, x := range ord {
		v := int(x.v)
		bv, bi := o.fb[v], int32(-1)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if rv := o.val[i] - cost[o.cix[i]] - charge(i); rv > bv && st.fits(i) {
				bv, bi = rv, i
			}
		}
		st.move(v, bi)
	}
}

// gatherPairs tries, for every pair (m, h), to gather onto m the viewers of
// h that gain by it: in decreasing order of their estimated gain (their
// best option on m against their current one, plus their share of the
// pull they leave), each moves to its best option on m that fits if that
// gains as the state stands (counting the pull it empties, not the one m
// opens), and the moves stay if they gain, the pull m opens included; else
// they are undone. It is closePairs' converse: two half-empty pulls merge,
// a new pull takes the viewers of several. Returns whether anything
// improved.
func (st *state) gatherPairs(b *budget) bool {
	o, g := st.o, st.org
	const eps = 1e-9
	improved := false
	type mover struct {
		v   int32
		est float64
	}
	var ms []mover
	var vs, from []int32
	for p := 0; p < g.npairs(); p++ {
		slots := g.pairSlot[g.pairSlotStart[p]:g.pairSlotStart[p+1]]
		if b.spend(int64(len(slots)) + 1) {
			return improved
		}
		ms = ms[:0]
		total := 0.0
		for _, s := range slots {
			v := g.slotUser[s]
			cur := st.sel[v]
			if cur >= 0 && st.pair[cur] == int32(p) {
				continue
			}
			best := math.Inf(-1)
			for j := g.slotOpt[s]; j < g.slotOpt[s+1]; j++ {
				if o.val[j] > best && st.fitsAfter(cur, j) {
					best = o.val[j]
				}
			}
			est := best - o.value(int(v), cur)
			if q := st.pairOf(cur); q >= 0 {
				est += st.oc / float64(st.pcnt[q])
			}
			if est > eps {
				ms = append(ms, mover{v, est})
				total += est
			}
		}
		closed := st.pcnt[p] == 0
		if len(ms) == 0 || (closed && total <= st.oc+eps) {
			continue
		}
		slices.SortFunc(ms, func(a, b mover) int {
			if a.est != b.est {
				if a.est > b.est {
					return -1
				}
				return 1
			}
			return int(a.v - b.v)
		})
		gain := 0.0
		if closed {
			gain = -st.oc
		}
		vs, from = vs[:0], from[:0]
		for _, x := range ms {
			v := int(x.v)
			cur := st.sel[v]
			s := g.slotStart[v]
			for g.pair[g.slotOpt[s]] != int32(p) {
				s++
			}
			bj, bd := int32(-1), eps
			for j := g.slotOpt[s]; j < g.slotOpt[s+1]; j++ {
				d := o.val[j] - o.value(v, cur) + st.pullDelta(cur, j)
				if st.pcnt[p] == 0 {
					d += st.oc // the opening is counted once, above
				}
				if d > bd && st.fitsAfter(cur, j) {
					bj, bd = j, d
				}
			}
			b.spend(int64(g.slotStart[v+1]-g.slotStart[v]) + 1)
			if bj < 0 {
				continue
			}
			gain += bd
			vs, from = append(vs, x.v), append(from, cur)
			st.move(v, bj)
		}
		if gain > eps {
			improved = true
			continue
		}
		for x := len(vs) - 1; x >= 0; x-- {
			st.move(int(vs[x]), from[x])
		}
	}
	return improved
}

// ejectOrigin is eject with an origin cost: the same moves (v takes a
// better but blocked option i on m after one user u there moves to its
// best alternative off m, to another rung on m, or into the room v
// leaves), chosen by their gain with the pulls each of the two moves opens
// or empties as the state stands, and kept only if the pair of moves,
// applied, gains (their pulls exactly counted: v and u may share a pair).
func (st *state) ejectOrigin(b *budget) bool {
	o := st.o
	const eps = 1e-9
	n := len(st.sel)
	if cap(st.alt) < n {
		st.alt = make([]int32, n)
	}
	alt := st.alt[:n]
	for u := range alt {
		alt[u] = st.bestAltOrigin(u)
	}
	if b.spend(int64(len(o.srv) + n)) {
		return false
	}
	improved := false
	var w int64
	for v := 0; v < n; v++ {
		if b.spend(w + 1) {
			return improved
		}
		w = 0
		cur := st.sel[v]
		cv := o.value(v, cur)
		curM := int32(-1)
		if cur >= 0 {
			curM = o.srv[cur]
		}
		bestGain := eps
		bu, bi, bj := -1, int32(0), int32(0)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if i == cur {
				continue
			}
			gi := o.val[i] - cv + st.pullDelta(cur, i)
			if gi <= eps {
				continue
			}
			m := o.srv[i]
			bwm, cpum := st.bw[m]+st.rbw[o.rung[i]], st.cpu[m]+st.rcpu[o.rung[i]]
			if curM == m {
				bwm -= st.rbw[o.rung[cur]]
				cpum -= st.rcpu[o.rung[cur]]
			}
			w += 1 + 8*int64(len(st.users[m]))
			for _, uu := range st.users[m] {
				u := int(uu)
				if u == v {
					continue
				}
				ucur := st.sel[u]
				uv := o.val[ucur]
				ubw, ucpu := bwm-st.rbw[o.rung[ucur]], cpum-st.rcpu[o.rung[ucur]]
				if ubw > st.bwCap[m] || ucpu > st.cpuCap[m] {
					continue
				}
				a := alt[u]
				if a >= 0 && (o.srv[a] == m || !st.fitsAfter(ucur, a)) {
					a = st.bestAltOrigin(u)
					alt[u] = a
				}
				if g := gi + o.value(u, a) - uv + st.pullDelta(ucur, a); g > bestGain {
					bestGain, bu, bi, bj = g, u, i, a
				}
				lo, hi := o.onServer(u, m)
				for j := lo; j < hi; j++ {
					if g := gi + o.val[j] - uv; j != ucur && g > bestGain &&
						ubw+st.rbw[o.rung[j]] <= st.bwCap[m] && ucpu+st.rcpu[o.rung[j]] <= st.cpuCap[m] {
						bestGain, bu, bi, bj = g, u, i, j
					}
				}
				if curM >= 0 && curM != m {
					lo, hi := o.onServer(u, curM)
					for j := lo; j < hi; j++ {
						if g := gi + o.val[j] - uv + st.pullDelta(ucur, j); g > bestGain &&
							st.bw[curM]-st.rbw[o.rung[cur]]+st.rbw[o.rung[j]] <= st.bwCap[curM] &&
							st.cpu[curM]-st.rcpu[o.rung[cur]]+st.rcpu[o.rung[j]] <= st.cpuCap[curM] {
							bestGain, bu, bi, bj = g, u, i, j
						}
					}
				}
			}
		}
		if bu < 0 {
			continue
		}
		ucur, open0 := st.sel[bu], st.open
		gain := o.val[bi] - cv + o.value(bu, bj) - o.val[ucur]
		st.move(bu, -1) // free first so that v's move never overshoots
		st.move(v, bi)
		st.move(bu, bj)
		if gain-st.oc*float64(st.open-open0) <= eps {
			// the pulls, counted exactly, make it a loss: undo (in
			// reverse, each step fits as it did before)
			st.move(bu, -1)
			st.move(v, cur)
			st.move(bu, ucur)
			alt[bu], alt[v] = st.bestAltOrigin(bu), st.bestAltOrigin(v)
			continue
		}
		alt[bu], alt[v] = st.bestAltOrigin(bu), st.bestAltOrigin(v)
		improved = true
	}
	return improved
}

// bestAltOrigin is bestAlt with the pulls: user u's best choice off its
// current server that fits, by its value plus the change of the pull term.
func (st *state) bestAltOrigin(u int) int32 {
	o := st.o
	cur := st.sel[u]
	curM := int32(-1)
	if cur >= 0 {
		curM = o.srv[cur]
	}
	best, bj := o.fb[u]+st.pullDelta(cur, -1), int32(-1)
	for j := o.start[u]; j < o.start[u+1]; j++ {
		if m := o.srv[j]; m != curM {
			if g := o.val[j] + st.pullDelta(cur, j); g > best &&
				st.bw[m]+st.rbw[o.rung[j]] <= st.bwCap[m] && st.cpu[m]+st.rcpu[o.rung[j]] <= st.cpuCap[m] {
				best, bj = g, j
			}
		}
	}
	return bj
}
