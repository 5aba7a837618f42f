package opstate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdfeed"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watcher follows the operator state in etcd for one scheduler: drains and
// the balance policy (which change what the routing engine answers) and
// drills (which change whether the route is announced).
type Watcher struct {
	Client *clientv3.Client
	Prefix string
	Logger *slog.Logger
	// OnChange is called after drains or the balance policy may have
	// changed, from the watcher's goroutine: rebuild the engine.
	OnChange func()
	// OnDrill is called once for each drill seen (at start too), from the
	// watcher's goroutine: the announcer withdraws if the target is its own.
	OnDrill       func(Drill)
	Verifier      *signing.Verifier
	RequireSigned bool
	// Clock times the drains' windows: at each start and end the watcher
	// calls OnChange by itself, etcd or no etcd. Nil: the real clock.
	Clock health.Clock

	mu          sync.Mutex
	drains      map[string]Drain      // by kind/name
	drills      map[DrillTarget]Drill // the latest drill per target
	balanceDoc  string                // the stored balance policy document
	balance     balance.Config        // parsed; the defaults when absent or invalid
	balanceErr  error                 // why the stored document is not in use
	balanceSeen bool                  // balanceDoc has been read
	signedSeen  bool                  // a value verified: unsigned ones are refused from then on
	refused     map[string]string     // the values refused, by key: each is logged and counted once
	unsigned    map[string]string     // the unsigned values used, by key: the same
	overridden  map[string]Drain      // the drains not applied lest a region be emptied, by key
	states      map[string]DrainState // each drain's state when last looked at, by key: a boundary is logged once
	kick        chan struct{}         // drains changed: time the next boundary again

	synced          atomic.Bool
	drainGauge      prometheus.Gauge
	invalidGauge    prometheus.Gauge
	refusedCount    *prometheus.CounterVec
	unsignedCount   *prometheus.CounterVec
	overriddenGauge prometheus.Gauge
	pendingGauge    prometheus.Gauge
}

// clock is the watcher's time source: health's, which tests fake alike.
func (w *Watcher) clock() health.Clock {
	if w.Clock == nil {
		return health.WallClock{}
	}
	return w.Clock
}

// Register adds the watcher's metrics.
func (w *Watcher) Register(reg prometheus.Registerer) {
	w.drainGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_drains", Help: "Operator drains in force (servers, nodes and regions): stored, and inside their window if scheduled."})
	w.pendingGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_drains_pending", Help: "Scheduled drains stored whose window has not begun."})
	w.invalidGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_balance_config_invalid_bool", Help: "1 when the stored balance policy document is invalid and the defaults are in use."})
	w.refusedCount = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_opstate_refused_total", Help: "Operator state values (drains, drills, the balance policy) not used because their signature is missing or does not verify, or (newer_format) a newer release wrote them in a format this build does not read, by kind and reason."}, []string{"kind", "reason"})
	w.unsignedCount = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_opstate_unsigned_accepted_total", Help: "Unsigned operator state values used despite snapshot.trusted_keys, before the center signed any (the upgrade), by kind."}, []string{"kind"})
	w.overriddenGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_drains_overridden", Help: "Drains in etcd not applied because they would leave a region with no undrained server and were not forced by an admin."})
	reg.MustRegister(w.drainGauge, w.invalidGauge, w.refusedCount, w.unsignedCount, w.overriddenGauge, w.pendingGauge)
}

// Run follows etcd until ctx ends, and the drains' windows on its clock.
func (w *Watcher) Run(ctx context.Context) error {
	w.kick = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.followWindows(ctx) }()
	defer func() { cancel(); <-done }()
	f := &etcdfeed.Feed{
		Client: w.Client, Prefix: w.Prefix, Keys: []string{keyspace.PrefixDrain, keyspace.PrefixDrill, keyspace.KeyBalance},
		Logger: w.Logger.With("component", "opstate"),
		Listed: w.listed, Updated: w.updated,
		Changed: func() {
			if w.OnChange != nil {
				w.OnChange()
			}
		},
	}
	return f.Run(ctx)
}

// Synced reports whether the drains and drills have been read at least once:
// before that, a scheduler must not answer (it could send STBs to a drained
// server).
func (w *Watcher) Synced() bool { return w.synced.Load() }

