package qoe

import (
	"container/heap"
	"math"
	"slices"
	"time"
)

// state is a (possibly infeasible) assignment with per-server loads and
// per-server user lists, used by repair and local search.
type state struct {
	in     *Instance
	o      *options
	sel    []int32 // option index per user, -1 = fallback
	bw     []float64
	cpu    []float64
	bwCap  []float64
	cpuCap []float64
	rbw    []float64 // per use class (options.ubw)
	rcpu   []float64
	users  [][]int32 // users per server
	pos    []int32   // position of a user in users[server]
	alt    []int32   // eject's per-user best alternative (scratch)
	// with an origin cost (nil, 0 without): viewers per (server, channel)
	// pair, the pairs pulled, the cost per pull, and o's view of the pairs
	pcnt []int32
	open int
	oc   float64
	pair []int32
	org  *origin
}

func newState(in *Instance, o *options, sel []int32) *state {
	ns := len(in.Servers)
	st := &state{in: in, o: o, sel: append([]int32(nil), sel...),
		bw: make([]float64, ns), cpu: make([]float64, ns),
		bwCap: make([]float64, ns), cpuCap: make([]float64, ns),
		users: make([][]int32, ns), pos: make([]int32, len(sel))}
	st.rbw, st.rcpu = o.ubw, o.ucpu
	for m, s := range in.Servers {
		st.bwCap[m] = s.Bandwidth * (1 + capTol)
		st.cpuCap[m] = s.Compute * (1 + capTol)
	}
	if o.org != nil {
		st.org, st.pair, st.oc = o.org, o.org.pair, o.org.cost
		st.pcnt = make([]int32, o.org.npairs())
	}
	for v, i := range st.sel {
		if i >= 0 {
			m := o.srv[i]
			st.bw[m] += st.rbw[o.use[i]]
			st.cpu[m] += st.rcpu[o.use[i]]
			st.pos[v] = int32(len(st.users[m]))
			st.users[m] = append(st.users[m], int32(v))
			if st.pcnt != nil {
				st.movePair(-1, i)
			}
		}
	}
	return st
}

// objective is the assignment's objective, net of its origin pulls.
func (st *state) objective() float64 {
	var s float64
	for v, i := range st.sel {
		s += st.o.value(v, i)
	}
	if st.pcnt != nil {
		s -= st.oc * float64(st.open)
	}
	return s
}

// move sets user v to option j (-1 = fallback).
func (st *state) move(v int, j int32) {
	o := st.o
	if i := st.sel[v]; i >= 0 {
		m := o.srv[i]
		st.bw[m] -= st.rbw[o.use[i]]
		st.cpu[m] -= st.rcpu[o.use[i]]
		l := st.users[m]
		p := st.pos[v]
		last := l[len(l)-1]
		l[p] = last
		st.pos[last] = p
		st.users[m] = l[:len(l)-1]
	}
	if st.pcnt != nil {
		st.movePair(st.sel[v], j)
	}
	st.sel[v] = j
	if j >= 0 {
		m := o.srv[j]
		st.bw[m] += st.rbw[o.use[j]]
		st.cpu[m] += st.rcpu[o.use[j]]
		st.pos[v] = int32(len(st.users[m]))
		st.users[m] = append(st.users[m], int32(v))
	}
}

func (st *state) excess(m int32, bw, cpu float64) float64 {
	var e float64
	if bw > st.bwCap[m] {
		e += (bw - st.bwCap[m]) / math.Max(st.bwCap[m], 1e-12)
	}
	if cpu > st.cpuCap[m] {
		e += (cpu - st.cpuCap[m]) / math.Max(st.cpuCap[m], 1e-12)
	}
	return e
}

// fitsAfter reports whether option j fits when user v (currently on option
// cur) switches to it.
func (st *state) fitsAfter(cur, j int32) bool {
	if j < 0 {
		return true
	}
	o := st.o
	m := o.srv[j]
	bw, cpu := st.bw[m]+st.rbw[o.use[j]], st.cpu[m]+st.rcpu[o.use[j]]
	if cur >= 0 && o.srv[cur] == m {
		bw -= st.rbw[o.use[cur]]
		cpu -= st.rcpu[o.use[cur]]
	}
	return bw <= st.bwCap[m] && cpu <= st.cpuCap[m]
}

