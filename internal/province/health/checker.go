package health

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CheckerOptions configures a Checker. Zero values take the defaults noted.
// It is also the checker's part of the configuration file (health.check in
// a scheduler, the top level of the healthcheck daemon's): the keys an
// operator sets carry yaml tags, DefaultCheckerOptions is their defaults and
// Validate checks them; the rest is the program's.
type CheckerOptions struct {
	// ID names this checker in its reports (Report.Checker); default: the
	// host name.
	ID string `yaml:"-"`
	// Interval between two probes of one target; default 1s.
	Interval time.Duration `yaml:"interval"`
	// Timeout of one probe (connect, headers and body); default Interval/4
	// (250 ms), so that a dead server whose probes time out rather than
	// being refused is still down within Interval+2*Timeout = 1.5 s, leaving
	// time to publish within the 2 s detection target. A status page slower
	// than that on a LAN means the server is in trouble anyway; raise it for
	// distant servers.
	Timeout time.Duration `yaml:"timeout"`
	// Rise consecutive successes bring a down server up; Fall consecutive
	// failures bring an up server down. Defaults 2 and 2.
	Rise int `yaml:"rise"`
	Fall int `yaml:"fall"`
	// FastInterval replaces Interval while a verdict change is pending (a
	// failure while up, a success while down; HAProxy's fastinter); default
	// Interval/4. With Interval 1s and Fall 2 a dead server is declared down
	// at most Interval+FastInterval (1.25 s) plus the probe time after it
	// died.
	FastInterval time.Duration `yaml:"-"`
	// LossWindow is how many recent probes Report.Loss is computed over;
	// default 20.
	LossWindow int `yaml:"-"`
	// BandwidthThreshold: a server whose reported bandwidth exceeds this
	// share of its CapacityMbps is unavailable for new STBs (Reason
	// "bandwidth 95% of capacity"), with the same Rise/Fall hysteresis as
	// reachability but counted separately. Default 0.9; negative disables.
	// It applies to every target; a target's Policy adds its own thresholds
	// (CPU, memory, connections, load average), counted with it.
	BandwidthThreshold float64 `yaml:"bandwidth_threshold"`
	// RefreshInterval: a report is emitted at least this often per target
	// even when nothing changed (it keeps the published key's timestamp
	// from growing old without bound); default 5m. Nothing reads the
	// timestamp for liveness (a checker's lease is that), so the refresh
	// is kept slow: at 30 s it was 99% of a province's verdict writes
	// (two checkers a server, 10,000 servers: 667 of 672 keys/s,
	// bench/etcdload), at 5 minutes a tenth of that.
	RefreshInterval time.Duration `yaml:"-"`
	// RTTMinChange: smoothed RTT changes smaller than this are not worth a
	// report even when above 20% (sub-millisecond LAN RTTs jitter by more
	// than that); default 1ms.
	RTTMinChange time.Duration `yaml:"-"`

	// OnReport receives the reports (see Checker for when one is made). It
	// is called from the target's own probe goroutine, one call at a time
	// per target, concurrently across targets: it must be safe for
	// concurrent use and must not block long, since that target's next
	// probe waits for it (other targets are unaffected). A publisher should
	// hand the report off (a coalescing map or buffered channel) rather than
	// write to etcd inline. Nil: reports are only kept for Current.
	OnReport func(Report) `yaml:"-"`
	// OnRemove, if set, is called once a target dropped by SetTargets has
	// stopped (from its goroutine, after its last OnReport), so that a
	// publisher can delete the server's key.
	OnRemove func(server string) `yaml:"-"`
	// Registerer for the checker's metrics; nil: not registered. Several
	// checkers may share one registerer (the collectors are shared).
	Registerer prometheus.Registerer `yaml:"-"`
	// Clock schedules the probes and stamps the reports (At, Since, the
	// refresh); nil: the real clock. Tests drive a fake one. A probe's
	// Timeout and the probe duration metric are I/O time and stay real.
	Clock Clock `yaml:"-"`
}

// Clock is the checker's time source.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now (time.NewTimer).
	NewTimer(d time.Duration) Timer
}

