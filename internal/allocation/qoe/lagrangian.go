package qoe

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Lagrangian is the main solver ("qoe"): Lagrangian relaxation of both
// capacity constraints with Polyak-step subgradient price updates, repair to
// feasibility and local search. Its Bound is the best Lagrangian dual value,
// a valid upper bound on the optimum.
type Lagrangian struct {
	MaxIter     int           // subgradient iterations; default 200
	PrimalEvery int           // repair+quick search every N iterations once the bound settles; default 10
	LocalSearch time.Duration // final local-search budget, as work at a fixed rate (each primal step's quick search gets a quarter, and at least two passes of single moves); default 40ms
	TimeLimit   time.Duration // overall limit for the dual phase; default 2s
	Tol         float64       // stop when relative gap <= Tol; default 1e-6

	trace func(iter int, dual, primal float64) // tests: every iteration's dual value and best primal
}

// Warm is what a solve starts from instead of nothing: the previous
// period's prices (its Result.Prices) and plan. Planner keeps both from
// one period to the next.
type Warm struct {
	// Prices per server of the instance being solved, as Result.Prices
	// (per kbps and per compute unit). Ignored unless there is one per
	// server: the caller keeps server positions across periods (as
	// Instance.Servers with Excluded does).
	Prices []Price
	// Assign per user of the instance being solved: the choice that user
	// (the caller knows users by identity) had last period, Server =
	// Fallback for none. Nil: each user's PrevServer and PrevKbps (the
	// highest rung not above it) say it. A choice that is no longer an
	// option (the user moved out of the server's coverage, the rung no
	// longer fits) counts as none.
	Assign []Choice
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
	// warmScale is the first step scale from warm prices: they are near
	// the new optimum, and a full Polyak step towards a target as far as
	// the warm plan's objective would throw them away.
	warmScale = 0.25
)

// Solve implements Solver.
func (l Lagrangian) Solve(ctx context.Context, in *Instance) (*Result, error) {
	return l.SolveWarm(ctx, in, nil)
}

// SolveWarm is Solve starting from w (nil: from nothing, as Solve): the
// subgradient starts at w's prices and the first plan is w's assignment
// made feasible (repaired, users without an option placed by their reduced
// value, then the quick local search), so after a small change of users
// (churn, movement) the bound and the plan are near-final after a few
// iterations. The bound is as valid as a cold solve's: every dual value
// is one.
func (l Lagrangian) SolveWarm(ctx context.Context, in *Instance, w *Warm) (*Result, error) {
	res, _, err := l.solveWarm(ctx, in, w, nil)
	return res, err
}

