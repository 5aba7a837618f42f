package health

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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
//
// A checker speaks only for what its etcd identity is bound to: its keys
// name a region (health/<region>/<checker>/), which etcd lets only a
// checker provisioned for that region write
// (internal/etcd/etcdauth), so a verdict counts for a server only when the
// key's region is the server's (or keyspace.ProvinceRegion, a
// province-wide checker's). A verdict counts only while its checker is
// live by the store's word: written under the very lease that holds the
// checker's registration, so a verdict left behind without a lease, or
// from a checker's earlier life, counts for nothing. What a report claims
// of itself (its checker, server, region, time) is not believed; its
// figures are the median over the counted checkers, so no one checker
// sets them.
type Merger struct {
	Client  *clientv3.Client
	Prefix  string
	Options MergerOptions
	Logger  *slog.Logger
	// OnChange is called (from the merger's goroutine) after anything that
	// may change availability.
	OnChange func()

	mu       sync.Mutex
	servers  map[string]*serverState     // by server name
	checkers map[checkerRef]*checkerSlot // registrations, and checkers seen in verdicts only
	lost     map[string]lostVerdict      // server -> last verdict after its checkers vanished
	failOpen map[string]bool             // servers already reported as failed open
	warned   map[string]bool             // old-layout keys, and checkers of newer verdicts, already warned about

	synced atomic.Bool // the first full list of verdicts is in

	failOpenGauge prometheus.Gauge
	checkerGauge  *prometheus.GaugeVec
	newerCount    prometheus.Counter
}

// checkerRef is a checker as its keys name it: the region its etcd
// identity is bound to, and its id.
type checkerRef struct{ region, id string }

// serverState is what the merger knows of one server: the verdicts on it,
// and its last merged verdict while they counted (kept through a
// relisting, for the grace period when they stop counting).
type serverState struct {
	verdicts []*leased // a few: a slice, cheaper than a map to walk
	last     lostVerdict
	hasLast  bool
}

// leased is a report with the lease etcd holds it under, and its
// checker's slot (found once, not on every Compute).
type leased struct {
	ref     checkerRef
	checker *checkerSlot
	r       Report
	lease   int64
}

// checkerSlot is a checker's registration and its lease; live while etcd
// holds the registration. A slot outlives the registration so that the
// verdicts pointing at it see it go.
type checkerSlot struct {
	info  avail.CheckerInfo
	lease int64
	live  bool
	refs  int // verdicts pointing at it
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
	m.newerCount = prometheus.NewCounter(prometheus.CounterOpts{Name: "anysched_health_newer_format_refusals_total", Help: "Verdicts refused because a newer checker wrote them in a format this build does not read (each counts as no verdict of that checker)."})
	reg.MustRegister(m.failOpenGauge, m.checkerGauge, m.newerCount)
}

func (m *Merger) reset() {
	m.servers = map[string]*serverState{}
	m.checkers = map[checkerRef]*checkerSlot{}
	if m.lost == nil {
		m.lost, m.failOpen, m.warned = map[string]lostVerdict{}, map[string]bool{}, map[string]bool{}
	}
}

// server is the state of a server, made on first sight.
func (m *Merger) server(name string) *serverState { return made(m.servers, name) }

// checker is the slot of a checker, made on first sight.
func (m *Merger) checker(ref checkerRef) *checkerSlot { return made(m.checkers, ref) }

