package qoe

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// spreadInstance has users spread over a wide area (each covered by only a
// few of many servers) and tight capacities: a user that inherits another
// user's option is then almost never covered by that option's server.
func spreadInstance(rng *rand.Rand, nu, ns int) *Instance {
	in := &Instance{Params: DefaultParams(), Ladder: DefaultLadder()}
	lat0, lon0 := -37.83, 144.93
	for m := 0; m < ns; m++ {
		in.Servers = append(in.Servers, Server{
			Lat: lat0 + rng.Float64()*0.03, Lon: lon0 + rng.Float64()*0.04,
			RadiusM:   300,
			Bandwidth: 2500 * float64(1+rng.IntN(6)),
			Compute:   3.8 * float64(1+rng.IntN(4)),
		})
	}
	for v := 0; v < nu; v++ {
		in.Users = append(in.Users, User{Lat: lat0 + rng.Float64()*0.03, Lon: lon0 + rng.Float64()*0.04,
			Profile:  Profile{DesiredKbps: in.Ladder[rng.IntN(len(in.Ladder))], Danmaku: float64(1 + rng.IntN(9)), Gift: float64(rng.IntN(2) * rng.IntN(100))},
			RoomMean: 0.01 + 0.12*rng.Float64(), Ingest: rng.IntN(ns+1) - 1, PrevServer: -1})
	}
	// a big spender first: its options are worth more than anyone else's,
	// so a user wrongly holding one of them clings to it
	in.Users[0].Profile.Gift = 1e5
	return in
}

// TestNoTimeLeftStillFeasible is the regression test of the 100k-user
// coverage bug: when the time budget ran out before the first subgradient
// iteration (building the option table alone took longer than TimeLimit at
// 100,000 users), the solver repaired a zero-initialised choice vector, i.e.
// every user on option 0 (user 0's first server). Repair only restores
// capacity, so the users left there were not covered by their server. The
// same happens with a context that is already done. Every solve must still
// be feasible and carry a bound.
func TestNoTimeLeftStillFeasible(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	bad := 0
	for it := 0; it < 40 && bad < 5; it++ {
		in := spreadInstance(rng, 200+rng.IntN(800), 20+rng.IntN(60))
		for ci, c := range []struct {
			ctx context.Context
			l   Lagrangian
		}{
			{cancelled, Lagrangian{}},
			{expired, Lagrangian{}},
			{context.Background(), Lagrangian{TimeLimit: time.Nanosecond}},
			// as at 100k users, where no time was left for the final
			// ejection moves either (they happened to repair small cases)
			{cancelled, Lagrangian{LocalSearch: time.Nanosecond}},
			{context.Background(), Lagrangian{TimeLimit: time.Nanosecond, LocalSearch: time.Nanosecond}},
		} {
			res, err := c.l.Solve(c.ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			obj, ok, viol := Evaluate(in, res.Assign)
			if !ok {
				bad++
				t.Errorf("iter %d case %d: infeasible (%d violations): %v", it, ci, len(viol), viol[0])
				continue
			}
			if math.Abs(obj-res.Objective) > 1e-7*math.Max(1, math.Abs(obj)) {
				t.Fatalf("iter %d case %d: objective %v, Evaluate %v", it, ci, res.Objective, obj)
			}
			if math.IsNaN(res.Bound) || res.Bound < obj-1e-7*math.Max(1, math.Abs(obj)) {
				bad++
				t.Errorf("iter %d case %d: bound %v, objective %v", it, ci, res.Bound, obj)
			}
		}
	}
}
