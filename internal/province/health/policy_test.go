package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// ---- probe expectations ----

func TestProbeExpect(t *testing.T) {
	const stats = `{"status": "up", "cpu": 0.5, "memory": 0.25, "load_avg": 3.5, "connections": 7}`
	statsLoad := avail.Load{CPU: 0.5, Memory: 0.25, LoadAvg: 3.5, Connections: 7}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "OK") })
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, stats)
	})
	mux.HandleFunc("/teapot", func(w http.ResponseWriter, r *http.Request) {
		// A status page that answers 418 with its figures.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, stats)
	})
	mux.HandleFunc("/late-marker", func(w http.ResponseWriter, r *http.Request) {
		// The marker lies past MaxBody: it is never seen.
		fmt.Fprint(w, strings.Repeat(" ", MaxBody)+"HEALTHY")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	re := regexp.MustCompile
	tests := []struct {
		name    string
		path    string
		policy  topology.HealthPolicy
		ok      bool
		kind    string
		errHas  string
		hasLoad bool
		load    avail.Load
	}{
		{"any 2xx", "/ok", topology.HealthPolicy{}, true, "", "", false, avail.Load{}},
		{"200 expected", "/ok", topology.HealthPolicy{ExpectStatus: 200}, true, "", "", false, avail.Load{}},
		{"204 expected", "/nocontent", topology.HealthPolicy{ExpectStatus: 204}, true, "", "", false, avail.Load{}},
		{"204 when 200 expected", "/nocontent", topology.HealthPolicy{ExpectStatus: 200}, false, KindExpect, "expect: HTTP 204, want 200", false, avail.Load{}},
		{"200 when 204 expected", "/ok", topology.HealthPolicy{ExpectStatus: 204}, false, KindExpect, "expect: HTTP 200, want 204", false, avail.Load{}},
		{"3xx expected", "/redirect", topology.HealthPolicy{ExpectStatus: 302}, true, "", "", false, avail.Load{}},
		{"3xx when 200 expected", "/redirect", topology.HealthPolicy{ExpectStatus: 200}, false, KindExpect, "expect: HTTP 302, want 200", false, avail.Load{}},
		{"3xx without expectation", "/redirect", topology.HealthPolicy{}, false, KindStatus, "status: HTTP 302", false, avail.Load{}},
		{"503 expected", "/unavailable", topology.HealthPolicy{ExpectStatus: 503}, true, "", "", false, avail.Load{}},
		{"503 when 200 expected", "/unavailable", topology.HealthPolicy{ExpectStatus: 200}, false, KindExpect, "expect: HTTP 503, want 200", false, avail.Load{}},
		{"expected status keeps load", "/teapot", topology.HealthPolicy{ExpectStatus: 418}, true, "", "", true, statsLoad},
		{"body matches", "/ok", topology.HealthPolicy{ExpectBody: re(`^OK$`)}, true, "", "", false, avail.Load{}},
		{"body mismatch", "/ok", topology.HealthPolicy{ExpectBody: re(`healthy`)}, false, KindExpect, `expect: body does not match "healthy"`, false, avail.Load{}},
		{"body matches stats, load kept", "/stats", topology.HealthPolicy{ExpectBody: re(`"status":\s*"up"`)}, true, "", "", true, statsLoad},
		{"body mismatch drops load", "/stats", topology.HealthPolicy{ExpectBody: re(`"status":\s*"down"`)}, false, KindExpect, "body does not match", false, avail.Load{}},
		{"empty body expected", "/nocontent", topology.HealthPolicy{ExpectStatus: 204, ExpectBody: re(`^$`)}, true, "", "", false, avail.Load{}},
		{"status checked before body", "/unavailable", topology.HealthPolicy{ExpectStatus: 200, ExpectBody: re(`draining`)}, false, KindExpect, "HTTP 503, want 200", false, avail.Load{}},
		{"body on an expected 503", "/unavailable", topology.HealthPolicy{ExpectStatus: 503, ExpectBody: re(`draining`)}, true, "", "", false, avail.Load{}},
		{"body past MaxBody unseen", "/late-marker", topology.HealthPolicy{ExpectBody: re(`HEALTHY`)}, false, KindExpect, "body does not match", false, avail.Load{}},
	}
	p := &Prober{Timeout: 5 * time.Second}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := p.Probe(context.Background(), Target{Server: "edge-1", URL: srv.URL + tc.path, Policy: tc.policy})
			if res.OK != tc.ok || res.Kind != tc.kind || res.HasLoad != tc.hasLoad || res.Load != tc.load {
				t.Fatalf("got %+v; want ok=%v kind=%q hasLoad=%v load=%+v", res, tc.ok, tc.kind, tc.hasLoad, tc.load)
			}
			if !strings.Contains(res.Err, tc.errHas) || (tc.kind == "") != (res.Err == "") {
				t.Fatalf("err %q, want it to mention %q", res.Err, tc.errHas)
			}
			if tc.kind != "" && !strings.HasPrefix(res.Err, tc.kind+": ") {
				t.Errorf("err %q does not start with its kind", res.Err)
			}
		})
	}

	t.Run("tcp probe ignores expectations", func(t *testing.T) {
		res := p.Probe(context.Background(), Target{Server: "edge-tcp", Address: mustAddrPort(t, srv.Listener.Addr().String()),
			Policy: topology.HealthPolicy{ExpectStatus: 204, ExpectBody: re(`never`)}})
		if !res.OK || res.Kind != "" {
			t.Fatalf("got %+v", res)
		}
	})
}