// Timer is what the checker uses of a timer, with time.Timer's semantics
// (Go 1.23 and later: after Reset or Stop no stale value is received).
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// WallClock is the time package as a Clock (the operator state watcher
// times drain windows with it too).
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// NewTimer is time.NewTimer.
func (WallClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// Thresholds of the report rule (see Checker).
const (
	reportRTTChange  = 0.20 // relative change of the smoothed RTT
	reportLoadChange = 0.10 // relative change of a load figure (not Requests)
	reportLossChange = 0.05 // absolute change of the loss share
	rttAlpha         = 0.3  // EWMA weight of a new RTT sample
)

// TargetProber probes one target; *Prober is the implementation.
type TargetProber interface {
	Probe(ctx context.Context, t Target) Result
}

// Checker probes a set of targets, each from its own goroutine, and turns the
// results into per-server Reports.
//
// Scheduling: each target's probes fall on a fixed phase within Interval,
// derived from a hash of the checker ID and the server name, so that the
// probes of many targets are spread over the interval rather than sent in
// bursts (and several checkers do not probe a server at the same instant).
// Probes of one target never overlap; a slow or hanging server only delays
// its own next probe. While a verdict change is pending, the target is
// re-probed every FastInterval.
//
// Verdict: a target starts unknown and publishes nothing until its first
// probe. It is Up after its first success (a restarted checker must not
// mark a province down) and Down after Fall consecutive failures; after
// that, the usual hysteresis: Fall consecutive failures take it down, Rise
// consecutive successes bring it back. The load thresholds (bandwidth, and
// the target's Policy: CPU, memory, connections, load average) share their
// own counters: an answer over any of them is overloaded; Fall consecutive
// overloaded answers make it Down with a reason naming the figures
// ("bandwidth N% of capacity" when that is the only one, else e.g.
// "overloaded: cpu 0.97 > max_cpu 0.90"), Rise consecutive answers under
// every threshold (or without figures) clear it; the first answer decides
// at start.
//
// Report rule (etcd write volume for 10,000 servers matters): a report is
// emitted after a probe only when, compared with the last report emitted for
// that target,
//   - the verdict changed (or it is the first verdict), or the cause of a
//     down verdict changed (unreachable vs. overloaded, or which figures
//     are over their thresholds),
//   - the smoothed RTT moved by more than 20% and by more than RTTMinChange,
//   - a load figure (CPU, memory, load average, bandwidth, connections)
//     moved by more than 10% (relative to the larger of the old value and a
//     small floor: 0.1 CPU or memory, 1 load, 10 Mbit/s, 10 connections; the
//     Requests counter always grows and does not count), or load figures
//     appeared or disappeared,
//   - the loss share moved by more than 0.05,
//   - or RefreshInterval has passed since the last report.
//
// RTT is an EWMA (weight 0.3) of successful probes; Loss is the failed share
// of the last LossWindow probes (an overloaded answer is not a loss).
type Checker struct {
	opts   CheckerOptions
	prober TargetProber
	log    *slog.Logger
	m      *checkerMetrics
	clock  Clock
	epoch  time.Time // phases are counted from here (monotonic on the real clock)

	mu       sync.Mutex
	targets  map[string]Target        // desired set
	loops    map[string]*targetLoop   // running loops (while Run runs)
	stopping map[string]chan struct{} // removed loops not yet exited
	runCtx   context.Context          // nil when not running (or stopping)
	running  bool                     // from Run's start until its loops have exited
	wg       sync.WaitGroup
}

type targetLoop struct {
	target  atomic.Pointer[Target]
	cancel  context.CancelFunc
	done    chan struct{}
	removed atomic.Bool
	last    atomic.Pointer[Report]
}

// NewChecker validates opts, applies defaults and registers the metrics. A
// nil prober is &Prober{Timeout: opts.Timeout}; a nil logger discards.
func NewChecker(opts CheckerOptions, prober TargetProber, logger *slog.Logger) (*Checker, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if prober == nil {
		prober = &Prober{Timeout: opts.Timeout}
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newCheckerMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Checker{
		opts:     opts,
		prober:   prober,
		log:      logger.With("checker", opts.ID),
		m:        m,
		clock:    opts.Clock,
		epoch:    opts.Clock.Now(),
		targets:  map[string]Target{},
		loops:    map[string]*targetLoop{},
		stopping: map[string]chan struct{}{},
	}, nil
}

func (o *CheckerOptions) defaults() error {
	switch {
	case o.Interval < 0, o.Timeout < 0, o.FastInterval < 0, o.RefreshInterval < 0, o.RTTMinChange < 0:
		return errors.New("health: checker durations must not be negative")
	case o.Rise < 0, o.Fall < 0, o.LossWindow < 0:
		return errors.New("health: checker rise, fall and loss window must not be negative")
	case math.IsNaN(o.BandwidthThreshold) || math.IsInf(o.BandwidthThreshold, 0):
		return errors.New("health: bandwidth threshold must be finite")
	}
	if o.ID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "checker"
		}
		o.ID = h
	}
	d := DefaultCheckerOptions()
	if o.Interval == 0 {
		o.Interval = d.Interval
	}
	if o.Timeout == 0 {
		o.Timeout = o.Interval / 4
	}
	if o.Rise == 0 {
		o.Rise = d.Rise
	}
	if o.Fall == 0 {
		o.Fall = d.Fall
	}
	if o.FastInterval == 0 {
		o.FastInterval = o.Interval / 4
	}
	if o.FastInterval > o.Interval {
		o.FastInterval = o.Interval
	}
	if o.LossWindow == 0 {
		o.LossWindow = 20
	}
	if o.BandwidthThreshold == 0 {
		o.BandwidthThreshold = d.BandwidthThreshold
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 5 * time.Minute
	}
	if o.RTTMinChange == 0 {
		o.RTTMinChange = time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = WallClock{}
	}
	return nil
}

