package health

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ---- the verdict state machine and report rule, on synthetic results ----

func testOpts(mod func(*CheckerOptions)) CheckerOptions {
	o := CheckerOptions{ID: "test", Interval: time.Second}
	if mod != nil {
		mod(&o)
	}
	if err := o.defaults(); err != nil {
		panic(err)
	}
	return o
}

// verdicts feeds a sequence of results ('+' success, '-' failure, 'o'
// success over the bandwidth threshold) and returns the verdict after each:
// 'U' up, 'D' down, '?' unknown.
func verdicts(o CheckerOptions, seq string) string {
	tr := newTracker(&o)
	tgt := Target{Server: "s", CapacityMbps: 1000}
	now := time.Unix(1e9, 0)
	var b strings.Builder
	for _, c := range seq {
		res := Result{OK: true, RTT: time.Millisecond}
		switch c {
		case '-':
			res = Result{Kind: KindRefused, Err: "refused: connection refused"}
		case 'o':
			res.HasLoad, res.Load = true, Load{BandwidthMbps: 950}
		}
		now = now.Add(time.Second)
		tr.update(res, tgt, now)
		b.WriteByte(map[tri]byte{unknown: '?', yes: 'U', no: 'D'}[tr.verdict])
	}
	return b.String()
}

func TestTrackerVerdicts(t *testing.T) {
	rf := func(rise, fall int) CheckerOptions {
		return testOpts(func(o *CheckerOptions) { o.Rise, o.Fall = rise, fall })
	}
	tests := []struct {
		name string
		opts CheckerOptions
		seq  string
		want string
	}{
		{"up after the first success", rf(2, 2), "+", "U"},
		{"unknown until fall failures", rf(2, 3), "---+", "??DD"},
		{"unknown then up", rf(2, 3), "--+", "??U"},
		{"fall", rf(2, 2), "++-+--", "UUUUUD"},
		{"rise", rf(2, 2), "+---+-++", "UUDDDDDU"},
		{"flapping rise=fall=3 never flips from up", rf(3, 3), "+-+-+-+-+-+-+-+-+-", "UUUUUUUUUUUUUUUUUU"},
		{"flapping rise=fall=3 never flips from down", rf(3, 3), "---+-+-+-+--+-+", "??DDDDDDDDDDDDD"},
		{"fall=1", rf(1, 1), "+-+", "UDU"},
		{"overloaded at start", rf(2, 2), "o", "D"},
		{"overload needs fall answers", rf(2, 2), "+o+o+oo", "UUUUUUD"},
		{"overload clears after rise answers", rf(2, 2), "oo+o++", "DDDDDU"},
		{"failures do not clear overload", rf(2, 2), "o-+", "DDD"},
		{"unreachable and overloaded", rf(2, 2), "oo--+", "DDDDD"},
		{"rise answers clear both", rf(2, 2), "oo--++", "DDDDDU"},
		{"threshold disabled", testOpts(func(o *CheckerOptions) { o.BandwidthThreshold = -1 }), "ooo", "UUU"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdicts(tc.opts, tc.seq); got != tc.want {
				t.Fatalf("%s -> %s, want %s", tc.seq, got, tc.want)
			}
		})
	}
}

