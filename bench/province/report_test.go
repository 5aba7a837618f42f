package main

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/lab"
)

// fakeResults is a small run: four samples 10 s apart (the first only
// starts the counters, the second still has sessions arriving), two
// cities, a 3-member etcd cluster, a storm at +12 s.
func fakeResults() *Results {
	set := Settings{Sessions: 3000, Duration: 30 * time.Second, Sample: 10 * time.Second, Period: 10 * time.Second,
		SessionTTL: 2 * time.Minute, Refresh: 5 * time.Second, Zap: 0.2, StormEvery: time.Minute, StormFirst: 12 * time.Second,
		StormShare: 0.3, StormWindow: 5 * time.Second, Servers: 160, Capacity: 0.8, Standby: []string{"hefei"}, Addrs: 8,
		Workers: 16, EtcdMembers: 3, EtcdHistory: 5 * time.Minute, CheckInterval: time.Second, Channels: 200,
		Cities: []CityPlan{{City: "hefei", Sessions: 2000, Servers: 3, ServerMbps: 3200}, {City: "wuhu", Sessions: 1000, Servers: 2, ServerMbps: 2400}}}
	// solves: how many in the interval, the first of them within 250 ms,
	// the rest within 500 ms.
	sample := func(t, cpu, rev, db, puts float64, fast, slow float64) Sample {
		s := Sample{T: t, MachineBusy: 80,
			Procs: []ProcSample{{Name: lab.CenterID, N: 1, CPU: cpu, RSS: 40}, {Name: "hefei-1", N: 1, CPU: 2 * cpu, RSS: 60}, {Name: "etcd1", N: 1, CPU: cpu, RSS: 50}, {Name: groupEdges, N: 48, CPU: 1, RSS: 1000}}}
		for _, in := range []struct{ id, city string }{{lab.CenterID, ""}, {"hefei-1", "hefei"}, {"hefei-2", "hefei"}, {"wuhu-1", "wuhu"}} {
			p := PlannerSample{Instance: in.id, City: in.city, Up: true, EtcdWriteBytes: -1}
			if in.id == "hefei-1" {
				n := fast + slow
				p.Sessions, p.Planned, p.Fallback, p.Gap, p.AtDesired = 2000, 2000, 10, 0.02, 0.5
				p.Solves, p.SolveSum, p.Timeouts = n, 0.3*n, n
				p.SolveHist = []float64{0, 0, 0, 0, 0, 0, fast, n, n, n, n}
			}
			s.Planners = append(s.Planners, p)
		}
		for k := 1; k <= 3; k++ {
			s.Etcd = append(s.Etcd, EtcdSample{Member: "etcd" + string(rune('0'+k)), Up: true, Leader: k == 2, Puts: puts, Txns: puts / 5,
				RecvBytes: 10240, DBSize: db, DBInUse: db * 0.9, Revision: rev, Keys: 274})
		}
		return s
	}
	hist := make([]uint64, histBuckets)
	hist[histBucket(5*time.Millisecond)] = 90
	hist[histBucket(80*time.Millisecond)] = 10
	return &Results{When: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), Machine: "AMD EPYC, 2 cores, 24 GiB RAM, Linux 6", LoadAvg: "1.00 1.00 1.00",
		Settings: set, LabUp: 12, DelayBy: "tun", Storms: []float64{12},
		Samples: []Sample{
			sample(0, 0, 1000, 1<<20, 0, 0, 0),
			sample(10, 100, 1800, 3<<20, 9000, 5, 5), // the ramp: not in the means
			sample(20, 5, 2600, 5<<20, 1300, 1, 1),
			sample(30, 7, 3400, 7<<20, 1500, 1, 0),
		},
		Load:    []Bucket{{Requests: 600, Own: 600, Hist: hist}, {Requests: 1500, Zaps: 900, Storm: 900, Own: 1499, Failures: 1, Hist: hist}, {Requests: 600, Own: 600, Hist: hist}},
		PerCity: []CityLoad{{City: "hefei", Bucket: Bucket{Requests: 1800, Own: 1799, Failures: 1}}, {City: "wuhu", Bucket: Bucket{Requests: 900, Own: 900}}},
	}
}

