package overflow_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/overflow"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// docTemplate is a province of one region: hefei-1 holds two live servers
// of 10 Gb/s each, hefei-2 only a vod server (no live server: never
// evaluated for live), hefei-3 one live server without a stated capacity.
// %s is the live service's overflow block.
const docTemplate = `anycast:
  service_ip: 198.18.0.1
  center_prefix: 198.18.0.0/26
regions:
  - name: hefei
    location: {lat: 31.82, lon: 117.23}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    labels: {fleet: live}
    servers:
      - {name: hefei-1-a, address: "10.1.1.10:8080", capacity: {bandwidth_mbps: 10000}}
      - {name: hefei-1-b, address: "10.1.1.11:8080", capacity: {bandwidth_mbps: 10000}}
  - name: hefei-2
    region: hefei
    location: {lat: 31.80, lon: 117.20}
    servers:
      - {name: hefei-2-a, address: "10.1.2.10:8080", labels: {fleet: vod}, capacity: {bandwidth_mbps: 10000}}
  - name: hefei-3
    region: hefei
    location: {lat: 31.70, lon: 117.10}
    labels: {fleet: live}
    servers:
      - {name: hefei-3-a, address: "10.1.3.10:8080"}
zones:
  - name: hefei-all
    region: hefei
    networks: [100.64.0.0/16]
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [730, 2000]
    selection: qoe
    match: {fleet: live}
    overflow: %s
  - name: vod
    hostnames: [vod.iptv.example]
    url_template: "http://{server}/vod/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [2000]
    match: {fleet: vod}
`

func compile(t testing.TB, doc string) *topology.Snapshot {
	t.Helper()
	top, err := topology.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse:\n%v\ndocument:\n%s", err, doc)
	}
	s, err := topology.Compile(top, 1)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

func snapWith(t testing.TB, overflowYAML string) *topology.Snapshot {
	t.Helper()
	return compile(t, fmt.Sprintf(docTemplate, overflowYAML))
}

// ids are the indices tests need.
type ids struct {
	live, vod                 int32
	hefei1, hefei2, hefei3    int32
	hefei1a, hefei1b, hefei3a int32
}

func lookup(t testing.TB, s *topology.Snapshot) ids {
	t.Helper()
	must := func(i int32, ok bool) int32 {
		if !ok {
			t.Fatal("test document lacks an entity")
		}
		return i
	}
	return ids{
		live: must(s.Service("live")), vod: must(s.Service("vod")),
		hefei1: must(s.Node("hefei-1")), hefei2: must(s.Node("hefei-2")), hefei3: must(s.Node("hefei-3")),
		hefei1a: must(s.Server("hefei-1-a")), hefei1b: must(s.Server("hefei-1-b")), hefei3a: must(s.Server("hefei-3-a")),
	}
}

// step is one evaluation, one second after the previous; figures are those
// of hefei-1's two servers (a, b), nil when unknown.
type step struct {
	bw, claimsMbps []float64
	sessions       []int
	requests       uint64 // sent to live@hefei-1 since the previous step
	over           bool
	reason         string // in Reason (over) or the last log record's reason
}

func perServer[T any](s *topology.Snapshot, id ids, ab []T) []T {
	if ab == nil {
		return nil
	}
	out := make([]T, len(s.Servers))
	out[id.hefei1a], out[id.hefei1b] = ab[0], ab[1]
	return out
}

