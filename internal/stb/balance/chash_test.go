package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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
// statistical leaves a single-goroutine test over many keys to the plain
// run: the race run races the ring in TestCHashConcurrentBounded.
func statistical(t *testing.T) {
	if testing.Short() {
		t.Skip("many keys, one goroutine: make test runs it plain, not under -race")
	}
}

func TestCHashRemapOnRemove(t *testing.T) {
	statistical(t)
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

// fakeClock makes c read its decay clock from *now.
func fakeClock(c *CHash, now *time.Time) *CHash {
	c.clock.now = func() time.Time { return *now }
	return c
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestCHashIdleKeepsAChannelOnOneServer: on a node with nothing else
// running, every request for one channel goes to its ring owner, however
// many (up to the floor, MinLoad x weight / mean weight: 727 for the
// lightest server here) and however fast or slow they come.
func TestCHashIdleKeepsAChannelOnOneServer(t *testing.T) {
	for _, ss := range [][]Server{equalServers(3), servers(100, 150, 80)} {
		for _, count := range []int{5, 50, 500} {
			for _, gap := range []time.Duration{0, time.Millisecond, time.Second, time.Minute} {
				now := t0
				c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.25, Now: now}), &now)
				for ch := range 20 {
					h := HashKey(fmt.Sprintf("ch%d", ch))
					for i := range count {
						now = now.Add(gap)
						if got := c.Pick(h, mix(uint64(i))); got != c.Owner(h) {
							t.Fatalf("weights %v, %d requests %v apart: request %d for ch%d went to %d, its owner is %d",
								ss, count, gap, i, ch, got, c.Owner(h))
						}
					}
					now = now.Add(time.Hour) // the next channel finds the node idle again
				}
			}
		}
	}
}

// zipfRun drives c with n requests at even intervals of gap from *now
// (advancing it), over channels keyed by zipfKeys, and returns the count
// per server position and per key the set of servers used.
func zipfRun(c *CHash, keys []uint64, now *time.Time, gap time.Duration) (counts []int, used map[uint64]map[int32]bool) {
	counts = make([]int, len(c.servers))
	used = make(map[uint64]map[int32]bool)
	for i, h := range keys {
		*now = now.Add(gap)
		got := c.Pick(h, mix(uint64(i)))
		counts[got]++
		if used[h] == nil {
			used[h] = map[int32]bool{}
		}
		used[h][got] = true
	}
	return counts, used
}

