package balance

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func letters(p Policy, n int) string {
	var b strings.Builder
	for range n {
		b.WriteByte(byte('a' + p.Pick(0, 0)))
	}
	return b.String()
}

func TestSWRRSequence(t *testing.T) {
	for _, tc := range []struct {
		weights []float64
		want    string
	}{
		{[]float64{5, 1, 1}, "aabacaa" + "aabacaa"}, // nginx's own example, two periods
		{[]float64{1, 1, 1}, "abcabc"},
		{[]float64{2, 1}, "aba" + "aba"},
		{[]float64{4, 2, 1}, "abacaba"},
		{[]float64{500, 100, 100}, "aabacaa"}, // scale-invariant
	} {
		p := mustSWRR(t, servers(tc.weights...), nil, SWRROptions{})
		if got := letters(p, len(tc.want)); got != tc.want {
			t.Errorf("weights %v: %s, want %s", tc.weights, got, tc.want)
		}
	}
}

// nginxPeer and nginxNext are a line-by-line port of nginx's
// ngx_http_upstream_get_peer and the failure branch of
// ngx_http_upstream_free_round_robin_peer, in integers as nginx has them.
type nginxPeer struct{ weight, effective, current int }

func nginxNext(peers []nginxPeer) int {
	best, total := -1, 0
	for i := range peers {
		p := &peers[i]
		p.current += p.effective
		total += p.effective
		if p.effective < p.weight {
			p.effective++
		}
		if best == -1 || p.current > peers[best].current {
			best = i
		}
	}
	peers[best].current -= total
	return best
}

func nginxFail(p *nginxPeer, maxFails int) {
	p.effective -= p.weight / maxFails
	if p.effective < 0 {
		p.effective = 0
	}
}

// TestSWRRMatchesNginx replays random weights and failures through both
// and demands the same choice at every step.
func TestSWRRMatchesNginx(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		n := 1 + r.IntN(12)
		ws := make([]float64, n)
		ref := make([]nginxPeer, n)
		for i := range ws {
			w := 1 + r.IntN(20)
			ws[i] = float64(w)
			ref[i] = nginxPeer{weight: w, effective: w}
		}
		maxFails := 1 + r.IntN(3)
		p := mustSWRR(t, servers(ws...), nil, SWRROptions{MaxFails: maxFails})
		for step := range 500 {
			if r.IntN(50) == 0 {
				i := r.IntN(n)
				nginxFail(&ref[i], maxFails)
				p.Fail(int32(i))
			}
			want := nginxNext(ref)
			if got := p.Pick(0, 0); got != int32(want) {
				t.Fatalf("trial %d step %d (weights %v, max_fails %d): picked %d, nginx picks %d", trial, step, ws, maxFails, got, want)
			}
		}
	}
}

func TestSWRRDistributionMillion(t *testing.T) {
	ss := servers(100, 50, 30, 15, 5, 1)
	p := mustSWRR(t, ss, nil, SWRROptions{})
	counts := map[int32]int{}
	for range 1_000_000 {
		counts[p.Pick(0, 0)]++
	}
	checkShares(t, counts, ss, 0.01)
}

func TestSWRRFailLowersAndRecovers(t *testing.T) {
	ss := servers(10, 10)
	p := mustSWRR(t, ss, nil, SWRROptions{MaxFails: 1})
	p.Fail(0) // effective 10 -> 0
	// Server 0 climbs back one unit per pick: while it is below server 1,
	// server 1 takes most picks.
	first := letters(p, 10)
	if strings.Count(first, "a") >= strings.Count(first, "b") {
		t.Errorf("right after a failure a took %d of 10 picks: %s", strings.Count(first, "a"), first)
	}
	// After recovery the split is even again.
	letters(p, 100)
	if got := letters(p, 1000); strings.Count(got, "a") != 500 {
		t.Errorf("after recovery a took %d of 1000", strings.Count(got, "a"))
	}
	p.Fail(99) // unknown server: ignored
}

