package outlier

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Detector is the passive outlier detector of one scheduler process. Observe
// and Report are lock-free and safe from any goroutine; SetServers,
// Evaluate and the read side serialise on a mutex, off the hot path.
type Detector struct {
	// Immutable after New.
	cfg     Config
	windowU uint64 // reask window in slot time units
	slots   []atomic.Uint64
	mask    uint64
	m       *metrics
	log     *slog.Logger

	table atomic.Pointer[table]

	mu     sync.Mutex
	states []*state          // by current server index
	byName map[string]*state // the same states, by name
	gen    uint64
	// scratch, reused by Evaluate
	cands     []candidate
	nodeTotal map[int32]int
	nodeOut   map[int32]int
}

// Ejection is one ejected server.
type Ejection struct {
	Server int32 // index in the last SetServers
	Name   string
	Until  time.Time
	Count  int    // ejections in a row, this one included (its length is Count x base_ejection, capped)
	Reason string // e.g. "5 consecutive re-asks"
}

// New builds a Detector for cfg (zero fields take their defaults). Its
// metrics are registered on reg (nil: not registered). It tracks no server
// until SetServers.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Detector, error) {
	if err := cfg.Validate(""); err != nil {
		return nil, fmt.Errorf("outlier: %w", err)
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	d := &Detector{
		cfg:       cfg,
		windowU:   uint64((cfg.ReaskWindow + timeUnit - 1) / timeUnit),
		m:         m,
		log:       log,
		byName:    map[string]*state{},
		nodeTotal: map[int32]int{},
		nodeOut:   map[int32]int{},
	}
	if cfg.Enabled {
		// A disabled detector never touches the table: no need for its memory.
		d.slots = make([]atomic.Uint64, cfg.Slots)
		d.mask = uint64(cfg.Slots - 1)
	}
	d.table.Store(&table{})
	return d, nil
}

// Config returns the configuration in use, defaults applied.
func (d *Detector) Config() Config { return d.cfg }

// Observe records one answered request: the client (clientKey, a hash of its
// address) was sent to server for content (contentKey, a hash of the channel
// or path) at now (unix nanoseconds). If the same client asked for the same
// content within reask_window before, the server of that earlier answer
// failed it. server is an index of the last SetServers; a negative or
// unknown one is ignored. Lock-free and allocation-free.
func (d *Detector) Observe(clientKey uint64, contentKey uint64, server int32, now int64) {
	if d.slots == nil {
		return
	}
	t := d.table.Load()
	if uint32(server) >= uint32(len(t.servers)) {
		return
	}
	seq := t.servers[server].requests.Add(1)
	h := mix(clientKey, contentKey)
	nowU := uint64(now) >> timeUnitShift
	v := pack(h, t.gen, seq, server, nowU)
	old := d.slots[h&d.mask].Swap(v)
	if old == 0 || old>>tagShift != v>>tagShift {
		return // empty, or another pair's answer (now forgotten)
	}
	// Strictly older: two answers within one time unit are one request
	// seen twice, not a player giving up. A negative age (a caller's clock
	// behind another's) wraps to far beyond the window.
	if age := (nowU - old) & timeMask; age == 0 || age > d.windowU {
		return
	}
	d.reask(t, old)
}

// reask attributes a failure to the server of the earlier answer old.
func (d *Detector) reask(t *table, old uint64) {
	d.m.reasks.Inc()
	idx := int32(old>>serverShift&serverMask) - 1
	if old>>genShift&1 != t.gen&1 {
		// Answered under the previous table: translate its index.
		if int(idx) >= len(t.remap) {
			return
		}
		idx = t.remap[idx]
	}
	if uint32(idx) >= uint32(len(t.servers)) {
		return // the server left the topology
	}
	c := t.servers[idx]
	c.failures.Add(1)
	// The failed request's full number: the latest number at or below the
	// current count with the same low bits (it was sent within the window,
	// so fewer than 2^14 requests ago unless the server takes more than
	// 1,600 a second from this scheduler).
	r := c.requests.Load()
	s := old >> seqShift & seqMask
	n := c.failN.Add(1)
	c.recent[n%ringSize].Store(r - (r-s)&seqMask)
}

// Report adds edge-reported counts for server since its last report (from
// health probes, e.g. 5xx responses): they feed the rate rule, as their own
// rate. server is an index of the last SetServers. Lock-free.
func (d *Detector) Report(server int32, requests, errors int64) {
	if d.slots == nil || requests < 0 || errors < 0 {
		return
	}
	t := d.table.Load()
	if uint32(server) >= uint32(len(t.servers)) {
		return
	}
	c := t.servers[server]
	c.edgeReq.Add(uint64(requests))
	c.edgeErr.Add(uint64(errors))
}