// TestCHashBoundHoldsUnderZipf drives a Zipf(1.1) channel stream (the top
// channel alone about a sixth of all requests, more than twice a server's
// share) through weighted servers, fast enough that the bound decides, and
// checks after every pick that the chosen server is within its bound
// ((1+eps) x its weight share of the node's recent requests), and over the
// run that no server took more than about 1+eps times its share. It also
// checks the test has teeth: without the bound the same stream overloads a
// server far past 1+eps.
func TestCHashBoundHoldsUnderZipf(t *testing.T) {
	const eps = 0.25
	ss := servers(100, 100, 100, 100, 100, 100, 100, 100, 200, 200, 50, 50, 100, 100, 100, 100)
	keys := zipfKeys(300_000, 2000, 1.1, 42)
	now := t0
	o := CHashOptions{Epsilon: eps, HalfLife: 10 * time.Second, MinLoad: 100, Now: now}
	c := fakeClock(mustCHash(t, ss, nil, o), &now)
	// 10,000 requests a second: 100,000 a half-life, 6,250 per server
	// against a floor of 100.
	const gap = 100 * time.Microsecond
	zipfRun(c, keys[:100_000], &now, gap) // settle
	cum := make([]int, len(ss))
	for i, h := range keys[100_000:] {
		now = now.Add(gap)
		j := c.Pick(h, mix(uint64(i)))
		cum[j]++
		// The pick checked the load against the total as of the last
		// tick; the total it finds now differs by at most a tick's
		// requests (1/64 of a half-life's).
		tick := c.clock.tick.Load()
		if load, b := c.loadAt(j, tick), c.bound(j, c.totalLoad()); load > b*1.02+1 {
			t.Fatalf("pick %d: server %d holds %.1f recent requests, bound %.1f", i, j, load, b)
		}
	}
	s := spread(cum, ss)
	if s > 1+eps+0.03 {
		t.Errorf("max/mean (per weight) %.3f, bound 1+eps = %.2f", s, 1+eps)
	}
	t.Logf("bounded: max/mean (per weight) %.3f", s)

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

// TestCHashHotChannelSpreadsOverFewServers: one channel with 30% of a busy
// 16-server node's requests is replicated over a few servers (its demand
// over a mean server's bound, at copyFill), not all of them; the cold
// channels stay on their first two; every server stays within its bound.
func TestCHashHotChannelSpreadsOverFewServers(t *testing.T) {
	const eps, n = 0.25, 16
	ss := equalServers(n)
	now := t0
	c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: eps, HalfLife: 10 * time.Second, MinLoad: 100, Now: now}), &now)
	hot := HashKey("final")
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]uint64, 200_000)
	for i := range keys {
		if r.Float64() < 0.3 {
			keys[i] = hot
		} else {
			keys[i] = HashKey(fmt.Sprintf("cold%d", r.IntN(4000)))
		}
	}
	zipfRun(c, keys[:100_000], &now, 100*time.Microsecond)
	counts, used := zipfRun(c, keys[100_000:], &now, 100*time.Microsecond)
	// Its demand is 0.3 x total, a copy's budget copyFill x (1+eps) x
	// total / n: ceil(7.7) = 8 replicas, which it may outgrow a little
	// where its replicas are full.
	if got := len(used[hot]); got < 3 || got > 10 {
		t.Errorf("the hot channel went to %d servers, want 3..10", got)
	}
	coldAffine, cold := 0, 0
	for h, srv := range used {
		if h == hot {
			continue
		}
		a, b := c.firstTwo(h)
		cold++
		if len(srv) == 1 && (srv[a] || srv[b]) || len(srv) == 2 && srv[a] && srv[b] {
			coldAffine++
		}
	}
	if f := float64(coldAffine) / float64(cold); f < 0.9 {
		t.Errorf("%.2f of cold channels stayed on their first two servers, want >= 0.9", f)
	}
	if s := spread(counts, ss); s > 1+eps+0.03 {
		t.Errorf("max/mean %.3f", s)
	}
	t.Logf("hot channel on %d servers; %.3f of cold channels on their first two only", len(used[hot]), float64(coldAffine)/float64(cold))
}

// TestCHashConcurrentBounded: many goroutines picking at once lose no count
// and keep every server within its bound plus the number of racing pickers.
func TestCHashConcurrentBounded(t *testing.T) {
	const eps, workers, per = 0.2, 8, 20_000
	ss := equalServers(8)
	now := t0 // the clock stands still: nothing decays, so counts add up exactly
	c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: eps, MinLoad: 10, Now: now}), &now)
	keys := zipfKeys(per, 500, 1.1, 3)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				if c.Pick(keys[(i+w*7919)%per], uint64(w)) < 0 {
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
		if b := c.bound(int32(j), float64(total)) + workers; float64(v) > b {
			t.Errorf("server %d: %d > %v", j, v, b)
		}
	}
}

