package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdfeed"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Merge rules for several checkers' verdicts on one server.
const (
	// MergeOptimistic: down only when every live checker says down (Apache
	// Traffic Control's rule: one checker's network trouble must not take
	// servers out).
	MergeOptimistic = "optimistic"
	// MergeMajority: down when more than half of the live checkers say down.
	MergeMajority = "majority"
)

// MergerOptions configure the scheduler side; the yaml tags are a
// scheduler's health section.
type MergerOptions struct {
	Rule string `yaml:"merge"` // optimistic (default) or majority
	// Grace: a server whose checkers all vanished keeps its last verdict this
	// long, then counts as available (fail open).
	Grace time.Duration `yaml:"grace"`
	// PanicThreshold: when less than this share of a node's servers is
	// healthy, health is ignored for that node (Envoy's panic mode) rather
	// than sending every STB to the survivors. 0 disables it.
	PanicThreshold float64 `yaml:"panic_threshold"`
}

// Merger follows health reports and checker liveness in etcd and computes
// availability, with the operator's drains (internal/province/opstate) applied. It never blocks the hot path: Compute is called off
// it, when the scheduler rebuilds its routing tables.
type Merger struct {
	Client  *clientv3.Client
	Prefix  string
	Options MergerOptions
	Logger  *slog.Logger
	// OnChange is called (from the merger's goroutine) after anything that
	// may change availability.
	OnChange func()

	mu       sync.Mutex
	reports  map[string]map[string]Report // server -> checker -> report
	lost     map[string]lostVerdict       // server -> last verdict after its checkers vanished
	checkers map[string]avail.CheckerInfo
	failOpen map[string]bool // servers already reported as failed open

	synced atomic.Bool // the first full list of verdicts is in

	failOpenGauge prometheus.Gauge
	checkerGauge  *prometheus.GaugeVec
}

// Synced reports whether the merger has read the province's verdicts at
// least once since it started.
func (m *Merger) Synced() bool { return m.synced.Load() }

type lostVerdict struct {
	up     bool
	reason string
	at     time.Time
}

// Register adds the merger's metrics.
func (m *Merger) Register(reg prometheus.Registerer) {
	m.failOpenGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_health_failopen_servers", Help: "Servers with no live checker past the grace period, counted as available."})
	m.checkerGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_health_checkers", Help: "Live health checkers (holding their lease), by the region they check."}, []string{"region"})
	reg.MustRegister(m.failOpenGauge, m.checkerGauge)
}

func (m *Merger) reset() {
	m.reports = map[string]map[string]Report{}
	m.checkers = map[string]avail.CheckerInfo{}
	if m.lost == nil {
		m.lost = map[string]lostVerdict{}
	}
	if m.failOpen == nil {
		m.failOpen = map[string]bool{}
	}
}

// Run follows etcd until ctx ends. On any watch failure it lists everything
// again, so it converges after an outage; while etcd is unreachable the last
// known verdicts stay in use.
func (m *Merger) Run(ctx context.Context) error {
	f := &etcdfeed.Feed{
		Client: m.Client, Prefix: m.Prefix, Keys: []string{keyspace.PrefixHealth, keyspace.PrefixCheckers},
		Logger: m.Logger.With("component", "health-merger"),
		Listed: m.listed, Updated: m.updated, Changed: m.changed,
		Tick: time.Second, // grace periods expire with time, not events
	}
	return f.Run(ctx)
}

func (m *Merger) listed(kvs []etcdfeed.KV) {
	m.mu.Lock()
	before := m.reports
	m.reset()
	for _, kv := range kvs {
		m.apply(kv)
	}
	// Servers whose reports vanished while we were not watching.
	for s, byChecker := range before {
		if len(m.reports[s]) == 0 {
			m.noteLost(s, byChecker)
		}
	}
	m.mu.Unlock()
	m.synced.Store(true)
}

func (m *Merger) updated(kvs []etcdfeed.KV) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	touched := false
	for _, kv := range kvs {
		touched = m.apply(kv) || touched
	}
	return touched
}

