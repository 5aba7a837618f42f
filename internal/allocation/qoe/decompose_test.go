package qoe

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestComponents: hand-made instances, each user and server placed so
// that the coverage graph is known.
func TestComponents(t *testing.T) {
	const lat, lon = -37.80, 144.94
	srv := func(dlat float64) Server {
		return Server{Lat: lat + dlat, Lon: lon, RadiusM: 500, Bandwidth: 1e5, Compute: 100}
	}
	usr := func(dlat float64) User {
		return User{Lat: lat + dlat, Lon: lon, Profile: Profile{DesiredKbps: 2500}, Ingest: -1, PrevServer: -1}
	}
	const km = 1.0 / 111 // a kilometre in latitude
	for _, tc := range []struct {
		name    string
		servers []Server
		users   []User
		want    []Component
	}{
		{name: "empty"},
		{
			// towns A (servers 0, 2) and B (server 1), a lone user (2)
			// and a server far from everyone (3)
			name:    "two towns, a lone user, a server covering nothing",
			servers: []Server{srv(0), srv(-10 * km), srv(0.1 * km), srv(-50 * km)},
			users:   []User{usr(0.05 * km), usr(-10 * km), usr(-30 * km), usr(0), usr(-10.2 * km)},
			want: []Component{
				{Users: []int{0, 3}, Servers: []int{0, 2}},
				{Users: []int{1, 4}, Servers: []int{1}},
				{Users: []int{2}},
			},
		},
		{
			// servers 0 and 2 share no user: user 1, covered by both
			// 0 and 1, and user 2, by 1 and 2, join them through 1
			name:    "chain",
			servers: []Server{srv(0), srv(0.8 * km), srv(1.6 * km)},
			users:   []User{usr(-0.3 * km), usr(0.4 * km), usr(1.2 * km), usr(1.9 * km)},
			want:    []Component{{Users: []int{0, 1, 2, 3}, Servers: []int{0, 1, 2}}},
		},
		{
			// the lone users' part comes last, whatever their indices
			name:    "no candidate first",
			servers: []Server{srv(0), srv(-10 * km)},
			users:   []User{usr(-30 * km), usr(-10 * km), usr(0), usr(-31 * km)},
			want: []Component{
				{Users: []int{1}, Servers: []int{1}},
				{Users: []int{2}, Servers: []int{0}},
				{Users: []int{0, 3}},
			},
		},
		{
			name:    "excluded server",
			servers: []Server{srv(0), {Lat: lat, Lon: lon, RadiusM: 500, Excluded: true}},
			users:   []User{usr(0)},
			want:    []Component{{Users: []int{0}, Servers: []int{0}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder(), Servers: tc.servers, Users: tc.users}
			if got := Components(in); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Components = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// towns builds one instance of towns far apart (50 km between
// neighbours), town t with sizes[t] users and one server per 50 users at
// scaleInstance's density, some users with a previous server in their
// town; with an origin cost (cost > 0) about every other town's users
// watch one of 20 channels. It returns the towns' instances as well.
func towns(rng *rand.Rand, sizes []int, cost float64) (*Instance, []*Instance) {
	all := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
	all.Params.OriginCost = cost
	var parts []*Instance
	for t, nu := range sizes {
		in := scaleInstance(rng, nu, max(1, nu/50))
		in.Params.OriginCost = cost
		off := len(all.Servers)
		for m := range in.Servers {
			in.Servers[m].Lat -= 0.45 * float64(t)
		}
		for v := range in.Users {
			u := &in.Users[v]
			u.Lat -= 0.45 * float64(t)
			if rng.IntN(3) == 0 {
				u.PrevServer, u.PrevKbps = rng.IntN(len(in.Servers)), in.Ladder[rng.IntN(len(in.Ladder))]
			}
			u.Channel = int32(rng.IntN(20))
		}
		parts = append(parts, in)
		all.Servers = append(all.Servers, in.Servers...)
		for _, u := range in.Users {
			if u.Ingest >= 0 {
				u.Ingest += off
			}
			if u.PrevServer >= 0 {
				u.PrevServer += off
			}
			all.Users = append(all.Users, u)
		}
	}
	return all, parts
}

// partSolver: the tests' setting, bounded by iterations and work, not by
// the clock, so that results do not depend on the machine's load.
var partSolver = Lagrangian{Tol: 0.01, MaxIter: 40, TimeLimit: time.Minute}

// TestDecomposedEqualsParts: on instances of 3-8 towns of 200-2000 users,
// some with an origin cost, every town is one component, and Decomposed's
// result is every town's solved alone (with its share of the local
// search budget), put together (choices, prices,
// iterations; objective and bound summed); with one worker or two the
// same.
func TestDecomposedEqualsParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	ctx := context.Background()
	for it := range 2 {
		if testing.Short() && it > 0 {
			t.Skip("the race run (-short) races the first instance; make test runs both plain")
		}
		sizes := make([]int, 3+rng.IntN(6))
		for i := range sizes {
			sizes[i] = 200 + rng.IntN(200)
		}
		sizes[rng.IntN(len(sizes))] = 2000
		cost := 0.0
		if it != 0 {
			cost = 1 + 4*rng.Float64()
		}
		in, parts := towns(rng, sizes, cost)
		comps := Components(in)
		if len(comps) != len(parts) {
			t.Fatalf("iter %d: %d components for %d towns", it, len(comps), len(parts))
		}
		var want Result
		want.Assign = make([]Choice, 0, len(in.Users))
		want.Prices = make([]Price, 0, len(in.Servers))
		u0, s0 := 0, 0
		for p, town := range parts {
			c := comps[p]
			if len(c.Users) != len(town.Users) || c.Users[0] != u0 || len(c.Servers) != len(town.Servers) || c.Servers[0] != s0 {
				t.Fatalf("iter %d: component %d is not town %d", it, p, p)
			}
			res, err := partSolver.part(len(town.Users), len(in.Users)).Solve(ctx, town)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range res.Assign {
				if ch.Server != Fallback {
					ch.Server += s0
				}
				want.Assign = append(want.Assign, ch)
			}
			want.Prices = append(want.Prices, res.Prices...)
			want.Objective += res.Objective
			want.Bound += res.Bound
			want.Iter = max(want.Iter, res.Iter)
			u0, s0 = u0+len(town.Users), s0+len(town.Servers)
		}
		var first *Result
		for _, workers := range []int{1, 2} {
			res, err := Decomposed{Solver: partSolver, Workers: workers}.Solve(ctx, fresh(in))
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("iter %d, %d towns, cost %.2f, %d workers", it, len(parts), cost, workers)
			checkResult(t, what, in, res)
			if !reflect.DeepEqual(*res, want) {
				t.Fatalf("%s: objective %v bound %v iter %d, the towns alone %v, %v, %d (or choices or prices differ)",
					what, res.Objective, res.Bound, res.Iter, want.Objective, want.Bound, want.Iter)
			}
			if first != nil && !reflect.DeepEqual(res, first) {
				t.Fatalf("%s: result differs from one worker's", what)
			}
			first = res
		}
	}
}

// TestDecomposedAgainstLagrangian: on multi-town instances where some
// broadcasters' edges and some users' previous servers are in another
// town, with and without an origin cost, Decomposed and the plain
// Lagrangian are both feasible, each one's bound is above the other's
// objective (both are upper bounds).
func TestDecomposedAgainstLagrangian(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	ctx := context.Background()
	for it := range 4 {
		if testing.Short() && it > 1 {
			t.Skip("the race run (-short) races two instances (with and without an origin cost); make test runs all four plain")
		}
		sizes := make([]int, 3+rng.IntN(6))
		for i := range sizes {
			sizes[i] = 200 + rng.IntN(300)
		}
		if it == 0 {
			sizes[0] = 2000
		}
		cost := 0.0
		if it%2 == 1 {
			cost = 1 + 4*rng.Float64()
		}
		in, _ := towns(rng, sizes, cost)
		for v := range in.Users {
			u := &in.Users[v]
			switch x := rng.IntN(10); {
			case x == 0:
				u.Ingest = rng.IntN(len(in.Servers)) // a broadcaster anywhere
			case x == 1:
				u.PrevServer, u.PrevKbps = rng.IntN(len(in.Servers)), in.Ladder[rng.IntN(len(in.Ladder))]
			}
		}
		what := fmt.Sprintf("iter %d, %d towns, cost %.2f", it, len(sizes), cost)
		plain, err := partSolver.Solve(ctx, fresh(in))
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, what+", plain", in, plain)
		dec, err := Decomposed{Solver: partSolver}.Solve(ctx, fresh(in))
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, what+", decomposed", in, dec)
		tol := 1e-7 * math.Max(1, math.Abs(plain.Bound))
		if dec.Bound < plain.Objective-tol || plain.Bound < dec.Objective-tol {
			t.Fatalf("%s: bounds below the other's objective: decomposed %v / %v, plain %v / %v",
				what, dec.Objective, dec.Bound, plain.Objective, plain.Bound)
		}
		t.Logf("%s: plain gap %.3f%% iters %d, decomposed gap %.3f%% iters %d, objective %+.3f%%",
			what, 100*plain.Gap(), plain.Iter, 100*dec.Gap(), dec.Iter, 100*(dec.Objective-plain.Objective)/plain.Bound)
	}
}

// TestDecomposedTinyAgainstBruteForce: tiny instances of two or three
// towns (lone users included; some broadcasters' edges and previous
// servers in another town; some with an origin cost): the enumerated
// optimum lies between Decomposed's objective and bound.
func TestDecomposedTinyAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	ctx := context.Background()
	for it := range 150 {
		in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
		if it%2 == 1 {
			in.Params.OriginCost = 8 * rng.Float64()
		}
		for t, left := 0, 5; t < 3 && left > 0; t++ {
			town := randInstance(rng, 1+rng.IntN(min(3, left)), 1+rng.IntN(2))
			left -= len(town.Users)
			off := len(in.Servers)
			for _, s := range town.Servers {
				s.Lat -= 0.45 * float64(t)
				in.Servers = append(in.Servers, s)
			}
			for _, u := range town.Users {
				u.Lat -= 0.45 * float64(t)
				if u.Ingest >= 0 {
					u.Ingest += off
				}
				if u.PrevServer >= 0 {
					u.PrevServer += off
				}
				u.Channel = int32(rng.IntN(2))
				in.Users = append(in.Users, u)
			}
		}
		for v := range in.Users {
			if rng.IntN(4) == 0 {
				in.Users[v].Ingest = rng.IntN(len(in.Servers))
			}
			if rng.IntN(4) == 0 {
				in.Users[v].PrevServer = rng.IntN(len(in.Servers))
			}
		}
		res, err := Decomposed{Solver: Lagrangian{TimeLimit: 10 * time.Second}}.Solve(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("iter %d (%d components)", it, len(Components(in)))
		checkResult(t, what, in, res)
		bf := bruteForce(in)
		tol := 1e-7 * math.Max(1, math.Abs(bf))
		if res.Objective > bf+tol || bf > res.Bound+tol {
			t.Fatalf("%s: optimum %v not within objective %v and bound %v", what, bf, res.Objective, res.Bound)
		}
	}
}

// TestDecomposedEdges: a done context still gives a feasible plan with a
// bound; a Planner is refused; a single component goes to the solver as
// it is.
func TestDecomposedEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 48))
	in, _ := towns(rng, []int{300, 300, 300}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Decomposed{Solver: Lagrangian{}}.Solve(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, "done context", in, res)
	if math.IsNaN(res.Bound) || len(res.Prices) != len(in.Servers) {
		t.Fatalf("done context: bound %v, %d prices", res.Bound, len(res.Prices))
	}
	if _, err := (Decomposed{Solver: &Planner{}}).Solve(context.Background(), in); err == nil {
		t.Fatal("a Planner as the inner solver was accepted")
	}
	one, _ := towns(rng, []int{300}, 0)
	a, err := Decomposed{Solver: partSolver}.Solve(context.Background(), fresh(one))
	if err != nil {
		t.Fatal(err)
	}
	b, err := partSolver.Solve(context.Background(), fresh(one))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("one component: %v / %v, the solver alone %v / %v", a.Objective, a.Bound, b.Objective, b.Bound)
	}
}