func (w *Watcher) listed(kvs []etcdfeed.KV) {
	w.mu.Lock()
	w.drains = map[string]Drain{}
	// The drills too are the listing's: one whose key went while the
	// feed was down has ended. Those seen before are not fired again.
	prev := w.drills
	w.drills = map[DrillTarget]Drill{}
	hadBalance := false
	var fire []Drill
	// A signed value anywhere in the listing refuses unsigned ones
	// everywhere in it, whatever their order.
	for _, kv := range kvs {
		if w.signedSeen || w.Verifier == nil {
			break
		}
		if k := kindOf(kv.Key); k != "" && !kv.Deleted {
			if body, sig, err := open(k, kv.Value); err == nil && sig != nil && verify(w.Verifier, k, w.Prefix, kv.Key, body, sig) == nil {
				w.signedSeen = true
			}
		}
	}
	present := map[string]string{}
	for _, kv := range kvs {
		present[kv.Key] = string(kv.Value)
	}
	for _, m := range []map[string]string{w.refused, w.unsigned} {
		for k, v := range m {
			if present[k] != v {
				delete(m, k)
			}
		}
	}
	for _, kv := range kvs {
		hadBalance = hadBalance || kv.Key == keyspace.KeyBalance
		if d, ok := w.applyLocked(kv); ok {
			if p, seen := prev[d.Target]; !seen || !p.Until.Equal(d.Until) {
				fire = append(fire, d)
			}
		}
	}
	if !hadBalance {
		w.applyLocked(etcdfeed.KV{Key: keyspace.KeyBalance, Deleted: true})
	}
	w.windowsLocked(w.clock().Now())
	w.mu.Unlock()
	w.synced.Store(true)
	w.rearm()
	w.fire(fire)
}

// updated applies watched changes; only drains and the balance policy
// change what the engine answers, so a drill alone reports no change.
func (w *Watcher) updated(kvs []etcdfeed.KV) bool {
	w.mu.Lock()
	var fire []Drill
	answers := false
	for _, kv := range kvs {
		answers = answers || !strings.HasPrefix(kv.Key, keyspace.PrefixDrill)
		if d, ok := w.applyLocked(kv); ok {
			fire = append(fire, d)
		}
	}
	w.windowsLocked(w.clock().Now())
	w.mu.Unlock()
	w.rearm()
	w.fire(fire)
	return answers
}

// rearm has followWindows time the next boundary again.
func (w *Watcher) rearm() {
	select {
	case w.kick <- struct{}{}:
	default: // one pending is enough
	}
}

// followWindows calls OnChange at each start and end of a drain's window,
// on the watcher's clock: the schedulers apply a scheduled drain on time
// even when the center or etcd is down then.
func (w *Watcher) followWindows(ctx context.Context) {
	clk := w.clock()
	t := clk.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		w.mu.Lock()
		now := clk.Now()
		next, ok := w.nextBoundaryLocked(now)
		w.mu.Unlock()
		if ok {
			t.Reset(next.Sub(now))
		} else {
			t.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-t.C():
			w.mu.Lock()
			w.windowsLocked(clk.Now())
			w.mu.Unlock()
			if w.OnChange != nil {
				w.OnChange()
			}
		}
	}
}

func (w *Watcher) nextBoundaryLocked(now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for _, d := range w.drains {
		if b, ok := d.nextBoundary(now); ok && (!found || b.Before(next)) {
			next, found = b, true
		}
	}
	return next, found
}

// windowsLocked logs each scheduled drain entering or leaving its window
// (once: a relist says nothing again) and sets the drain gauges.
func (w *Watcher) windowsLocked(now time.Time) {
	states := make(map[string]DrainState, len(w.drains))
	active, pending := 0, 0
	for k, d := range w.drains {
		st := d.State(now)
		states[k] = st
		switch st {
		case DrainActive:
			active++
		case DrainPending:
			pending++
		}
		prev, seen := w.states[k]
		if !d.Scheduled() || (seen && prev == st) {
			continue
		}
		switch {
		case st == DrainActive && seen:
			w.Logger.Info("scheduled drain: its window began, applying it", "component", "opstate", "drain", d.String(), "window", d.Window())
		case st == DrainEnded:
			w.Logger.Info("scheduled drain: its window ended, no longer applied", "component", "opstate", "drain", d.String(), "window", d.Window())
		}
	}
	w.states = states
	if w.drainGauge != nil {
		w.drainGauge.Set(float64(active))
		w.pendingGauge.Set(float64(pending))
	}
}

func (w *Watcher) fire(drills []Drill) {
	if w.OnDrill == nil {
		return
	}
	for _, d := range drills {
		w.OnDrill(d)
	}
}

