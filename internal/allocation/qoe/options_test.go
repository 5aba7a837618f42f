package qoe

import (
	"math/rand/v2"
	"testing"
)

// TestOptionTableExact: the candidate lists are exactly the covering servers
// (brute force over every pair, Covers) and every option's value equals
// Value to the bit, on instances with mixed radii and previous assignments.
func TestOptionTableExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for it := 0; it < 30; it++ {
		var in *Instance
		if it%2 == 0 {
			in = randInstance(rng, 50+rng.IntN(300), 1+rng.IntN(30))
		} else {
			in = spreadInstance(rng, 50+rng.IntN(300), 1+rng.IntN(60))
		}
		o := buildOptions(in)
		for v := range in.Users {
			var want []int32
			for m := range in.Servers {
				if in.Covers(v, m) {
					want = append(want, int32(m))
				}
			}
			got := in.Candidates()[v]
			if len(got) != len(want) {
				t.Fatalf("iter %d user %d: candidates %v, covering %v", it, v, got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("iter %d user %d: candidates %v, covering %v", it, v, got, want)
				}
			}
			for i := o.start[v]; i < o.start[v+1]; i++ {
				if w := in.Value(v, int(o.srv[i]), int(o.rung[i])); o.val[i] != w {
					t.Fatalf("iter %d user %d option %d: %v != Value %v", it, v, i, o.val[i], w)
				}
			}
			if o.fb[v] != in.Value(v, Fallback, 0) {
				t.Fatalf("fallback value")
			}
		}
	}
}

// TestCandidatesNotStale: replacing the Users slice of an instance
// recomputes the candidates.
func TestCandidatesNotStale(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	in := spreadInstance(rng, 100, 40)
	in.Candidates()
	other := spreadInstance(rng, 100, 40)
	in.Users = other.Users
	for v := range in.Users {
		for _, m := range in.Candidates()[v] {
			if !in.Covers(v, int(m)) {
				t.Fatalf("stale candidates for user %d", v)
			}
		}
	}
}