// TestCHashExplainPredictsPick: under load, with hot keys replicated and
// cold keys spilling, Explain names the server Pick then chooses, and
// changes nothing itself (counts, clock, total).
func TestCHashExplainPredictsPick(t *testing.T) {
	ss := servers(100, 200, 100, 50, 100, 100, 150, 100)
	now := t0
	c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.1, HalfLife: 10 * time.Second, MinLoad: 50, Now: now}), &now)
	keys := zipfKeys(60_000, 300, 1.2, 5)
	zipfRun(c, keys[:40_000], &now, 100*time.Microsecond)
	kinds := map[string]int{}
	for i, h := range keys[40_000:] {
		now = now.Add(100 * time.Microsecond)
		client := mix(uint64(i) + 99)
		loads, tick, total, slot := fmt.Sprint(c.Loads()), c.clock.tick.Load(), c.total.Load(), c.keys.slot(mix(h)).Load()
		x := c.Explain(h, client)
		if fmt.Sprint(c.Loads()) != loads || c.clock.tick.Load() != tick || c.total.Load() != total || c.keys.slot(mix(h)).Load() != slot {
			t.Fatal("explain changed the policy's state")
		}
		if got := c.Pick(h, client); got != x.Pick {
			t.Fatalf("request %d: explain said %d, pick gave %d: %+v", i, x.Pick, got, x)
		}
		chosen := 0
		for _, cd := range x.Candidates {
			if cd.Chosen {
				chosen++
				kinds[strings.SplitN(strings.SplitN(cd.Note, "; ", 2)[1], ",", 2)[0]]++
			}
		}
		if chosen != 1 || len(x.Notes) < 3 {
			t.Fatalf("explanation: %+v", x)
		}
	}
	// The run went through every kind of choice.
	for _, k := range []string{"ring owner", "second server", "first two", "replica"} {
		if kinds[k] == 0 {
			t.Errorf("no pick chose a %q: %v", k, kinds)
		}
	}
	u := mustCHash(t, ss, nil, CHashOptions{})
	if x := u.Explain(7, 0); x.Pick != u.Pick(7, 0) || len(x.Candidates) != 1 {
		t.Errorf("unbounded explain: %+v", x)
	}
}

// TestCHashExplainWhenEveryServerIsFull: with every server past its bound
// (a burst within one tick on a node whose total is still zero, so each
// bound is its floor), Explain still names a server, the least loaded one,
// and Pick takes the same. An earlier Explain walked the ring and answered
// -1 when it found no room, which TestTableSwapRace once caught: picks on
// the shared counters had filled every server under it.
func TestCHashExplainWhenEveryServerIsFull(t *testing.T) {
	now := t0
	c := fakeClock(mustCHash(t, servers(100, 100, 100, 100, 100, 100), nil,
		CHashOptions{Epsilon: 0.1, HalfLife: 10 * time.Second, MinLoad: 1, Now: now}), &now)
	for i := range 3000 {
		c.Pick(HashKey(fmt.Sprint("k", i)), uint64(i))
	}
	loads, _ := c.Loads()
	for j, v := range loads {
		if b := c.bound(int32(j), c.totalLoad()); float64(v) <= b {
			t.Fatalf("server %d has room (%d recent, bound %.1f): the burst did not fill the node", j, v, b)
		}
	}
	for i := range 50 {
		h := HashKey(fmt.Sprint("k", i))
		x := c.Explain(h, uint64(i))
		if x.Pick < 0 || !strings.Contains(fmt.Sprint(x.Notes), "every server tried is full") {
			t.Fatalf("key %d: explain on a full node: %+v", i, x)
		}
		if got := c.Pick(h, uint64(i)); got != x.Pick {
			t.Fatalf("key %d: explain said %d, pick gave %d", i, x.Pick, got)
		}
	}
}

// TestCHashInherit: a rebuild with the same servers shares the counters
// (picks on either count for both); one with other servers carries the
// loads over by server identity and the keys' demand as it is.
func TestCHashInherit(t *testing.T) {
	ss := equalServers(4)
	now := t0
	o := CHashOptions{Epsilon: 0.1, Now: now}
	old := fakeClock(mustCHash(t, ss, nil, o), &now)
	for k := range 1000 {
		old.Pick(HashKey(fmt.Sprint(k)), 0)
	}
	same, _ := newCHash(ss, nil, o, old)
	same.Inherit(old)
	old.Pick(1, 0)
	if a, b := fmt.Sprint(old.Loads()), fmt.Sprint(same.Loads()); a != b {
		t.Errorf("same servers: %s vs %s", a, b)
	}
	c, _ := newCHash(ss[1:], nil, o, old)
	c.Inherit(old)
	oldLoads, _ := old.Loads()
	loads, total := c.Loads()
	if !slices.Equal(loads, oldLoads[1:]) || total != oldLoads[1]+oldLoads[2]+oldLoads[3] {
		t.Errorf("inherited %v (total %d) from %v", loads, total, oldLoads)
	}
	if c.keys != old.keys {
		t.Error("the keys' demand was not carried over")
	}
	other, _ := newCHash(servers(100, 100), nil, CHashOptions{Epsilon: 0.1, Now: now}, nil)
	other.servers[0].Name, other.servers[1].Name = "elsewhere-a", "elsewhere-b"
	other.Inherit(old)
	if l, total := other.Loads(); total != 0 || other.keys == old.keys {
		t.Errorf("a policy with no server in common inherited %v", l)
	}
}

