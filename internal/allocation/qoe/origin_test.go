package qoe

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// withOrigin gives in's users channels 0..nch-1 (about one in eight none)
// and the origin cost c.
func withOrigin(rng *rand.Rand, in *Instance, nch int, c float64) *Instance {
	in.Params.OriginCost = c
	for v := range in.Users {
		in.Users[v].Channel = int32(rng.IntN(nch))
		if rng.IntN(8) == 0 {
			in.Users[v].Channel = -1 - int32(rng.IntN(3))
		}
	}
	return in
}

// checkResult checks a solve's result on in: feasible, its objective the
// one Evaluate computes, its bound at least the objective.
func checkResult(t *testing.T, what string, in *Instance, res *Result) {
	t.Helper()
	obj, ok, viol := Evaluate(in, res.Assign)
	if !ok {
		t.Fatalf("%s: infeasible: %v", what, viol)
	}
	tol := 1e-7 * math.Max(1, math.Abs(obj))
	if math.Abs(obj-res.Objective) > tol {
		t.Fatalf("%s: objective %v, Evaluate %v", what, res.Objective, obj)
	}
	if !math.IsNaN(res.Bound) && res.Bound < obj-tol {
		t.Fatalf("%s: bound %v < objective %v", what, res.Bound, obj)
	}
}

// TestOriginTinyAgainstBruteForce: with the shared origin cost, on tiny
// instances, cold (Lagrangian) and warm (Planner, a second period), the
// result is feasible, its objective is Evaluate's, the enumerated optimum
// lies between objective and bound (so within the stated gap), and the
// solver mostly finds it.
func TestOriginTinyAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	ctx := context.Background()
	exact, n := 0, 0
	for it := 0; it < 250; it++ {
		in := withOrigin(rng, randInstance(rng, 1+rng.IntN(6), 1+rng.IntN(3)), 1+rng.IntN(3), 8*rng.Float64())
		pl := &Planner{Solver: Lagrangian{TimeLimit: time.Second}}
		for period := 0; period < 2; period++ {
			res, err := pl.Solve(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, "tiny", in, res)
			bf := bruteForce(in)
			tol := 1e-7 * math.Max(1, math.Abs(bf))
			if res.Objective > bf+tol {
				t.Fatalf("iter %d period %d: objective %v above the optimum %v", it, period, res.Objective, bf)
			}
			if bf > res.Bound+tol {
				t.Fatalf("iter %d period %d: optimum %v above the bound %v", it, period, bf, res.Bound)
			}
			n++
			if bf-res.Objective <= tol {
				exact++
			}
			// next period: the plan becomes PrevServer/PrevKbps
			next := *in
			next.Users = append([]User(nil), in.Users...)
			next.cand = nil
			for v, c := range res.Assign {
				next.Users[v].PrevServer, next.Users[v].PrevKbps = c.Server, in.Ladder[c.Rung]
			}
			in = &next
		}
	}
	t.Logf("qoe optimal on %d/%d tiny instances with an origin cost", exact, n)
	if exact < n*9/10 {
		t.Errorf("qoe optimal on only %d/%d tiny instances", exact, n)
	}
}

// TestOriginDualBound: at random prices the dual value (per-channel dual
// descent plus the prices' term) is at least the enumerated optimum: every
// dual value the solver may keep as its bound is one.
func TestOriginDualBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for it := 0; it < 300; it++ {
		in := withOrigin(rng, randInstance(rng, 1+rng.IntN(7), 1+rng.IntN(3)), 1+rng.IntN(3), 10*rng.Float64())
		o := buildOptions(in)
		ev := newEvaluator(in, o)
		ns := len(in.Servers)
		pb, pc, ub, uc := make([]float64, ns), make([]float64, ns), make([]float64, ns), make([]float64, ns)
		sel := make([]int32, len(in.Users))
		bf := bruteForce(in)
		for k := 0; k < 5; k++ {
			dual := 0.0
			for m, s := range in.Servers {
				if k > 0 {
					pb[m], pc[m] = rng.ExpFloat64()*1e-3/float64(k), rng.ExpFloat64()/float64(k)
				}
				dual += pb[m]*s.Bandwidth*(1+capTol) + pc[m]*s.Compute*(1+capTol)
			}
			dual += ev.eval(pb, pc, sel, ub, uc)
			if dual < bf-1e-7*math.Max(1, math.Abs(bf)) {
				t.Fatalf("iter %d prices %d: dual %v below the optimum %v", it, k, dual, bf)
			}
		}
		ev.close()
	}
}