func TestTrackerReportFields(t *testing.T) {
	o := testOpts(func(o *CheckerOptions) { o.LossWindow = 4 })
	tr := newTracker(&o)
	tgt := Target{Server: "edge-1", CapacityMbps: 1000}
	t0 := time.Unix(1e9, 0)

	r, emit := tr.update(Result{OK: true, RTT: 10 * time.Millisecond, HasLoad: true, Load: Load{CPU: 0.5, BandwidthMbps: 100, Connections: 7}}, tgt, t0)
	if !emit || !r.Up || r.Server != "edge-1" || r.RTT != 10*time.Millisecond || r.Loss != 0 || r.Load.Connections != 7 || !r.Since.Equal(t0) || !r.At.Equal(t0) || r.Reason != "" {
		t.Fatalf("first report %+v, %v", r, emit)
	}
	r, _ = tr.update(Result{OK: true, RTT: 20 * time.Millisecond}, tgt, t0.Add(time.Second))
	if want := 13 * time.Millisecond; r.RTT != want { // 0.3*20 + 0.7*10
		t.Fatalf("ewma rtt %v, want %v", r.RTT, want)
	}
	if r.Load != (Load{}) {
		t.Fatalf("load kept after an answer without figures: %+v", r.Load)
	}
	r, _ = tr.update(Result{Kind: KindTimeout, Err: "timeout: deadline"}, tgt, t0.Add(2*time.Second))
	if r.RTT != 13*time.Millisecond || r.Loss != 1.0/3 || !r.Up {
		t.Fatalf("after a failure: %+v", r)
	}
	r, _ = tr.update(Result{Kind: KindTimeout, Err: "timeout: deadline"}, tgt, t0.Add(3*time.Second))
	if r.Up || r.Reason != "timeout: deadline" || r.Loss != 0.5 || !r.Since.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("down: %+v", r)
	}
	r, _ = tr.update(Result{Kind: KindRefused, Err: "refused: x"}, tgt, t0.Add(4*time.Second))
	r, _ = tr.update(Result{Kind: KindRefused, Err: "refused: x"}, tgt, t0.Add(5*time.Second))
	if r.Loss != 1 || r.Reason != "refused: x" { // the window holds the last 4: - - - -
		t.Fatalf("window: %+v", r)
	}
	// Back up, then overloaded.
	for i := range 2 {
		r, _ = tr.update(Result{OK: true, RTT: 13 * time.Millisecond}, tgt, t0.Add(time.Duration(6+i)*time.Second))
	}
	if !r.Up {
		t.Fatalf("not up after rise: %+v", r)
	}
	for i := range 2 {
		r, _ = tr.update(Result{OK: true, RTT: 13 * time.Millisecond, HasLoad: true, Load: Load{BandwidthMbps: 951}}, tgt, t0.Add(time.Duration(8+i)*time.Second))
	}
	if r.Up || r.Reason != "bandwidth 95% of capacity" {
		t.Fatalf("overloaded: %+v", r)
	}
}