// TestCHashDecay: loads and demand halve every half-life, and a channel
// that was hot is cold again once its burst has faded (here across a
// rebuild, which is what restarts the clock in a scheduler).
func TestCHashDecay(t *testing.T) {
	ss := equalServers(3)
	now := t0
	o := CHashOptions{Epsilon: 0.25, HalfLife: 10 * time.Second, MinLoad: 100, Now: now}
	c := fakeClock(mustCHash(t, ss, nil, o), &now)
	h := HashKey("match")
	used := map[int32]bool{}
	for i := range 2000 {
		used[c.Pick(h, mix(uint64(i)))] = true
	}
	if len(used) < 2 {
		t.Fatalf("2,000 requests against a floor of 100 stayed on %v", used)
	}
	_, before := c.Loads()
	now = now.Add(10 * time.Second)
	c.clock.refresh()
	if _, after := c.Loads(); math.Abs(float64(after)-float64(before)/2) > 3 {
		t.Errorf("after one half-life the loads add up to %d, from %d", after, before)
	}
	now = now.Add(10 * 10 * time.Second)
	o.Now = now
	next := fakeClock(mustCHash(t, ss, nil, o), &now)
	next.Inherit(c)
	for i := range 50 {
		if got := next.Pick(h, mix(uint64(i))); got != next.Owner(h) {
			t.Fatalf("request %d after the burst faded went to %d, owner %d", i, got, next.Owner(h))
		}
	}
}

// TestCHashSlowStartBounded: a returning server keeps its ring points (no
// key moves) but takes only its ramped share of a busy node's requests.
func TestCHashSlowStartBounded(t *testing.T) {
	ss := equalServers(4)
	loads := healthy(4)
	now := t0
	loads[0].Since = now.Add(-6 * time.Second) // 10% of its weight, Envoy's floor
	o := CHashOptions{Epsilon: 0.25, HalfLife: 10 * time.Second, MinLoad: 100, Now: now,
		SlowStart: SlowStart{Window: time.Minute}}
	c := fakeClock(mustCHash(t, ss, loads, o), &now)
	full := mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.25})
	for k := range 10_000 {
		if h := HashKey(fmt.Sprint(k)); c.Owner(h) != full.Owner(h) {
			t.Fatalf("slow start moved key %d", k)
		}
	}
	if c.RampingUntil() != now.Add(54*time.Second) {
		t.Errorf("ramping until %v", c.RampingUntil())
	}
	keys := zipfKeys(200_000, 2000, 1.05, 8)
	zipfRun(c, keys[:100_000], &now, 100*time.Microsecond)
	counts, _ := zipfRun(c, keys[100_000:], &now, 100*time.Microsecond)
	share := float64(counts[0]) / 100_000
	if want := 1.25 * 0.1 / 3.1; share > want*1.05 {
		t.Errorf("the ramping server took %.4f of the requests, its bound is %.4f", share, want)
	}
}