// applyLocked records one key; it returns a drill that is new or changed.
func (w *Watcher) applyLocked(kv etcdfeed.KV) (Drill, bool) {
	log := w.Logger.With("component", "opstate")
	raw := kv.Value
	var refused error
	if !kv.Deleted {
		if kv.Value, refused = w.checkLocked(kv); refused != nil {
			kv.Deleted = true // refused: as if it were not there
		}
	} else {
		delete(w.refused, kv.Key)
		delete(w.unsigned, kv.Key)
	}
	switch {
	case strings.HasPrefix(kv.Key, keyspace.PrefixDrain):
		k := strings.TrimPrefix(kv.Key, keyspace.PrefixDrain)
		if kv.Deleted {
			delete(w.drains, k)
		} else {
			var d Drain
			if err := json.Unmarshal(kv.Value, &d); err != nil {
				log.Error("ignoring an unreadable drain", "key", kv.Key, "err", err)
				delete(w.drains, k)
			} else if d.Format > Format {
				w.newer(kv.Key, signing.OpDrain, d.Format)
				delete(w.drains, k)
			} else if kv.Key != keyspace.Drain(string(d.Kind), d.Name) {
				// The key is what DrainReasons looks up and what an
				// undrain deletes: a value naming another target is not
				// a drain.
				log.Error("ignoring a drain whose value names another target than its key", "key", kv.Key, "kind", d.Kind, "name", d.Name)
				delete(w.drains, k)
			} else {
				w.drains[k] = d
			}
		}
	case strings.HasPrefix(kv.Key, keyspace.PrefixDrill):
		if kv.Deleted {
			// Ends it: by its lease shortly after its end, or early by
			// whoever deleted it.
			if t, err := ParseDrillTarget(strings.TrimPrefix(kv.Key, keyspace.PrefixDrill)); err == nil {
				delete(w.drills, t)
			}
			return Drill{}, false
		}
		var d Drill
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			log.Error("ignoring an unreadable drill", "key", kv.Key, "err", err)
			return Drill{}, false
		}
		if d.Format > Format {
			w.newer(kv.Key, signing.OpDrill, d.Format)
			if t, err := ParseDrillTarget(strings.TrimPrefix(kv.Key, keyspace.PrefixDrill)); err == nil {
				delete(w.drills, t) // as if absent
			}
			return Drill{}, false
		}
		// The key names the drill's target (and its deletion ends that
		// one): a value naming another is not a drill.
		if t, err := ParseDrillTarget(strings.TrimPrefix(kv.Key, keyspace.PrefixDrill)); err != nil || t != d.Target {
			log.Error("ignoring a drill whose value names another target than its key", "key", kv.Key, "target", d.Target.String())
			return Drill{}, false
		}
		if prev, ok := w.drills[d.Target]; ok && prev.Until.Equal(d.Until) {
			return Drill{}, false
		}
		w.drills[d.Target] = d
		return d, true
	case kv.Key == keyspace.KeyBalance:
		stored := string(raw) // as stored, signature and all
		if kv.Deleted && refused == nil {
			stored = ""
		}
		if w.balanceSeen && stored == w.balanceDoc {
			return Drill{}, false // said once, not again on every relist
		}
		doc := string(kv.Value)
		if kv.Deleted {
			doc = ""
		}
		w.balanceSeen = true
		w.balanceDoc, w.balance, w.balanceErr = stored, balance.DefaultConfig(), nil
		if refused != nil {
			w.balanceErr = fmt.Errorf("the stored balance policy document is refused: %w; the defaults are in use", refused)
		} else if doc != "" {
			c, err := balance.ParseConfig([]byte(doc))
			if err != nil {
				w.balanceErr = err
				log.Error("stored balance configuration is invalid; using the defaults", "key", w.Prefix+keyspace.KeyBalance, "err", err)
			} else {
				w.balance = c
			}
		}
		if w.invalidGauge != nil {
			w.invalidGauge.Set(map[bool]float64{false: 0, true: 1}[w.balanceErr != nil])
		}
	}
	return Drill{}, false
}

// Drains lists the drains stored, by kind and name, scheduled ones
// whatever their state (Drain.State says it).
func (w *Watcher) Drains() []Drain {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Drain, 0, len(w.drains))
	for _, d := range w.drains {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Drain) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name)) })
	return out
}

