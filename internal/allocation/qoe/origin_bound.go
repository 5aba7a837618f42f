package qoe

import "math"

// The bound with the origin cost (the model F: origin.go). Keep, besides
// each user's one choice, the constraints that the viewers of one channel
// on a server fit the server (implied by the capacities), and dualise the
// capacities with prices as without the cost. For prices >= 0, the
// relaxation's value is >= max F over feasible plans (a feasible plan is a
// relaxed one, and its priced slack is >= 0), and it splits per channel (a
// user without a channel stays alone): it is prices*capacities + sum_h S_h
// with
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
	// per (server, use class): the pull charged per kbps of D_m, per unit of C_m
	chargeB, chargeC []float64
}

func newOriginScratch(in *Instance, o *options, g *origin) *originScratch {
	n, ns, nu := len(in.Users), len(g.slotOpt)-1, o.nu
	x := &originScratch{val: make([]float64, ns), pair: make([]int32, ns), best: make([]int32, ns),
		t: make([]float64, n), ptr: make([]int32, n), act: make([]int32, n), slack: make([]float64, g.npairs()),
		chargeB: make([]float64, len(in.Servers)*nu), chargeC: make([]float64, len(in.Servers)*nu)}
	for m, s := range in.Servers {
		for c := range nu {
			// per unit of the capacity as the solver's states allow it;
			// an option that uses none of a capacity is charged nothing
			// (one using more than the capacity is no option)
			if u := o.ubw[c]; u > 0 {
				x.chargeB[m*nu+c] = g.cost * u / (s.Bandwidth * (1 + capTol))
			}
			if u := o.ucpu[c]; u > 0 {
				x.chargeC[m*nu+c] = g.cost * u / (s.Compute * (1 + capTol))
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