// repair makes the state feasible: on every overloaded server it repeatedly
// applies the change (other rung on the same server, move to a server with
// room, or fallback) with the least loss of weighted QoE per unit of
// normalised excess removed. Candidates sit in a lazy min-heap: a user's
// ratio only grows as the excess shrinks and other servers fill, so a stale
// key is a lower bound and is refreshed when popped. (With an origin cost
// the loss counts the pulls a change opens or empties, and a key may also
// fall as pairs open; a popped key is refreshed all the same, so only the
// order suffers.)
func (st *state) repair() {
	o := st.o
	// bestFor returns user v's best change for server m at the current state.
	bestFor := func(m int32, v int) (float64, int32) {
		ex := st.excess(m, st.bw[m], st.cpu[m])
		cur := st.sel[v]
		cv := o.val[cur]
		cbw, ccpu := st.rbw[o.use[cur]], st.rcpu[o.use[cur]]
		bestRatio, bestJ := math.Inf(1), int32(-2)
		try := func(j int32, after float64) {
			red := ex - after
			if red <= 1e-15 {
				return
			}
			loss := cv - o.value(v, j)
			if st.pcnt != nil {
				loss -= st.pullDelta(cur, j)
			}
			if r := loss / red; r < bestRatio {
				bestRatio, bestJ = r, j
			}
		}
		try(-1, st.excess(m, st.bw[m]-cbw, st.cpu[m]-ccpu))
		for j := o.start[v]; j < o.start[v+1]; j++ {
			if j == cur {
				continue
			}
			if o.srv[j] == m {
				try(j, st.excess(m, st.bw[m]-cbw+st.rbw[o.use[j]], st.cpu[m]-ccpu+st.rcpu[o.use[j]]))
			} else if st.fitsAfter(cur, j) {
				try(j, st.excess(m, st.bw[m]-cbw, st.cpu[m]-ccpu))
			}
		}
		return bestRatio, bestJ
	}
	var h repairHeap
	for mm := range st.in.Servers {
		m := int32(mm)
		if st.excess(m, st.bw[m], st.cpu[m]) <= 0 {
			continue
		}
		h = h[:0]
		for _, vv := range st.users[m] {
			r, _ := bestFor(m, int(vv))
			h = append(h, repairItem{r, vv})
		}
		heap.Init(&h)
		for st.excess(m, st.bw[m], st.cpu[m]) > 0 && h.Len() > 0 {
			it := heap.Pop(&h).(repairItem)
			v := int(it.v)
			if st.sel[v] < 0 || o.srv[st.sel[v]] != m {
				continue
			}
			r, j := bestFor(m, v)
			if j == -2 {
				continue
			}
			if h.Len() > 0 && r > h[0].ratio+1e-12 {
				heap.Push(&h, repairItem{r, it.v})
				continue
			}
			st.move(v, j)
			if j >= 0 && o.srv[j] == m {
				r2, _ := bestFor(m, v) // still on m at a lower rung: may give more
				heap.Push(&h, repairItem{r2, it.v})
			}
		}
		for st.excess(m, st.bw[m], st.cpu[m]) > 0 && len(st.users[m]) > 0 {
			st.move(int(st.users[m][0]), -1) // cannot happen; keeps feasibility certain
		}
	}
}

type repairItem struct {
	ratio float64
	v     int32
}
type repairHeap []repairItem

func (h repairHeap) Len() int           { return len(h) }
func (h repairHeap) Less(i, j int) bool { return h[i].ratio < h[j].ratio }
func (h repairHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *repairHeap) Push(x any)        { *h = append(*h, x.(repairItem)) }
func (h *repairHeap) Pop() any          { o := *h; x := o[len(o)-1]; *h = o[:len(o)-1]; return x }

// budget bounds a local search by work, in units of about one option
// examined, so that the same instance and budget give the same result
// whatever else the machine runs, and, as a safety net, by a wall-clock
// deadline.
type budget struct {
	work     int64
	deadline time.Time
	calls    int
	out      bool
}

// workPerSecond converts a time budget into work units: what one core of
// the development machine (AMD EPYC, shared) did per second in improve and
// eject on the EUA instance (2.2e8 units/s).
const workPerSecond = 2.2e8

func newBudget(d time.Duration, deadline time.Time) *budget {
	return &budget{work: int64(d.Seconds() * workPerSecond), deadline: deadline}
}

// spend charges w units and reports whether the budget is used up (the
// clock is read every 64 calls).
func (b *budget) spend(w int64) bool {
	if b.out {
		return true
	}
	b.work -= w
	b.calls++
	if b.work <= 0 || (b.calls&63 == 0 && time.Now().After(b.deadline)) {
		b.out = true
	}
	return b.out
}