// TestOriginZeroCostIgnoresChannels: with OriginCost 0 the channels are
// not read: every solver's result is the same, bit for bit, whatever the
// users' channels (the comparison with the code before the origin cost
// is the same property: its users had no channel).
func TestOriginZeroCostIgnoresChannels(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	ctx := context.Background()
	for it := 0; it < 8; it++ {
		a := randInstance(rng, 1+rng.IntN(200), 1+rng.IntN(12))
		b := fresh(a)
		b.Users = append([]User(nil), a.Users...)
		withOrigin(rng, b, 1+rng.IntN(6), 0)
		sa, sb := append(allSolvers(), &Planner{Solver: Lagrangian{TimeLimit: unhurried}}), append(allSolvers(), &Planner{Solver: Lagrangian{TimeLimit: unhurried}})
		for k, s := range sa {
			ra, err := s.Solve(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := sb[k].Solve(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if ra.Objective != rb.Objective || !(ra.Bound == rb.Bound || math.IsNaN(ra.Bound) && math.IsNaN(rb.Bound)) || ra.Iter != rb.Iter {
				t.Fatalf("iter %d %s: objective %v bound %v iters %d; with channels %v %v %d", it, s.Name(), ra.Objective, ra.Bound, ra.Iter, rb.Objective, rb.Bound, rb.Iter)
			}
			for v := range ra.Assign {
				if ra.Assign[v] != rb.Assign[v] {
					t.Fatalf("iter %d %s: user %d %+v, with channels %+v", it, s.Name(), v, ra.Assign[v], rb.Assign[v])
				}
			}
		}
	}
}

// TestOriginGroupsViewers: with a large origin cost the viewers of a
// channel share servers: fewer pulls than without the cost, each solve
// feasible with a valid bound.
func TestOriginGroupsViewers(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 38))
	ctx := context.Background()
	for it := 0; it < 2; it++ {
		in := withOrigin(rng, randInstance(rng, 200+rng.IntN(200), 8+rng.IntN(8)), 4+rng.IntN(6), 0)
		free, err := Lagrangian{TimeLimit: unhurried}.Solve(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		costly := fresh(in)
		costly.Params.OriginCost = 5
		res, err := Lagrangian{TimeLimit: unhurried}.Solve(ctx, costly)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "costly", costly, res)
		p0, _ := OriginPulls(in, free.Assign)
		p1, _ := OriginPulls(costly, res.Assign)
		blind, _, _ := Evaluate(costly, free.Assign) // the cost-blind plan, at the cost
		t.Logf("iter %d: %d users: pulls %d without the cost, %d with; objective at the cost %.2f (cost-blind plan %.2f), gap %.2f%%",
			it, len(in.Users), p0, p1, res.Objective, blind, 100*res.Gap())
		if p1 >= p0 {
			t.Errorf("iter %d: %d pulls with the cost, %d without", it, p1, p0)
		}
		if res.Objective < blind {
			t.Errorf("iter %d: objective %v below the cost-blind plan's %v", it, res.Objective, blind)
		}
	}
}

// TestOriginPullsCount: OriginPulls against a direct count on random
// assignments (invalid choices, fallback and users without a channel
// pull nothing), and Evaluate's objective is the values less the pulls.
func TestOriginPullsCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	for it := 0; it < 500; it++ {
		in := withOrigin(rng, randInstance(rng, 1+rng.IntN(40), 1+rng.IntN(6)), 1+rng.IntN(5), 3*rng.Float64())
		assign := make([]Choice, len(in.Users))
		for v := range assign {
			assign[v] = Choice{Server: rng.IntN(len(in.Servers)+2) - 1, Rung: rng.IntN(len(in.Ladder))}
			if assign[v].Server == len(in.Servers) && rng.IntN(2) == 0 {
				assign[v].Server = -2 // invalid
			}
		}
		want := 0
		for m := range in.Servers {
			for h := int32(0); h < 5; h++ {
				for v, c := range assign {
					if c.Server == m && in.Users[v].Channel == h {
						want++
						break
					}
				}
			}
		}
		pulls, kbps := OriginPulls(in, assign)
		if pulls != want || kbps != float64(want)*in.Ladder[len(in.Ladder)-1] {
			t.Fatalf("iter %d: %d pulls, %v kbps; counted %d", it, pulls, kbps, want)
		}
		obj, _, _ := Evaluate(in, assign)
		sum := 0.0
		for v, c := range assign {
			if c.Server == Fallback || (c.Server >= 0 && c.Server < len(in.Servers)) {
				sum += in.Value(v, c.Server, c.Rung)
			}
		}
		if want := sum - in.Params.OriginCost*float64(pulls); math.Abs(obj-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("iter %d: Evaluate %v, values less pulls %v", it, obj, want)
		}
	}
}