// made is m[k], a zero value stored there on first sight.
func made[K comparable, V any](m map[K]*V, k K) *V {
	v := m[k]
	if v == nil {
		v = new(V)
		m[k] = v
	}
	return v
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

// listed replaces everything known. Servers whose verdicts vanished while
// the merger was not watching are noticed by Compute, which remembers
// each server's last verdict.
func (m *Merger) listed(kvs []etcdfeed.KV) {
	m.mu.Lock()
	before := m.servers
	m.reset()
	for _, kv := range kvs {
		m.apply(kv)
	}
	for name, st := range before {
		if st.hasLast {
			m.server(name).last, m.server(name).hasLast = st.last, true
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
// concerned health at all. Whether a report counts is Compute's to judge,
// against the topology.
func (m *Merger) apply(kv etcdfeed.KV) bool {
	switch {
	case strings.HasPrefix(kv.Key, keyspace.PrefixHealth):
		region, checker, server, ok := keyspace.ParseVerdict(kv.Key)
		if !ok {
			m.warnLegacy(kv)
			return false
		}
		ref := checkerRef{region, checker}
		var r Report
		if !kv.Deleted {
			if json.Unmarshal(kv.Value, &r) != nil {
				return false
			}
			if r.Format > ReportFormat {
				// Refused whole: as if this checker had no verdict on it.
				m.newerReport(ref, r.Format)
				kv.Deleted = true
			}
		}
		if kv.Deleted {
			if st := m.servers[server]; st != nil {
				st.verdicts = slices.DeleteFunc(st.verdicts, func(l *leased) bool {
					if l.ref == ref {
						l.checker.refs--
						return true
					}
					return false
				})
				if len(st.verdicts) == 0 && !st.hasLast {
					delete(m.servers, server)
				}
			}
			return true
		}
		// The key, which etcd's permissions vouch for, names the checker
		// and the server; the value's claims are not believed.
		r.Checker, r.Server = checker, server
		st := m.server(server)
		if i := slices.IndexFunc(st.verdicts, func(l *leased) bool { return l.ref == ref }); i >= 0 {
			st.verdicts[i].r, st.verdicts[i].lease = r, kv.Lease
		} else {
			c := m.checker(ref)
			c.refs++
			st.verdicts = append(st.verdicts, &leased{ref: ref, checker: c, r: r, lease: kv.Lease})
		}
		return true
	case strings.HasPrefix(kv.Key, keyspace.PrefixCheckers):
		region, id, ok := keyspace.ParseChecker(kv.Key)
		if !ok {
			m.warnLegacy(kv)
			return false
		}
		ref := checkerRef{region, id}
		if kv.Deleted {
			if c := m.checkers[ref]; c != nil {
				c.live, c.lease = false, 0
			}
			return true
		}
		var ci avail.CheckerInfo
		if json.Unmarshal(kv.Value, &ci) == nil {
			ci.ID, ci.Region = id, region
			c := m.checker(ref)
			c.info, c.lease, c.live = ci, kv.Lease, true
		}
		return true
	}
	return false
}

// newerReport logs (once per checker) and counts a report refused for
// its format.
func (m *Merger) newerReport(ref checkerRef, format int) {
	if m.newerCount != nil {
		m.newerCount.Inc()
	}
	key := keyspace.Verdicts(ref.region, ref.id)
	if m.warned[key] {
		return
	}
	m.warned[key] = true
	m.Logger.Warn("a checker publishes verdicts in a newer format than this build reads; they are refused, as if it had none: upgrade this scheduler, or roll the checker back",
		"component", "health-merger", "checker", ref.id, "region", ref.region, "format", format, "reads", ReportFormat)
}

// warnLegacy says once per key that a checker of the layout before
// regions (identity anysched-checker.<checker-id>) is ignored: an
// operator upgrading sees why its servers went unchecked.
func (m *Merger) warnLegacy(kv etcdfeed.KV) {
	if kv.Deleted || m.warned[kv.Key] || !strings.HasPrefix(kv.Key, keyspace.PrefixCheckers) {
		return // one warning per checker: its registration, not each verdict
	}
	m.warned[kv.Key] = true
	m.Logger.Warn("a checker publishes in the layout before regions; its verdicts are ignored: give it the identity anysched-checker.<region>.<checker-id> and upgrade it (docs/operations.md, \"Naming a health checker\")",
		"component", "health-merger", "key", kv.Key)
}

func (m *Merger) changed() {
	if m.OnChange != nil {
		m.OnChange()
	}
}

// counted appends to dst the reports on a server of region that count:
// from checkers bound to that region or to the province, written under
// the lease of their checker's live registration.
func counted(dst []*Report, st *serverState, region string) []*Report {
	for _, l := range st.verdicts {
		if l.ref.region != region && l.ref.region != keyspace.ProvinceRegion {
			continue
		}
		if !l.checker.live || l.lease == 0 || l.lease != l.checker.lease {
			continue
		}
		dst = append(dst, &l.r)
	}
	return dst
}

// merge applies the rule to one server's reports.
func merge(rule string, reports []*Report) (up bool, reason string) {
	return mergeBy(rule, reports, func(r *Report) (bool, string) { return r.Up, r.Reason })
}

// mergeBy applies the rule to the verdicts verdict reads from the reports
// (the server's, or its IPv6 address's).
func mergeBy(rule string, reports []*Report, verdict func(*Report) (bool, string)) (up bool, reason string) {
	downs, total := 0, len(reports)
	var why []string
	for _, r := range reports {
		if up, reason := verdict(r); !up {
			downs++
			if reason != "" {
				why = append(why, r.Checker+": "+reason)
			}
		}
	}
	slices.Sort(why) // reports come from a map: say them in one order
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

// medianFigures is each figure's median over the reports (of an even
// count, the mean of the middle two): one checker among three or more
// cannot move it beyond the others', whatever it claims, and no
// checker-set time decides which report wins. A median of counters
// (requests, errors) still only grows while the checkers stay. sc is
// scratch space, reused from one server to the next (Compute runs over
// every server of the province on every change).
func medianFigures(rs []*Report, sc *scratch) avail.Figures {
	if len(rs) == 1 {
		r := rs[0]
		return avail.Figures{Load: r.Load, RTT: r.RTT, Loss: r.Loss, Since: r.Since, Measured: true}
	}
	mf := func(get func(*Report) float64) float64 {
		sc.fl = sc.fl[:0]
		for _, r := range rs {
			sc.fl = append(sc.fl, get(r))
		}
		return median(sc.fl, func(a, b float64) float64 { return (a + b) / 2 })
	}
	mi := func(get func(*Report) int64) int64 {
		sc.in = sc.in[:0]
		for _, r := range rs {
			sc.in = append(sc.in, get(r))
		}
		return median(sc.in, func(a, b int64) int64 { return a + (b-a)/2 })
	}
	// The lower median of the times: one a report gave, so that an unset
	// (zero) one stays unset.
	sc.ts = sc.ts[:0]
	for _, r := range rs {
		sc.ts = append(sc.ts, r.Since)
	}
	slices.SortFunc(sc.ts, time.Time.Compare)
	return avail.Figures{
		Load: avail.Load{
			CPU:           mf(func(r *Report) float64 { return r.Load.CPU }),
			Memory:        mf(func(r *Report) float64 { return r.Load.Memory }),
			LoadAvg:       mf(func(r *Report) float64 { return r.Load.LoadAvg }),
			BandwidthMbps: mf(func(r *Report) float64 { return r.Load.BandwidthMbps }),
			Connections:   int(mi(func(r *Report) int64 { return int64(r.Load.Connections) })),
			Requests:      mi(func(r *Report) int64 { return r.Load.Requests }),
			Errors:        mi(func(r *Report) int64 { return r.Load.Errors }),
		},
		RTT:      time.Duration(mi(func(r *Report) int64 { return int64(r.RTT) })),
		Loss:     mf(func(r *Report) float64 { return r.Loss }),
		Since:    sc.ts[(len(sc.ts)-1)/2],
		Measured: true,
	}
}

// scratch is medianFigures' and counted's space, reused across servers.
type scratch struct {
	rs []*Report
	fl []float64
	in []int64
	ts []time.Time
}

// median sorts v and returns its middle value, or mid of the middle two.
func median[T int64 | float64](v []T, mid func(a, b T) T) T {
	if len(v) == 2 { // two checkers a region, the usual case: no sort
		return mid(min(v[0], v[1]), max(v[0], v[1]))
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return mid(v[n/2-1], v[n/2])
}

// Compute merges everything known into per-server availability for snap;
// drained[i] says why server i is drained by an operator ("" when it is not,
// nil when nothing is drained: see opstate.Watcher.DrainReasons).
func (m *Merger) Compute(snap *topology.Snapshot, drained []string) *avail.Availability {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers == nil {
		m.reset()
	}
	n := len(snap.Servers)
	a := &avail.Availability{Figures: make([]avail.Figures, n), Available: make([]bool, n), Why: make([]string, n), Healthy: make([]bool, n), Drained: make([]bool, n), Panic: make([]bool, len(snap.Nodes))}
	now := time.Now()
	failOpen := 0
	var sc scratch
	// A dual-stack server's families are merged apart: one may be down
	// while the other works. famDown[f][i]: only family f of server i is
	// down (allocated at the first).
	var famDown *[2][]bool
	var famWhy [2][]string
	for i, sv := range snap.Servers {
		region := ""
		if sv.Region >= 0 {
			region = snap.Regions[sv.Region].Name
		}
		up, reason := true, ""
		st := m.servers[sv.Name]
		if st != nil {
			sc.rs = counted(sc.rs[:0], st, region)
		}
		if rs := sc.rs; st != nil && len(rs) > 0 {
			up, reason = merge(m.Options.Rule, rs)
			if sv.Addr6.IsValid() {
				up6, reason6 := mergeBy(m.Options.Rule, rs, (*Report).up6)
				if up != up6 {
					if famDown == nil {
						famDown = &[2][]bool{make([]bool, n), make([]bool, n)}
						famWhy = [2][]string{make([]string, n), make([]string, n)}
					}
					f, why := 0, reason
					if !up6 {
						f, why = 1, reason6
					}
					famDown[f][i], famWhy[f][i] = true, why
					up, reason = true, ""
				}
			}
			a.Figures[i] = medianFigures(rs, &sc)
			st.last, st.hasLast = lostVerdict{up: up, reason: reason}, true
			if len(m.lost) > 0 {
				delete(m.lost, sv.Name)
			}
			if len(m.failOpen) > 0 {
				delete(m.failOpen, sv.Name)
			}
		} else {
			// No checker counts any more: keep the last verdict for the
			// grace period, from when this was first seen.
			if st != nil && st.hasLast {
				st.hasLast = false
				m.lost[sv.Name] = lostVerdict{up: st.last.up, reason: st.last.reason, at: now}
				if len(st.verdicts) == 0 {
					delete(m.servers, sv.Name)
				}
			}
			if lv, ok := m.lost[sv.Name]; ok {
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
			if famDown != nil && a.Panic[ni] { // health ignored: both families too
				famDown[0][s], famDown[1][s], famWhy[0][s], famWhy[1][s] = false, false, "", ""
			}
		}
	}
	a.FamilyDown = famDown
	if famDown != nil {
		a.FamilyWhy = &famWhy
	}
	perRegion := map[string]int{}
	for _, rv := range snap.Regions {
		perRegion[rv.Name] = 0
	}
	for ref, c := range m.checkers {
		if !c.live {
			if c.refs == 0 {
				delete(m.checkers, ref) // gone, and no verdict points at it
			}
			continue
		}
		a.Checkers = append(a.Checkers, c.info)
		perRegion[c.info.Region]++
	}
	slices.SortFunc(a.Checkers, func(x, y avail.CheckerInfo) int {
		return cmp.Or(strings.Compare(x.Region, y.Region), strings.Compare(x.ID, y.ID))
	})
	// Servers that left the topology leave the lost verdicts too (a
	// sweep only when there are more than servers: rare).
	if len(m.lost) > n {
		seen := make(map[string]bool, n)
		for _, sv := range snap.Servers {
			seen[sv.Name] = true
		}
		maps.DeleteFunc(m.lost, func(s string, _ lostVerdict) bool { return !seen[s] })
		maps.DeleteFunc(m.failOpen, func(s string, _ bool) bool { return !seen[s] })
	}
	if m.checkerGauge != nil {
		for r, n := range perRegion {
			m.checkerGauge.WithLabelValues(r).Set(float64(n))
		}
	}
	return a
}
