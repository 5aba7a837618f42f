package outlier

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// FuzzEjectedShare: whatever fails, however the topology changes between
// evaluations, no node ever has more than max_ejected_share of its servers
// ejected, nor all of them.
func FuzzEjectedShare(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42, 1 << 40} {
		for _, share := range []uint8{0, 29, 49, 50, 99} {
			f.Add(seed, share)
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, shareByte uint8) {
		share := float64(shareByte%100+1) / 100
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		h := newHarness(t, Config{MaxEjectedShare: share, MinRequests: 10}, nil, nil)
		now := t0
		var nodes []int32
		var servers []string
		topology := func() {
			nodes, servers = nodes[:0], servers[:0]
			for node := range rng.IntN(5) + 1 {
				for range rng.IntN(6) + 1 {
					nodes = append(nodes, int32(node))
					// Names from a small pool, so servers move between
					// nodes and indexes while keeping their state.
					servers = append(servers, fmt.Sprintf("s%d", rng.IntN(40)))
				}
			}
			h.d.SetServers(nodes, servers)
		}
		topology()
		for round := range 40 {
			if round > 0 && rng.IntN(4) == 0 {
				topology()
			}
			n := int32(len(servers))
			for s := range n {
				switch rng.IntN(4) {
				case 0: // a run of failures
					for i := range 6 {
						h.fail(s, (s+1)%n, now.Add(time.Duration(i)*time.Millisecond))
					}
				case 1: // a bad rate
					for i := range 12 {
						h.ok(s, now.Add(time.Duration(i)*time.Millisecond))
						h.fail(s, (s+1)%n, now.Add(time.Duration(i)*time.Millisecond))
					}
				case 2:
					h.d.Report(s, 20, int64(rng.IntN(21)))
				}
			}
			now = now.Add(time.Duration(rng.IntN(40)+1) * time.Second)
			h.d.Evaluate(now)
			set := h.d.EjectedSet()
			if len(set) != len(nodes) {
				t.Fatalf("EjectedSet has %d servers, want %d", len(set), len(nodes))
			}
			total, out := map[int32]int{}, map[int32]int{}
			for i, node := range nodes {
				total[node]++
				if set[i] {
					out[node]++
				}
			}
			for node, k := range total {
				if o := out[node]; float64(o) > share*float64(k)+1e-9 || (o > 0 && o >= k) {
					t.Fatalf("round %d: node %d has %d of %d servers ejected (share %v)", round, node, o, k, share)
				}
			}
			if got := h.counter("ejected"); got != float64(count(set)) {
				t.Fatalf("ejected_servers %v, want %d", got, count(set))
			}
		}
	})
}