// Options returns the options in use, defaults applied.
func (c *Checker) Options() CheckerOptions { return c.opts }

// SetTargets replaces the set of targets, keyed by Server. It may be called
// before or while Run runs: new servers get a probe loop, dropped ones have
// theirs stopped (OnRemove follows), and kept ones continue with their state
// and the updated Target (address, URL, capacity, policy) from their next
// probe.
// Targets without a Server name are ignored; of duplicates, the last wins.
func (c *Checker) SetTargets(ts []Target) {
	want := make(map[string]Target, len(ts))
	for _, t := range ts {
		if t.Server == "" {
			c.log.Warn("health: target without a server name ignored", "url", t.URL, "address", t.Address)
			continue
		}
		if _, dup := want[t.Server]; dup {
			c.log.Warn("health: duplicate target, the last one wins", "server", t.Server)
		}
		want[t.Server] = t
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.targets = want
	if c.runCtx == nil {
		return
	}
	for name, l := range c.loops {
		if _, ok := want[name]; !ok {
			l.removed.Store(true)
			l.cancel()
			delete(c.loops, name)
			c.stopping[name] = l.done
		}
	}
	for name, t := range want {
		if l, ok := c.loops[name]; ok {
			l.target.Store(&t)
		} else {
			c.startLocked(t)
		}
	}
}

// Current returns the last report emitted for every target that has a
// verdict, sorted by server: what a publisher rewrites after losing its
// lease.
func (c *Checker) Current() []Report {
	c.mu.Lock()
	out := make([]Report, 0, len(c.loops))
	for _, l := range c.loops {
		if r := l.last.Load(); r != nil {
			out = append(out, *r)
		}
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

// Run probes the targets until ctx is done, then stops every loop, waits for
// them and returns nil. It returns an error at once if already running.
func (c *Checker) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("health: checker already running")
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.runCtx, c.running = runCtx, true
	for _, t := range c.targets {
		c.startLocked(t)
	}
	c.mu.Unlock()

	<-ctx.Done()

	c.mu.Lock()
	c.runCtx = nil
	c.loops = map[string]*targetLoop{}
	c.mu.Unlock()
	cancel()
	c.wg.Wait()
	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
	return nil
}

// startLocked starts t's loop; c.mu is held and c.runCtx is set.
func (c *Checker) startLocked(t Target) {
	l := &targetLoop{done: make(chan struct{})}
	l.target.Store(&t)
	ctx, cancel := context.WithCancel(c.runCtx)
	l.cancel = cancel
	prev := c.stopping[t.Server] // a removed loop of the same name still finishing
	c.loops[t.Server] = l
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		if prev != nil {
			select {
			case <-prev: // its OnRemove must not follow our first report
			case <-ctx.Done():
			}
		}
		c.loop(ctx, l)
		close(l.done)
		c.mu.Lock()
		if c.stopping[t.Server] == l.done {
			delete(c.stopping, t.Server)
		}
		c.mu.Unlock()
		if l.removed.Load() && c.opts.OnRemove != nil {
			c.opts.OnRemove(t.Server)
		}
	}()
}

// loop is one target's probe loop.
func (c *Checker) loop(ctx context.Context, l *targetLoop) {
	name := l.target.Load().Server
	offset := phaseOffset(c.opts.ID, name, c.opts.Interval)
	tr := newTracker(&c.opts)
	// A dual-stack server's IPv6 address has its own rise and fall: one
	// family may be down while the other works.
	tr6 := newTracker(&c.opts)
	var sent6 tri // the IPv6 verdict last emitted
	now := c.clock.Now()
	timer := c.clock.NewTimer(c.nextSlot(now, offset).Sub(now))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		}
		t := *l.target.Load()
		start := c.clock.Now()
		began := time.Now() // the probe's I/O time, for the metric
		pctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		res := c.prober.Probe(pctx, t)
		cancel()
		took := time.Since(began)
		t6, dual := t.Family6()
		var res6 Result
		if dual {
			began6 := time.Now()
			pctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
			res6 = c.prober.Probe(pctx, t6)
			cancel()
			c.m.duration.Observe(time.Since(began6).Seconds())
		}
		now := c.clock.Now()
		if ctx.Err() != nil {
			return
		}
		if res.Kind != KindCanceled && res6.Kind != KindCanceled { // says nothing about the server
			c.m.duration.Observe(took.Seconds())
			for _, k := range [2]string{res.Kind, res6.Kind} {
				if k != "" {
					c.m.errors.WithLabelValues(k).Inc()
				}
			}
			prevVerdict := tr.verdict
			rep, emit := tr.update(res, t, now)
			if tr.verdict != prevVerdict {
				c.verdictChanged(prevVerdict, rep)
			}
			if dual {
				prev6 := tr6.verdict
				rep6, _ := tr6.update(res6, t6, now)
				if tr6.verdict != prev6 {
					c.changed(prev6, rep6, "server's IPv6 address")
				}
				if tr6.verdict != unknown && rep.Server != "" {
					up6 := tr6.verdict == yes
					rep.Up6, rep.Reason6 = &up6, rep6.Reason
					emit = emit || tr6.verdict != sent6
				}
			}
			if emit && dual {
				sent6 = tr6.verdict
			}
			if emit {
				rep.Checker = c.opts.ID
				l.last.Store(&rep)
				if c.opts.OnReport != nil {
					c.opts.OnReport(rep)
				}
			}
		}

		var next time.Time
		if tr.pending() || (t.Address6.IsValid() && tr6.pending()) {
			next = start.Add(c.opts.FastInterval)
		} else {
			after := start.Add(c.opts.Interval / 2)
			if now.After(after) {
				after = now
			}
			next = c.nextSlot(after, offset)
		}
		timer.Reset(next.Sub(c.clock.Now()))
	}
}

