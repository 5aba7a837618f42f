package qoe

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// TestPlannerWarm: periods with churn and movement solved by a Planner
// (warm) and cold: every warm result is feasible with a valid bound, its
// reused candidate lists are exactly the covering servers, and its gap is
// about the cold solve's.
func TestPlannerWarm(t *testing.T) {
	for _, sz := range []struct{ nu, ns int }{{300, 6}, {2000, 40}} {
		if testing.Short() && sz.nu > 300 {
			t.Skip("the race run (-short) races the small instance; make test runs the large one plain")
		}
		rng := rand.New(rand.NewPCG(51, uint64(sz.nu)))
		in := scaleInstance(rng, sz.nu, sz.ns)
		pl := &Planner{Solver: Lagrangian{TimeLimit: unhurried}}
		for period := 0; period < 4; period++ {
			res, err := pl.Solve(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			obj, ok, viol := Evaluate(in, res.Assign)
			if !ok {
				t.Fatalf("%d users, period %d: infeasible: %v", sz.nu, period, viol[0])
			}
			tol := 1e-7 * math.Max(1, math.Abs(obj))
			if math.Abs(obj-res.Objective) > tol || res.Bound < obj-tol {
				t.Fatalf("%d users, period %d: objective %v (Evaluate %v), bound %v", sz.nu, period, res.Objective, obj, res.Bound)
			}
			for v := range in.Users {
				cand := in.Candidates()[v]
				k := 0
				for m := range in.Servers {
					if in.Covers(v, m) {
						if k >= len(cand) || cand[k] != int32(m) {
							t.Fatalf("period %d user %d: candidates %v, server %d covers it", period, v, cand, m)
						}
						k++
					}
				}
				if k != len(cand) {
					t.Fatalf("period %d user %d: candidates %v, %d cover it", period, v, cand, k)
				}
			}
			cold, err := Lagrangian{TimeLimit: unhurried}.Solve(context.Background(), fresh(in))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d users, period %d: warm objective %.2f gap %.3f%% iters %d; cold %.2f gap %.3f%% iters %d",
				sz.nu, period, res.Objective, 100*res.Gap(), res.Iter, cold.Objective, 100*cold.Gap(), cold.Iter)
			if period > 0 && res.Gap() > math.Max(2*cold.Gap(), 0.005) {
				t.Errorf("%d users, period %d: warm gap %.3f%%, cold %.3f%%", sz.nu, period, 100*res.Gap(), 100*cold.Gap())
			}
			in = nextPeriod(rng, in, res)
		}
	}
}

// TestWarmStartChoices: a warm plan maps to the user's option on its
// previous server and rung (from PrevServer/PrevKbps or an explicit
// Assign); a choice that is no longer an option counts as none; an Assign
// of the wrong length is refused.
func TestWarmStartChoices(t *testing.T) {
	in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder(),
		Servers: []Server{{Lat: -37.81, Lon: 144.96, RadiusM: 500, Bandwidth: 1e5, Compute: 100},
			{Lat: -37.90, Lon: 144.96, RadiusM: 500, Bandwidth: 1e5, Compute: 100}},
		Users: []User{
			{Lat: -37.81, Lon: 144.96, Profile: Profile{DesiredKbps: 5000}, Ingest: -1, PrevServer: 0, PrevKbps: 2500},
			{Lat: -37.81, Lon: 144.96, Profile: Profile{DesiredKbps: 5000}, Ingest: -1, PrevServer: 0, PrevKbps: 3000}, // between rungs: 2500
			{Lat: -37.81, Lon: 144.96, Profile: Profile{DesiredKbps: 5000}, Ingest: -1, PrevServer: 1, PrevKbps: 5000}, // server 1 no longer covers
			{Lat: -37.81, Lon: 144.96, Profile: Profile{DesiredKbps: 5000}, Ingest: -1, PrevServer: -1},
		}}
	o := buildOptions(in)
	got := o.toChoices(in, o.warmChoice(in, nil))
	want := []Choice{{0, 1}, {0, 1}, {Fallback, 0}, {Fallback, 0}}
	for v := range want {
		if got[v] != want[v] {
			t.Errorf("user %d: warm choice %+v, want %+v", v, got[v], want[v])
		}
	}
	got = o.toChoices(in, o.warmChoice(in, []Choice{{0, 2}, {Fallback, 0}, {1, 0}, {0, 0}}))
	want = []Choice{{0, 2}, {Fallback, 0}, {Fallback, 0}, {0, 0}}
	for v := range want {
		if got[v] != want[v] {
			t.Errorf("user %d: warm choice from Assign %+v, want %+v", v, got[v], want[v])
		}
	}
	if _, err := (Lagrangian{TimeLimit: unhurried}).SolveWarm(context.Background(), in, &Warm{Assign: make([]Choice, 3)}); err == nil {
		t.Error("a warm Assign of 3 choices for 4 users was accepted")
	}
	res, err := (Lagrangian{TimeLimit: unhurried}).SolveWarm(context.Background(), in, &Warm{Prices: make([]Price, 1)}) // wrong length: ignored
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, viol := Evaluate(in, res.Assign); !ok {
		t.Fatal(viol)
	}
}

