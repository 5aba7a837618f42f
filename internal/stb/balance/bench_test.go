package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

var benchSizes = []int{8, 64, 1024}

// benchServers: n servers with mixed weights (50..200) and plausible loads.
func benchServers(n int) ([]Server, []Load) {
	r := rand.New(rand.NewPCG(uint64(n), 1))
	ss := make([]Server, n)
	ls := make([]Load, n)
	for i := range ss {
		ss[i] = Server{Index: int32(i), Name: fmt.Sprintf("edge-%04d", i), Weight: float64(50 + 50*r.IntN(4))}
		ls[i] = Load{Healthy: true, CPU: r.Float64() * 0.8, BandwidthMbps: r.Float64() * 8000, CapacityMbps: 10000,
			Connections: r.IntN(2000), RTT: time.Duration(1+r.IntN(20)) * time.Millisecond, Loss: r.Float64() * 0.01}
	}
	return ss, ls
}

type benchPolicy struct {
	name  string
	build func(ss []Server, ls []Load) Policy
}

var benchPolicies = []benchPolicy{
	{"swrr", func(ss []Server, ls []Load) Policy { return must(NewSWRR(ss, ls, SWRROptions{})) }},
	{"chash", func(ss []Server, ls []Load) Policy { return must(NewCHash(ss, ls, CHashOptions{})) }},
	{"chash-bounded", func(ss []Server, ls []Load) Policy { return must(NewCHash(ss, ls, CHashOptions{Epsilon: 0.25})) }},
	{"p2c", func(ss []Server, ls []Load) Policy { return must(NewP2C(ss, ls, P2COptions{})) }},
	{"nearest", func(ss []Server, ls []Load) Policy { return must(NewNearest(ss, ls, NearestOptions{})) }},
	{"nearest-equal", func(ss []Server, ls []Load) Policy {
		eq := append([]Server(nil), ss...)
		for i := range eq {
			eq[i].Weight = 100
		}
		return must(NewNearest(eq, ls, NearestOptions{}))
	}},
}

func must[P Policy](p P, err error) Policy {
	if err != nil {
		panic(err)
	}
	return p
}

// BenchmarkPick: one pick, one goroutine, per policy and node size. Keys
// follow Zipf(1.1) over 10,000 channels; clients are random.
func BenchmarkPick(b *testing.B) {
	keys := zipfKeys(1<<16, 10_000, 1.1, 1)
	clients := make([]uint64, 1<<16)
	for i := range clients {
		clients[i] = mix(uint64(i))
	}
	for _, bp := range benchPolicies {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/servers=%d", bp.name, n), func(b *testing.B) {
				p := bp.build(benchServers(n))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p.Pick(keys[i&0xffff], clients[i&0xffff])
					i++
				}
			})
		}
	}
}

// BenchmarkPickParallel: every core picking in one 64-server node at once,
// the worst case for the per-pick state (swrr's mutex, chash's and p2c's
// shared counters).
func BenchmarkPickParallel(b *testing.B) {
	keys := zipfKeys(1<<16, 10_000, 1.1, 1)
	for _, bp := range benchPolicies {
		b.Run(fmt.Sprintf("%s/servers=64", bp.name), func(b *testing.B) {
			p := bp.build(benchServers(64))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(rand.Uint32())
				for pb.Next() {
					p.Pick(keys[i&0xffff], mix(uint64(i)))
					i++
				}
			})
		})
	}
}

// BenchmarkBuild: constructor cost (off the hot path, on every rebuild).
func BenchmarkBuild(b *testing.B) {
	for _, bp := range benchPolicies {
		for _, n := range []int{64, 1024} {
			b.Run(fmt.Sprintf("%s/servers=%d", bp.name, n), func(b *testing.B) {
				ss, ls := benchServers(n)
				b.ReportAllocs()
				for b.Loop() {
					bp.build(ss, ls)
				}
			})
		}
	}
}

// BenchmarkBuildTable: a province (200 nodes x 50 servers = 10,000) with
// every selection built, as on a health change.
func BenchmarkBuildTable(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Adaptive.Enabled = true
	in := TableInput{Config: cfg}
	for n := range 200 {
		ss, ls := benchServers(50)
		for i := range ss {
			ss[i].Name = fmt.Sprintf("n%d-%s", n, ss[i].Name)
		}
		in.Nodes = append(in.Nodes, NodeInput{Servers: ss, Loads: ls})
	}
	prev, _ := BuildTable(in, nil)
	b.ReportAllocs()
	for b.Loop() {
		prev, _ = BuildTable(in, prev)
	}
}

// BenchmarkCHashSpreadZipf: how unevenly a Zipf(1.1) channel stream (10,000
// channels, 1,000,000 requests) loads the servers, with and without the
// bound: max/mean is the busiest server's load over the mean, per unit of
// weight (1 is perfect; bounded load promises at most about 1+epsilon);
// affinity is the share of requests served by the channel's ring owner.
func BenchmarkCHashSpreadZipf(b *testing.B) {
	keys := zipfKeys(1_000_000, 10_000, 1.1, 7)
	for _, eps := range []float64{0, 0.25, 0.1} {
		for _, n := range benchSizes {
			name := "unbounded"
			if eps > 0 {
				name = fmt.Sprintf("bounded-eps=%g", eps)
			}
			b.Run(fmt.Sprintf("%s/servers=%d", name, n), func(b *testing.B) {
				ss, _ := benchServers(n)
				var s, aff float64
				for b.Loop() {
					c := must(NewCHash(ss, nil, CHashOptions{Epsilon: eps})).(*CHash)
					counts := make([]int, n)
					affine := 0
					for _, h := range keys {
						got := c.Pick(h, 0)
						counts[got]++
						if got == c.Owner(h) {
							affine++
						}
					}
					s, aff = spread(counts, ss), float64(affine)/float64(len(keys))
				}
				b.ReportMetric(s, "max/mean")
				b.ReportMetric(aff, "affinity")
			})
		}
	}
}

func BenchmarkContentHash(b *testing.B) {
	q := KeyOptions{Query: []string{"rendition"}}
	b.Run("channel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ContentHash("/cctv1/2000/index.m3u8", "token=0123456789abcdef", KeyOptions{})
		}
	})
	b.Run("path+query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ContentHash("/vod/films/2024/some-title/720p/seg-00042.ts", "token=0123456789abcdef&rendition=hd", KeyOptions{By: KeyPath, Query: q.Query})
		}
	})
}

func BenchmarkRankNodes(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	nodes := make([]NodeState, 200)
	for i := range nodes {
		nodes[i] = NodeState{Index: int32(i), Loc: Point{31 + r.Float64(), 117 + r.Float64()}, Servers: 50, Healthy: 50,
			Measured: i%2 == 0, RTT: time.Duration(r.IntN(20)) * time.Millisecond, Loss: r.Float64() * 0.02}
	}
	b.ReportAllocs()
	for b.Loop() {
		RankNodes(nodes, Point{31.5, 117.5}, RankOptions{By: RankRTTLoss})
	}
}