// solveWarm is SolveWarm building the option table into old's arrays
// (Planner); it returns the table for the next solve to reuse.
func (l Lagrangian) solveWarm(ctx context.Context, in *Instance, w *Warm, old *options) (*Result, *options, error) {
	if err := in.Validate(); err != nil {
		return nil, nil, err
	}
	if w != nil && w.Assign != nil && len(w.Assign) != len(in.Users) {
		return nil, nil, fmt.Errorf("qoe: warm start has %d choices for %d users", len(w.Assign), len(in.Users))
	}
	l = l.defaults()
	r := &run{l: l, ctx: ctx, in: in, start: time.Now()}
	r.deadline = r.start.Add(l.TimeLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(r.deadline) {
		r.deadline = d
	}
	r.o = buildOptionsInto(in, old)
	res, err := r.solve(w)
	return res, r.o, err
}

// run is one solve's working state.
type run struct {
	l        Lagrangian
	ctx      context.Context
	in       *Instance
	o        *options
	ev       *evaluator
	start    time.Time
	deadline time.Time

	bwCap, cpuCap []float64 // as the state's (with capTol)
	quick         int64     // work of a primal step's local search
	// per primal slot (primal) its best assignment and objective
	best    [2][]int32
	bestObj [2]float64
	has     [2]bool // best[h] is set (an empty instance's plan is nil)
	wg      sync.WaitGroup
	large   bool // more than largeOptions options
}

// lsDeadline is a local search's wall-clock safety net: the end of the dual
// phase, or d from now if that is later or the context is done. Its work
// budget normally ends it first, which keeps results independent of the
// machine's load.
func (r *run) lsDeadline(d time.Duration) time.Time {
	t := time.Now().Add(d)
	if r.ctx.Err() == nil && r.deadline.After(t) {
		return r.deadline
	}
	return t
}

func (r *run) bestObjective() float64 { return math.Max(r.bestObj[0], r.bestObj[1]) }

// keep records st as heuristic h's result if it is its best, and returns
// st's objective.
func (r *run) keep(h int, st *state) float64 {
	obj := st.objective()
	if obj > r.bestObj[h] || !r.has[h] {
		r.bestObj[h], r.best[h], r.has[h] = obj, st.sel, true
	}
	return obj
}

// primal runs up to two heuristics on the relaxed choice sel, one per
// core, each followed by a quick local search (at least two passes of
// single moves):
//
//   - slot 0: the repair of the relaxed choice; on a large instance (more
//     than largeOptions options) at iteration 0 only, and from then on the
//     regret greedy at the best bound's prices (bestCost; nil when they are
//     the current ones, and then slot 0 does not run). At zero prices
//     the repair is the better one (at 100,000 users 882 k against the
//     greedy's 669 k: the greedy fills servers with whoever values the top
//     rung most). At later prices it ends 4-10% below the greedy there
//     (836-889 k against 924-937 k) and costs more (0.2 s against 0.11 s):
//     the relaxed choice piles near-indifferent users onto the same
//     servers, and unpiling them costs more than placing them afresh. On
//     small instances the repaired plans end highest after the final
//     polish (the EUA instance's results are those of the repair alone).
//   - slot 1: the regret greedy at the current prices.
//
// With warm (the warm plan, at iteration 0), slot 0 is the warm plan
// repaired, with users without an option placed by the greedy, and slot 1
// does not run: the warm plan is the better start.
func (r *run) primal(sel, warm []int32, bestCost []float64, iter int) {
	in, o := r.in, r.o
	if warm == nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			st := newState(in, o, sel)
			st.greedy(r.ev.cost, false)
			st.improve(&budget{work: r.quick, deadline: r.lsDeadline(r.l.LocalSearch / 4)}, false)
			r.keep(1, st)
		}()
	}
	var st *state
	switch {
	case r.large && iter > 0 && bestCost == nil:
		r.wg.Wait() // the greedy at the current prices is the one at the best bound's
		return
	case warm != nil:
		st = newState(in, o, warm)
		st.repair()
		st.greedy(r.ev.cost, true)
	case !r.large || iter == 0:
		st = newState(in, o, sel)
		st.repair()
	default:
		st = newState(in, o, sel)
		st.greedy(bestCost, false)
	}
	st.improve(&budget{work: r.quick, deadline: r.lsDeadline(r.l.LocalSearch / 4)}, false)
	r.keep(0, st)
	r.wg.Wait()
}

// target is the Polyak step's estimate of the optimum: the best plan so
// far; on a small instance the repair's alone (slot 0), the rule the step
// sizes were tuned with on the EUA instance.
func (r *run) target() float64 {
	if r.large {
		return r.bestObjective()
	}
	return r.bestObj[0]
}

