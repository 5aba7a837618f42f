package balance

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
)

const remapKeys = 200_000

func ownerMap(c *CHash, n int) []int32 {
	out := make([]int32, n)
	for k := range out {
		out[k] = c.Owner(HashKey(fmt.Sprintf("key-%d", k)))
	}
	return out
}

// arcShare is the fraction of the hash space server (by Index) owns on c's
// ring: the arcs ending at its points.
func arcShare(c *CHash, server int32) float64 {
	total := 0.0
	for k, p := range c.points {
		prev := c.points[(k+len(c.points)-1)%len(c.points)]
		if c.servers[c.owner[k]].Index == server {
			total += float64(p-prev) / math.Exp2(64) // wraps correctly in uint64
		}
	}
	return total
}

// Remap tolerances. Two things separate the moved fraction from 1/N:
//   - the ring: a server's arc is a sum of V exponential gaps, so its share
//     is 1/N with relative standard deviation 1/sqrt(V) (7.9% for V = 160);
//   - sampling: K keys estimate the arc share with standard deviation
//     sqrt(p(1-p)/K) (0.07 points for p = 0.1, K = 200,000).
//
// The test checks each separately at four standard deviations: the moved
// fraction against the removed server's exact arc share (sampling only), and
// the arc share against 1/N (ring only). The hashes are fixed, so the test is
// deterministic; the bounds say why it passes for any fixed set of names.
func TestCHashRemapOnRemove(t *testing.T) {
	const n, v = 10, 160
	ss := equalServers(n)
	full := mustCHash(t, ss, nil, CHashOptions{VirtualNodes: v})
	before := ownerMap(full, remapKeys)
	var sumMoved float64
	for removed := range int32(n) {
		rest := slices.DeleteFunc(slices.Clone(ss), func(s Server) bool { return s.Index == removed })
		after := ownerMap(mustCHash(t, rest, nil, CHashOptions{VirtualNodes: v}), remapKeys)
		moved := 0
		for k := range before {
			if before[k] != after[k] {
				moved++
				if before[k] != removed {
					t.Fatalf("removing %d moved key %d from %d to %d", removed, k, before[k], after[k])
				}
			} else if after[k] == removed {
				t.Fatalf("key %d still on removed server", k)
			}
		}
		frac := float64(moved) / remapKeys
		share := arcShare(full, removed)
		if sd := math.Sqrt(share * (1 - share) / remapKeys); math.Abs(frac-share) > 4*sd {
			t.Errorf("removed %d: moved %.4f, its arc share is %.4f (4 sd = %.4f)", removed, frac, share, 4*sd)
		}
		if math.Abs(share-1.0/n) > 4/math.Sqrt(v)/n {
			t.Errorf("server %d's arc share %.4f is more than 4 sd from 1/N", removed, share)
		}
		sumMoved += frac
	}
	// Averaged over every server removed, the moved fraction is 1/N up to
	// sampling alone.
	if mean := sumMoved / n; math.Abs(mean-1.0/n) > 4*math.Sqrt(0.1*0.9/remapKeys) {
		t.Errorf("mean moved fraction %.4f, want %.4f", mean, 1.0/n)
	}
}

func TestCHashRemapOnAdd(t *testing.T) {
	const n, v = 10, 160
	ss := equalServers(n + 1)
	before := ownerMap(mustCHash(t, ss[:n], nil, CHashOptions{VirtualNodes: v}), remapKeys)
	full := mustCHash(t, ss, nil, CHashOptions{VirtualNodes: v})
	after := ownerMap(full, remapKeys)
	moved := 0
	for k := range before {
		if before[k] != after[k] {
			moved++
			if after[k] != n {
				t.Fatalf("adding server %d moved key %d from %d to %d", n, k, before[k], after[k])
			}
		}
	}
	frac := float64(moved) / remapKeys
	share := arcShare(full, n)
	if sd := math.Sqrt(share * (1 - share) / remapKeys); math.Abs(frac-share) > 4*sd {
		t.Errorf("moved %.4f, the new server's arc share is %.4f", frac, share)
	}
	if want := 1.0 / (n + 1); math.Abs(share-want) > 4/math.Sqrt(v)*want {
		t.Errorf("new server's share %.4f, want about %.4f", share, want)
	}
}

