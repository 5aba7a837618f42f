package allocator

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Every split of a class must stay reachable: the chunks' subset sums are
// every count from 0 to n, each chunk a power of two of at most max.
func TestChunkSizesReachEveryCount(t *testing.T) {
	for _, max := range []int{1, 2, 8, 32, 64} {
		for n := 0; n <= 300; n++ {
			cs := chunkSizes(n, max)
			sum := 0
			reach := map[int]bool{0: true}
			for _, c := range cs {
				if c < 1 || c > max || bits.OnesCount(uint(c)) != 1 {
					t.Fatalf("n %d max %d: chunk %d", n, max, c)
				}
				sum += c
				for s := range maps.Clone(reach) {
					reach[s+c] = true
				}
			}
			if sum != n {
				t.Fatalf("n %d max %d: chunks %v add up to %d", n, max, cs, sum)
			}
			for s := 0; s <= n; s++ {
				if !reach[s] {
					t.Fatalf("n %d max %d: chunks %v cannot make %d", n, max, cs, s)
				}
			}
			if max > 1 && n >= 4*max && len(cs) > n/max+2*bits.Len(uint(max)) {
				t.Fatalf("n %d max %d: %d chunks, too many", n, max, len(cs))
			}
		}
	}
}

// A plan published without certifying target_gap is counted, and only
// then: the operator's signal that the solve stops short of the target.
func TestUncertifiedPlansCounted(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	for _, target := range []float64{1e-12, 0.1} {
		r := newRig(t, e, eng, fmt.Sprintf("gap-%g", target), Config{TargetGap: target, SolveTimeout: 5 * time.Millisecond})
		for i := range 40 { // more than the north zone's two servers carry at the top rung
			r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%5), signed(t, fmt.Sprintf("v%d", i), 5000))
		}
		r.a.Solve(context.Background())
		gap := r.a.Summary().Gap
		want := 0.0
		if gap > target {
			want = 1
		}
		if got := testutil.ToFloat64(r.a.met.uncertified); got != want {
			t.Fatalf("target %g, gap %g: uncertified plans counted %v, want %v", target, gap, got, want)
		}
		r.a.board.Release(context.Background())
	}
}

// solve_timeout bounds the plan, not only the solver's iterations: with
// no time left at all a solve still publishes a feasible plan with its
// bound (the solver's first iteration and repair always run), every
// session placed or sent to the fallback, no server past its capacity,
// and the plan counts as out late. With time to spare it does not.
func TestSolveTimeoutIsABound(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	for _, tt := range []struct {
		timeout time.Duration
		late    float64
	}{{time.Nanosecond, 1}, {9 * time.Second, 0}} {
		r := newRig(t, e, eng, fmt.Sprintf("timeout-%v", tt.timeout), Config{SolveTimeout: tt.timeout, ColdSolveTimeout: tt.timeout})
		for i := range 40 { // more than the north zone's two servers carry at the top rung
			r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%5), signed(t, fmt.Sprintf("v%d", i), 5000))
		}
		r.a.Solve(context.Background())
		st := r.a.Status()
		if !st.Planned || st.PlannedN != 40 || st.Bound < st.Objective || math.IsNaN(st.Bound) {
			t.Fatalf("timeout %v: planned %v, %d sessions, objective %v, bound %v", tt.timeout, st.Planned, st.PlannedN, st.Objective, st.Bound)
		}
		for _, sv := range st.Servers {
			if sv.Capacity[0] > 0 && sv.Used[0] > sv.Capacity[0]+1e-6 {
				t.Fatalf("timeout %v: server %s uses %v kbps of %v", tt.timeout, sv.Name, sv.Used[0], sv.Capacity[0])
			}
		}
		if got := testutil.ToFloat64(r.a.met.overruns); got != tt.late {
			t.Fatalf("timeout %v: plans out late counted %v, want %v", tt.timeout, got, tt.late)
		}
		r.a.board.Release(context.Background())
	}
}

// A solve with no plan to start from (the first) has cold_solve_timeout;
// the next ones solve_timeout.
func TestColdSolveHasItsOwnBudget(t *testing.T) {
	e := etcdtest.Start(t)
	r := newRig(t, e, engine(t), "cold", Config{SolveTimeout: time.Nanosecond, ColdSolveTimeout: 9 * time.Second})
	for i := range 40 {
		r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%5), signed(t, fmt.Sprintf("v%d", i), 5000))
	}
	for i, late := range []float64{0, 1} {
		r.a.Solve(context.Background())
		if got := testutil.ToFloat64(r.a.met.overruns); got != late {
			t.Fatalf("solve %d: plans out late counted %v, want %v (the first is cold, 9 s; then 1 ns)", i+1, got, late)
		}
	}
	if d := (Config{Period: 10 * time.Second}).withDefaults(); d.SolveTimeout != 2*time.Second || d.ColdSolveTimeout != 5*time.Second {
		t.Errorf("defaults for a 10 s period: solve_timeout %v, cold_solve_timeout %v; want 2s, 5s", d.SolveTimeout, d.ColdSolveTimeout)
	}
	if d := (Config{Period: 2 * time.Second}).withDefaults(); d.ColdSolveTimeout != time.Second {
		t.Errorf("a 2 s period: cold_solve_timeout %v, want 1s (half the period)", d.ColdSolveTimeout)
	}
}

// The grouping's numbering of static classes is kept from solve to solve
// but does not grow with the viewers that came and went: once it holds
// more than twice what is live (and the slack), the next solve numbers
// afresh, and every session is still planned across the change.
func TestNumberingStaysBounded(t *testing.T) {
	e := etcdtest.Start(t)
	r := newRig(t, e, engine(t), "numbering", Config{})
	g := &grouped{slack: 16}
	r.a.grouping["live"] = g
	numberings := map[uint32]bool{}
	for period := range 12 {
		for v := range 10 { // every viewer on a channel never watched before
			r.get(fmt.Sprintf("100.64.1.%d", v+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", period*10+v), signed(t, fmt.Sprintf("v%d", v), 2500))
		}
		r.a.Solve(context.Background())
		if st := r.a.Status(); !st.Planned || st.PlannedN != 10 {
			t.Fatalf("period %d: planned %v, %d sessions, want 10", period, st.Planned, st.PlannedN)
		}
		p := r.a.plan.Load()
		for _, s := range r.a.sessions.sweep(0) {
			if p.plannedOf(s) == nil {
				t.Fatalf("period %d: session %s on %s not in the plan", period, s.key.user, s.key.channel)
			}
		}
		if len(g.statics) > 2*10+16+10 {
			t.Fatalf("period %d: %d static classes numbered for 10 live", period, len(g.statics))
		}
		numberings[g.numbering] = true
	}
	if len(numberings) < 2 {
		t.Fatalf("one numbering over 120 static classes: never renumbered")
	}
}