// BenchmarkDecomposed: 20 towns of 5,000 users and 100 servers each
// (scaleInstance's density), solved as one instance by the Lagrangian and
// by Decomposed over it with one and two workers (Lagrangian{Tol: 0.01,
// TimeLimit: 5s}); reports the gap, the iterations (Decomposed: the most
// any town ran), the process's CPU time per solve (the machine may be
// shared: wall time alone says little) and the peak heap. Needs
// QOE_SCALE=1.
func BenchmarkDecomposed(b *testing.B) {
	if os.Getenv("QOE_SCALE") == "" {
		b.Skip("set QOE_SCALE=1")
	}
	sizes := make([]int, 20)
	for i := range sizes {
		sizes[i] = 5000
	}
	in, _ := towns(rand.New(rand.NewPCG(21, 22)), sizes, 0)
	inner := Lagrangian{Tol: 0.01, TimeLimit: 5 * time.Second}
	for _, bc := range []struct {
		name string
		s    Solver
	}{
		{"plain", inner},
		{"decomposed/workers=1", Decomposed{Solver: inner, Workers: 1}},
		{"decomposed/workers=2", Decomposed{Solver: inner, Workers: 2}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var gap, iters, cpu float64
			var peak uint64
			for i := 0; i < b.N; i++ {
				runtime.GC()
				stop := make(chan struct{})
				done := make(chan uint64)
				go func() { done <- peakHeap(stop) }()
				c0 := cpuSeconds()
				res, err := bc.s.Solve(context.Background(), fresh(in))
				cpu += cpuSeconds() - c0
				close(stop)
				peak = max(peak, <-done)
				if err != nil {
					b.Fatal(err)
				}
				gap += res.Gap()
				iters += float64(res.Iter)
			}
			b.ReportMetric(100*gap/float64(b.N), "gap%")
			b.ReportMetric(iters/float64(b.N), "iters")
			b.ReportMetric(cpu/float64(b.N), "cpu-s")
			b.ReportMetric(float64(peak)/1e6, "peakMB")
		})
	}
}

// cpuSeconds is the process's user and system CPU time (Linux, at 100
// ticks a second; 0 elsewhere).
func cpuSeconds() float64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// the fields after the command's closing parenthesis: state is the
	// first, utime the 12th, stime the 13th
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

// peakHeap samples the live heap every 10 ms until stop and returns the
// largest.
func peakHeap(stop <-chan struct{}) uint64 {
	var peak uint64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}