// TestCHashIndexShiftMovesNothing: identity is the name, so renumbering
// (another server added earlier in the topology) moves no key.
func TestCHashIndexShiftMovesNothing(t *testing.T) {
	ss := equalServers(8)
	a := mustCHash(t, ss, nil, CHashOptions{})
	shifted := slices.Clone(ss)
	slices.Reverse(shifted)
	for i := range shifted {
		shifted[i].Index += 100
	}
	b := mustCHash(t, shifted, nil, CHashOptions{})
	for k := range 10_000 {
		h := HashKey(fmt.Sprint(k))
		if a.Owner(h)+100 != b.Owner(h) {
			t.Fatalf("key %d: %d vs %d", k, a.Owner(h), b.Owner(h))
		}
	}
}

func TestCHashWeightedShares(t *testing.T) {
	ss := servers(100, 200, 100, 400)
	c := mustCHash(t, ss, nil, CHashOptions{VirtualNodes: 1000})
	counts := map[int32]int{}
	for k := range 400_000 {
		counts[c.Pick(HashKey(fmt.Sprint(k)), 0)]++
	}
	// V x w/mean points per server: relative sd about 1/sqrt(points) <= 4%.
	checkShares(t, counts, ss, 0.10)
}

// TestCHashBoundedLoadInvariantZipf drives a Zipf(1.1) channel stream (the
// top channel alone is about a sixth of all requests, more than twice a
// server's fair share) and checks after every pick that no server holds more
// than ceil((1+eps) x its weight share of the recent total), across the
// history halvings. It also checks the test has teeth: without the bound the
// same stream overloads a server far past 1+eps.
func TestCHashBoundedLoadInvariantZipf(t *testing.T) {
	const eps = 0.25
	ss := servers(100, 100, 100, 100, 100, 100, 100, 100, 200, 200, 50, 50, 100, 100, 100, 100)
	keys := zipfKeys(300_000, 2000, 1.1, 42)
	c := mustCHash(t, ss, nil, CHashOptions{Epsilon: eps, Window: 20_000})
	sumW := 0.0
	for _, s := range ss {
		sumW += s.Weight
	}
	bound := func(j int, total int64) float64 {
		return math.Ceil((1 + eps) * float64(total) * c.servers[j].Weight / sumW)
	}
	affine := 0
	cum := make([]int, len(ss))
	for i, h := range keys {
		got := c.Pick(h, 0)
		if got == c.Owner(h) {
			affine++
		}
		cum[got]++
		j := int(got) // servers are in index order
		loads, total := c.Loads()
		if float64(loads[j]) > bound(j, total) {
			t.Fatalf("pick %d: server %d holds %d of %d recent, bound %v", i, j, loads[j], total, bound(j, total))
		}
		if i%997 == 0 {
			for j := range loads {
				if float64(loads[j]) > bound(j, total) {
					t.Fatalf("pick %d: server %d holds %d of %d recent, bound %v", i, j, loads[j], total, bound(j, total))
				}
			}
		}
	}
	if _, total := c.Loads(); total >= 2*20_000 {
		t.Errorf("history never faded: total %d", total)
	}
	if f := float64(affine) / float64(len(keys)); f < 0.6 {
		t.Errorf("only %.2f of picks went to the key's ring owner: cache affinity lost", f)
	}
	t.Logf("bounded: %.3f of picks on the ring owner, max/mean (per weight) %.3f", float64(affine)/float64(len(keys)), spread(cum, ss))

	u := mustCHash(t, ss, nil, CHashOptions{})
	clear(cum)
	for _, h := range keys {
		cum[u.Pick(h, 0)]++
	}
	if s := spread(cum, ss); s < 1.5*(1+eps) {
		t.Errorf("unbounded spread %.2f: the stream is not skewed enough to test the bound", s)
	} else {
		t.Logf("unbounded: max/mean (per weight) %.3f", s)
	}
}

// spread is max over servers of (count / weight) divided by the mean of the
// same: 1 is perfectly even.
func spread(counts []int, ss []Server) float64 {
	total, sumW, worst := 0.0, 0.0, 0.0
	for i, s := range ss {
		total += float64(counts[i])
		sumW += s.Weight
	}
	for i, s := range ss {
		worst = max(worst, float64(counts[i])/(s.Weight/sumW*total))
	}
	return worst
}

// TestCHashConcurrentBounded: many goroutines picking at once keep every
// counter within its bound plus the number of racing pickers.
func TestCHashConcurrentBounded(t *testing.T) {
	const eps, workers, per = 0.2, 8, 20_000
	ss := equalServers(8)
	c := mustCHash(t, ss, nil, CHashOptions{Epsilon: eps, Window: 1 << 30})
	keys := zipfKeys(per, 500, 1.1, 3)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				if c.Pick(keys[(i+w*7919)%per], 0) < 0 {
					t.Error("no pick")
					return
				}
			}
		})
	}
	wg.Wait()
	loads, total := c.Loads()
	if total != workers*per {
		t.Errorf("total %d, want %d", total, workers*per)
	}
	for j, v := range loads {
		if b := math.Ceil((1+eps)*float64(total)/8) + workers; float64(v) > b {
			t.Errorf("server %d: %d > %v", j, v, b)
		}
	}
}

