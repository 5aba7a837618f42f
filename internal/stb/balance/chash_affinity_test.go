package balance

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The affinity simulation: a stream of channel requests with Zipf(s)
// popularity over 10,000 channels, arriving evenly in (fake) time through
// one bounded chash node of benchServers, measured after the loads have
// settled. It reports what the cache sees:
//
//   - copies: distinct servers a channel was sent to in the measured
//     window, the mean over the channels requested and over the top 1%;
//   - primary: share of requests served by the channel's ring owner;
//   - first two: share served by the owner or the next distinct server
//     clockwise (the two servers a channel's cache is warm on first);
//   - max/mean: the busiest server's requests over the mean, per unit of
//     weight.

const (
	affChannels = 10_000
	// affPerHalfLife: requests per half-life per server of mean weight,
	// so a server's recent load settles near 1.44x this, well above the
	// floor (MinLoad 1,000) where the bound is what decides.
	affPerHalfLife = 4000
	affWarmup      = 3 // half-lives before measuring
	affMeasure     = 2 // half-lives measured
)

type affinityResult struct {
	copiesMean, copiesTop, primary, firstTwo, maxMean float64
}

func (r affinityResult) String() string {
	return fmt.Sprintf("copies %.2f (top 1%% %.1f), primary %.2f, first two %.3f, max/mean %.3f",
		r.copiesMean, r.copiesTop, r.primary, r.firstTwo, r.maxMean)
}

// zipfChannels draws channel ranks with P(rank k) proportional to 1/k^s, any
// s > 0 (math/rand's Zipf needs s > 1), by inverting the CDF.
type zipfChannels struct {
	cdf    []float64
	hashes []uint64
	r      *rand.Rand
}

