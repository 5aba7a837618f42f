package qoe

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Lagrangian is the main solver ("qoe"): Lagrangian relaxation of both
// capacity constraints with Polyak-step subgradient price updates, repair to
// feasibility and local search. Its Bound is the best Lagrangian dual value,
// a valid upper bound on the optimum.
type Lagrangian struct {
	MaxIter     int           // subgradient iterations; default 200
	PrimalEvery int           // repair+quick search every N iterations once the bound settles; default 10
	LocalSearch time.Duration // final local-search budget, as work at a fixed rate (each repair's quick search gets a quarter); default 40ms
	TimeLimit   time.Duration // overall limit for the dual phase; default 2s
	Tol         float64       // stop when relative gap <= Tol; default 1e-6
}

// Name implements Solver.
func (Lagrangian) Name() string { return "qoe" }

func (l Lagrangian) defaults() Lagrangian {
	if l.MaxIter <= 0 {
		l.MaxIter = 200
	}
	if l.PrimalEvery <= 0 {
		l.PrimalEvery = 10
	}
	if l.LocalSearch <= 0 {
		l.LocalSearch = 40 * time.Millisecond
	}
	if l.TimeLimit <= 0 {
		l.TimeLimit = 2 * time.Second
	}
	if l.Tol <= 0 {
		l.Tol = 1e-6
	}
	return l
}

// Step rule of the subgradient method: Polyak steps scaled by stepScale
// (1 at the start), halved after halveAfter iterations without a better
// bound, along the deflected direction (deflect). Measured on the EUA
// instance (816 users, 125 servers; docs/benchmarks.md): the old rule
// (scale 2, halving after 15, no deflection) left the bound 0.8% above the
// LP optimum after 200 iterations and the repaired primal 3-5% below it;
// this one reaches the LP bound to 0.01% in ~150 iterations, and the
// repairs at near-optimal prices are within 0.3% of it.
const (
	halveAfter  = 4
	deflect     = 0.3
	repairBelow = 0.005
)

