package qoe

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// expand is in with every user of Count c as c users of Count 1, and the
// map from each expanded user to its user in in.
func expand(in *Instance) (*Instance, []int) {
	out := &Instance{Params: in.Params, Ladder: in.Ladder, Servers: in.Servers}
	var of []int
	for v, u := range in.Users {
		c := max(u.Count, 1)
		u.Count = 0
		for range c {
			out.Users = append(out.Users, u)
			of = append(of, v)
		}
	}
	return out, of
}

// countedInstance is randInstance with users standing for 1 to 8 viewers.
func countedInstance(seed uint64, nu, ns int) *Instance {
	rng := rand.New(rand.NewPCG(seed, 9))
	in := randInstance(rng, nu, ns)
	for v := range in.Users {
		in.Users[v].Count = int32(1 + rng.IntN(8))
	}
	return in
}

// A user of Count c is c viewers that take one choice: its objective and
// loads are the expanded instance's for the same choice, and the solver's
// plan is feasible for the expanded instance, with a bound no lower than
// its value.
func TestCountIsThatManyViewers(t *testing.T) {
	for seed := range uint64(6) {
		in := countedInstance(seed, 60, 8)
		res, err := Lagrangian{TimeLimit: 2 * time.Second}.Solve(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		obj, ok, why := Evaluate(in, res.Assign)
		if !ok {
			t.Fatalf("seed %d: infeasible: %v", seed, why)
		}
		if math.Abs(obj-res.Objective) > 1e-6*math.Max(1, math.Abs(obj)) {
			t.Fatalf("seed %d: objective %v, Evaluate says %v", seed, res.Objective, obj)
		}
		ex, of := expand(in)
		assign := make([]Choice, len(ex.Users))
		for i, v := range of {
			assign[i] = res.Assign[v]
		}
		eobj, eok, ewhy := Evaluate(ex, assign)
		if !eok {
			t.Fatalf("seed %d: the plan overloads the expanded instance: %v", seed, ewhy)
		}
		if math.Abs(eobj-obj) > 1e-6*math.Max(1, math.Abs(obj)) {
			t.Fatalf("seed %d: objective %v, expanded %v", seed, obj, eobj)
		}
		if res.Bound < obj-1e-6*math.Abs(obj) {
			t.Fatalf("seed %d: bound %v below the plan's %v", seed, res.Bound, obj)
		}
		// The bound holds for the expanded problem too: its optimum is no
		// higher than the counted instance's bound (the dual function of
		// the counted instance is the expanded one's).
		eres, err := Lagrangian{TimeLimit: 2 * time.Second}.Solve(context.Background(), ex)
		if err != nil {
			t.Fatal(err)
		}
		if eres.Objective > res.Bound+1e-6*math.Abs(res.Bound) {
			t.Fatalf("seed %d: expanded plan %v above the counted bound %v", seed, eres.Objective, res.Bound)
		}
	}
}

func TestCountOutOfRange(t *testing.T) {
	in := countedInstance(1, 5, 2)
	in.Users[3].Count = MaxCount + 1
	if _, err := (Lagrangian{}).Solve(context.Background(), in); err == nil || !strings.Contains(err.Error(), "user 3: count") {
		t.Fatalf("err = %v, want user 3's count refused", err)
	}
}
