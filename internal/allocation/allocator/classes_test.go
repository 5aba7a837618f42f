package allocator

import (
	"context"
	"fmt"
	"maps"
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