func TestTrackerReportRule(t *testing.T) {
	o := testOpts(func(o *CheckerOptions) { o.RefreshInterval = 30 * time.Second; o.LossWindow = 20 })
	tgt := Target{Server: "edge-1", CapacityMbps: 10000}
	base := Result{OK: true, RTT: 10 * time.Millisecond, HasLoad: true, Load: Load{CPU: 0.5, BandwidthMbps: 1000, Connections: 1000, Requests: 1}}
	with := func(f func(*Result)) Result { r := base; f(&r); return r }
	tests := []struct {
		name string
		next Result
		at   time.Duration // after the first report
		emit bool
	}{
		{"nothing changed", base, time.Second, false},
		{"requests counter grows", with(func(r *Result) { r.Load.Requests = 1e9 }), time.Second, false},
		{"refresh", base, 30 * time.Second, true},
		{"just before refresh", base, 29 * time.Second, false},
		{"rtt +15%", with(func(r *Result) { r.RTT = 15 * time.Millisecond }), time.Second, false}, // ewma 11.5ms: +15%
		{"rtt +30%", with(func(r *Result) { r.RTT = 20 * time.Millisecond }), time.Second, true},  // ewma 13ms
		{"cpu +8%", with(func(r *Result) { r.Load.CPU = 0.54 }), time.Second, false},
		{"cpu +12%", with(func(r *Result) { r.Load.CPU = 0.56 }), time.Second, true},
		{"bandwidth -11%", with(func(r *Result) { r.Load.BandwidthMbps = 890 }), time.Second, true},
		{"connections +5%", with(func(r *Result) { r.Load.Connections = 1050 }), time.Second, false},
		{"connections +20%", with(func(r *Result) { r.Load.Connections = 1200 }), time.Second, true},
		{"load figures gone", with(func(r *Result) { r.HasLoad, r.Load = false, Load{} }), time.Second, true},
		{"one failure: loss 0.5 of 2", Result{Kind: KindTimeout, Err: "timeout"}, time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(&o)
			t0 := time.Unix(1e9, 0)
			if _, emit := tr.update(base, tgt, t0); !emit {
				t.Fatal("first verdict not emitted")
			}
			if _, emit := tr.update(tc.next, tgt, t0.Add(tc.at)); emit != tc.emit {
				t.Fatalf("emit = %v, want %v", emit, tc.emit)
			}
		})
	}

	t.Run("loss steps of 0.05 wait for the second", func(t *testing.T) {
		tr := newTracker(&o)
		t0 := time.Unix(1e9, 0)
		for i := range 20 {
			tr.update(base, tgt, t0.Add(time.Duration(i)*time.Millisecond))
		}
		if _, emit := tr.update(Result{Kind: KindTimeout, Err: "timeout"}, tgt, t0.Add(time.Second)); emit {
			t.Fatal("loss 0.05 reported")
		}
		tr.update(base, tgt, t0.Add(2*time.Second))
		if _, emit := tr.update(Result{Kind: KindTimeout, Err: "timeout"}, tgt, t0.Add(3*time.Second)); !emit {
			t.Fatal("loss 0.10 not reported")
		}
	})
	t.Run("cause of a down verdict", func(t *testing.T) {
		o := o
		o.Fall = 1
		tr := newTracker(&o)
		t0 := time.Unix(1e9, 0)
		over := with(func(r *Result) { r.Load.BandwidthMbps = 9500 })
		if r, emit := tr.update(over, tgt, t0); !emit || r.Up {
			t.Fatalf("%+v %v", r, emit)
		}
		if _, emit := tr.update(over, tgt, t0.Add(time.Second)); emit {
			t.Fatal("unchanged overload reported")
		}
		if r, emit := tr.update(Result{Kind: KindRefused, Err: "refused"}, tgt, t0.Add(2*time.Second)); !emit || r.Reason != "refused" {
			t.Fatalf("overloaded -> unreachable: %+v %v", r, emit)
		}
	})
}