// apply records one key (relative to the prefix); it reports whether it
// concerned health at all.
func (m *Merger) apply(kv etcdfeed.KV) bool {
	switch {
	case strings.HasPrefix(kv.Key, keyspace.PrefixHealth):
		checker, server, ok := strings.Cut(strings.TrimPrefix(kv.Key, keyspace.PrefixHealth), "/")
		if !ok || checker == "" || server == "" {
			return false
		}
		if kv.Deleted {
			if prev, had := m.reports[server][checker]; had {
				delete(m.reports[server], checker)
				if len(m.reports[server]) == 0 {
					delete(m.reports, server)
					m.noteLost(server, map[string]Report{checker: prev})
				}
			}
			return true
		}
		var r Report
		if json.Unmarshal(kv.Value, &r) != nil {
			return false
		}
		if m.reports[server] == nil {
			m.reports[server] = map[string]Report{}
		}
		m.reports[server][checker] = r
		delete(m.lost, server)
		delete(m.failOpen, server)
		return true
	case strings.HasPrefix(kv.Key, keyspace.PrefixCheckers):
		id := strings.TrimPrefix(kv.Key, keyspace.PrefixCheckers)
		if kv.Deleted {
			delete(m.checkers, id)
			return true
		}
		var ci avail.CheckerInfo
		if json.Unmarshal(kv.Value, &ci) == nil {
			m.checkers[id] = ci
		}
		return true
	}
	return false
}

// noteLost keeps a vanished server's last merged verdict for the grace period.
func (m *Merger) noteLost(server string, last map[string]Report) {
	up, reason := merge(m.Options.Rule, last)
	m.lost[server] = lostVerdict{up: up, reason: reason, at: time.Now()}
}

func (m *Merger) changed() {
	if m.OnChange != nil {
		m.OnChange()
	}
}

// merge applies the rule to one server's reports.
func merge(rule string, reports map[string]Report) (up bool, reason string) {
	downs, total := 0, len(reports)
	var why []string
	for _, r := range reports {
		if !r.Up {
			downs++
			if r.Reason != "" {
				why = append(why, r.Checker+": "+r.Reason)
			}
		}
	}
	var down bool
	if rule == MergeMajority {
		down = downs*2 > total
	} else {
		down = total > 0 && downs == total
	}
	if !down {
		return true, ""
	}
	return false, fmt.Sprintf("down by %d of %d checkers (%s)", downs, total, strings.Join(why, "; "))
}

// Compute merges everything known into per-server availability for snap;
// drained[i] says why server i is drained by an operator ("" when it is not,
// nil when nothing is drained: see opstate.Watcher.DrainReasons).
func (m *Merger) Compute(snap *topology.Snapshot, drained []string) *avail.Availability {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reports == nil {
		m.reset()
	}
	n := len(snap.Servers)
	a := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n), Healthy: make([]bool, n), Drained: make([]bool, n), Panic: make([]bool, len(snap.Nodes))}
	now := time.Now()
	failOpen := 0
	for i, sv := range snap.Servers {
		up, reason := true, ""
		if rs, ok := m.reports[sv.Name]; ok && len(rs) > 0 {
			up, reason = merge(m.Options.Rule, rs)
			var latest Report
			for _, r := range rs {
				if r.At.After(latest.At) {
					latest = r
				}
			}
			a.Figures[i] = avail.Figures{Load: latest.Load, RTT: latest.RTT, Loss: latest.Loss, Since: latest.Since, Measured: true}
		} else if lv, ok := m.lost[sv.Name]; ok {
			if now.Sub(lv.at) < m.Options.Grace {
				up, reason = lv.up, lv.reason+" (no live checker; last verdict kept)"
			} else {
				failOpen++
				if !lv.up && !m.failOpen[sv.Name] {
					m.failOpen[sv.Name] = true
					m.Logger.Warn("no live checker for a server past the grace period; counting it as available", "component", "health-merger", "server", sv.Name, "last_verdict", lv.reason)
				}
			}
		}
		a.Healthy[i] = up
		if !up {
			a.Why[i] = reason
		}
		if drained != nil && drained[i] != "" {
			a.Drained[i] = true
			a.Why[i] = "drained: " + drained[i]
		}
	}
	if m.failOpenGauge != nil {
		m.failOpenGauge.Set(float64(failOpen))
	}
	for ni, nv := range snap.Nodes {
		healthy := 0
		for _, s := range nv.Servers {
			if a.Healthy[s] {
				healthy++
			}
		}
		a.Panic[ni] = m.Options.PanicThreshold > 0 && float64(healthy) < m.Options.PanicThreshold*float64(len(nv.Servers))
		for _, s := range nv.Servers {
			a.Available[s] = !a.Drained[s] && (a.Healthy[s] || a.Panic[ni])
			if a.Available[s] {
				a.Why[s] = ""
			}
		}
	}
	perRegion := map[string]int{}
	for _, rv := range snap.Regions {
		perRegion[rv.Name] = 0
	}
	for _, c := range m.checkers {
		a.Checkers = append(a.Checkers, c)
		perRegion[c.Region]++
	}
	if m.checkerGauge != nil {
		for r, n := range perRegion {
			m.checkerGauge.WithLabelValues(r).Set(float64(n))
		}
	}
	return a
}