func (r *run) solve(w *Warm) (*Result, error) {
	l, in, o := r.l, r.in, r.o
	n, ns := len(in.Users), len(in.Servers)
	r.ev = newEvaluator(in, o)
	defer r.ev.close()
	r.bestObj = [2]float64{math.Inf(-1), math.Inf(-1)}
	r.large = len(o.srv) > largeOptions
	r.quick = max(int64((l.LocalSearch/4).Seconds()*workPerSecond), 2*int64(len(o.srv)+n))
	r.bwCap, r.cpuCap = make([]float64, ns), make([]float64, ns)
	for m, s := range in.Servers {
		r.bwCap[m] = s.Bandwidth * (1 + capTol)
		r.cpuCap[m] = s.Compute * (1 + capTol)
	}
	bwCap, cpuCap := r.bwCap, r.cpuCap
	// scaled prices: value per whole capacity of a server
	lb := make([]float64, ns)
	lc := make([]float64, ns)
	pb := make([]float64, ns)
	pc := make([]float64, ns)
	useB := make([]float64, ns)
	useC := make([]float64, ns)
	stepScale := 1.0
	var warmSel []int32
	if w != nil {
		if len(w.Prices) == ns {
			for m, p := range w.Prices {
				lb[m] = math.Max(0, p.Bandwidth) * math.Max(bwCap[m], 1e-12)
				lc[m] = math.Max(0, p.Compute) * math.Max(cpuCap[m], 1e-12)
			}
			stepScale = warmScale
		}
		warmSel = o.warmChoice(in, w.Assign)
	}
	// sel is the relaxed choice of the current iteration. It starts as all
	// fallback (-1), never as the zero value: option 0 is the first option of
	// the first user with one, and repairing a vector of zeros would leave
	// users on a server that does not cover them.
	sel := make([]int32, n)
	for v := range sel {
		sel[v] = -1
	}

	bound := math.Inf(1)
	bestPB := make([]float64, ns)
	bestPC := make([]float64, ns)
	bestCost := make([]float64, len(r.ev.cost))
	dirB := make([]float64, ns)
	dirC := make([]float64, ns)
	noImprove := 0
	lastBound, lastPrimal := math.Inf(1), 0
	iter := 0

	for iter = 0; iter < l.MaxIter; iter++ {
		// The first iteration always runs, whatever the budget: it yields
		// the relaxed choice that primal() repairs and the first bound (at
		// zero prices). Building the option table may use up TimeLimit by
		// itself on a large instance.
		if iter > 0 && (r.ctx.Err() != nil || time.Now().After(r.deadline)) {
			break
		}
		for m := 0; m < ns; m++ {
			pb[m] = lb[m] / math.Max(bwCap[m], 1e-12)
			pc[m] = lc[m] / math.Max(cpuCap[m], 1e-12)
		}
		dual := r.ev.eval(pb, pc, sel, useB, useC)
		for m := 0; m < ns; m++ {
			dual += pb[m]*bwCap[m] + pc[m]*cpuCap[m]
		}
		if l.trace != nil {
			l.trace(iter, dual, r.bestObjective())
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
			var warm []int32
			if iter == 0 {
				warm = warmSel
			}
			// bestCost nil: the best bound's prices are the current ones
			var bc []float64
			if r.large && noImprove != 0 {
				costAt(o, bestPB, bestPC, bestCost)
				bc = bestCost
			}
			r.primal(sel, warm, bc, iter)
			lastPrimal = iter
		}
		bestObj := r.bestObjective()
		if bestObj > math.Inf(-1) && bound-bestObj <= l.Tol*math.Max(1, math.Abs(bound)) {
			iter++
			break
		}
		if gnorm == 0 {
			iter++
			// relaxed choice feasible and complementary: optimal (with
			// an origin cost, the prices are at least where they stay)
			break
		}
		if norm == 0 {
			continue // the deflected direction only pushes prices below 0
		}
		target := r.target()
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
	if !r.has[0] {
		r.primal(sel, warmSel, nil, 0)
	}
	// Final polish, each on its own core: on a small instance of slot 0's
	// best (the repaired plan, which the tuning was done with), and of slot
	// 1's as well if that is ahead (the polish finishes there, and the
	// repaired plan, behind before it, often ends ahead); on a large one
	// of the best alone (the polish's budget is about one pass, which
	// reorders nothing). The better wins, ties to slot 0.
	var sts [2]*state
	for h := range sts {
		if !r.has[h] {
			continue
		}
		if other := r.bestObj[1-h]; (r.large && (r.bestObj[h] < other || (h == 1 && r.bestObj[h] == other))) ||
			(!r.large && h == 1 && r.bestObj[1] <= other) {
			continue // behind: not worth a core
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			st := newState(in, o, r.best[h])
			st.improve(newBudget(l.LocalSearch, r.lsDeadline(l.LocalSearch)), true)
			sts[h] = st
		}()
	}
	r.wg.Wait()
	st := sts[0]
	if st == nil || (sts[1] != nil && sts[1].objective() > st.objective()) {
		st = sts[1]
	}
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

// warmChoice maps a previous plan to option indices (-1: fallback, or no
// longer an option). assign nil: from each user's PrevServer and PrevKbps.
func (o *options) warmChoice(in *Instance, assign []Choice) []int32 {
	sel := make([]int32, len(in.Users))
	for v := range sel {
		m, k := -1, -1
		if assign != nil {
			m, k = assign[v].Server, assign[v].Rung
		} else if u := &in.Users[v]; u.PrevServer >= 0 {
			m = u.PrevServer
			for i, r := range in.Ladder {
				if r <= u.PrevKbps {
					k = i
				}
			}
		}
		sel[v] = -1
		if m < 0 || k < 0 {
			continue
		}
		lo, hi := o.onServer(v, int32(m))
		for i := lo; i < hi; i++ {
			if int(o.rung[i]) == k {
				sel[v] = i
			}
		}
	}
	return sel
}
