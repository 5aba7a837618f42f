package health

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/testbed/fakeclock"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
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
			res.HasLoad, res.Load = true, avail.Load{BandwidthMbps: 950}
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

	r, emit := tr.update(Result{OK: true, RTT: 10 * time.Millisecond, HasLoad: true, Load: avail.Load{CPU: 0.5, BandwidthMbps: 100, Connections: 7}}, tgt, t0)
	if !emit || !r.Up || r.Server != "edge-1" || r.RTT != 10*time.Millisecond || r.Loss != 0 || r.Load.Connections != 7 || !r.Since.Equal(t0) || !r.At.Equal(t0) || r.Reason != "" {
		t.Fatalf("first report %+v, %v", r, emit)
	}
	r, _ = tr.update(Result{OK: true, RTT: 20 * time.Millisecond}, tgt, t0.Add(time.Second))
	if want := 13 * time.Millisecond; r.RTT != want { // 0.3*20 + 0.7*10
		t.Fatalf("ewma rtt %v, want %v", r.RTT, want)
	}
	if r.Load != (avail.Load{}) {
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
		r, _ = tr.update(Result{OK: true, RTT: 13 * time.Millisecond, HasLoad: true, Load: avail.Load{BandwidthMbps: 951}}, tgt, t0.Add(time.Duration(8+i)*time.Second))
	}
	if r.Up || r.Reason != "bandwidth 95% of capacity" {
		t.Fatalf("overloaded: %+v", r)
	}
}

func TestTrackerReportRule(t *testing.T) {
	o := testOpts(func(o *CheckerOptions) { o.RefreshInterval = 30 * time.Second; o.LossWindow = 20 })
	tgt := Target{Server: "edge-1", CapacityMbps: 10000}
	base := Result{OK: true, RTT: 10 * time.Millisecond, HasLoad: true, Load: avail.Load{CPU: 0.5, BandwidthMbps: 1000, Connections: 1000, Requests: 1}}
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
		{"load figures gone", with(func(r *Result) { r.HasLoad, r.Load = false, avail.Load{} }), time.Second, true},
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
		o.FastInterval != 250*time.Millisecond || o.LossWindow != 20 || o.BandwidthThreshold != 0.9 || o.RefreshInterval != 5*time.Minute {
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

// ---- the checker's loops, on a fake clock ----

// The checker's loops run on a fake clock: the test moves time from one due
// probe to the next (clocked.step), so it counts probes, intervals and
// refreshes exactly, however loaded the machine. The probes themselves are
// real (HTTP or TCP against a local server) or scripted.

// fakeClock adapts fakeclock.Clock to Clock.
type fakeClock struct{ *fakeclock.Clock }

func (f fakeClock) NewTimer(d time.Duration) Timer { return f.Clock.NewTimer(d) }

// t0 is where the fake clocks start.
var t0 = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// reports collects a checker's reports.
type reports struct {
	mu      sync.Mutex
	all     []Report
	removed []string
}

func (r *reports) add(rep Report) {
	r.mu.Lock()
	r.all = append(r.all, rep)
	r.mu.Unlock()
}

func (r *reports) remove(server string) {
	r.mu.Lock()
	r.removed = append(r.removed, server)
	r.mu.Unlock()
}

func (r *reports) removals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.removed)
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

func isUp(r Report) bool   { return r.Up }
func isDown(r Report) bool { return !r.Up }

// clocked is a checker running on a fake clock until the test ends.
type clocked struct {
	*Checker
	clk *fakeclock.Clock
	rs  *reports
}

// startClocked runs a checker on a fake clock; a nil prober is the real
// one, with a Timeout (real time) no loaded machine reaches on loopback.
func startClocked(t *testing.T, opts CheckerOptions, prober TargetProber, targets ...Target) *clocked {
	t.Helper()
	c := &clocked{clk: fakeclock.New(t0), rs: &reports{}}
	opts.Clock = fakeClock{c.clk}
	opts.OnReport, opts.OnRemove = c.rs.add, c.rs.remove
	if opts.ID == "" {
		opts.ID = "test-agent"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	var err error
	if c.Checker, err = NewChecker(opts, prober, nil); err != nil {
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
		case <-time.After(wait.DefaultTimeout):
			t.Error("Run did not return")
		}
	})
	return c
}

// settle waits until n probe loops wait on their timers: every probe the
// last step started is done and reported.
func (c *clocked) settle(t *testing.T, n int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d probe loops idle", n), wait.DefaultTimeout, func() bool { return c.clk.Armed() == n })
}