// ---- load thresholds ----

func TestOverloadThresholds(t *testing.T) {
	tests := []struct {
		name   string
		policy topology.HealthPolicy
		over   avail.Load // an answer over the threshold
		under  avail.Load // one under it (or not reporting the figure)
		reason string     // of the down report
	}{
		{"cpu", topology.HealthPolicy{MaxCPU: 0.9}, avail.Load{CPU: 0.97}, avail.Load{CPU: 0.5},
			"overloaded: cpu 0.97 > max_cpu 0.90"},
		{"cpu at the threshold is not over", topology.HealthPolicy{MaxCPU: 0.9}, avail.Load{CPU: 0.95}, avail.Load{CPU: 0.9},
			"overloaded: cpu 0.95 > max_cpu 0.90"},
		{"cpu just over reads larger", topology.HealthPolicy{MaxCPU: 0.9}, avail.Load{CPU: 0.9012}, avail.Load{CPU: 0.2},
			"overloaded: cpu 0.901 > max_cpu 0.900"},
		{"memory", topology.HealthPolicy{MaxMemory: 0.8}, avail.Load{Memory: 0.85}, avail.Load{Memory: 0.75},
			"overloaded: memory 0.85 > max_memory 0.80"},
		{"connections", topology.HealthPolicy{MaxConnections: 5000}, avail.Load{Connections: 5200}, avail.Load{Connections: 4999},
			"overloaded: connections 5200 > max_connections 5000"},
		{"load average", topology.HealthPolicy{MaxLoad: 8}, avail.Load{LoadAvg: 12.5}, avail.Load{LoadAvg: 7.9},
			"overloaded: load 12.50 > max_load 8.00"},
		{"figure not reported", topology.HealthPolicy{MaxMemory: 0.8}, avail.Load{Memory: 0.81, CPU: 0.99}, avail.Load{CPU: 0.99},
			"overloaded: memory 0.81 > max_memory 0.80"},
		{"bandwidth keeps its reason", topology.HealthPolicy{MaxCPU: 0.9}, avail.Load{BandwidthMbps: 950, CPU: 0.5}, avail.Load{BandwidthMbps: 500, CPU: 0.5},
			"bandwidth 95% of capacity"},
		{"several figures", topology.HealthPolicy{MaxCPU: 0.9, MaxMemory: 0.8, MaxConnections: 10, MaxLoad: 4},
			avail.Load{BandwidthMbps: 950, CPU: 0.97, Memory: 0.81, Connections: 11, LoadAvg: 4.5}, avail.Load{CPU: 0.9, Memory: 0.8, Connections: 10, LoadAvg: 4},
			"overloaded: bandwidth 95% of capacity, cpu 0.97 > max_cpu 0.90, memory 0.81 > max_memory 0.80, connections 11 > max_connections 10, load 4.50 > max_load 4.00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOpts(func(o *CheckerOptions) { o.Rise, o.Fall = 2, 2 })
			tr := newTracker(&o)
			tgt := Target{Server: "s", CapacityMbps: 1000, Policy: tc.policy}
			now := time.Unix(1e9, 0)
			var last Report
			var b strings.Builder
			for _, c := range "+uoouu" {
				res := Result{OK: true, RTT: time.Millisecond, HasLoad: true}
				switch c {
				case '+':
					res.HasLoad = false
				case 'o':
					res.Load = tc.over
				case 'u':
					res.Load = tc.under
				}
				now = now.Add(time.Second)
				r, _ := tr.update(res, tgt, now)
				if !r.Up && last.Up {
					if r.Reason != tc.reason {
						t.Errorf("reason %q, want %q", r.Reason, tc.reason)
					}
					if r.Load != tc.over {
						t.Errorf("down report load %+v, want %+v", r.Load, tc.over)
					}
				}
				last = r
				b.WriteByte(map[tri]byte{unknown: '?', yes: 'U', no: 'D'}[tr.verdict])
			}
			// Up while under, down after Fall answers over, still down
			// after one under (Rise is 2), up after the second.
			if got, want := b.String(), "UUUDDU"; got != want {
				t.Fatalf("verdicts %s, want %s", got, want)
			}
			if last.Reason != "" {
				t.Fatalf("recovered report keeps reason %q", last.Reason)
			}
		})
	}
}

