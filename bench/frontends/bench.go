package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
)

// runResult is one measured run.
type runResult struct {
	rps      float64
	p50, p99 time.Duration // zero when the tool gives no percentiles
	p999     time.Duration // fixed-rate runs: the 99.9th percentile
	avg      time.Duration // DNS: dnsperf's average latency
	total    int64         // requests or queries completed
	lost     int64         // DNS: queries lost
	cpu      time.Duration // server CPU time (user+system, whole process tree) per answered request
	logBytes int64         // access-log bytes the server wrote during the run
	busy     [2]float64    // share of the run the server's and the load generator's CPUs were busy (pinned runs), by any process
	own      float64       // share of the run the server's processes were on a CPU
	others   float64       // share of the run other processes ran on the server's core (servers on one core)
	tls      string        // what the server's TLS log says of the handshakes ("" when it has none)
	problems []string      // errors the tool reported (non-3xx answers, socket errors)
}

// side is one server under one load: what a row of the table compares.
type side struct {
	name    string        // as the table names it
	missing string        // why it was not measured; "" when it was
	pid     int           // root of the server's process tree, whose CPU time is counted
	target  string        // what the load asks: a URL (HTTP), host:port (DNS)
	logFile string        // its access log, measured and emptied after each run ("" none)
	tlsLog  bool          // logFile ends its lines with TLS protocol and session reuse (nginx TLS)
	any     *anyschedProc // anysched sides: where dropped access-log lines are read
	twoCore bool          // the server may use both cores
	byP99   bool          // fixed-rate load: the best run is the one with the lowest p99
	run     func(ctx context.Context, d time.Duration) (runResult, error)

	runs    []runResult
	dropped float64 // access-log lines the server dropped during the measured runs
}

// scenario is a set of sides measured in alternation under one kind of
// load: round after round, each side once, so a slow period of the machine
// hits all of them alike.
type scenario struct {
	title    string // "HTTP 302, keep-alive"
	unit     string // req/s or q/s
	tool     string
	settings string
	checks   []string // what the sample responses showed
	notes    []string
	sides    []*side
	pin      pinning // whose CPUs' busy time is measured (unpinned: none)
	rate     int     // offered load of a fixed-rate scenario, whose rows compare p99; 0: closed loop, rows compare throughput
}

// row is one comparison of the table: a against b.
type row struct {
	sc     *scenario
	what   string  // what a is, as the table says it; "" for anysched
	peer   string  // what b is, as the table says it
	a, b   *side   // a is anysched
	target float64 // a/b must be at least this; 0: a reference, no target
	// shared: a 2-core row where the load generator shares the server's
	// two cores (a host with fewer than four), so throughput cannot show
	// scaling; the verdict estimates it from CPU time per request instead.
	shared bool
}

// cpuScaling estimates what 2 cores serve against 1 from CPU time per
// request: 2 x b's over a's, a on 2 cores, b on 1. It holds when the
// cores do not wait on each other (no lock held across requests), which
// CPU time alone cannot show.
func (r row) cpuScaling() (float64, bool) {
	x, y := minCPU(r.a.runs), minCPU(r.b.runs)
	if x <= 0 || y <= 0 {
		return 0, false
	}
	return 2 * float64(y) / float64(x), true
}

func best(rs []runResult) runResult {
	var b runResult
	for _, r := range rs {
		if r.rps > b.rps {
			b = r
		}
	}
	return b
}

// atRate reports whether the row compares tails under a fixed rate.
func (r row) atRate() bool { return r.sc != nil && r.sc.rate > 0 }

// top is the side's best run: the fastest, or under a fixed rate the one
// with the lowest p99.
func (s *side) top() runResult {
	if !s.byP99 {
		return best(s.runs)
	}
	var b runResult
	for _, r := range s.runs {
		if b.p99 == 0 || (r.p99 > 0 && r.p99 < b.p99) {
			b = r
		}
	}
	return b
}

// measured reports whether the side has a measured run.
func (s *side) measured() bool { return s.missing == "" && len(s.runs) > 0 }

// ratio is a's best throughput over b's, or under a fixed rate b's p99
// over a's (at least 1: a's tail is no longer); ok is false when either
// side was not measured.
func (r row) ratio() (float64, bool) {
	if !r.a.measured() || !r.b.measured() {
		return 0, false
	}
	return r.runRatio(r.a.top(), r.b.top())
}

// runRatio compares one run of a with one of b as the row does: by
// throughput, or under a fixed rate by p99; ok is false when the divisor
// is zero.
func (r row) runRatio(a, b runResult) (float64, bool) {
	if r.atRate() {
		return float64(b.p99) / float64(a.p99), a.p99 > 0
	}
	return a.rps / b.rps, b.rps > 0
}

// targetLoad is a load generator aimed at a side's target (dnsLoad,
// rateLoad, wrkLoad).
type targetLoad interface {
	run(ctx context.Context, target string, d time.Duration) (runResult, error)
}

// under is a copy of s, without runs, that serves ld at a fixed rate: its
// best run is the one with the lowest p99.
func (s *side) under(ld targetLoad) *side {
	c := *s
	c.runs, c.dropped, c.byP99 = nil, 0, true
	c.run = func(ctx context.Context, d time.Duration) (runResult, error) { return ld.run(ctx, c.target, d) }
	return &c
}