// improve runs local search (single moves including bitrate up/down, then
// ejection moves: v takes a blocked option after one user there moves
// elsewhere, changes rung or falls back) until no improvement or the budget
// is spent. With an origin cost every move counts the pulls it opens or
// empties, and closing and gathering pairs (closePairs, gatherPairs) come
// before the ejections.
func (st *state) improve(b *budget, ejections bool) {
	o := st.o
	n := len(st.sel)
	const eps = 1e-9
	for pass := 0; pass < 50; pass++ {
		improved := false
		for v := 0; v < n; v++ {
			if b.spend(int64(o.start[v+1]-o.start[v]) + 1) {
				return
			}
			cur := st.sel[v]
			cv := o.value(v, cur)
			var bj int32
			if st.pcnt == nil {
				best := cv + eps
				bj = -2
				if o.fb[v] > best {
					best, bj = o.fb[v], -1
				}
				for j := o.start[v]; j < o.start[v+1]; j++ {
					if j != cur && o.val[j] > best && st.fitsAfter(cur, j) {
						best, bj = o.val[j], j
					}
				}
			} else {
				bj = st.bestMove(v, cur, cv)
			}
			if bj != -2 {
				st.move(v, bj)
				improved = true
			}
		}
		if !improved && st.pcnt != nil {
			c := st.closePairs(b)
			improved = st.gatherPairs(b) || c
		}
		if !improved && ejections {
			if st.pcnt != nil {
				improved = st.ejectOrigin(b)
			} else {
				improved = st.eject(b)
			}
		}
		if !improved {
			return
		}
	}
}

// eject tries, for each user v, its better-but-blocked options i on a
// server m by moving one user u off m (to u's best alternative elsewhere
// that fits, to v's current server, or to fallback) or to another rung on
// m. u's best alternative off m is computed once per pass (and recomputed
// when it no longer fits), so a pass costs O(options x users per server)
// rather than that times the options per user. Returns whether anything
// improved.
func (st *state) eject(b *budget) bool {
	o := st.o
	const eps = 1e-9
	n := len(st.sel)
	if cap(st.alt) < n {
		st.alt = make([]int32, n)
	}
	alt := st.alt[:n]
	for u := range alt {
		alt[u] = st.bestAlt(u)
	}
	if b.spend(int64(len(o.srv) + n)) {
		return false
	}
	any := false
	var w int64
	for v := 0; v < n; v++ {
		if b.spend(w + 1) {
			return any
		}
		w = 0
		cur := st.sel[v]
		cv := o.value(v, cur)
		curM := int32(-1)
		if cur >= 0 {
			curM = o.srv[cur]
		}
		bestGain := eps
		var bu int = -1
		var bi, bj int32
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if i == cur || o.val[i] <= cv+eps {
				continue
			}
			m := o.srv[i]
			// loads at m with v on i
			bwm, cpum := st.bw[m]+st.rbw[o.use[i]], st.cpu[m]+st.rcpu[o.use[i]]
			if curM == m {
				bwm -= st.rbw[o.use[cur]]
				cpum -= st.rcpu[o.use[cur]]
			}
			gi := o.val[i] - cv
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
					continue // u leaving m altogether does not make room
				}
				// off m: u's best alternative (checked against the current
				// loads; v leaving curM only adds room)
				a := alt[u]
				if a >= 0 && (o.srv[a] == m || !st.fitsAfter(ucur, a)) {
					a = st.bestAlt(u)
					alt[u] = a
				}
				if g := gi + o.value(u, a) - uv; g > bestGain {
					bestGain, bu, bi, bj = g, u, i, a
				}
				// another rung on m
				lo, hi := o.onServer(u, m)
				for j := lo; j < hi; j++ {
					if g := gi + o.val[j] - uv; j != ucur && g > bestGain &&
						ubw+st.rbw[o.use[j]] <= st.bwCap[m] && ucpu+st.rcpu[o.use[j]] <= st.cpuCap[m] {
						bestGain, bu, bi, bj = g, u, i, j
					}
				}
				// into the room v leaves on curM
				if curM >= 0 && curM != m {
					lo, hi := o.onServer(u, curM)
					for j := lo; j < hi; j++ {
						if g := gi + o.val[j] - uv; g > bestGain &&
							st.bw[curM]-st.rbw[o.use[cur]]+st.rbw[o.use[j]] <= st.bwCap[curM] &&
							st.cpu[curM]-st.rcpu[o.use[cur]]+st.rcpu[o.use[j]] <= st.cpuCap[curM] {
							bestGain, bu, bi, bj = g, u, i, j
						}
					}
				}
			}
		}
		if bu >= 0 {
			st.move(bu, -1) // free first so that v's move never overshoots
			st.move(v, bi)
			st.move(bu, bj)
			alt[bu] = st.bestAlt(bu)
			alt[v] = st.bestAlt(v) // v's alternative was off its old server
			any = true
		}
	}
	return any
}