// TestDeterministicAcrossCores: the result does not depend on GOMAXPROCS
// (fixed chunks, loads summed as integer counts, the dual per chunk in
// chunk order, local searches bounded by work), on an instance large
// enough for the float32 scan and the repair's retirement.
func TestDeterministicAcrossCores(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	in := scaleInstance(rand.New(rand.NewPCG(61, 62)), 14000, 280)
	l := Lagrangian{MaxIter: 40, TimeLimit: time.Minute}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var first *Result
	for _, procs := range []int{1, 2, 3} {
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

// TestEvalAllocatesNothing: an iteration's per-user evaluation on every
// core allocates nothing (the evaluator's scratch is the solve's).
func TestEvalAllocatesNothing(t *testing.T) {
	in := scaleInstance(rand.New(rand.NewPCG(71, 72)), 12000, 240)
	o := buildOptions(in)
	ev := newEvaluator(in, o)
	defer ev.close()
	ns := len(in.Servers)
	pb, pc, ub, uc := make([]float64, ns), make([]float64, ns), make([]float64, ns), make([]float64, ns)
	for m := range pb {
		pb[m], pc[m] = 1e-4*float64(m%7), 1e-2*float64(m%5)
	}
	sel := make([]int32, len(in.Users))
	if a := testing.AllocsPerRun(20, func() { ev.eval(pb, pc, sel, ub, uc) }); a > 0 {
		t.Errorf("eval allocates %v times per call", a)
	}
}

// TestEmptyInstances: no users, or no servers, solve (cold and warm) to an
// empty or all-fallback plan.
func TestEmptyInstances(t *testing.T) {
	for i, in := range []*Instance{
		{Params: DefaultParams(), Ladder: DefaultLadder()},
		{Params: DefaultParams(), Ladder: DefaultLadder(), Users: []User{{Profile: Profile{DesiredKbps: 1200}, Ingest: -1, PrevServer: -1}}},
		{Params: DefaultParams(), Ladder: DefaultLadder(), Servers: []Server{{RadiusM: 1, Bandwidth: 1e4, Compute: 10}}},
	} {
		pl := &Planner{Solver: Lagrangian{TimeLimit: unhurried}}
		for period := 0; period < 2; period++ {
			res, err := pl.Solve(context.Background(), in)
			if err != nil {
				t.Fatalf("instance %d period %d: %v", i, period, err)
			}
			if _, ok, viol := Evaluate(in, res.Assign); !ok {
				t.Fatalf("instance %d period %d: %v", i, period, viol)
			}
		}
	}
}

// A cold Planner seeded with another planner's prices for the same
// servers starts where that one stopped: at a tolerance, it certifies in
// fewer iterations than from zero, and its result is as valid.
func TestPlannerSeed(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 2000))
	in := scaleInstance(rng, 2000, 40)
	first, err := (&Planner{Solver: Lagrangian{Tol: 0.01, TimeLimit: unhurried}}).Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	next := nextPeriod(rng, in, first)
	cold, err := (&Planner{Solver: Lagrangian{Tol: 0.01, TimeLimit: unhurried}}).Solve(context.Background(), fresh(next))
	if err != nil {
		t.Fatal(err)
	}
	pl := &Planner{Solver: Lagrangian{Tol: 0.01, TimeLimit: unhurried}}
	pl.Seed(first.Prices)
	seeded, err := pl.Solve(context.Background(), fresh(next))
	if err != nil {
		t.Fatal(err)
	}
	obj, ok, _ := Evaluate(next, seeded.Assign)
	if !ok || math.Abs(obj-seeded.Objective) > 1e-7*math.Max(1, obj) || seeded.Bound < obj {
		t.Fatalf("seeded result: objective %v (Evaluate %v, feasible %t), bound %v", seeded.Objective, obj, ok, seeded.Bound)
	}
	t.Logf("from zero: %d iterations, gap %.3f%%; seeded: %d iterations, gap %.3f%%", cold.Iter, 100*cold.Gap(), seeded.Iter, 100*seeded.Gap())
	if seeded.Iter >= cold.Iter {
		t.Errorf("seeded with the last prices: %d iterations, from zero %d", seeded.Iter, cold.Iter)
	}
	// Prices for other servers than the instance's are ignored.
	pl.Seed(first.Prices[:1])
	if _, err := pl.Solve(context.Background(), fresh(next)); err != nil {
		t.Fatal(err)
	}
}