func TestThresholdsAndHysteresis(t *testing.T) {
	cases := []struct {
		name     string
		overflow string
		steps    []step
	}{
		{name: "bandwidth, default resume 0.8", overflow: "{bandwidth_share: 0.9}", steps: []step{
			{bw: []float64{8000, 8900}},
			{bw: []float64{9000, 9000}, over: true, reason: "bandwidth 90% >= 90%"},
			{bw: []float64{8000, 8000}, over: true, reason: "bandwidth 90% >= 90%"}, // between 72% and 90%
			{bw: []float64{7200, 7200}, over: true},                                 // at resume*threshold: still over
			{bw: []float64{7100, 7100}, over: false, reason: "bandwidth 71% < 72%"},
			{bw: []float64{8900, 8900}, over: false}, // below the threshold: stays back
			{bw: []float64{9900, 8900}, over: true, reason: "bandwidth 94% >= 90%"},
		}},
		{name: "claims in kbps against capacity in Mbps", overflow: "{claims_share: 0.8, resume: 0.5}", steps: []step{
			{claimsMbps: []float64{7000, 7000}},
			{claimsMbps: []float64{9000, 7000}, over: true, reason: "claims 80% >= 80%"},
			{claimsMbps: []float64{4000, 4000}, over: true}, // 40%: at resume*threshold
			{claimsMbps: []float64{3000, 4000}, over: false, reason: "claims 35% < 40%"},
		}},
		{name: "sessions per server", overflow: "{sessions_per_server: 1000}", steps: []step{
			{sessions: []int{1200, 700}},
			{sessions: []int{1200, 800}, over: true, reason: "sessions 1,000 per server >= 1,000"},
			{sessions: []int{900, 700}, over: true},
			{sessions: []int{900, 698}, over: false, reason: "sessions 799 per server < 800"},
		}},
		{name: "rps from counters over two readings", overflow: "{rps_per_server: 1000, resume: 0.9}", steps: []step{
			{requests: 5000}, // first reading: no rate yet
			{requests: 1800}, // 900/s per server
			{requests: 2500, over: true, reason: "rps 1,250/s per server >= 1,000"},
			{requests: 1800, over: true}, // 900/s: at resume*threshold
			{requests: 1700, over: false, reason: "rps 850/s per server < 900"},
		}},
		{name: "any figure puts over, every figure must be below", overflow: "{bandwidth_share: 0.9, rps_per_server: 1000}", steps: []step{
			{bw: []float64{1000, 1000}, requests: 100},
			{bw: []float64{9500, 9500}, requests: 1000, over: true, reason: "bandwidth 95% >= 90%"},
			{bw: []float64{1000, 1000}, requests: 1700, over: true}, // rps 850/s between 800 and 1,000
			{bw: []float64{1000, 1000}, requests: 1500, over: false, reason: "bandwidth 10% < 72%, rps 750/s per server < 800"},
			{bw: []float64{9500, 9500}, requests: 2200, over: true, reason: "bandwidth 95% >= 90%, rps 1,100/s per server >= 1,000"},
		}},
		{name: "an unknown figure holds the node", overflow: "{bandwidth_share: 0.9}", steps: []step{
			{bw: nil},
			{bw: []float64{9500, 9500}, over: true},
			{bw: nil, over: true},
			{bw: []float64{-1, -1}, over: true}, // negative: unknown for each server
			{bw: []float64{1000, -1}, over: false, reason: "bandwidth 10% < 72%"}, // the server with a figure
		}},
		{name: "resume 1 comes back just below the threshold", overflow: "{sessions_per_server: 100, resume: 1}", steps: []step{
			{sessions: []int{100, 100}, over: true},
			{sessions: []int{100, 99}, over: false, reason: "sessions 99.5 per server < 100"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapWith(t, tc.overflow)
			id := lookup(t, snap)
			rec := logtest.New()
			c := overflow.New(prometheus.NewRegistry(), rec.Logger())
			counters := overflow.NewCounters(len(snap.Services), len(snap.Nodes))
			now := time.Date(2025, 1, 1, 20, 0, 0, 0, time.UTC)
			wasOver := false
			for i, st := range tc.steps {
				for range st.requests {
					counters.Add(id.live, id.hefei1)
				}
				claims := perServer(snap, id, st.claimsMbps)
				for j := range claims {
					claims[j] *= 1000 // the input is in kbps
				}
				changed := c.Evaluate(overflow.Inputs{
					Snap: snap, BandwidthMbps: perServer(snap, id, st.bw), ClaimedKbps: claims,
					Sessions: perServer(snap, id, st.sessions), Counters: counters, Now: now,
				})
				now = now.Add(time.Second)
				state := c.State()
				if got := state.Over(id.live, id.hefei1); got != st.over {
					t.Fatalf("step %d: Over = %v, want %v (reason %q)", i, got, st.over, state.Reason(id.live, id.hefei1))
				}
				if wantChanged := i == 0 || st.over != wasOver; changed != wantChanged {
					t.Errorf("step %d: Evaluate = %v, want %v", i, changed, wantChanged)
				}
				if st.over && st.reason != "" {
					if got := state.Reason(id.live, id.hefei1); got != st.reason {
						t.Errorf("step %d: Reason = %q, want %q", i, got, st.reason)
					}
				}
				if !st.over && state.Reason(id.live, id.hefei1) != "" {
					t.Errorf("step %d: Reason = %q for a node that is not over", i, state.Reason(id.live, id.hefei1))
				}
				if st.over != wasOver {
					msg := map[bool]string{true: "node over", false: "node back"}[st.over]
					recs := rec.Containing(slog.LevelInfo, msg)
					if len(recs) == 0 {
						t.Fatalf("step %d: no %q logged", i, msg)
					}
					last := recs[len(recs)-1]
					if last.Attrs["service"] != "live" || last.Attrs["node"] != "hefei-1" || (st.reason != "" && last.Attrs["reason"] != st.reason) {
						t.Errorf("step %d: logged %s, want service=live node=hefei-1 reason=%q", i, last, st.reason)
					}
				}
				wasOver = st.over
				// The other nodes never go over: hefei-2 has no live server,
				// hefei-3 no figures.
				for _, n := range []int32{id.hefei2, id.hefei3} {
					if state.Over(id.live, n) {
						t.Fatalf("step %d: node %d over", i, n)
					}
				}
			}
		})
	}
}

func TestNodesWithoutPoolServersIgnored(t *testing.T) {
	snap := snapWith(t, "{bandwidth_share: 0.5, sessions_per_server: 10}")
	id := lookup(t, snap)
	c := overflow.New(nil, nil)
	bw := make([]float64, len(snap.Servers))
	sessions := make([]int, len(snap.Servers))
	for i := range bw {
		bw[i], sessions[i] = 1e6, 1000 // everything far over
	}
	c.Evaluate(overflow.Inputs{Snap: snap, BandwidthMbps: bw, Sessions: sessions, Now: time.Unix(1, 0)})
	st := c.State()
	cases := []struct {
		name      string
		svc, node int32
		over      bool
	}{
		{"live on its node", id.live, id.hefei1, true},
		{"live where it has no server", id.live, id.hefei2, false},
		{"live where only sessions apply (no capacity)", id.live, id.hefei3, true},
		{"vod has no thresholds", id.vod, id.hefei2, false},
		{"vod has no server there", id.vod, id.hefei1, false},
	}
	for _, tc := range cases {
		if got := st.Over(tc.svc, tc.node); got != tc.over {
			t.Errorf("%s: Over = %v, want %v", tc.name, got, tc.over)
		}
	}
	if got := st.Reason(id.live, id.hefei3); got != "sessions 1,000 per server >= 10" {
		t.Errorf("hefei-3 reason = %q: bandwidth has no capacity to be a share of", got)
	}
}

func TestSnapshotChangeCarriesFlagsByName(t *testing.T) {
	snap1 := snapWith(t, "{bandwidth_share: 0.9, rps_per_server: 1000}")
	id1 := lookup(t, snap1)
	reg := prometheus.NewRegistry()
	c := overflow.New(reg, nil)
	now := time.Unix(1000, 0)
	bw := func(s *topology.Snapshot, id ids, v float64) []float64 {
		return perServer(s, id, []float64{v, v})
	}
	c.Evaluate(overflow.Inputs{Snap: snap1, BandwidthMbps: bw(snap1, id1, 9500), Now: now})
	if !c.State().Over(id1.live, id1.hefei1) {
		t.Fatal("hefei-1 not over at 95%")
	}
	if got := testutil.ToFloat64(gauge(t, reg, "live")); got != 1 {
		t.Fatalf("anysched_overflow_nodes{service=live} = %v, want 1", got)
	}

	// The same province with hefei-1 moved to the end and a node added
	// before it: other indices, the same names.
	doc2 := strings.Replace(fmt.Sprintf(docTemplate, "{bandwidth_share: 0.9, rps_per_server: 1000}"), "nodes:\n", `nodes:
  - name: hefei-0
    region: hefei
    location: {lat: 31.9, lon: 117.3}
    labels: {fleet: live}
    servers:
      - {name: hefei-0-a, address: "10.1.0.10:8080", capacity: {bandwidth_mbps: 10000}}
`, 1)
	snap2 := compile(t, doc2)
	id2 := lookup(t, snap2)
	if id2.hefei1 == id1.hefei1 {
		t.Fatal("test document: hefei-1 kept its index")
	}
	counters := overflow.NewCounters(len(snap2.Services), len(snap2.Nodes))
	for range 100_000 {
		counters.Add(id2.live, id2.hefei1)
	}
	// Bandwidth between resume and threshold, the rate not known yet (first
	// reading): still over, under the new indices, with the same reason.
	if !c.Evaluate(overflow.Inputs{Snap: snap2, BandwidthMbps: bw(snap2, id2, 8000), Counters: counters, Now: now.Add(time.Second)}) {
		t.Error("Evaluate on a new snapshot did not publish")
	}
	st := c.State()
	if st.Snapshot() != snap2 {
		t.Fatal("state is not of the new snapshot")
	}
	if !st.Over(id2.live, id2.hefei1) || st.Over(id2.live, id2.hefei3) {
		t.Fatalf("after the reload: hefei-1 over %v (want true), hefei-3 over %v (want false)", st.Over(id2.live, id2.hefei1), st.Over(id2.live, id2.hefei3))
	}
	if got := st.Reason(id2.live, id2.hefei1); got != "bandwidth 95% >= 90%" {
		t.Errorf("carried reason = %q", got)
	}
	if st.Over(id2.live, id1.hefei1) && id1.hefei1 != id2.hefei1 {
		t.Errorf("the flag stayed at hefei-1's old index %d (now %s)", id1.hefei1, snap2.Nodes[id1.hefei1].Name)
	}
	// Bandwidth low, the rate known from the second reading and low: back.
	for range 1000 {
		counters.Add(id2.live, id2.hefei1)
	}
	if !c.Evaluate(overflow.Inputs{Snap: snap2, BandwidthMbps: bw(snap2, id2, 1000), Counters: counters, Now: now.Add(2 * time.Second)}) {
		t.Error("Evaluate did not report the node back")
	}
	if c.State().Over(id2.live, id2.hefei1) {
		t.Error("hefei-1 still over at 10% and 500/s per server")
	}
	if got := testutil.ToFloat64(transitions(t, reg, "live", "back")); got != 1 {
		t.Errorf("transitions{back} = %v, want 1", got)
	}

	// A reload where the service has no thresholds any more drops its series.
	snap3 := compile(t, strings.Replace(doc2, "    overflow: {bandwidth_share: 0.9, rps_per_server: 1000}\n", "", 1))
	c.Evaluate(overflow.Inputs{Snap: snap3, Now: now.Add(3 * time.Second)})
	if n := testutil.CollectAndCount(reg, "anysched_overflow_nodes", "anysched_overflow_transitions_total"); n != 0 {
		t.Errorf("%d series left for a service without thresholds", n)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, svc string) prometheus.Collector {
	t.Helper()
	return metric(t, reg, "anysched_overflow_nodes", map[string]string{"service": svc})
}

func transitions(t *testing.T, reg *prometheus.Registry, svc, dir string) prometheus.Collector {
	t.Helper()
	return metric(t, reg, "anysched_overflow_transitions_total", map[string]string{"service": svc, "direction": dir})
}

// metric returns a collector of the one sample of name with labels.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(v)
			return g
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}

func TestRate(t *testing.T) {
	snap := snapWith(t, "{rps_per_server: 100}")
	id := lookup(t, snap)
	t0 := time.Unix(5000, 0)
	add := func(c *overflow.Counters, n int) {
		for range n {
			c.Add(id.live, id.hefei1)
		}
	}
	cases := []struct {
		name string
		run  func(c *overflow.Controller, cs *overflow.Counters) bool // over at the end
		want bool
	}{
		{"two readings 2 s apart", func(c *overflow.Controller, cs *overflow.Counters) bool {
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			add(cs, 400) // 200/s over 2 s: 100/s per server
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0.Add(2 * time.Second)})
			return c.State().Over(id.live, id.hefei1)
		}, true},
		{"the same rate over a longer time", func(c *overflow.Controller, cs *overflow.Counters) bool {
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			add(cs, 399)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0.Add(2 * time.Second)})
			return c.State().Over(id.live, id.hefei1)
		}, false},
		{"no time passed: the reading is kept", func(c *overflow.Controller, cs *overflow.Counters) bool {
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			add(cs, 200)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0.Add(time.Second)})
			return c.State().Over(id.live, id.hefei1)
		}, true},
		{"counts before the first reading are no rate", func(c *overflow.Controller, cs *overflow.Counters) bool {
			add(cs, 1_000_000)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			return c.State().Over(id.live, id.hefei1)
		}, false},
		{"new counters start a new reading", func(c *overflow.Controller, cs *overflow.Counters) bool {
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			fresh := overflow.NewCounters(len(snap.Services), len(snap.Nodes))
			add(fresh, 1000)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: fresh, Now: t0.Add(time.Second)})
			return c.State().Over(id.live, id.hefei1)
		}, false},
		{"counters smaller than the snapshot give no rate", func(c *overflow.Controller, _ *overflow.Counters) bool {
			small := overflow.NewCounters(len(snap.Services), 1)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: small, Now: t0})
			add(small, 1000)
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: small, Now: t0.Add(time.Second)})
			return c.State().Over(id.live, id.hefei1)
		}, false},
		{"requests to another node do not count", func(c *overflow.Controller, cs *overflow.Counters) bool {
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0})
			for range 1000 {
				cs.Add(id.live, id.hefei3)
				cs.Add(id.vod, id.hefei1)
			}
			c.Evaluate(overflow.Inputs{Snap: snap, Counters: cs, Now: t0.Add(time.Second)})
			return c.State().Over(id.live, id.hefei1) || !c.State().Over(id.live, id.hefei3)
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := overflow.New(prometheus.NewRegistry(), nil)
			if got := tc.run(c, overflow.NewCounters(len(snap.Services), len(snap.Nodes))); got != tc.want {
				t.Errorf("over = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNilSafety(t *testing.T) {
	var st *overflow.State
	if st.Over(0, 0) || st.Reason(0, 0) != "" || st.Count(0) != 0 || st.Snapshot() != nil {
		t.Error("a nil *State is not empty")
	}
	var cs *overflow.Counters
	cs.Add(0, 0) // must not panic
	if cs.Load(0, 0) != 0 {
		t.Error("a nil *Counters loads non-zero")
	}
	c := overflow.New(nil, nil)
	if c.State() != nil {
		t.Error("state before the first evaluation")
	}
	if c.Evaluate(overflow.Inputs{}) || c.State() != nil {
		t.Error("an evaluation without a snapshot published")
	}
	if c.State().Over(0, 0) {
		t.Error("over before the first evaluation")
	}

	snap := snapWith(t, "{bandwidth_share: 0.9}")
	id := lookup(t, snap)
	// Short and NaN figures are unknown, not a panic.
	c.Evaluate(overflow.Inputs{Snap: snap, BandwidthMbps: []float64{nan()}, Sessions: []int{1}, ClaimedKbps: []float64{}, Now: time.Unix(1, 0)})
	st = c.State()
	for _, idx := range [][2]int32{{-1, 0}, {0, -1}, {int32(len(snap.Services)), 0}, {0, int32(len(snap.Nodes))}, {1 << 30, 1 << 30}} {
		if st.Over(idx[0], idx[1]) || st.Reason(idx[0], idx[1]) != "" {
			t.Errorf("Over(%d, %d) out of range is not false", idx[0], idx[1])
		}
	}
	if st.Over(id.live, id.hefei1) {
		t.Error("over on unknown figures")
	}
	counters := overflow.NewCounters(2, 3)
	for _, idx := range [][2]int32{{-1, 0}, {0, -1}, {2, 0}, {0, 3}} {
		counters.Add(idx[0], idx[1])
		if counters.Load(idx[0], idx[1]) != 0 {
			t.Errorf("Load(%d, %d) out of range counted", idx[0], idx[1])
		}
	}
	if s, n := overflow.NewCounters(-1, 5).Size(); s != 0 || n != 5 {
		t.Errorf("NewCounters(-1, 5).Size() = %d, %d", s, n)
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}
