package balance

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func TestP2CChoicesDistinctAndUniform(t *testing.T) {
	for _, n := range []int{2, 3, 7, 64} {
		p := mustP2C(t, equalServers(n), nil, P2COptions{Rand: seeded(1)})
		pairs := map[[2]int]int{}
		const draws = 200_000
		for range draws {
			a, b := p.choices()
			if a == b || a < 0 || b < 0 || a >= n || b >= n {
				t.Fatalf("n=%d: choices %d, %d", n, a, b)
			}
			pairs[[2]int{a, b}]++
		}
		if n <= 7 {
			// Every ordered pair equally likely: n(n-1) of them.
			want := float64(draws) / float64(n*(n-1))
			for pr, c := range pairs {
				if d := float64(c) - want; d*d > 16*want { // 4 sd (Poisson)
					t.Errorf("n=%d: pair %v drawn %d times, want %.0f", n, pr, c, want)
				}
			}
			if len(pairs) != n*(n-1) {
				t.Errorf("n=%d: %d distinct pairs", n, len(pairs))
			}
		}
	}
}

// TestP2CBalancesByLocalPicks: with identical health figures the local pick
// counters alone spread picks almost perfectly (power of two choices: the
// gap between the busiest and the mean stays O(log log n)).
func TestP2CBalancesByLocalPicks(t *testing.T) {
	const n, picks = 16, 160_000
	p := mustP2C(t, equalServers(n), healthy(n), P2COptions{Rand: seeded(2)})
	counts := make([]int, n)
	for range picks {
		counts[p.Pick(0, 0)]++
	}
	mean := picks / n
	for i, c := range counts {
		if c < mean-20 || c > mean+20 {
			t.Errorf("server %d took %d, mean %d", i, c, mean)
		}
	}
}

func TestP2CAvoidsLoadedAndFollowsWeight(t *testing.T) {
	ss := servers(100, 100, 100, 200)
	loads := healthy(4)
	for i := range loads {
		loads[i].CapacityMbps = 10000
	}
	loads[0].CPU = 0.95           // hot CPU
	loads[1].BandwidthMbps = 9000 // nearly full link
	loads[2].Connections, loads[3].Connections = 10, 10
	// One health period's worth of picks: each adds 1/10000 (a connection)
	// + 4/10000 (PickMbps over capacity) to its server's score, so the idle
	// servers stay below the loaded ones throughout.
	p := mustP2C(t, ss, loads, P2COptions{Rand: seeded(3), ConnRef: 10000})
	counts := make([]int, 4)
	for range 3000 {
		counts[p.Pick(0, 0)]++
	}
	// A loaded server wins only when drawn together with the other loaded
	// one (1 pair in 6), so each gets about 1/12 of the picks.
	if counts[0] > 3000/12*5/4 || counts[1] > 3000/12*5/4 {
		t.Errorf("loaded servers not avoided: %v", counts)
	}
	// Idle servers 2 and 3 converge to equal score (picks x cost / relative
	// weight): server 3 (double weight) takes about twice server 2's picks.
	if r := float64(counts[3]) / float64(counts[2]); r < 1.7 || r > 2.3 {
		t.Errorf("weight 200 vs 100 took %v: ratio %.2f", counts[2:], r)
	}
	// Explain shows two sampled candidates and does not count a pick.
	before := p.picks[2].n.Load() + p.picks[3].n.Load() + p.picks[0].n.Load() + p.picks[1].n.Load()
	x := p.Explain(0, 0)
	sampled := 0
	for _, c := range x.Candidates {
		if c.Note != "not sampled" {
			sampled++
		}
	}
	after := p.picks[2].n.Load() + p.picks[3].n.Load() + p.picks[0].n.Load() + p.picks[1].n.Load()
	if sampled != 2 || x.Pick < 0 || before != after {
		t.Errorf("explain: %d sampled, pick %d, counted %d", sampled, x.Pick, after-before)
	}
}

func TestP2CSmallAndConcurrent(t *testing.T) {
	if p := mustP2C(t, nil, nil, P2COptions{}); p.Pick(0, 0) != -1 || p.Explain(0, 0).Pick != -1 {
		t.Error("empty p2c picked")
	}
	if p := mustP2C(t, equalServers(1), nil, P2COptions{}); p.Pick(0, 0) != 0 || p.Explain(0, 0).Pick != 0 {
		t.Error("single server not picked")
	}
	if _, err := NewP2C(equalServers(2), nil, P2COptions{ConnRef: -1}); err == nil {
		t.Error("negative conn_ref accepted")
	}
	// The default randomness is safe for concurrent picks.
	p := mustP2C(t, equalServers(8), nil, P2COptions{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10_000 {
				if p.Pick(rand.Uint64(), 0) < 0 {
					t.Error("no pick")
					return
				}
			}
		})
	}
	wg.Wait()
	total := int64(0)
	for j := range p.picks {
		total += p.picks[j].n.Load()
	}
	if total != 80_000 {
		t.Errorf("counted %d picks", total)
	}
}

func TestP2CWeightedDraws(t *testing.T) {
	ss := servers(100, 50, 30, 15, 5)
	p := mustP2C(t, ss, nil, P2COptions{Rand: seeded(5)})
	if p.uniform {
		t.Fatal("unequal weights drawn uniformly")
	}
	counts := map[int32]int{}
	r := rand.New(rand.NewPCG(9, 9))
	for range 1_000_000 {
		counts[int32(p.draw(r.Uint64()))]++
	}
	checkShares(t, counts, ss, 0.02)
	for range 10_000 {
		if a, b := p.choices(); a == b {
			t.Fatal("weighted choices repeat")
		}
	}
	// One server with nearly all the weight still gets a distinct rival.
	q := mustP2C(t, servers(1e9, 1), nil, P2COptions{Rand: seeded(6)})
	for range 1000 {
		if a, b := q.choices(); a == b {
			t.Fatal("dominant weight: choices repeat")
		}
	}
}