// step waits until n probe loops are idle, then moves the clock to the next
// due probe and returns the new time.
func (c *clocked) step(t *testing.T, n int) time.Time {
	t.Helper()
	return c.clk.Step(t, n)
}

// until steps a checker of n loops until server has a report satisfying ok
// among those after the first skip, and returns it; at most maxSteps steps.
func (c *clocked) until(t *testing.T, n int, server string, skip, maxSteps int, ok func(Report) bool) Report {
	t.Helper()
	for range maxSteps {
		c.step(t, n)
		c.settle(t, n)
		if reps := c.rs.list(server); len(reps) > skip {
			for _, r := range reps[skip:] {
				if ok(r) {
					return r
				}
			}
		}
	}
	t.Fatalf("%s: no matching report within %d probes; got %+v", server, maxSteps, c.rs.list(server))
	return Report{}
}

// script is a TargetProber answering from a function; it records when (on
// the fake clock) each server was probed.
type script struct {
	clk    *fakeclock.Clock
	answer func(ctx context.Context, t Target, n int) Result // n: the server's probe count, from 1

	mu     sync.Mutex
	probes map[string][]time.Time
}

func (s *script) Probe(ctx context.Context, t Target) Result {
	s.mu.Lock()
	if s.probes == nil {
		s.probes = map[string][]time.Time{}
	}
	s.probes[t.Server] = append(s.probes[t.Server], s.clk.Now())
	n := len(s.probes[t.Server])
	s.mu.Unlock()
	return s.answer(ctx, t, n)
}

func (s *script) times(server string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.probes[server])
}

func (s *script) count(server string) int { return len(s.times(server)) }

// startScripted runs a checker on a fake clock with a scripted prober.
func startScripted(t *testing.T, opts CheckerOptions, answer func(context.Context, Target, int) Result, targets ...Target) (*clocked, *script) {
	t.Helper()
	p := &script{answer: answer}
	c := startClocked(t, opts, p, targets...)
	p.clk = c.clk
	return c, p
}

var (
	okResult      = Result{OK: true, RTT: time.Millisecond}
	refusedResult = Result{Kind: KindRefused, Err: "refused: connection refused"}
)

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

// TestCheckerDetectsDeathAndRevival: a real server killed is down within
// Interval + (Fall-1) fast re-probes, and back after Rise probes once it
// listens again on the same port.
func TestCheckerDetectsDeathAndRevival(t *testing.T) {
	opts := CheckerOptions{Interval: time.Second, Rise: 2, Fall: 2}
	held := port.Hold(t) // the port stays ours while the server is dead
	var requests atomic.Int64
	serve := func() (kill func()) {
		ln, err := held.Listen()
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			okHandler(w, r)
		})}
		go srv.Serve(ln)
		return func() { srv.Close() }
	}
	kill := serve()
	c := startClocked(t, opts, nil, Target{Server: "edge-1", URL: "http://" + held.Addr() + "/nginx_status"})

	up := c.until(t, 1, "edge-1", 0, 1, isUp) // the first success decides
	if up.Load.Connections != 291 || up.Checker != "test-agent" || !up.At.After(t0) {
		t.Fatalf("first report %+v", up)
	}

	kill()
	killed := c.clk.Now()
	down := c.until(t, 1, "edge-1", len(c.rs.list("edge-1")), 10, isDown)
	took := down.At.Sub(killed)
	o := c.Options()
	bound := o.Interval + o.FastInterval*time.Duration(o.Fall-1)
	t.Logf("down %v after the kill (bound %v): %s", took, bound, down.Reason)
	if took <= 0 || took > bound {
		t.Errorf("down %v after the kill, want within %v", took, bound)
	}
	if !strings.HasPrefix(down.Reason, "refused") {
		t.Errorf("reason %q", down.Reason)
	}

	// Back on the same port: up after exactly Rise successful probes.
	kill = serve()
	defer kill()
	n0 := requests.Load()
	back := c.until(t, 1, "edge-1", len(c.rs.list("edge-1")), 10, isUp)
	if n := requests.Load() - n0; n != int64(opts.Rise) {
		t.Errorf("up after %d successful probes, want %d", n, opts.Rise)
	}
	if !back.Since.After(down.Since) {
		t.Errorf("since %v not after %v", back.Since, down.Since)
	}
}