func TestOverloadVerdictSequences(t *testing.T) {
	// 'c': cpu over max_cpu, 'm': memory over max_memory, 'n': connections
	// over, '+': under all, '-': unreachable. The thresholds share one
	// pair of counters, as the bandwidth threshold did alone.
	policy := topology.HealthPolicy{MaxCPU: 0.9, MaxMemory: 0.9, MaxConnections: 100}
	answers := map[rune]Result{
		'c': {OK: true, HasLoad: true, Load: avail.Load{CPU: 0.95}},
		'm': {OK: true, HasLoad: true, Load: avail.Load{Memory: 0.95}},
		'n': {OK: true, HasLoad: true, Load: avail.Load{Connections: 101}},
		'+': {OK: true, HasLoad: true, Load: avail.Load{CPU: 0.5, Memory: 0.5, Connections: 50}},
		'-': {Kind: KindRefused, Err: "refused: connection refused"},
	}
	tests := []struct {
		name       string
		rise, fall int
		seq, want  string
	}{
		{"overloaded at start", 2, 2, "c", "D"},
		{"different figures count together", 2, 2, "+cm", "UUD"},
		{"an answer under every threshold resets the run", 2, 2, "+c+m+n", "UUUUUU"},
		{"recovery needs rise answers", 2, 2, "cm+n++", "DDDDDU"},
		{"failures do not clear overload", 2, 2, "cc-+", "DDDD"},
		{"fall=1 rise=1", 1, 1, "+n+m+", "UDUDU"},
		{"rise=3", 3, 2, "+ccc++m+++", "UUDDDDDDDU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := testOpts(func(o *CheckerOptions) { o.Rise, o.Fall = tc.rise, tc.fall })
			tr := newTracker(&o)
			tgt := Target{Server: "s", Policy: policy}
			now := time.Unix(1e9, 0)
			var b strings.Builder
			for _, c := range tc.seq {
				now = now.Add(time.Second)
				tr.update(answers[c], tgt, now)
				b.WriteByte(map[tri]byte{unknown: '?', yes: 'U', no: 'D'}[tr.verdict])
			}
			if got := b.String(); got != tc.want {
				t.Fatalf("%s -> %s, want %s", tc.seq, got, tc.want)
			}
		})
	}
}

func TestOverloadCauseChangeReported(t *testing.T) {
	// Down for cpu, then for memory instead: a new cause, reported even
	// though the verdict and the figures' sizes barely move.
	o := testOpts(func(o *CheckerOptions) { o.Fall = 1; o.RTTMinChange = time.Hour })
	tr := newTracker(&o)
	tgt := Target{Server: "s", Policy: topology.HealthPolicy{MaxCPU: 0.9, MaxMemory: 0.9}}
	t0 := time.Unix(1e9, 0)
	ans := func(cpu, mem float64) Result {
		return Result{OK: true, RTT: time.Millisecond, HasLoad: true, Load: avail.Load{CPU: cpu, Memory: mem}}
	}
	if r, emit := tr.update(ans(0.95, 0.89), tgt, t0); !emit || r.Up || !strings.HasPrefix(r.Reason, "overloaded: cpu") {
		t.Fatalf("first: %+v %v", r, emit)
	}
	if r, emit := tr.update(ans(0.95, 0.89), tgt, t0.Add(time.Second)); emit {
		t.Fatalf("unchanged overload reported: %+v", r)
	}
	if r, emit := tr.update(ans(0.89, 0.95), tgt, t0.Add(2*time.Second)); !emit || r.Up || r.Reason != "overloaded: memory 0.95 > max_memory 0.90" {
		t.Fatalf("cpu -> memory: %+v %v", r, emit)
	}
}

func TestReportRuleNewFigures(t *testing.T) {
	o := testOpts(nil)
	tgt := Target{Server: "s"}
	base := Result{OK: true, RTT: 10 * time.Millisecond, HasLoad: true, Load: avail.Load{Memory: 0.5, LoadAvg: 4}}
	tests := []struct {
		name string
		load avail.Load
		emit bool
	}{
		{"memory +8%", avail.Load{Memory: 0.54, LoadAvg: 4}, false},
		{"memory +12%", avail.Load{Memory: 0.56, LoadAvg: 4}, true},
		{"load +5%", avail.Load{Memory: 0.5, LoadAvg: 4.2}, false},
		{"load +25%", avail.Load{Memory: 0.5, LoadAvg: 5}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(&o)
			t0 := time.Unix(1e9, 0)
			tr.update(base, tgt, t0)
			next := base
			next.Load = tc.load
			if _, emit := tr.update(next, tgt, t0.Add(time.Second)); emit != tc.emit {
				t.Fatalf("emit = %v, want %v", emit, tc.emit)
			}
		})
	}
}