// The section says what was run and what it measured: the figures come
// out of the samples as the tables' headers say.
func TestSection(t *testing.T) {
	r := fakeResults()
	sec := section(r, "docs/img/province.png")
	if !strings.HasPrefix(sec, docBegin+"\n") || !strings.HasSuffix(sec, docEnd+"\n") {
		t.Fatalf("the section is not between its markers:\n%s", sec)
	}
	for _, want := range []string{
		"**Size: 3,000 sessions**, 0.1% of the design's 3,000,000",
		"hefei 2,000, wuhu 1,000",
		"**Time is not accelerated**",
		"`alloc.period` 10s and `alloc.session_ttl` 2m",
		// CPU: the means of the steady samples (+20 s, +30 s: the ramp, one
		// refresh of 5 s, ends within the one at +10 s), the storm's
		// interval apart.
		"| center | 1 | 6.0% | 5.0% / 7.0% | 7.0% |",
		"| hefei-1 | 1 | 12.0% | 10.0% / 14.0% | 14.0% | 60 MiB | 60 MiB | 60 MiB |",
		"| edges | 48 | 1.0% |",
		"The lab's processes used 25% of a core in all: the 18 schedulers 18%, the etcd members 6%",
		// The planner: 3 solves in the window, 0.3 s each; two within 250 ms.
		"| hefei-1 | 2,000 | 2,000 | 2,000 | 10 | 3 | 300 ms | ≤ 250 ms / ≤ 500 ms / ≤ 500 ms | 0.0200 / 0.0200 | 3 | 50.0% | 1,800 | 1 | own 100.0% |",
		"| hefei-2 | - |",
		// etcd: the leader's puts per second, revision and size growth.
		"140.0/s mean (storm intervals 130.0/s, others 150.0/s), highest interval 900.0/s",
		"1000 -> 3400 over 30 s: +80.0/s",
		"1.0 MiB at the load's start, 7.0 MiB at its end",
		"not exported by this build",
		"the center's housekeeper keeps 5m of etcd's history",
		"| compacted up to (`etcd_debugging_mvcc_compact_revision`) | not during the load (the housekeeper keeps 5m of history) |",
		// The load: the ramp's interval counts in the totals, not in the rates.
		"2,700 STB requests (900 channel changes, 900 of them in storms), 1 failed",
		"60 requests/s outside storms, 150/s in",
		"![etcd database size and revision, and each daemon's CPU and RSS over the run](img/province.png)",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the section lacks %q:\n%s", want, sec)
		}
	}
}

// parseMetrics sums a series over its labels but keeps histogram buckets
// apart by le.
func TestParseMetrics(t *testing.T) {
	m := parseMetrics(`# HELP anysched_requests_total x
# TYPE anysched_requests_total counter
anysched_requests_total{proto="http",region="hefei",result="CZ"} 10
anysched_requests_total{proto="dns",region="hefei",result="CZ"} 5
anysched_alloc_solve_duration_seconds_bucket{le="0.5"} 3
anysched_alloc_solve_duration_seconds_bucket{le="+Inf"} 4
anysched_alloc_solve_duration_seconds_sum 1.25
etcd_mvcc_db_total_size_in_bytes 2.097152e+06
`)
	for k, want := range map[string]float64{"anysched_requests_total": 15, "anysched_alloc_solve_duration_seconds_bucket|0.5": 3,
		"anysched_alloc_solve_duration_seconds_bucket|+Inf": 4, "anysched_alloc_solve_duration_seconds_sum": 1.25, "etcd_mvcc_db_total_size_in_bytes": 2 << 20} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if m.has("anysched_etcd_client_write_bytes_total") {
		t.Error("a series the page lacks is there")
	}
}

// The cities share the sessions and servers out by population, every
// city with at least the lab's two live edges, and the servers carry the
// asked share of the demand.
func TestSplitCities(t *testing.T) {
	cs := splitCities(30000, 160, 0.8)
	var sessions, servers int
	for _, c := range cs {
		sessions += c.Sessions
		servers += c.Servers
		if c.Servers < lab.LiveServers {
			t.Errorf("%s: %d servers", c.City, c.Servers)
		}
		if got := c.ServerMbps * float64(c.Servers); got < 0.8*float64(c.Sessions)*topKbps/1000 {
			t.Errorf("%s: %v Mbit/s for %d sessions", c.City, got, c.Sessions)
		}
	}
	if sessions != 30000 || servers != 160 || cs[0].City != "hefei" || cs[0].Sessions != 4606 {
		t.Errorf("split: %d sessions, %d servers, first %+v", sessions, servers, cs[0])
	}
}

// The latency histogram's quantiles are its buckets' upper bounds.
func TestHist(t *testing.T) {
	h := make([]uint64, histBuckets)
	h[histBucket(time.Millisecond)] = 99
	h[histBucket(time.Second)] = 1
	if p50 := histQuantile(h, 0.5); p50 < 1 || p50 > 1.15 {
		t.Errorf("p50 %v ms, want 1 to 1.15", p50)
	}
	if p99, p100 := histQuantile(h, 0.99), histQuantile(h, 1); p99 > 1.15 || p100 < 1000 || p100 > 1150 {
		t.Errorf("p99 %v ms, max %v ms", p99, p100)
	}
	if v := histBound([]float64{0, 1, 2}, 3, 1); !math.IsInf(v, 1) || bound(v) != "> 5 s" || bound(0.25) != "≤ 250 ms" {
		t.Errorf("beyond the last bucket: %v, %q", v, bound(v))
	}
}