func TestCheckerFlappingHoldsVerdict(t *testing.T) {
	// 1st answer fine, 2nd fails, ...
	c, p := startScripted(t, CheckerOptions{Interval: time.Second, Rise: 3, Fall: 3, RTTMinChange: time.Hour},
		func(_ context.Context, _ Target, n int) Result {
			if n%2 == 0 {
				return Result{Kind: KindStatus, Err: "status: 500"}
			}
			return okResult
		}, Target{Server: "flappy"})
	for range 30 {
		c.step(t, 1)
	}
	c.settle(t, 1)
	if n := p.count("flappy"); n != 30 {
		t.Fatalf("%d probes in 30 steps", n)
	}
	reps := c.rs.list("flappy")
	for _, r := range reps {
		if !r.Up {
			t.Fatalf("flapping server went down: %+v", reps)
		}
	}
	if len(reps) == 0 || reps[len(reps)-1].Loss < 0.3 {
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
	c := startClocked(t, CheckerOptions{Interval: time.Second, Rise: 2, Fall: 2}, nil,
		Target{Server: "edge-bw", URL: srv.URL + "/stats", CapacityMbps: 1000})
	r := c.until(t, 1, "edge-bw", 0, 1, isUp)
	if r.Load.BandwidthMbps != 500 || r.Load.CPU != 0.3 {
		t.Fatalf("load %+v", r.Load)
	}
	bw.Store(950)
	n0 := srv.requests.Load()
	r = c.until(t, 1, "edge-bw", 0, 10, isDown)
	if r.Reason != "bandwidth 95% of capacity" || r.Load.BandwidthMbps != 950 {
		t.Fatalf("down report %+v", r)
	}
	if n := srv.requests.Load() - n0; n != 2 {
		t.Errorf("down after %d overloaded answers, want Fall = 2", n)
	}
	n := len(c.rs.list("edge-bw"))
	bw.Store(880)
	r = c.until(t, 1, "edge-bw", n, 10, isUp)
	if r.Reason != "" {
		t.Fatalf("up report %+v", r)
	}
}

// TestCheckerSpreadsProbes: each target's probes fall on its own phase of
// the interval, so the first probes of many targets are spread out.
func TestCheckerSpreadsProbes(t *testing.T) {
	const n = 10
	const iv = 200 * time.Millisecond
	var targets []Target
	for i := range n {
		targets = append(targets, Target{Server: fmt.Sprintf("edge-%d", i)})
	}
	c, p := startScripted(t, CheckerOptions{Interval: iv, RTTMinChange: time.Hour},
		func(context.Context, Target, int) Result { return okResult }, targets...)
	for c.clk.Now().Before(t0.Add(2 * iv)) { // two intervals
		c.step(t, n)
	}
	c.settle(t, n)
	var times []time.Time
	for _, tg := range targets {
		ts := p.times(tg.Server)
		if len(ts) < 2 {
			t.Fatalf("%s probed %d times in two intervals", tg.Server, len(ts))
		}
		if want := t0.Add(phaseOffset("test-agent", tg.Server, iv)); !ts[0].Equal(want) || ts[1].Sub(ts[0]) != iv {
			t.Fatalf("%s probed at +%v, +%v; want +%v and an interval later", tg.Server, ts[0].Sub(t0), ts[1].Sub(t0), want.Sub(t0))
		}
		times = append(times, ts[0])
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

// TestCheckerSlowServerDoesNotDelayOthers: while one target's probe hangs,
// the other is probed on time, and the hanging one is not probed again
// (probes of one target never overlap).
func TestCheckerSlowServerDoesNotDelayOthers(t *testing.T) {
	release := make(chan struct{})
	c, p := startScripted(t, CheckerOptions{Interval: time.Second, Timeout: time.Hour, RTTMinChange: time.Hour},
		func(ctx context.Context, tg Target, _ int) Result {
			if tg.Server != "slow" {
				return okResult
			}
			select { // hangs until released (the real timeout is an hour)
			case <-release:
				return Result{Kind: KindTimeout, Err: "timeout: no answer"}
			case <-ctx.Done():
				return Result{Kind: KindCanceled, Err: "canceled"}
			}
		}, Target{Server: "slow"}, Target{Server: "fast"})
	// Step until the slow probe hangs (its loop then waits on no timer).
	for p.count("slow") == 0 {
		wait.For(t, "both loops idle, or the slow probe started", wait.DefaultTimeout, func() bool {
			return c.clk.Armed() == 2 || (p.count("slow") == 1 && c.clk.Armed() == 1)
		})
		if p.count("slow") == 0 {
			c.clk.AdvanceToNext()
		}
	}
	fast0, from := p.count("fast"), c.clk.Now()
	for range 20 {
		c.step(t, 1)
	}
	c.settle(t, 1)
	got, in := p.count("fast")-fast0, c.clk.Now().Sub(from)
	t.Logf("fast: %d probes in %v while the slow probe hangs", got, in)
	if got != 20 || in > 20*time.Second {
		t.Fatalf("fast target probed %d times in %v at a 1s interval", got, in)
	}
	if s := p.count("slow"); s != 1 {
		t.Fatalf("slow target probed %d times: probes overlap", s)
	}
	close(release)
	c.until(t, 2, "slow", 0, 10, func(r Report) bool { return !r.Up && strings.HasPrefix(r.Reason, "timeout") })
}

func TestCheckerSetTargetsWhileRunning(t *testing.T) {
	c, p := startScripted(t, CheckerOptions{Interval: time.Second, RTTMinChange: time.Hour},
		func(_ context.Context, tg Target, _ int) Result {
			if tg.URL == "dead" {
				return refusedResult
			}
			return okResult
		}, Target{Server: "a", URL: "ok"})
	c.until(t, 1, "a", 0, 1, isUp)

	c.SetTargets([]Target{{Server: "a", URL: "ok"}, {Server: "b", URL: "ok"}})
	c.until(t, 2, "b", 0, 2, isUp)
	if cur := c.Current(); len(cur) != 2 || cur[0].Server != "a" || cur[1].Server != "b" {
		t.Fatalf("Current %+v", cur)
	}

	c.SetTargets([]Target{{Server: "b", URL: "ok"}})
	wait.For(t, "OnRemove(a)", wait.DefaultTimeout, func() bool { return len(c.rs.removals()) > 0 })
	if got := c.rs.removals(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("OnRemove calls %v", got)
	}
	na, pa, pb := len(c.rs.list("a")), p.count("a"), p.count("b")
	for range 5 { // five intervals: b is probed, a is not
		c.step(t, 1)
	}
	c.settle(t, 1)
	if len(c.rs.list("a")) != na || p.count("a") != pa || p.count("b") != pb+5 {
		t.Fatalf("after a's removal, 5 steps probed a %d and b %d times", p.count("a")-pa, p.count("b")-pb)
	}
	if cur := c.Current(); len(cur) != 1 || cur[0].Server != "b" {
		t.Fatalf("Current %+v", cur)
	}

	// A kept target takes its new URL and keeps its state: b goes down
	// through the usual Fall, not through "unknown".
	nb := len(c.rs.list("b"))
	c.SetTargets([]Target{{Server: "b", URL: "dead"}})
	r := c.until(t, 1, "b", nb, 10, isDown)
	if !strings.HasPrefix(r.Reason, "refused") {
		t.Fatalf("b: %+v", r)
	}

	// Re-adding a removed server starts it afresh.
	c.SetTargets([]Target{{Server: "a", URL: "ok"}})
	wait.For(t, "OnRemove(b)", wait.DefaultTimeout, func() bool { return len(c.rs.removals()) == 2 })
	c.until(t, 1, "a", na, 1, isUp)
}

// TestCheckerReportSuppression: nothing changed, nothing reported until
// RefreshInterval has passed; a load change is reported at the next probe.
func TestCheckerReportSuppression(t *testing.T) {
	var conns atomic.Int64
	conns.Store(100)
	const refresh = 30 * time.Second
	opts := CheckerOptions{Interval: time.Second, RefreshInterval: refresh, RTTMinChange: time.Hour}
	c, p := startScripted(t, opts, func(context.Context, Target, int) Result {
		r := okResult
		r.HasLoad, r.Load = true, avail.Load{CPU: 0.2, BandwidthMbps: 300, Connections: int(conns.Load())}
		return r
	}, Target{Server: "steady"})
	first := c.until(t, 1, "steady", 0, 1, isUp)
	for range 15 { // half the refresh interval
		c.step(t, 1)
	}
	c.settle(t, 1)
	if reps := c.rs.list("steady"); len(reps) != 1 {
		t.Fatalf("%d reports while nothing changed: %+v", len(reps), reps)
	}
	if probes := p.count("steady"); probes != 16 {
		t.Fatalf("%d probes in 16 steps", probes)
	}
	second := c.until(t, 1, "steady", 1, 30, isUp)
	if gap := second.At.Sub(first.At); gap != refresh {
		t.Fatalf("refresh after %v, want %v", gap, refresh)
	}
	conns.Store(150)
	changed := c.until(t, 1, "steady", 2, 1, func(r Report) bool { return r.Load.Connections == 150 })
	if d := changed.At.Sub(second.At); d != opts.Interval {
		t.Fatalf("load change reported %v after the last report, want at the next probe (%v)", d, opts.Interval)
	}
}

func TestCheckerTCPTarget(t *testing.T) {
	ln, ap := listenTCP(t, "127.0.0.1:0")
	c := startClocked(t, CheckerOptions{Interval: time.Second}, nil, Target{Server: "tcp", Address: ap})
	if r := c.until(t, 1, "tcp", 0, 1, isUp); r.RTT <= 0 {
		t.Fatalf("%+v", r)
	}
	ln.Close()
	c.until(t, 1, "tcp", 0, 10, isDown)
}

func TestCheckerMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	srv := newModeServer(t, okHandler)
	c := startClocked(t, CheckerOptions{Interval: time.Second, Registerer: reg, RTTMinChange: time.Hour}, nil, Target{Server: "m", URL: srv.URL})
	// A second checker in the same process shares the collectors.
	if _, err := NewChecker(CheckerOptions{Registerer: reg}, nil, nil); err != nil {
		t.Fatal(err)
	}
	c.until(t, 1, "m", 0, 1, isUp)
	srv.mode.Store(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	c.until(t, 1, "m", 0, 10, isDown)

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
	// One success, then Fall (2) failures: three probes.
	if got["anysched_health_probe_duration_seconds"] != 3 ||
		got["anysched_health_probe_errors_total{kind=status}"] != 2 ||
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
	clk := fakeclock.New(t0)
	var after atomic.Bool
	var calls atomic.Int64
	p := &script{clk: clk, answer: func(context.Context, Target, int) Result { return okResult }}
	c, err := NewChecker(CheckerOptions{ID: "x", Interval: time.Second, RefreshInterval: time.Millisecond, Clock: fakeClock{clk},
		OnReport: func(Report) {
			calls.Add(1)
			if after.Load() {
				t.Error("report after Run returned")
			}
		}}, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTargets([]Target{{Server: "a"}, {Server: ""}}) // the nameless one is ignored
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for range 3 { // a report per probe (RefreshInterval 1ms)
		clk.Step(t, 1)
	}
	wait.For(t, "3 reports", wait.DefaultTimeout, func() bool { return calls.Load() == 3 })
	if err := c.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after.Store(true)
	// Run has returned: no loop is left waiting to probe.
	if n := clk.Armed(); n != 0 {
		t.Fatalf("%d probe loops still waiting after Run returned", n)
	}

	// Runs again after a stop.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	after.Store(false)
	go func() { done <- c.Run(ctx) }()
	clk.Step(t, 1)
	wait.For(t, "a report from the second Run", wait.DefaultTimeout, func() bool { return calls.Load() == 4 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p.count("a") != 4 || p.count("") != 0 {
		t.Fatalf("probes: a %d, nameless %d", p.count("a"), p.count(""))
	}
}

// TestCheckerOptionsDefaults: the file's defaults are valid and are what a
// checker given zero options runs with, so the two cannot drift.
func TestCheckerOptionsDefaults(t *testing.T) {
	d := DefaultCheckerOptions()
	if err := d.Validate("health.check."); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	c, err := NewChecker(CheckerOptions{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Options()
	if got.Interval != d.Interval || got.Timeout != d.Timeout || got.Rise != d.Rise || got.Fall != d.Fall || got.BandwidthThreshold != d.BandwidthThreshold {
		t.Errorf("zero options run with interval %s timeout %s rise %d fall %d bandwidth %v; the file's defaults are %+v",
			got.Interval, got.Timeout, got.Rise, got.Fall, got.BandwidthThreshold, d)
	}
	bad := CheckerOptions{Interval: time.Second, Timeout: 2 * time.Second, Rise: 0, Fall: 101, BandwidthThreshold: 1.5}
	err = bad.Validate("health.check.")
	for _, want := range []string{"health.check.timeout", "health.check.interval 1s", "health.check.rise", "health.check.fall", "health.check.bandwidth_threshold"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate(%+v) = %v, want it to name %s", bad, err, want)
		}
	}
}