func TestCHashInheritAndExplain(t *testing.T) {
	ss := equalServers(4)
	old := mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.1})
	for k := range 1000 {
		old.Pick(HashKey(fmt.Sprint(k)), 0)
	}
	c := mustCHash(t, ss[1:], nil, CHashOptions{Epsilon: 0.1})
	c.Inherit(old)
	oldLoads, _ := old.Loads()
	loads, total := c.Loads()
	if !slices.Equal(loads, oldLoads[1:]) || total != oldLoads[1]+oldLoads[2]+oldLoads[3] {
		t.Errorf("inherited %v (total %d) from %v", loads, total, oldLoads)
	}
	// Explain predicts the pick and changes nothing.
	for k := range 200 {
		h := HashKey(fmt.Sprint("x", k))
		x := c.Explain(h, 0)
		_, t0 := c.Loads()
		if got := c.Pick(h, 0); got != x.Pick {
			t.Fatalf("explain said %d, pick gave %d: %+v", x.Pick, got, x)
		}
		if _, t1 := c.Loads(); t1 != t0+1 {
			t.Fatalf("explain counted a pick")
		}
		if x.Candidates[0].Note == "" || !x.Candidates[len(x.Candidates)-1].Chosen {
			t.Fatalf("explain candidates: %+v", x.Candidates)
		}
	}
	u := mustCHash(t, ss, nil, CHashOptions{})
	if x := u.Explain(7, 0); x.Pick != u.Pick(7, 0) || len(x.Candidates) != 1 {
		t.Errorf("unbounded explain: %+v", x)
	}
}

func TestCHashEmptyAndBad(t *testing.T) {
	c := mustCHash(t, nil, nil, CHashOptions{Epsilon: 0.5})
	if c.Pick(1, 0) != -1 || c.Owner(1) != -1 || c.Explain(1, 0).Pick != -1 {
		t.Error("empty ring picked something")
	}
	if _, err := NewCHash(equalServers(2), nil, CHashOptions{Epsilon: -1}); err == nil {
		t.Error("negative epsilon accepted")
	}
	one := mustCHash(t, equalServers(1), nil, CHashOptions{Epsilon: 0.5})
	for k := range 100 {
		if one.Pick(uint64(k), 0) != 0 {
			t.Fatal("single server not picked")
		}
	}
}

// TestCHashRingReuse: a rebuild for a health change shares the ring; a
// change of server set, weight or virtual nodes builds a new one, identical
// to a fresh build.
func TestCHashRingReuse(t *testing.T) {
	ss := equalServers(6)
	old := mustCHash(t, ss, healthy(6), CHashOptions{})
	loads := healthy(6)
	loads[2].CPU = 0.9
	same, _ := newCHash(ss, loads, CHashOptions{}, old)
	if &same.points[0] != &old.points[0] {
		t.Error("load change rebuilt the ring")
	}
	loads[2].Healthy = false
	for name, tc := range map[string]struct {
		ss    []Server
		loads []Load
		o     CHashOptions
	}{
		"server down":   {ss, loads, CHashOptions{}},
		"weight change": {servers(100, 100, 50, 100, 100, 100), nil, CHashOptions{}},
		"virtual nodes": {ss, nil, CHashOptions{VirtualNodes: 100}},
	} {
		got, _ := newCHash(tc.ss, tc.loads, tc.o, old)
		fresh := mustCHash(t, tc.ss, tc.loads, tc.o)
		if &got.points[0] == &old.points[0] || !slices.Equal(got.points, fresh.points) || !slices.Equal(got.owner, fresh.owner) {
			t.Errorf("%s: ring not rebuilt as fresh", name)
		}
	}
}

func TestRadixSort(t *testing.T) {
	for _, n := range []int{0, 1, 100, 4096, 50_000} {
		keys := zipfKeys(n+1, 1000, 1.1, uint64(n))[:n] // many duplicates
		for i := range keys {
			if i%3 == 0 {
				keys[i] = mix(uint64(i))
			}
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		radixSort(keys)
		if !slices.Equal(keys, want) {
			t.Fatalf("n=%d: not sorted", n)
		}
	}
}
