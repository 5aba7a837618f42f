package opstate

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdfeed"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/topology"
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
	OnDrill func(Drill)

	mu          sync.Mutex
	drains      map[string]Drain      // by kind/name
	drills      map[DrillTarget]Drill // the latest drill per target
	balanceDoc  string                // the stored balance policy document
	balance     balance.Config        // parsed; the defaults when absent or invalid
	balanceErr  error                 // why the stored document is not in use
	balanceSeen bool                  // balanceDoc has been read

	synced       atomic.Bool
	drainGauge   prometheus.Gauge
	invalidGauge prometheus.Gauge
}

// Register adds the watcher's metrics.
func (w *Watcher) Register(reg prometheus.Registerer) {
	w.drainGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_drains", Help: "Operator drains in force (servers, nodes and regions)."})
	w.invalidGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "anysched_opstate_balance_config_invalid_bool", Help: "1 when the stored balance policy document is invalid and the defaults are in use."})
	reg.MustRegister(w.drainGauge, w.invalidGauge)
}

// Run follows etcd until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
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
	w.mu.Unlock()
	w.synced.Store(true)
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
	w.mu.Unlock()
	w.fire(fire)
	return answers
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
	switch {
	case strings.HasPrefix(kv.Key, keyspace.PrefixDrain):
		k := strings.TrimPrefix(kv.Key, keyspace.PrefixDrain)
		if kv.Deleted {
			delete(w.drains, k)
		} else {
			var d Drain
			if err := json.Unmarshal(kv.Value, &d); err != nil {
				log.Error("ignoring an unreadable drain", "key", kv.Key, "err", err)
			} else {
				w.drains[k] = d
			}
		}
		if w.drainGauge != nil {
			w.drainGauge.Set(float64(len(w.drains)))
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
		doc := string(kv.Value)
		if kv.Deleted {
			doc = ""
		}
		if w.balanceSeen && doc == w.balanceDoc {
			return Drill{}, false // said once, not again on every relist
		}
		w.balanceSeen = true
		w.balanceDoc, w.balance, w.balanceErr = doc, balance.DefaultConfig(), nil
		if doc != "" {
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

// Drains lists the drains in force, by kind and name.
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
func (w *Watcher) DrainReasons(snap *topology.Snapshot) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, len(snap.Servers))
	if len(w.drains) == 0 {
		return out
	}
	for i, sv := range snap.Servers {
		for _, k := range [...]string{
			string(DrainServer) + "/" + sv.Name,
			string(DrainNode) + "/" + snap.Nodes[sv.Node].Name,
			string(DrainRegion) + "/" + snap.Regions[sv.Region].Name,
		} {
			if d, ok := w.drains[k]; ok {
				out[i] = d.String()
				break
			}
		}
	}
	return out
}

// MaxDrill is the longest a drill is in force from its start, whatever its
// key says: the admin API starts none longer, and one written to etcd by
// anyone else ends by then too.
const MaxDrill = time.Hour

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
	end := d.Until
	if last := d.Started.Add(MaxDrill); last.Before(end) {
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