// TestCheckerPolicy: a real prober and checker, the target's policy from
// its Target: a memory threshold takes the server out and lets it back, and
// a missed expected status takes it down as a failure of kind "expect".
func TestCheckerPolicy(t *testing.T) {
	var mem atomic.Int64 // percent
	mem.Store(50)
	var status atomic.Int64
	status.Store(http.StatusNoContent)
	srv := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		if status.Load() != http.StatusNoContent {
			fmt.Fprintf(w, `{"memory": %.2f, "load": [1.5, 1.0, 0.5]}`, float64(mem.Load())/100)
		}
	})
	tgt := Target{Server: "edge-p", URL: srv.URL + "/stats",
		Policy: topology.HealthPolicy{ExpectStatus: http.StatusNoContent, MaxMemory: 0.9}}
	c := startClocked(t, CheckerOptions{Interval: time.Second, Rise: 2, Fall: 2}, nil, tgt)
	c.until(t, 1, "edge-p", 0, 1, isUp)

	status.Store(http.StatusOK) // figures now, but not the expected status
	n := len(c.rs.list("edge-p"))
	r := c.until(t, 1, "edge-p", n, 10, isDown)
	if r.Reason != "expect: HTTP 200, want 204" {
		t.Fatalf("down report %+v", r)
	}

	tgt.Policy.ExpectStatus = http.StatusOK // the topology changes its expectation
	c.SetTargets([]Target{tgt})
	n = len(c.rs.list("edge-p"))
	r = c.until(t, 1, "edge-p", n, 10, isUp)
	if r.Load.Memory != 0.5 || r.Load.LoadAvg != 1.5 {
		t.Fatalf("up report load %+v", r.Load)
	}

	mem.Store(95)
	n = len(c.rs.list("edge-p"))
	r = c.until(t, 1, "edge-p", n, 10, isDown)
	if r.Reason != "overloaded: memory 0.95 > max_memory 0.90" {
		t.Fatalf("overloaded report %+v", r)
	}
	mem.Store(60)
	n = len(c.rs.list("edge-p"))
	if r = c.until(t, 1, "edge-p", n, 10, isUp); r.Reason != "" {
		t.Fatalf("recovered report %+v", r)
	}
}

// ---- the agent's targets ----

func TestAgentTargetsCarryPolicy(t *testing.T) {
	tp := fixture.Province(t)
	tp.Pools = []topology.Pool{{Name: "all", Match: topology.Labels{},
		Health: &topology.HealthCheck{ExpectBody: "ok", MaxMemory: 0.9, MaxCPU: 0.95}}}
	own := &tp.Nodes[0].Servers[0]
	if own.Health == nil {
		own.Health = &topology.HealthCheck{}
	}
	own.Health.ExpectStatus = 204
	own.Health.MaxCPU = 0.8
	own.Health.MaxConnections = 3000
	snap := fixture.Compile(t, tp)

	first := snap.Servers[0]
	region := snap.Regions[first.Region].Name
	a, err := NewAgent(nil, "/anysched/", AgentOptions{CheckerID: "c1", Region: region}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	a.SetSnapshot(snap)

	a.Checker.mu.Lock()
	targets := a.Checker.targets
	a.Checker.mu.Unlock()
	got, ok := targets[first.Name]
	if !ok {
		t.Fatalf("no target for %s in %v", first.Name, targets)
	}
	p := got.Policy
	if p.ExpectStatus != 204 || p.MaxCPU != 0.8 || p.MaxMemory != 0.9 || p.MaxConnections != 3000 || p.MaxLoad != 0 ||
		p.ExpectBody == nil || p.ExpectBody.String() != "ok" {
		t.Fatalf("%s: policy %+v", first.Name, p)
	}
	if got.URL != first.HealthURL || got.CapacityMbps != first.Capacity.BandwidthMbps {
		t.Fatalf("%s: target %+v", first.Name, got)
	}
	// Every other server of the region has the pool's policy alone.
	n := 0
	for _, sv := range snap.Servers {
		if sv.Name == first.Name || sv.Region != first.Region {
			continue
		}
		n++
		p := targets[sv.Name].Policy
		if p.ExpectStatus != 0 || p.MaxCPU != 0.95 || p.MaxMemory != 0.9 || p.MaxConnections != 0 || p.ExpectBody == nil {
			t.Errorf("%s: policy %+v", sv.Name, p)
		}
	}
	if n == 0 {
		t.Fatal("the fixture's region has one server: nothing inherits the pool's policy")
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}