// FuzzOriginPulls: OriginPulls on any assignment and channels is the
// number of distinct (server, channel) among valid choices of users with a
// channel, and never panics.
//
//	go test ./internal/allocation/qoe -run '^$' -fuzz FuzzOriginPulls -fuzztime 30s
func FuzzOriginPulls(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, uint8(3))
	f.Add([]byte{255, 255, 0, 0}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, ns uint8) {
		in := &Instance{Ladder: DefaultLadder(), Servers: make([]Server, int(ns%8))}
		var assign []Choice
		for i := 0; i+1 < len(data); i += 2 {
			in.Users = append(in.Users, User{Channel: int32(int8(data[i])) % 4})
			assign = append(assign, Choice{Server: int(int8(data[i+1])) % 10})
		}
		seen := map[[2]int]bool{}
		for v, c := range assign {
			if in.Users[v].Channel >= 0 && c.Server >= 0 && c.Server < len(in.Servers) {
				seen[[2]int{c.Server, int(in.Users[v].Channel)}] = true
			}
		}
		if p, _ := OriginPulls(in, assign); p != len(seen) {
			t.Fatalf("%d pulls, %d distinct pairs", p, len(seen))
		}
	})
}

// TestOriginLocalSearch: repair and the full local search keep a plan
// feasible, never lose objective (net of the pulls), and the state's pull
// counts match a recount. Its search driver is a copy of
// TestLocalSearchKeepsFeasible's (alloc_test.go) on purpose: that test's
// instances have no origin cost, so its searches never open or empty a
// pair; this one gives them channels and a cost (withOrigin) and recounts
// the pairs, where that one recounts the loads.
//
// The searches it drives (ejectOrigin, bestAltOrigin and the other moves of
// origin_search.go) are copies of eject, bestAlt and bestMove that count
// pulls. improve takes them only when the instance has an origin cost, so a
// plan without one runs the search it ran before the cost existed, bit for
// bit (TestOriginZeroCostIgnoresChannels), with no pull bookkeeping in its
// inner loops; this test is what keeps the copies' bookkeeping honest.
func TestOriginLocalSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for it := 0; it < 40; it++ {
		in := withOrigin(rng, randInstance(rng, 50+rng.IntN(200), 2+rng.IntN(10)), 1+rng.IntN(8), 4*rng.Float64())
		o := buildOptions(in)
		sel := make([]int32, len(in.Users))
		for v := range sel {
			sel[v] = -1
			if k := o.start[v+1] - o.start[v]; k > 0 && rng.IntN(8) > 0 {
				sel[v] = o.start[v] + rng.Int32N(k)
			}
		}
		st := newState(in, o, sel)
		st.repair()
		before := st.objective()
		st.improve(newBudget(time.Second, time.Now().Add(time.Second)), true)
		after := st.objective()
		if after < before-1e-9 {
			t.Fatalf("iter %d: local search lost objective: %v -> %v", it, before, after)
		}
		obj, ok, viol := Evaluate(in, o.toChoices(in, st.sel))
		if !ok {
			t.Fatalf("iter %d: infeasible after local search: %v", it, viol)
		}
		if math.Abs(obj-after) > 1e-7*math.Max(1, math.Abs(obj)) {
			t.Fatalf("iter %d: objective %v, Evaluate %v", it, after, obj)
		}
		re := newState(in, o, st.sel)
		if re.open != st.open {
			t.Fatalf("iter %d: %d pairs pulled, recount %d", it, st.open, re.open)
		}
		for p := range re.pcnt {
			if re.pcnt[p] != st.pcnt[p] {
				t.Fatalf("iter %d: pair %d has %d viewers, recount %d", it, p, st.pcnt[p], re.pcnt[p])
			}
		}
	}
}

// TestOriginLPWithCBC: the LP export with an origin cost, solved by CBC,
// has the enumerated optimum; CBC's assignment evaluates to it.
func TestOriginLPWithCBC(t *testing.T) {
	if _, err := exec.LookPath("cbc"); err != nil {
		t.Skip("cbc not installed (apt-get install coinor-cbc)")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for it := 0; it < 4; it++ {
		in := withOrigin(rng, randInstance(rng, 2+rng.IntN(5), 1+rng.IntN(3)), 1+rng.IntN(2), 1+4*rng.Float64())
		assign, _ := runCBC(t, in)
		obj, ok, viol := Evaluate(in, assign)
		if !ok {
			t.Fatalf("iter %d: CBC's assignment infeasible: %v", it, viol)
		}
		if bf := bruteForce(in); math.Abs(bf-obj) > 1e-6*math.Max(1, math.Abs(bf)) {
			var buf bytes.Buffer
			WriteLP(&buf, in)
			t.Fatalf("iter %d: CBC %v, brute force %v\n%s", it, obj, bf, buf.String())
		}
	}
}

// TestOriginEvalAllocatesNothing: the per-channel subproblems allocate
// nothing per iteration either.
func TestOriginEvalAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	in := withOrigin(rng, scaleInstance(rng, 3000, 60), 30, 2) // two chunks of channels
	o := buildOptions(in)
	ev := newEvaluator(in, o)
	defer ev.close()
	ns := len(in.Servers)
	pb, pc, ub, uc := make([]float64, ns), make([]float64, ns), make([]float64, ns), make([]float64, ns)
	for m := range pb {
		pb[m], pc[m] = 1e-4*float64(m%7), 1e-2*float64(m%5)
	}
	sel := make([]int32, len(in.Users))
	if a := testing.AllocsPerRun(10, func() { ev.eval(pb, pc, sel, ub, uc) }); a > 0 {
		t.Errorf("eval allocates %v times per call", a)
	}
}