// SetServers tells the detector the servers of a new topology: nodes[i] is
// the node of server i (the unit max_ejected_share applies to), names[i] its
// name. Servers keep their counters and ejection state by name across
// re-indexing; new names start clean, absent ones are forgotten. The two
// slices must have the same length (extra entries of the longer one are
// ignored), and at most 65,535 servers are tracked. Call it before
// publishing a routing snapshot with the new indexes, so that Observe and
// Report calls made with them find the new table.
func (d *Detector) SetServers(nodes []int32, names []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := min(len(nodes), len(names))
	if len(nodes) != len(names) {
		d.log.Error("outlier: servers and nodes differ in length; extra entries ignored",
			"nodes", len(nodes), "names", len(names))
	}
	if n > maxServers {
		d.log.Error("outlier: too many servers; the rest are not tracked", "servers", n, "max", maxServers)
		n = maxServers
	}
	if d.sameNames(names[:n]) {
		// No server moved: keep the table, so remembered answers need no
		// translation (and a caller may call this on every rebuild).
		for i, s := range d.states {
			s.node = nodes[i]
		}
		return
	}
	states := make([]*state, n)
	byName := make(map[string]*state, n)
	servers := make([]*counters, n)
	remap := make([]int32, len(d.states))
	for i := range remap {
		remap[i] = -1
	}
	for i := range n {
		name := names[i] //nolint:gosec // G602: i < n <= len(names)
		s := d.byName[name]
		_, dup := byName[name]
		if dup {
			d.log.Error("outlier: duplicate server name; tracked separately", "server", name)
			s = nil
		}
		if s == nil {
			s = &state{name: name, c: new(counters)}
		} else {
			remap[s.idx] = int32(i)
		}
		if !dup {
			byName[name] = s
		}
		s.idx, s.node = int32(i), nodes[i]
		states[i] = s
		servers[i] = s.c
	}
	d.states, d.byName = states, byName
	d.gen++
	d.table.Store(&table{servers: servers, gen: d.gen, remap: remap})
	d.m.ejected.Set(float64(d.ejectedCount()))
}

// sameNames reports whether names are the current servers, in order.
func (d *Detector) sameNames(names []string) bool {
	if len(names) != len(d.states) {
		return false
	}
	for i, s := range d.states {
		if s.name != names[i] {
			return false
		}
	}
	return true
}

func (d *Detector) ejectedCount() int {
	n := 0
	for _, s := range d.states {
		if s.ejected {
			n++
		}
	}
	return n
}

// Ejected lists the ejected servers by index.
func (d *Detector) Ejected() []Ejection {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []Ejection
	for _, s := range d.states {
		if s.ejected {
			out = append(out, Ejection{Server: s.idx, Name: s.name, Until: s.until, Count: s.count, Reason: s.reason})
		}
	}
	return out
}

// EjectedSet is the ejected flag of every server of the last SetServers, by
// index: what the routing engine's rebuild leaves out. The slice is the
// caller's.
func (d *Detector) EjectedSet() []bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]bool, len(d.states))
	for i, s := range d.states {
		out[i] = s.ejected
	}
	return out
}

// Why explains the state of server: why it is ejected and until when, or
// why a failing server was left in, or "" when there is nothing to say.
func (d *Detector) Why(server int32) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if uint32(server) >= uint32(len(d.states)) {
		return ""
	}
	s := d.states[server]
	switch {
	case s.ejected:
		return fmt.Sprintf("ejected until %s (ejection %d in a row): %s", s.until.Format(time.RFC3339), s.count, s.reason)
	case s.skipped != "":
		return "failing but not ejected, max_ejected_share of its node reached: " + s.skipped
	}
	return ""
}

type metrics struct {
	ejections *prometheus.CounterVec
	ejected   prometheus.Gauge
	reasks    prometheus.Counter
	skipped   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anysched_outlier_ejections_total",
			Help: "Servers ejected by outlier detection, by rule (consecutive: consecutive re-asks; rate: re-ask or edge-reported error rate).",
		}, []string{"reason"}),
		ejected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "anysched_outlier_ejected_servers",
			Help: "Servers currently ejected by outlier detection.",
		}),
		reasks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_outlier_reasks_total",
			Help: "Requests repeating the same client's request for the same content within the re-ask window (failures of the first answer's server).",
		}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_outlier_ejections_skipped_total",
			Help: "Failing servers left in because their node had max_ejected_share of its servers ejected (counted once per episode).",
		}),
	}
	if reg != nil {
		var err error
		if m.ejections, err = register(reg, m.ejections); err != nil {
			return nil, err
		}
		if m.ejected, err = register(reg, m.ejected); err != nil {
			return nil, err
		}
		if m.reasks, err = register(reg, m.reasks); err != nil {
			return nil, err
		}
		if m.skipped, err = register(reg, m.skipped); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{reasonConsecutive, reasonRate} {
		m.ejections.WithLabelValues(r)
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// the same description (a second detector in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex, nil
			}
		}
		return c, fmt.Errorf("outlier: registering metrics: %w", err)
	}
	return c, nil
}