// DrainReasons says, for each server of snap, why it is drained (directly,
// by its node or by its region), or "" when it is not.
//
// No drain leaves a region without an undrained server unless an admin
// forced it: anyone who can write etcd can write drains, and a region so
// emptied sends its STBs away (applyDrains). Every scheduler decides
// alike, from the drains and the topology alone.
func (w *Watcher) DrainReasons(snap *topology.Snapshot) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(snap.Servers))
	applied := w.applyDrainsLocked(snap, w.clock().Now())
	if len(applied) == 0 {
		return out
	}
	for i, sv := range snap.Servers {
		for _, k := range [...]string{
			string(DrainServer) + "/" + sv.Name,
			string(DrainNode) + "/" + snap.Nodes[sv.Node].Name,
			string(DrainRegion) + "/" + snap.Regions[sv.Region].Name,
		} {
			if d, ok := applied[k]; ok {
				out[i] = d.String()
				break
			}
		}
	}
	return out
}

// applyDrainsLocked returns the drains in force at now (inside their
// window, if scheduled) that apply to snap, by key: forced ones, then the others oldest first (by At, then key), each
// unless it would leave its region with no undrained server. So a region's
// last server stays in service whichever drain came last, and the drains
// before keep theirs. Those left out are counted and logged once each.
func (w *Watcher) applyDrainsLocked(snap *topology.Snapshot, now time.Time) map[string]Drain {
	inForce := make(map[string]Drain, len(w.drains))
	for k, d := range w.drains {
		if d.State(now) == DrainActive {
			inForce[k] = d
		}
	}
	applied := make(map[string]Drain, len(inForce))
	over := map[string]Drain{}
	if len(inForce) > 0 {
		keys := make([]string, 0, len(inForce))
		for k := range inForce {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			da, db := inForce[a], inForce[b]
			if da.Forced != db.Forced {
				if da.Forced {
					return -1
				}
				return 1
			}
			return cmp.Or(da.At.Compare(db.At), cmp.Compare(a, b))
		})
		drained := make([]bool, len(snap.Servers))
		serving := make([]int, len(snap.Regions))
		for i, r := range snap.Regions {
			serving[i] = len(r.Servers)
		}
		for _, k := range keys {
			d := inForce[k]
			servers, region := drainCovers(snap, d)
			if region < 0 {
				continue // not in this topology
			}
			fresh := 0
			for _, sv := range servers {
				if !drained[sv] {
					fresh++
				}
			}
			if !d.Forced && fresh > 0 && fresh >= serving[region] {
				over[k] = d
				continue
			}
			for _, sv := range servers {
				drained[sv] = true
			}
			serving[region] -= fresh
			applied[k] = d
		}
	}
	for k, d := range over {
		if prev, ok := w.overridden[k]; !ok || !prev.At.Equal(d.At) {
			w.Logger.Warn("drain not applied: it would leave region "+regionOf(snap, d)+" with no undrained server, and no admin forced it", "component", "opstate", "drain", d.String(), "at", d.At.Format(time.RFC3339))
		}
	}
	for k, d := range w.overridden {
		if _, ok := over[k]; !ok {
			if _, still := inForce[k]; still {
				w.Logger.Info("drain applied again: its region keeps an undrained server without it", "component", "opstate", "drain", d.String())
			}
		}
	}
	w.overridden = over
	if w.overriddenGauge != nil {
		w.overriddenGauge.Set(float64(len(over)))
	}
	return applied
}

// drainCovers returns the servers d drains in snap and their region's
// index (-1: d names nothing there).
func drainCovers(snap *topology.Snapshot, d Drain) ([]int32, int32) {
	switch d.Kind {
	case DrainServer:
		if i, ok := snap.Server(d.Name); ok {
			return []int32{i}, snap.Servers[i].Region
		}
	case DrainNode:
		if i, ok := snap.Node(d.Name); ok && len(snap.Nodes[i].Servers) > 0 {
			ss := snap.Nodes[i].Servers
			return ss, snap.Servers[ss[0]].Region
		}
	case DrainRegion:
		if i, ok := snap.Region(d.Name); ok {
			return snap.Regions[i].Servers, i
		}
	}
	return nil, -1
}

func regionOf(snap *topology.Snapshot, d Drain) string {
	if _, r := drainCovers(snap, d); r >= 0 {
		return snap.Regions[r].Name
	}
	return "?"
}

// MaxDrill is the longest a drill is in force from its start, whatever its
// key says: the admin API starts none longer, and one written to etcd by
// anyone else ends by then too.
const MaxDrill = time.Hour