func (c *Checker) verdictChanged(prev tri, r Report) { c.changed(prev, r, "server") }

// changed logs and counts a change of the verdict on what (the server, or
// its IPv6 address) that r reports.
func (c *Checker) changed(prev tri, r Report, what string) {
	if prev == unknown {
		// Establishing a verdict is not a change; not counted.
		if r.Up {
			c.log.Debug("health: "+what+" up (first verdict)", "server", r.Server, "rtt", r.RTT)
		} else {
			c.log.Warn("health: "+what+" down (first verdict)", "server", r.Server, "reason", r.Reason)
		}
		return
	}
	if r.Up {
		c.m.changes.WithLabelValues("up").Inc()
		c.log.Info("health: "+what+" up", "server", r.Server, "rtt", r.RTT)
	} else {
		c.m.changes.WithLabelValues("down").Inc()
		c.log.Warn("health: "+what+" down", "server", r.Server, "reason", r.Reason)
	}
}

// phaseOffset is the target's deterministic phase within the interval.
func phaseOffset(id, server string, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(server))
	return time.Duration(h.Sum64() % uint64(interval))
}

// nextSlot is the first time >= after that lies on the target's phase:
// epoch + offset + k*Interval.
func (c *Checker) nextSlot(after time.Time, offset time.Duration) time.Time {
	iv := c.opts.Interval
	d := after.Sub(c.epoch) - offset
	k := d / iv
	if d > k*iv {
		k++
	}
	if k < 0 {
		k = 0
	}
	return c.epoch.Add(offset + k*iv)
}