// Solve implements Solver.
func (l Lagrangian) Solve(ctx context.Context, in *Instance) (*Result, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	l = l.defaults()
	start := time.Now()
	deadline := start.Add(l.TimeLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// lsDeadline is a local search's wall-clock safety net: the end of the
	// dual phase, or d from now if that is later or the context is done.
	// Its work budget (d at workPerSecond) normally ends it first, which
	// keeps results independent of the machine's load.
	lsDeadline := func(d time.Duration) time.Time {
		t := time.Now().Add(d)
		if ctx.Err() == nil && deadline.After(t) {
			return deadline
		}
		return t
	}
	o := buildOptions(in)
	n, ns := len(in.Users), len(in.Servers)
	none := make([]int32, n)
	for i := range none {
		none[i] = -1
	}
	st0 := newState(in, o, none)
	bwCap, cpuCap := st0.bwCap, st0.cpuCap
	// scaled prices: value per whole capacity of a server
	lb := make([]float64, ns)
	lc := make([]float64, ns)
	pb := make([]float64, ns)
	pc := make([]float64, ns)
	useB := make([]float64, ns)
	useC := make([]float64, ns)
	// sel is the relaxed choice of the current iteration. It starts as all
	// fallback (-1), never as the zero value: option 0 is the first option of
	// the first user with one, and repairing a vector of zeros would leave
	// users on a server that does not cover them.
	sel := make([]int32, n)
	for v := range sel {
		sel[v] = -1
	}

	bestObj := math.Inf(-1)
	var best []int32
	bound := math.Inf(1)
	bestPB := make([]float64, ns)
	bestPC := make([]float64, ns)
	stepScale := 1.0
	dirB := make([]float64, ns)
	dirC := make([]float64, ns)
	noImprove := 0
	lastBound, lastPrimal := math.Inf(1), 0
	iter := 0

	primal := func() {
		st := newState(in, o, sel)
		st.repair()
		st.improve(newBudget(l.LocalSearch/4, lsDeadline(l.LocalSearch/4)), false)
		if obj := st.objective(); obj > bestObj {
			bestObj, best = obj, st.sel
		}
	}

	for iter = 0; iter < l.MaxIter; iter++ {
		// The first iteration always runs, whatever the budget: it yields
		// the relaxed choice that primal() repairs and the first bound (at
		// zero prices). Building the option table may use up TimeLimit by
		// itself on a large instance.
		if iter > 0 && (ctx.Err() != nil || time.Now().After(deadline)) {
			break
		}
		for m := 0; m < ns; m++ {
			pb[m] = lb[m] / math.Max(bwCap[m], 1e-12)
			pc[m] = lc[m] / math.Max(cpuCap[m], 1e-12)
			useB[m], useC[m] = 0, 0
		}
		dual := 0.0
		for v := 0; v < n; v++ {
			bv, bi := o.fb[v], int32(-1)
			for i := o.start[v]; i < o.start[v+1]; i++ {
				m, k := o.srv[i], o.rung[i]
				rv := o.val[i] - pb[m]*st0.rbw[k] - pc[m]*st0.rcpu[k]
				if rv > bv {
					bv, bi = rv, i
				}
			}
			sel[v] = bi
			dual += bv
			if bi >= 0 {
				m, k := o.srv[bi], o.rung[bi]
				useB[m] += st0.rbw[k]
				useC[m] += st0.rcpu[k]
			}
		}
		for m := 0; m < ns; m++ {
			dual += pb[m]*bwCap[m] + pc[m]*cpuCap[m]
		}
		if math.IsInf(bound, 1) || dual < bound-1e-12*math.Max(1, math.Abs(bound)) {
			bound = dual
			copy(bestPB, pb)
			copy(bestPC, pc)
			noImprove = 0
		} else {
			noImprove++
			if noImprove >= halveAfter {
				stepScale /= 2
				noImprove = 0
			}
		}
		// subgradient g (scaled: fraction of capacity); the step follows
		// the deflected direction d = g + deflect*d_prev (Camerini, Fratta
		// and Maffioli), which damps the zig-zag between neighbouring
		// servers' prices, projected on prices >= 0.
		gnorm, norm := 0.0, 0.0
		feasible := true
		for m := 0; m < ns; m++ {
			gb := useB[m]/math.Max(bwCap[m], 1e-12) - 1
			gc := useC[m]/math.Max(cpuCap[m], 1e-12) - 1
			if gb > 0 || gc > 0 {
				feasible = false
			}
			if gb > 0 || lb[m] > 0 {
				gnorm += gb * gb
			}
			if gc > 0 || lc[m] > 0 {
				gnorm += gc * gc
			}
			db, dc := gb+deflect*dirB[m], gc+deflect*dirC[m]
			dirB[m], dirC[m] = db, dc
			if db > 0 || lb[m] > 0 {
				norm += db * db
			}
			if dc > 0 || lc[m] > 0 {
				norm += dc * dc
			}
		}
		// Repair the relaxed choice at iteration 0 (every result needs a
		// feasible assignment), whenever it is feasible, and every
		// PrimalEvery iterations once the bound has moved by less than
		// repairBelow over the last PrimalEvery (earlier, the prices are
		// too far from the optimum for the repair to compete), or at
		// least every 5*PrimalEvery.
		repair := feasible
		if iter%l.PrimalEvery == 0 {
			if iter == 0 || lastBound-bound <= repairBelow*math.Abs(bound) || iter-lastPrimal >= 5*l.PrimalEvery {
				repair = true
			}
			lastBound = bound
		}
		if repair {
			primal()
			lastPrimal = iter
		}
		if bestObj > math.Inf(-1) && bound-bestObj <= l.Tol*math.Max(1, math.Abs(bound)) {
			iter++
			break
		}
		if gnorm == 0 {
			iter++
			break // relaxed choice feasible and complementary: optimal
		}
		if norm == 0 {
			continue // the deflected direction only pushes prices below 0
		}
		target := bestObj
		if math.IsInf(target, -1) {
			target = dual - 0.05*math.Max(1, math.Abs(dual))
		}
		t := stepScale * (dual - target) / norm
		if t <= 0 {
			t = stepScale * 0.01 * math.Max(1, math.Abs(dual)) / norm
		}
		for m := 0; m < ns; m++ {
			gb, gc := dirB[m], dirC[m]
			lb[m] = math.Max(0, lb[m]+t*gb)
			lc[m] = math.Max(0, lc[m]+t*gc)
		}
		if stepScale < 1e-6 {
			iter++
			break
		}
	}
	// iteration 0 always runs primal(), so best is set; keep the guard
	if best == nil {
		primal()
	}
	// final polish of the best
	st := newState(in, o, best)
	st.improve(newBudget(l.LocalSearch, lsDeadline(l.LocalSearch)), true)
	obj := st.objective()
	if math.IsInf(bound, 1) {
		bound = math.NaN()
	}
	prices := make([]Price, ns)
	for m := range prices {
		prices[m] = Price{Bandwidth: bestPB[m], Compute: bestPC[m]}
	}
	if !finite(obj) || !finite(bound) {
		// Finite inputs whose products overflow: say so rather than hand
		// a NaN plan (and NaN prices) to every request of the period.
		return nil, fmt.Errorf("qoe: objective %v, bound %v are not finite: a capacity, bitrate or parameter is too large", obj, bound)
	}
	return &Result{Assign: o.toChoices(in, st.sel), Objective: obj, Bound: bound, Prices: prices, Iter: iter}, nil
}