func newZipfChannels(channels int, s float64, seed uint64) *zipfChannels {
	z := &zipfChannels{cdf: make([]float64, channels), hashes: make([]uint64, channels), r: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	sum := 0.0
	for k := range channels {
		sum += math.Pow(float64(k+1), -s)
		z.cdf[k] = sum
		z.hashes[k] = HashKey(fmt.Sprintf("ch%d", k))
	}
	for k := range z.cdf {
		z.cdf[k] /= sum
	}
	return z
}

func (z *zipfChannels) next() int {
	i, _ := slices.BinarySearch(z.cdf, z.r.Float64())
	return min(i, len(z.cdf)-1)
}

// firstTwo is the key's ring owner and the next distinct server clockwise,
// as server indices.
func (c *CHash) firstTwo(keyHash uint64) (int32, int32) {
	k := c.search(mix(keyHash))
	s := keyServers{c: c, keyHash: keyHash, k0: k, p0: c.owner[k], p1: -1}
	return c.servers[s.at(0)].Index, c.servers[s.at(1)].Index
}

// newAffinityCHash builds the bounded policy the simulation drives, on the
// fake clock now.
func newAffinityCHash(ss []Server, eps float64, now *time.Time) *CHash {
	c := must(NewCHash(ss, nil, CHashOptions{Epsilon: eps, Now: *now})).(*CHash)
	c.clock.now = func() time.Time { return *now }
	return c
}

func simulateAffinity(servers int, s, eps float64, seed uint64) affinityResult {
	ss, _ := benchServers(servers)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	c := newAffinityCHash(ss, eps, &now)
	z := newZipfChannels(affChannels, s, seed)
	perHalfLife := affPerHalfLife * servers
	dt := defaultHalfLife / time.Duration(perHalfLife)
	first := make([][2]int32, affChannels)
	for k, h := range z.hashes {
		first[k][0], first[k][1] = c.firstTwo(h)
	}
	words := (servers + 63) / 64
	seen := make([]uint64, affChannels*words)
	counts := make([]int, servers)
	var primary, firstTwo, measured int
	for i := range (affWarmup + affMeasure) * perHalfLife {
		now = t0.Add(time.Duration(i) * dt)
		k := z.next()
		got := c.Pick(z.hashes[k], mix(uint64(i)))
		if i < affWarmup*perHalfLife {
			continue
		}
		measured++
		counts[got]++
		seen[k*words+int(got)/64] |= 1 << (got % 64)
		if got == first[k][0] {
			primary++
			firstTwo++
		} else if got == first[k][1] {
			firstTwo++
		}
	}
	var r affinityResult
	requested, top := 0, affChannels/100
	for k := range affChannels {
		n := 0
		for _, w := range seen[k*words : (k+1)*words] {
			n += bits.OnesCount64(w)
		}
		if n > 0 {
			requested++
			r.copiesMean += float64(n)
		}
		if k < top {
			r.copiesTop += float64(n)
		}
	}
	r.copiesMean /= float64(requested)
	r.copiesTop /= float64(top)
	r.primary = float64(primary) / float64(measured)
	r.firstTwo = float64(firstTwo) / float64(measured)
	r.maxMean = spread(counts, ss)
	return r
}

// TestCHashAffinityTarget: at 64 servers under Zipf(1.1), bounded chash
// (epsilon 0.25) keeps the busiest server within 1.3x the mean and serves
// at least 80% of requests from one of a channel's first two servers. The
// first-two share cannot go much higher: no assignment that keeps every
// server within (1+epsilon) x its share serves more than firstTwoCeiling
// of the requests there (0.811 for this node and stream), and the test
// checks the pick is within a point of it.
func TestCHashAffinityTarget(t *testing.T) {
	statistical(t)
	r := simulateAffinity(64, 1.1, 0.25, 7)
	ceiling := firstTwoCeiling(64, 1.1, 0.25)
	t.Logf("64 servers, Zipf(1.1): %v; ceiling %.4f", r, ceiling)
	if r.maxMean > 1.3 {
		t.Errorf("max/mean %.3f > 1.3", r.maxMean)
	}
	if r.firstTwo < 0.8 || r.firstTwo < ceiling-0.01 {
		t.Errorf("%.3f of requests at one of the channel's first two servers, want >= 0.8 and within 0.01 of the ceiling %.4f", r.firstTwo, ceiling)
	}
}

// firstTwoCeiling is the largest share of a Zipf(s) stream over the
// affinity channels that any assignment can serve from each channel's
// first two servers while no server takes more than (1+eps) x its weight
// share: a maximum flow from the channels (capacity: their popularity) to
// their first two servers to the sink (capacity: the servers' bounds).
func firstTwoCeiling(servers int, s, eps float64) float64 {
	ss, _ := benchServers(servers)
	now := time.Now()
	c := newAffinityCHash(ss, eps, &now)
	z := newZipfChannels(affChannels, s, 1)
	sumW := 0.0
	for _, sv := range ss {
		sumW += sv.Weight
	}
	// Nodes: 0 source, 1..K channels, K+1..K+N servers, K+N+1 sink.
	k, n := affChannels, servers
	g := newFlowGraph(k + n + 2)
	for i := range k {
		p := z.cdf[i]
		if i > 0 {
			p -= z.cdf[i-1]
		}
		a, b := c.firstTwo(z.hashes[i])
		g.edge(0, 1+i, p)
		g.edge(1+i, 1+k+int(a), 1)
		g.edge(1+i, 1+k+int(b), 1)
	}
	for j, sv := range ss {
		g.edge(1+k+j, k+n+1, (1+eps)*sv.Weight/sumW)
	}
	return g.maxFlow(0, k+n+1)
}

// flowGraph is Dinic's maximum flow on float capacities.
type flowGraph struct {
	head, next, to []int
	cap            []float64
	level, iter    []int
}

func newFlowGraph(nodes int) *flowGraph {
	g := &flowGraph{head: make([]int, nodes), level: make([]int, nodes), iter: make([]int, nodes)}
	for i := range g.head {
		g.head[i] = -1
	}
	return g
}

func (g *flowGraph) edge(u, v int, c float64) {
	for _, e := range [2]struct {
		from, to int
		cap      float64
	}{{u, v, c}, {v, u, 0}} {
		g.to = append(g.to, e.to)
		g.cap = append(g.cap, e.cap)
		g.next = append(g.next, g.head[e.from])
		g.head[e.from] = len(g.to) - 1
	}
}

const flowTiny = 1e-12

func (g *flowGraph) maxFlow(s, t int) float64 {
	total := 0.0
	for {
		for i := range g.level {
			g.level[i] = -1
		}
		g.level[s] = 0
		queue := []int{s}
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for e := g.head[u]; e >= 0; e = g.next[e] {
				if v := g.to[e]; g.cap[e] > flowTiny && g.level[v] < 0 {
					g.level[v] = g.level[u] + 1
					queue = append(queue, v)
				}
			}
		}
		if g.level[t] < 0 {
			return total
		}
		copy(g.iter, g.head)
		for {
			f := g.push(s, t, math.Inf(1))
			if f <= flowTiny {
				break
			}
			total += f
		}
	}
}

func (g *flowGraph) push(u, t int, limit float64) float64 {
	if u == t {
		return limit
	}
	for ; g.iter[u] >= 0; g.iter[u] = g.next[g.iter[u]] {
		e := g.iter[u]
		if v := g.to[e]; g.cap[e] > flowTiny && g.level[v] == g.level[u]+1 {
			if f := g.push(v, t, min(limit, g.cap[e])); f > flowTiny {
				g.cap[e] -= f
				g.cap[e^1] += f
				return f
			}
		}
	}
	return 0
}

// BenchmarkCHashAffinity prints the affinity table:
//
//	go test -run '^$' -bench CHashAffinity ./internal/stb/balance
func BenchmarkCHashAffinity(b *testing.B) {
	for _, s := range []float64{0.8, 1.1, 1.4} {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("zipf=%g/servers=%d", s, n), func(b *testing.B) {
				var r affinityResult
				for b.Loop() {
					r = simulateAffinity(n, s, 0.25, 7)
				}
				b.ReportMetric(r.copiesMean, "copies")
				b.ReportMetric(r.copiesTop, "copies-top1%")
				b.ReportMetric(r.primary, "primary")
				b.ReportMetric(r.firstTwo, "first-two")
				b.ReportMetric(r.maxMean, "max/mean")
			})
		}
	}
}