// onServer returns the range of user u's options on server m (a user's
// options are sorted by server: buildOptions follows the sorted M(v)).
func (o *options) onServer(u int, m int32) (lo, hi int32) {
	lo, hi = o.start[u], o.start[u+1]
	a, b := lo, hi
	for a < b { // first option with srv >= m
		h := int32(uint32(a+b) >> 1)
		if o.srv[h] < m {
			a = h + 1
		} else {
			b = h
		}
	}
	lo = a
	for b = lo; b < hi && o.srv[b] == m; b++ {
	}
	return lo, b
}

// bestAlt is user u's best choice off its current server that fits as the
// loads stand (fallback if none is better).
func (st *state) bestAlt(u int) int32 {
	o := st.o
	cur := st.sel[u]
	curM := int32(-1)
	if cur >= 0 {
		curM = o.srv[cur]
	}
	best, bj := o.fb[u], int32(-1)
	for j := o.start[u]; j < o.start[u+1]; j++ {
		if m := o.srv[j]; m != curM && o.val[j] > best &&
			st.bw[m]+st.rbw[o.use[j]] <= st.bwCap[m] && st.cpu[m]+st.rcpu[o.use[j]] <= st.cpuCap[m] {
			best, bj = o.val[j], j
		}
	}
	return bj
}

// greedy assigns users at the prices behind cost (per option entry
// o.cix): users in decreasing order of regret (best reduced value minus the
// best on another server or the fallback) take their best option by
// reduced value that fits. Users whose choice is clear go first; the
// near-indifferent ones, which the relaxed choice piles onto the same
// cheap servers, take what room is left. keep: only the users on the
// fallback are placed, the others keep their choice; else every user is
// placed afresh.
func (st *state) greedy(cost []float64, keep bool) {
	if st.pcnt != nil {
		st.greedyOrigin(cost, keep)
		return
	}
	o := st.o
	n := len(st.sel)
	if !keep {
		for v := 0; v < n; v++ {
			st.move(v, -1)
		}
	}
	// regrets on every core (users are independent), then the placement
	// in order, which is sequential
	var todo []int32 // keep: the users to place
	if keep {
		for v := 0; v < n; v++ {
			if st.sel[v] < 0 {
				todo = append(todo, int32(v))
			}
		}
	}
	nu := n
	if keep {
		nu = len(todo)
	}
	ord := make([]regret, nu)
	newPool(nu, 4096, 0).run(func(_, _, lo, hi int) {
		for x := lo; x < hi; x++ {
			v := x
			if keep {
				v = int(todo[x])
			}
			b1, b2, m1, i1 := o.fb[v], math.Inf(-1), int32(-1), int32(-1)
			for i := o.start[v]; i < o.start[v+1]; i++ {
				rv := o.val[i] - cost[o.cix[i]]
				if rv > b1 {
					if o.srv[i] != m1 {
						b2 = b1
					}
					b1, m1, i1 = rv, o.srv[i], i
				} else if rv > b2 && o.srv[i] != m1 {
					b2 = rv
				}
			}
			if m1 >= 0 && o.fb[v] > b2 {
				b2 = o.fb[v]
			}
			ord[x] = regret{b1 - b2, int32(v), i1}
		}
	})
	sortRegrets(ord)
	for _, x := range ord {
		v := int(x.v)
		if x.best < 0 || st.fits(x.best) {
			st.move(v, x.best) // the best option still fits (or is the fallback)
			continue
		}
		bv, bi := o.fb[v], int32(-1)
		for i := o.start[v]; i < o.start[v+1]; i++ {
			if rv := o.val[i] - cost[o.cix[i]]; rv > bv && st.fits(i) {
				bv, bi = rv, i
			}
		}
		st.move(v, bi)
	}
}

// sortRegrets sorts the greedy's order: decreasing regret, then user.
func sortRegrets(ord []regret) {
	slices.SortFunc(ord, func(a, b regret) int {
		switch {
		case a.r > b.r:
			return -1
		case a.r < b.r:
			return 1
		}
		return int(a.v - b.v)
	})
}

// regret is a user's place in the greedy's order and its best option.
type regret struct {
	r    float64
	v    int32
	best int32
}

// fits reports whether option j fits its server as the loads stand.
func (st *state) fits(j int32) bool {
	m, u := st.o.srv[j], st.o.use[j]
	return st.bw[m]+st.rbw[u] <= st.bwCap[m] && st.cpu[m]+st.rcpu[u] <= st.cpuCap[m]
}