func TestCheckerOptions(t *testing.T) {
	c, err := NewChecker(CheckerOptions{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Options()
	if o.ID == "" || o.Interval != time.Second || o.Timeout != 250*time.Millisecond || o.Rise != 2 || o.Fall != 2 ||
		o.FastInterval != 250*time.Millisecond || o.LossWindow != 20 || o.BandwidthThreshold != 0.9 || o.RefreshInterval != 30*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
	// The detection target: a dead server is down within 2 s, timeouts
	// included, leaving time to publish: the next probe within Interval, it
	// times out, the fast re-probe starts after max(FastInterval, Timeout)
	// and times out too.
	if worst := o.Interval + o.Timeout + max(o.FastInterval, o.Timeout); worst > 1500*time.Millisecond {
		t.Fatalf("default worst-case detection %v", worst)
	}
	for _, bad := range []CheckerOptions{{Interval: -1}, {Rise: -1}, {LossWindow: -2}, {Timeout: -time.Second}} {
		if _, err := NewChecker(bad, nil, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestPhaseOffset(t *testing.T) {
	const iv = time.Second
	seen := map[time.Duration]bool{}
	var quarters [4]int
	for i := range 200 {
		off := phaseOffset("agent-1", fmt.Sprintf("edge-%d", i), iv)
		if off < 0 || off >= iv {
			t.Fatalf("offset %v", off)
		}
		if off != phaseOffset("agent-1", fmt.Sprintf("edge-%d", i), iv) {
			t.Fatal("not deterministic")
		}
		seen[off] = true
		quarters[off*4/iv]++
	}
	for q, n := range quarters {
		if n < 25 { // 50 expected
			t.Errorf("quarter %d holds %d of 200 offsets", q, n)
		}
	}
	if phaseOffset("agent-1", "edge-1", iv) == phaseOffset("agent-2", "edge-1", iv) {
		t.Error("two agents probe a server at the same phase")
	}
}

// ---- the checker against real servers ----

// reports collects a checker's reports.
type reports struct {
	mu      sync.Mutex
	all     []Report
	removed []string
	ch      chan struct{}
}

func newReports() *reports { return &reports{ch: make(chan struct{}, 1)} }

func (r *reports) add(rep Report) {
	r.mu.Lock()
	r.all = append(r.all, rep)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *reports) remove(server string) {
	r.mu.Lock()
	r.removed = append(r.removed, server)
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

func (r *reports) list(server string) []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Report
	for _, rep := range r.all {
		if server == "" || rep.Server == server {
			out = append(out, rep)
		}
	}
	return out
}

// wait returns the first report after the first `skip` reports of server
// that satisfies ok.
func (r *reports) wait(t testing.TB, server string, skip int, timeout time.Duration, ok func(Report) bool) Report {
	t.Helper()
	deadline := time.After(timeout)
	for {
		for _, rep := range r.list(server)[min(skip, len(r.list(server))):] {
			if ok(rep) {
				return rep
			}
		}
		select {
		case <-r.ch:
		case <-deadline:
			t.Fatalf("%s: no matching report within %v; got %+v", server, timeout, r.list(server))
		}
	}
}

func isUp(r Report) bool   { return r.Up }
func isDown(r Report) bool { return !r.Up }

// startChecker runs a checker until the test ends.
func startChecker(t *testing.T, opts CheckerOptions, targets ...Target) (*Checker, *reports) {
	t.Helper()
	rs := newReports()
	opts.OnReport = rs.add
	opts.OnRemove = rs.remove
	if opts.ID == "" {
		opts.ID = "test-agent"
	}
	if opts.Timeout == 0 {
		// Generous: the default (Interval/4) of the short test intervals
		// would fail healthy probes on a loaded machine under -race.
		opts.Timeout = time.Second
	}
	c, err := NewChecker(opts, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets(targets)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return")
		}
	})
	return c, rs
}

// modeServer answers according to its mode; it counts requests.
type modeServer struct {
	*httptest.Server
	mode     atomic.Value // func(w, r)
	requests atomic.Int64
}

func newModeServer(t testing.TB, h http.HandlerFunc) *modeServer {
	s := &modeServer{}
	s.mode.Store(h)
	s.Server = httptest.NewServer(s.handler())
	t.Cleanup(s.Close)
	return s
}

func (s *modeServer) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mode.Load().(http.HandlerFunc)(w, r)
	})
}

func okHandler(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, stubBody) }

func TestCheckerDetectsDeathAndRevival(t *testing.T) {
	opts := CheckerOptions{Interval: 50 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 2, Fall: 2}
	srv := newModeServer(t, okHandler)
	_, rs := startChecker(t, opts, Target{Server: "edge-1", URL: srv.URL + "/nginx_status"})

	up := rs.wait(t, "edge-1", 0, 2*time.Second, isUp)
	if up.Load.Connections != 291 || up.Checker != "test-agent" {
		t.Fatalf("first report %+v", up)
	}

	addr := srv.Listener.Addr().String()
	nUp := len(rs.list("edge-1"))
	killed := time.Now()
	srv.Close()
	down := rs.wait(t, "edge-1", nUp, 2*time.Second, isDown)
	took := down.At.Sub(killed)
	fast := opts.Interval / 4
	bound := opts.Interval + fast*time.Duration(opts.Fall-1) + opts.Timeout
	t.Logf("down %v after the kill (bound %v): %s", took, bound, down.Reason)
	if took > bound+150*time.Millisecond { // slack for a loaded machine under -race
		t.Errorf("down after %v, want within %v", took, bound)
	}
	if !strings.HasPrefix(down.Reason, "refused") {
		t.Errorf("reason %q", down.Reason)
	}

	// Back on the same port.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var revived atomic.Int64
	srv2 := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		revived.Add(1)
		okHandler(w, r)
	}))
	srv2.Listener.Close()
	srv2.Listener = ln
	srv2.Start()
	defer srv2.Close()
	nDown := len(rs.list("edge-1"))
	back := rs.wait(t, "edge-1", nDown, 2*time.Second, isUp)
	if n := revived.Load(); n < int64(opts.Rise) {
		t.Errorf("up after %d successful probes, want %d", n, opts.Rise)
	}
	if !back.Since.After(down.Since) {
		t.Errorf("since %v not after %v", back.Since, down.Since)
	}
}