// TestCHashRemoveMovesOnlyItsKeys: every server of a key's preference list
// (owner, second, replicas) is a function of the ring, so removing a server
// changes only the entries that were it, and the owner it leaves is taken
// by the key's second server. On an idle node, picks move only for keys
// the removed server owned.
func TestCHashRemoveMovesOnlyItsKeys(t *testing.T) {
	ss := equalServers(12)
	o := CHashOptions{Epsilon: 0.25}
	full := mustCHash(t, ss, nil, o)
	for removed := range int32(12) {
		rest := slices.DeleteFunc(slices.Clone(ss), func(s Server) bool { return s.Index == removed })
		after := mustCHash(t, rest, nil, o)
		for k := range 3000 {
			h := HashKey(fmt.Sprint("key", k))
			list := func(c *CHash) []int32 {
				kk := c.search(mix(h))
				s := keyServers{c: c, keyHash: h, k0: kk, p0: c.owner[kk], p1: -1}
				out := make([]int32, 8)
				for i := range out {
					out[i] = c.servers[s.at(i)].Index
				}
				return out
			}
			a, b := list(full), list(after)
			if a[0] == removed {
				if b[0] != a[1] {
					t.Fatalf("removing %d: key %d's owner went to %d, not its second server %d", removed, k, b[0], a[1])
				}
				continue
			}
			if a[1] == removed {
				continue // the second server moves on, and with it the skip rule of the replicas
			}
			for i := range a {
				if a[i] != removed && a[i] != b[i] {
					t.Fatalf("removing %d moved key %d's server %d from %d to %d (%v -> %v)", removed, k, i, a[i], b[i], a, b)
				}
			}
		}
		// Idle picks: one request per key on fresh policies.
		fresh := mustCHash(t, ss, nil, o)
		for k := range 3000 {
			h := HashKey(fmt.Sprint("key", k))
			if was, is := fresh.Pick(h, 0), after.Pick(h, 0); was != is && was != removed {
				t.Fatalf("removing %d moved key %d from %d to %d", removed, k, was, is)
			}
		}
	}
}

// TestCHashWeightedBounded: under a busy uniform stream every server's share
// follows its weight (ring points and bound both scale with it).
func TestCHashWeightedBounded(t *testing.T) {
	statistical(t)
	ss := servers(100, 200, 100, 400, 50, 150)
	now := t0
	c := fakeClock(mustCHash(t, ss, nil, CHashOptions{Epsilon: 0.25, VirtualNodes: 1000, HalfLife: 10 * time.Second, MinLoad: 100, Now: now}), &now)
	r := rand.New(rand.NewPCG(4, 5))
	keys := make([]uint64, 400_000)
	for i := range keys {
		keys[i] = HashKey(fmt.Sprint(r.IntN(50_000)))
	}
	zipfRun(c, keys[:100_000], &now, 50*time.Microsecond)
	counts, _ := zipfRun(c, keys[100_000:], &now, 50*time.Microsecond)
	m := map[int32]int{}
	for j, n := range counts {
		m[int32(j)] = n
	}
	checkShares(t, m, ss, 0.10)
}

func TestCHashEmptyAndBad(t *testing.T) {
	c := mustCHash(t, nil, nil, CHashOptions{Epsilon: 0.5})
	if c.Pick(1, 0) != -1 || c.Owner(1) != -1 || c.Explain(1, 0).Pick != -1 {
		t.Error("empty ring picked something")
	}
	for _, o := range []CHashOptions{{Epsilon: -1}, {Epsilon: math.NaN()}, {HalfLife: -time.Second}, {MinLoad: -1}, {MinLoad: math.Inf(1)}} {
		if _, err := NewCHash(equalServers(2), nil, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
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

// TestCHashSmallNodes: nodes of one and two servers, overloaded by one
// channel, pick among what they have.
func TestCHashSmallNodes(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		now := t0
		c := fakeClock(mustCHash(t, equalServers(n), nil, CHashOptions{Epsilon: 0.1, MinLoad: 1, Now: now}), &now)
		used := map[int32]int{}
		for i := range 3000 {
			now = now.Add(time.Millisecond)
			used[c.Pick(HashKey(fmt.Sprint("ch", i%3)), mix(uint64(i)))]++
		}
		if len(used) != n {
			t.Errorf("%d servers: used %v", n, used)
		}
	}
}