// runScenario warms every available side up, then runs the measured
// rounds. A side whose run fails is reported as failed and left out of
// later rounds; only the end of ctx aborts.
func runScenario(ctx context.Context, o opts, sc *scenario) error {
	live := func() []*side {
		var out []*side
		for _, s := range sc.sides {
			if s.missing == "" {
				out = append(out, s)
			}
		}
		return out
	}
	fail := func(s *side, what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.missing = fmt.Sprintf("failed in %s: %v", what, firstLine(err.Error()))
		fmt.Printf("%s: %s %s\n", sc.title, s.name, s.missing)
		return nil
	}
	// Unmeasured: connections, goroutine stacks, caches, the first GC
	// cycles over the snapshot's heap.
	for _, s := range live() {
		if _, err := s.run(ctx, time.Second); err != nil {
			if err := fail(s, "the warm-up", err); err != nil {
				return err
			}
		}
		s.truncateLog()
	}
	for round := 1; round <= o.rounds; round++ {
		for _, s := range live() {
			r, err := s.measure(ctx, o.duration, sc.pin)
			if err != nil {
				if err := fail(s, fmt.Sprintf("round %d", round), err); err != nil {
					return err
				}
				continue
			}
			s.runs = append(s.runs, r)
			fmt.Printf("%s: round %d %-34s %s\n", sc.title, round, s.name, r.line(sc.unit))
		}
	}
	return nil
}

// measure runs the load once, with the server's CPU time, access-log bytes
// and dropped lines around it.
func (s *side) measure(ctx context.Context, d time.Duration, pin pinning) (runResult, error) {
	var dropped float64
	if s.any != nil {
		v, err := s.any.dropped(ctx)
		if err != nil {
			return runResult{}, err
		}
		dropped = v
	}
	before, err := treeCPU(s.pid)
	if err != nil {
		return runResult{}, err
	}
	var cores []cpuTimes
	var tasks float64
	// A two-core run on CPUs of its own is not on the CPUs whose busy
	// time is read.
	if pin.on() && (!s.twoCore || pin.shared) {
		if cores, err = readCPUTimes(pin.cpus[:]...); err != nil {
			return runResult{}, err
		}
	}
	start := time.Now()
	r, err := s.run(ctx, d)
	if err != nil {
		return r, err
	}
	wall := time.Since(start)
	if cores != nil {
		now, err := readCPUTimes(pin.cpus[:]...)
		if err != nil {
			return r, err
		}
		for i := range now {
			r.busy[i] = busyShare(cores[i], now[i])
		}
		tasks = tasksShare(cores[0], now[0])
	}
	after, err := treeCPU(s.pid)
	if err != nil {
		return r, err
	}
	if r.total > 0 {
		r.cpu = (after - before) / time.Duration(r.total)
	}
	r.own = float64(after-before) / float64(wall)
	if cores != nil && !s.twoCore {
		r.others = max(0, tasks-r.own)
	}
	if s.logFile != "" {
		// The writer may still be flushing the tail; what it adds after
		// this is counted in the next run, a small error.
		if st, err := os.Stat(s.logFile); err == nil {
			r.logBytes = st.Size()
		}
		if s.tlsLog {
			r.tls = tlsSummary(s.logFile)
		}
		s.truncateLog()
	}
	if s.any != nil {
		v, err := s.any.dropped(ctx)
		if err != nil {
			return r, err
		}
		s.dropped += v - dropped
	}
	return r, nil
}

// truncateLog empties the side's access log (its writer appends), so the
// files stay small and each run's bytes can be counted.
func (s *side) truncateLog() {
	if s.logFile != "" {
		_ = os.Truncate(s.logFile, 0)
	}
}

// line is a run's progress line.
func (r runResult) line(unit string) string {
	lat := "avg " + fmtDur(r.avg)
	if r.p50 > 0 {
		lat = "p50 " + fmtDur(r.p50) + " p99 " + fmtDur(r.p99)
	}
	if r.p999 > 0 {
		lat += " p99.9 " + fmtDur(r.p999)
	}
	s := fmt.Sprintf("%9.0f %-5s %-24s CPU %s/req", r.rps, unit, lat, fmtCPU(r.cpu))
	if r.busy != [2]float64{} {
		s += fmt.Sprintf("  busy: server core %.0f%% (the server %.0f%%), load core %.0f%%", 100*r.busy[0], 100*r.own, 100*r.busy[1])
	}
	if r.logBytes > 0 && r.total > 0 {
		s += fmt.Sprintf("  log %d B/req", r.logBytes/r.total)
	}
	if r.tls != "" {
		s += "  " + r.tls
	}
	return s + problems(r)
}

func problems(r runResult) string {
	var s string
	if r.lost > 0 {
		s += fmt.Sprintf("  (%d lost)", r.lost)
	}
	if len(r.problems) > 0 {
		s += "  (" + strings.Join(r.problems, "; ") + ")"
	}
	return s
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// fmtCPU prints a per-request CPU time in microseconds.
func fmtCPU(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", float64(d)/1e3)
}
