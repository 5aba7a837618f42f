package balance

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestNearestDistributionMillion(t *testing.T) {
	for _, ss := range [][]Server{servers(100, 100, 100, 100), servers(100, 50, 30, 15, 5)} {
		p := mustNearest(t, ss, nil, NearestOptions{})
		r := rand.New(rand.NewPCG(11, 12))
		counts := map[int32]int{}
		for range 1_000_000 {
			counts[p.Pick(0, mix(r.Uint64()))]++
		}
		// Shares are binomial: relative sd sqrt((1-p)/(p x 1e6)), 0.45%
		// for the smallest share here (5/200), so 1% is over 2 sd for
		// it and 4+ sd for the rest; the seed is fixed.
		checkShares(t, counts, ss, 0.01)
	}
}

// TestNearestSticky: an STB keeps its server; removing a server moves only
// that server's STBs.
func TestNearestSticky(t *testing.T) {
	ss := servers(100, 100, 200, 100, 50)
	p := mustNearest(t, ss, nil, NearestOptions{})
	rest := mustNearest(t, slices.Delete(slices.Clone(ss), 2, 3), nil, NearestOptions{})
	for k := range uint64(50_000) {
		h := mix(k)
		a := p.Pick(0, h)
		if a != p.Pick(0, h) {
			t.Fatal("not deterministic")
		}
		if b := rest.Pick(0, h); a != 2 && a != b {
			t.Fatalf("client %d moved from %d to %d though server 2 was removed", k, a, b)
		}
	}
}

func TestNearestExplainAndHealth(t *testing.T) {
	ss := servers(100, 100, 100)
	loads := healthy(3)
	loads[1].Healthy = false
	now := time.Now()
	loads[2].Since = now.Add(-time.Second)
	p := mustNearest(t, ss, loads, NearestOptions{SlowStart: SlowStart{Window: time.Minute}, Now: now})
	for k := range uint64(1000) {
		h := mix(k)
		x := p.Explain(0, h)
		if x.Pick != p.Pick(0, h) || x.Pick == 1 || len(x.Candidates) != 2 || !x.Candidates[0].Chosen {
			t.Fatalf("explain %+v", x)
		}
	}
	if p := mustNearest(t, nil, nil, NearestOptions{}); p.Pick(0, 1) != -1 {
		t.Error("empty nearest picked")
	}
}