func TestSWRRLoadFailures(t *testing.T) {
	ss := servers(10, 10)
	loads := healthy(2)
	loads[0].Failures = 1
	p := mustSWRR(t, ss, loads, SWRROptions{MaxFails: 2})
	x := p.Explain(0, 0)
	if e := x.Candidates[0].Effective; e != 5 {
		t.Errorf("one failure of two allowed: effective %v, want 5", e)
	}
	if e := x.Candidates[1].Effective; e != 10 {
		t.Errorf("no failure: effective %v, want 10", e)
	}
}

// TestSWRRInheritKeepsSequence: a node rebuilt between every pick must still
// run nginx's sequence. Without Inherit every new table starts at the top and
// the heaviest server takes every pick.
func TestSWRRInheritKeepsSequence(t *testing.T) {
	ss := servers(5, 1, 1)
	var prev *SWRR
	var b strings.Builder
	for range 14 {
		p := mustSWRR(t, ss, nil, SWRROptions{})
		p.Inherit(prev)
		b.WriteByte(byte('a' + p.Pick(0, 0)))
		prev = p
	}
	if got, want := b.String(), "aabacaaaabacaa"; got != want {
		t.Errorf("rebuilt each pick: %s, want %s", got, want)
	}
	// A failure penalty survives the rebuild.
	prev.Fail(1)
	p := mustSWRR(t, ss, nil, SWRROptions{})
	p.Inherit(prev)
	if e := p.Explain(0, 0).Candidates[1].Effective; e != 0 {
		t.Errorf("penalty lost across rebuild: effective %v", e)
	}
}

func TestSWRRHealthAndPanic(t *testing.T) {
	ss := servers(1, 1, 1, 1)
	loads := healthy(4)
	loads[1].Healthy, loads[2].Healthy, loads[3].Healthy = false, false, false
	p := mustSWRR(t, ss, loads, SWRROptions{})
	for range 10 {
		if got := p.Pick(0, 0); got != 0 {
			t.Fatalf("picked unhealthy %d", got)
		}
	}
	// 1 of 4 healthy is under a 0.5 panic threshold: health is ignored.
	p = mustSWRR(t, ss, loads, SWRROptions{Panic: 0.5})
	if got := letters(p, 4); got != "abcd" {
		t.Errorf("panic mode: %s, want abcd", got)
	}
	if !p.Explain(0, 0).Panic {
		t.Error("explain does not say panic")
	}
	// None healthy, no panic threshold: nothing to pick.
	for i := range loads {
		loads[i].Healthy = false
	}
	p = mustSWRR(t, ss, loads, SWRROptions{})
	if got := p.Pick(0, 0); got != -1 {
		t.Errorf("no healthy server: picked %d", got)
	}
	// Zero weight: never picked.
	p = mustSWRR(t, servers(0, 1), nil, SWRROptions{})
	if got := letters(p, 3); got != "bbb" {
		t.Errorf("zero weight: %s", got)
	}
}

func TestSWRRBadInput(t *testing.T) {
	if _, err := NewSWRR(servers(1, 1), healthy(1), SWRROptions{}); err == nil {
		t.Error("loads shorter than servers accepted")
	}
	if _, err := NewSWRR(servers(-1), nil, SWRROptions{}); err == nil {
		t.Error("negative weight accepted")
	}
	if _, err := NewSWRR(servers(1), nil, SWRROptions{MaxFails: -1}); err == nil {
		t.Error("negative max_fails accepted")
	}
}

func TestSWRRExplainDoesNotAdvance(t *testing.T) {
	p := mustSWRR(t, servers(5, 1, 1), nil, SWRROptions{})
	for range 3 {
		x := p.Explain(0, 0)
		if x.Pick != 0 || !x.Candidates[0].Chosen || x.Policy != "swrr" {
			t.Fatalf("explain: %+v", x)
		}
	}
	if got := letters(p, 7); got != "aabacaa" {
		t.Errorf("explain advanced the sequence: %s", got)
	}
	// Explain predicts the next pick.
	for range 20 {
		want := p.Explain(0, 0).Pick
		if got := p.Pick(0, 0); got != want {
			t.Fatalf("explain said %d, pick gave %d", want, got)
		}
	}
}
