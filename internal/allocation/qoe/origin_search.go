package qoe

import (
	"math"
	"slices"
)

// The primal heuristics with the origin cost (the model F: origin.go)
// charge the pull: repair and the local search by the exact change of the
// objective (a move that opens a pair pays c, one that empties a pair
// gains c), the greedy by an amortised share (c divided by the viewers the
// plan it starts from had on that pair, at most c, nothing once the pair
// is pulled), and the local search gains moves that close a pair with few
// viewers by moving all of them (closePairs), gather a channel's viewers
// onto a server (gatherPairs), and ejections whose pulls are counted
// (ejectOrigin). These are copies of state.go's moves rather than one
// search with a switch: a plan without an origin cost keeps the plain
// search, bit for bit and with no pull bookkeeping (see the tests beside
// TestOriginLocalSearch).

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
			bwm, cpum := st.bw[m]+st.rbw[o.use[i]], st.cpu[m]+st.rcpu[o.use[i]]
			if curM == m {
				bwm -= st.rbw[o.use[cur]]
				cpum -= st.rcpu[o.use[cur]]
			}
			w += 1 + 8*int64(len(st.users[m]))
			for _, uu := range st.users[m] {
				u := int(uu)
				if u == v {
					continue
				}
				ucur := st.sel[u]
				uv := o.val[ucur]
				ubw, ucpu := bwm-st.rbw[o.use[ucur]], cpum-st.rcpu[o.use[ucur]]
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
						ubw+st.rbw[o.use[j]] <= st.bwCap[m] && ucpu+st.rcpu[o.use[j]] <= st.cpuCap[m] {
						bestGain, bu, bi, bj = g, u, i, j
					}
				}
				if curM >= 0 && curM != m {
					lo, hi := o.onServer(u, curM)
					for j := lo; j < hi; j++ {
						if g := gi + o.val[j] - uv + st.pullDelta(ucur, j); g > bestGain &&
							st.bw[curM]-st.rbw[o.use[cur]]+st.rbw[o.use[j]] <= st.bwCap[curM] &&
							st.cpu[curM]-st.rcpu[o.use[cur]]+st.rcpu[o.use[j]] <= st.cpuCap[curM] {
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
				st.bw[m]+st.rbw[o.use[j]] <= st.bwCap[m] && st.cpu[m]+st.rcpu[o.use[j]] <= st.cpuCap[m] {
				best, bj = g, j
			}
		}
	}
	return bj
}