// MaxWindow is the longest maintenance window: a maintenance drill is in
// force at most this long from its start, and a scheduled drain longer
// than this needs an admin's --force.
const MaxWindow = 7 * 24 * time.Hour

// drillSkew is how far in the future a drill's start may be (clocks).
const drillSkew = time.Minute

// Drill returns the drill in force for target at now, if any. Every
// scheduler applies the admin API's guards itself, since anyone who can
// write etcd can write a drill: a drill is in force from its start (at
// most drillSkew ahead) until its end or MaxDrill after its start, and
// until its key is deleted; the center's own drill is not in force while
// a city's is, so that no city is left without a scheduler.
func (w *Watcher) Drill(target DrillTarget, now time.Time) (Drill, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.drills[target]
	if !ok || !inForce(d, now) {
		return d, false
	}
	if target.Center {
		for t, other := range w.drills {
			if !t.Center && inForce(other, now) {
				return d, false
			}
		}
	}
	return d, true
}

func inForce(d Drill, now time.Time) bool {
	end, longest := d.Until, MaxDrill
	if d.Maintenance {
		longest = MaxWindow
	}
	if last := d.Started.Add(longest); last.Before(end) {
		end = last
	}
	return now.Before(end) && !d.Started.After(now.Add(drillSkew))
}

// Balance is the in-node balance policy in force: the stored document, or
// the defaults when there is none or it is invalid (err says why).
func (w *Watcher) Balance() (c balance.Config, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.balanceSeen {
		return balance.DefaultConfig(), nil
	}
	return w.balance, w.balanceErr
}

// Format is the format version of the drain and drill documents this
// build reads and writes (their "format" field; absent is 1). A value of
// a later one, which a newer release wrote, is refused whole, as if
// absent: read in part, a drain or drill could mean something else than
// its writer meant (docs/design.md, "Compatibility across releases").
const Format = 1

// newer logs and counts the refusal of a value of key in format f.
func (w *Watcher) newer(key string, kind signing.OpKind, f int) {
	if w.refusedCount != nil {
		w.refusedCount.WithLabelValues(string(kind), "newer_format").Inc()
	}
	w.Logger.Error("refusing operator state in a newer format than this build reads: ignored as if absent (upgrade this scheduler, or roll the center back)",
		"component", "opstate", "key", key, "format", f, "reads", Format)
}

// checkLocked returns what of kv's value to decode, or why it is refused.
// Without a Verifier every value is used; with one, only those the center
// signed for this key verify, and unsigned ones only until a signed one
// has been seen (unless RequireSigned). Each refusal, and each unsigned
// value used, is logged and counted once.
func (w *Watcher) checkLocked(kv etcdfeed.KV) ([]byte, error) {
	kind := kindOf(kv.Key)
	if kind == "" {
		return kv.Value, nil
	}
	body, sig, err := open(kind, kv.Value)
	if w.Verifier == nil {
		return body, nil
	}
	if err == nil {
		if sig == nil {
			err = signing.ErrUnsigned
		} else {
			err = verify(w.Verifier, kind, w.Prefix, kv.Key, body, sig)
		}
	}
	value := string(kv.Value)
	if errors.Is(err, signing.ErrUnsigned) && !w.RequireSigned && !w.signedSeen {
		delete(w.refused, kv.Key)
		if w.unsigned == nil {
			w.unsigned = map[string]string{}
		}
		if w.unsigned[kv.Key] != value {
			w.unsigned[kv.Key] = value
			if w.unsignedCount != nil {
				w.unsignedCount.WithLabelValues(string(kind)).Inc()
			}
			w.Logger.Warn("using unsigned operator state: the center does not sign yet (upgrade it; then set snapshot.opstate_signatures: required)", "component", "opstate", "key", kv.Key)
		}
		return body, nil
	}
	delete(w.unsigned, kv.Key)
	if err == nil {
		w.signedSeen = true
		delete(w.refused, kv.Key)
		return body, nil
	}
	if w.refused == nil {
		w.refused = map[string]string{}
	}
	if w.refused[kv.Key] != value {
		w.refused[kv.Key] = value
		reason := refusal(err)
		if w.refusedCount != nil {
			w.refusedCount.WithLabelValues(string(kind), reason).Inc()
		}
		w.Logger.Error("refusing operator state not signed by a trusted key: ignored as if absent", "component", "opstate", "key", kv.Key, "reason", reason, "err", err)
	}
	return nil, err
}