// TestOriginValidate: a negative or non-finite origin cost is refused.
func TestOriginValidate(t *testing.T) {
	for _, c := range []float64{-1, math.NaN(), math.Inf(1)} {
		in := randInstance(rand.New(rand.NewPCG(47, 48)), 3, 2)
		in.Params.OriginCost = c
		if err := in.Validate(); err == nil {
			t.Errorf("origin cost %v accepted", c)
		}
	}
}

// zipfChannel draws one of nch channels, log-uniformly (a few popular
// channels, many small ones).
func zipfChannel(rng *rand.Rand, nch int) int32 {
	return int32(math.Pow(float64(nch), rng.Float64())) - 1
}

// BenchmarkOrigin: BenchmarkScale's cold solves and warm re-solves with the
// shared origin cost on (2 per pull, one channel per 20 users, log-uniform
// popularity), to a certified 1% gap or the time limit (scaleSolver).
// Reports the gap, the iterations and the pulls.
func BenchmarkOrigin(b *testing.B) {
	for _, sz := range []struct{ nu, ns int }{{1000, 20}, {10000, 200}} {
		for _, warm := range []bool{false, true} {
			name := fmt.Sprintf("users=%d/cold", sz.nu)
			if warm {
				name = fmt.Sprintf("users=%d/warm", sz.nu)
			}
			b.Run(name, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(21, 22))
				nch := sz.nu / 20
				in := scaleInstance(rng, sz.nu, sz.ns)
				in.Params.OriginCost = 2
				for v := range in.Users {
					in.Users[v].Channel = zipfChannel(rng, nch)
				}
				pl := Planner{Solver: scaleSolver(false)}
				if warm {
					res, err := pl.Solve(context.Background(), in)
					if err != nil {
						b.Fatal(err)
					}
					next := nextPeriod(rng, in, res)
					for v := range next.Users {
						if next.Users[v].RoomMean != in.Users[v].RoomMean { // a new user
							next.Users[v].Channel = zipfChannel(rng, nch)
						}
					}
					in = next
					pl.Solver = scaleSolver(true)
				}
				b.ReportAllocs()
				b.ResetTimer()
				var gap, iters, pulls float64
				for i := 0; i < b.N; i++ {
					p := pl
					in := fresh(in)
					res, err := p.Solve(context.Background(), in)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := OriginPulls(in, res.Assign)
					gap += res.Gap()
					iters += float64(res.Iter)
					pulls += float64(n)
				}
				b.ReportMetric(100*gap/float64(b.N), "gap%")
				b.ReportMetric(iters/float64(b.N), "iters")
				b.ReportMetric(pulls/float64(b.N), "pulls")
			})
		}
	}
}

// TestOriginDeterministicAcrossCores: with the origin cost, too, the
// result does not depend on GOMAXPROCS (channels in fixed chunks, the
// dual summed per chunk in chunk order).
func TestOriginDeterministicAcrossCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	in := withOrigin(rng, scaleInstance(rng, 2500, 50), 25, 2) // two chunks
	l := Lagrangian{MaxIter: 6, LocalSearch: 5 * time.Millisecond, TimeLimit: time.Minute}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var first *Result
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		res, err := l.Solve(context.Background(), fresh(in))
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
			continue
		}
		if res.Objective != first.Objective || res.Bound != first.Bound || res.Iter != first.Iter {
			t.Fatalf("GOMAXPROCS %d: objective %v bound %v iters %d, GOMAXPROCS 1: %v %v %d", procs, res.Objective, res.Bound, res.Iter, first.Objective, first.Bound, first.Iter)
		}
		for v := range res.Assign {
			if res.Assign[v] != first.Assign[v] {
				t.Fatalf("GOMAXPROCS %d: user %d %+v, GOMAXPROCS 1 %+v", procs, v, res.Assign[v], first.Assign[v])
			}
		}
	}
}