func TestCheckerFlappingHoldsVerdict(t *testing.T) {
	var n atomic.Int64
	srv := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%2 == 0 { // 1st answer fine, 2nd fails, ...
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	_, rs := startChecker(t, CheckerOptions{Interval: 20 * time.Millisecond, Rise: 3, Fall: 3, RTTMinChange: time.Hour},
		Target{Server: "flappy", URL: srv.URL})
	deadline := time.Now().Add(3 * time.Second)
	for srv.requests.Load() < 30 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if srv.requests.Load() < 30 {
		t.Fatalf("only %d probes", srv.requests.Load())
	}
	for _, r := range rs.list("flappy") {
		if !r.Up {
			t.Fatalf("flapping server went down: %+v", rs.list("flappy"))
		}
	}
	if reps := rs.list("flappy"); len(reps) == 0 || reps[len(reps)-1].Loss < 0.3 {
		t.Fatalf("reports %+v: loss not reported", reps)
	}
}

func TestCheckerBandwidthThreshold(t *testing.T) {
	var bw atomic.Int64
	bw.Store(500)
	srv := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"cpu": 0.3, "bandwidth_mbps": %d, "connections": 40}`, bw.Load())
	})
	_, rs := startChecker(t, CheckerOptions{Interval: 20 * time.Millisecond, Rise: 2, Fall: 2},
		Target{Server: "edge-bw", URL: srv.URL + "/stats", CapacityMbps: 1000})
	r := rs.wait(t, "edge-bw", 0, 2*time.Second, isUp)
	if r.Load.BandwidthMbps != 500 || r.Load.CPU != 0.3 {
		t.Fatalf("load %+v", r.Load)
	}
	bw.Store(950)
	r = rs.wait(t, "edge-bw", 0, 2*time.Second, isDown)
	if r.Reason != "bandwidth 95% of capacity" || r.Load.BandwidthMbps != 950 {
		t.Fatalf("down report %+v", r)
	}
	n := len(rs.list("edge-bw"))
	bw.Store(880)
	r = rs.wait(t, "edge-bw", n, 2*time.Second, isUp)
	if r.Reason != "" {
		t.Fatalf("up report %+v", r)
	}
}

func TestCheckerSpreadsProbes(t *testing.T) {
	const n = 10
	const iv = 200 * time.Millisecond
	var mu sync.Mutex
	first := map[string]time.Time{}
	srv := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if _, ok := first[r.URL.Path]; !ok {
			first[r.URL.Path] = time.Now()
		}
		mu.Unlock()
	})
	var targets []Target
	for i := range n {
		targets = append(targets, Target{Server: fmt.Sprintf("edge-%d", i), URL: fmt.Sprintf("%s/edge-%d", srv.URL, i)})
	}
	startChecker(t, CheckerOptions{Interval: iv, RTTMinChange: time.Hour}, targets...)
	deadline := time.Now().Add(3 * time.Second)
	for {
		mu.Lock()
		got := len(first)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d targets probed", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var times []time.Time
	for _, ts := range first {
		times = append(times, ts)
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	spread := times[n-1].Sub(times[0])
	// The most first probes within any 20 ms window (a burst would be all n).
	most := 0
	for i := range times {
		j := i
		for j < n && times[j].Sub(times[i]) < 20*time.Millisecond {
			j++
		}
		most = max(most, j-i)
	}
	t.Logf("first probes spread over %v; at most %d of %d within 20ms", spread, most, n)
	if spread < iv/3 || most > n/2 {
		t.Fatalf("probes bunched: spread %v, %d of %d within 20ms", spread, most, n)
	}
}

func TestCheckerSlowServerDoesNotDelayOthers(t *testing.T) {
	slow := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	fast := newModeServer(t, okHandler)
	opts := CheckerOptions{Interval: 40 * time.Millisecond, Timeout: 300 * time.Millisecond, RTTMinChange: time.Hour}
	_, rs := startChecker(t, opts,
		Target{Server: "slow", URL: slow.URL},
		Target{Server: "fast", URL: fast.URL})
	rs.wait(t, "fast", 0, 2*time.Second, isUp)
	n0 := fast.requests.Load()
	time.Sleep(800 * time.Millisecond)
	got := fast.requests.Load() - n0
	t.Logf("fast: %d probes in 800ms; slow: %d", got, slow.requests.Load())
	if got < 10 { // 20 expected
		t.Fatalf("fast target probed %d times in 800ms at a 40ms interval", got)
	}
	if s := slow.requests.Load(); s > 5 {
		t.Fatalf("slow target probed %d times: probes overlap", s)
	}
	rs.wait(t, "slow", 0, 2*time.Second, func(r Report) bool { return !r.Up && strings.HasPrefix(r.Reason, "timeout") })
}

func TestCheckerSetTargetsWhileRunning(t *testing.T) {
	a := newModeServer(t, okHandler)
	b := newModeServer(t, okHandler)
	opts := CheckerOptions{Interval: 20 * time.Millisecond, RTTMinChange: time.Hour}
	c, rs := startChecker(t, opts, Target{Server: "a", URL: a.URL})
	rs.wait(t, "a", 0, 2*time.Second, isUp)

	c.SetTargets([]Target{{Server: "a", URL: a.URL}, {Server: "b", URL: b.URL}})
	rs.wait(t, "b", 0, 2*time.Second, isUp)
	if cur := c.Current(); len(cur) != 2 || cur[0].Server != "a" || cur[1].Server != "b" {
		t.Fatalf("Current %+v", cur)
	}

	c.SetTargets([]Target{{Server: "b", URL: b.URL}})
	deadline := time.Now().Add(2 * time.Second)
	for {
		rs.mu.Lock()
		removed := slices.Clone(rs.removed)
		rs.mu.Unlock()
		if slices.Equal(removed, []string{"a"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OnRemove calls %v", removed)
		}
		time.Sleep(5 * time.Millisecond)
	}
	na, nreq := len(rs.list("a")), a.requests.Load()
	time.Sleep(100 * time.Millisecond)
	if len(rs.list("a")) != na || a.requests.Load() != nreq {
		t.Fatal("a removed target is still probed")
	}
	if cur := c.Current(); len(cur) != 1 || cur[0].Server != "b" {
		t.Fatalf("Current %+v", cur)
	}

	// A kept target takes its new URL and keeps its state: b goes down
	// through the usual Fall, not through "unknown".
	nb := len(rs.list("b"))
	c.SetTargets([]Target{{Server: "b", URL: "http://" + closedAddr(t).String() + "/"}})
	r := rs.wait(t, "b", nb, 2*time.Second, isDown)
	if !strings.HasPrefix(r.Reason, "refused") {
		t.Fatalf("b: %+v", r)
	}

	// Re-adding a removed server starts it afresh.
	c.SetTargets([]Target{{Server: "a", URL: a.URL}})
	rs.wait(t, "a", na, 2*time.Second, isUp)
}

func TestCheckerReportSuppression(t *testing.T) {
	var conns atomic.Int64
	conns.Store(100)
	srv := newModeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"cpu": 0.2, "bandwidth_mbps": 300, "connections": %d}`, conns.Load())
	})
	const refresh = 600 * time.Millisecond
	_, rs := startChecker(t, CheckerOptions{Interval: 20 * time.Millisecond, RefreshInterval: refresh, RTTMinChange: time.Hour},
		Target{Server: "steady", URL: srv.URL})
	first := rs.wait(t, "steady", 0, 2*time.Second, isUp)
	n0 := srv.requests.Load()
	time.Sleep(refresh / 2)
	if reps := rs.list("steady"); len(reps) != 1 {
		t.Fatalf("%d reports while nothing changed: %+v", len(reps), reps)
	}
	if probes := srv.requests.Load() - n0; probes < 5 {
		t.Fatalf("only %d probes", probes)
	}
	second := rs.wait(t, "steady", 1, 2*time.Second, isUp)
	if gap := second.At.Sub(first.At); gap < refresh || gap > refresh+200*time.Millisecond {
		t.Fatalf("refresh after %v, want %v", gap, refresh)
	}
	conns.Store(150)
	changed := rs.wait(t, "steady", 2, time.Second, func(r Report) bool { return r.Load.Connections == 150 })
	if changed.At.Sub(second.At) > refresh/2 {
		t.Fatalf("load change reported only after %v", changed.At.Sub(second.At))
	}
}

func TestCheckerTCPTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ap := netip.MustParseAddrPort(ln.Addr().String())
	_, rs := startChecker(t, CheckerOptions{Interval: 30 * time.Millisecond}, Target{Server: "tcp", Address: ap})
	if r := rs.wait(t, "tcp", 0, 2*time.Second, isUp); r.RTT <= 0 {
		t.Fatalf("%+v", r)
	}
	ln.Close()
	rs.wait(t, "tcp", 0, 2*time.Second, isDown)
}

func TestCheckerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	srv := newModeServer(t, okHandler)
	opts := CheckerOptions{Interval: 20 * time.Millisecond, Registerer: reg, RTTMinChange: time.Hour}
	_, rs := startChecker(t, opts, Target{Server: "m", URL: srv.URL})
	// A second checker in the same process shares the collectors.
	if _, err := NewChecker(CheckerOptions{Registerer: reg}, nil, nil); err != nil {
		t.Fatal(err)
	}
	rs.wait(t, "m", 0, 2*time.Second, isUp)
	srv.mode.Store(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	rs.wait(t, "m", 0, 2*time.Second, isDown)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += "{" + lp.GetName() + "=" + lp.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	if got["anysched_health_probe_duration_seconds"] < 3 ||
		got["anysched_health_probe_errors_total{kind=status}"] < 2 ||
		got["anysched_health_verdict_changes_total{to=down}"] != 1 ||
		got["anysched_health_verdict_changes_total{to=up}"] != 0 { // the first verdict is not a change
		t.Fatalf("metrics %v", got)
	}
	for _, k := range ErrorKinds {
		if _, ok := got["anysched_health_probe_errors_total{kind="+k+"}"]; !ok {
			t.Errorf("kind %q not exported", k)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

func TestCheckerRun(t *testing.T) {
	srv := newModeServer(t, okHandler)
	var after atomic.Bool
	var calls atomic.Int64
	c, err := NewChecker(CheckerOptions{ID: "x", Interval: 10 * time.Millisecond, RefreshInterval: time.Millisecond,
		OnReport: func(Report) {
			calls.Add(1)
			if after.Load() {
				t.Error("report after Run returned")
			}
		}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]Target{{Server: "a", URL: srv.URL}, {Server: ""}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Second)
	for calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := c.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after.Store(true)
	time.Sleep(50 * time.Millisecond)
	if calls.Load() < 3 {
		t.Fatalf("%d reports", calls.Load())
	}
	// Runs again after a stop.
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	after.Store(false)
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
