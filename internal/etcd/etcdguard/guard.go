// Package etcdguard bounds what each etcd identity other than the center
// writes into the province's etcd. etcd's roles bound where an identity
// may write (its own prefixes: etcdauth.Permissions), not how much: a
// compromised city or checker could write its prefixes full until the
// backend's quota is reached, and NOSPACE stops every write in the
// province (applies, drains, claims, health verdicts). etcd has no per-user
// quota, so the center enforces one: it follows every write under the
// prefix, charges each to the identity whose write permission covers its
// key, and when an identity writes more than Config.BytesPerMinute in a
// minute, or holds more than Config.Keys keys, revokes that identity's
// write permissions and records why under guard/revoked/<identity>. The
// identity keeps reading (a city keeps serving from what it knows); the
// operator investigates and deletes the record, and the guard grants the
// permissions back. Records survive a restart of the center, which
// provisions roles afresh and then revokes them again.
package etcdguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Config is the etcd.write_guard section of the center.
type Config struct {
	// BytesPerMinute bounds what one identity writes (keys and values, every
	// put counted, overwrites included: each is a revision etcd keeps until
	// compaction) in any minute. The province's largest city writes a few
	// MB a minute (docs/capacity.md). 0 disables the guard.
	BytesPerMinute int64 `yaml:"bytes_per_minute"`
	// Keys bounds the keys one identity holds at once (its plan-state parts,
	// verdicts, registrations).
	Keys int `yaml:"keys"`
	// Revoke: past a bound, revoke the identity's write permissions (needs
	// etcd's root role for the center's user, as housekeeping does);
	// false: report only (metrics, log).
	Revoke bool `yaml:"revoke"`
}

// DefaultConfig is the section's defaults (docs/operations.md).
func DefaultConfig() Config {
	return Config{BytesPerMinute: 64 << 20, Keys: 32_768, Revoke: true}
}

// Validate checks the section, each problem named under path
// ("etcd.write_guard.").
func (c Config) Validate(path string) error {
	var errs yamlstrict.Errors
	if c.BytesPerMinute < 0 || (c.BytesPerMinute > 0 && c.BytesPerMinute < 1<<20) {
		errs.Add(path+"bytes_per_minute", "%d: 0 (off) or at least 1 MiB (1048576): the largest city writes megabytes a minute", c.BytesPerMinute)
	}
	if c.Keys < 1_024 {
		errs.Add(path+"keys", "%d is below 1024: a city's plan state alone is hundreds of parts", c.Keys)
	}
	return errs.Err()
}

// Options are the guard's collaborators.
type Options struct {
	// Lead reports whether this center enforces (one center does, as one
	// keeps house); nil: always.
	Lead func(context.Context) (bool, error)
	// Identities lists the identities to guard; nil: etcd's users (needs
	// the root role).
	Identities func(context.Context) ([]etcdauth.Identity, error)
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Record is what guard/revoked/<identity> holds.
type Record struct {
	Identity string    `json:"identity"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
}

// slot is how finely the last minute's writes are kept.
const (
	slot  = 10 * time.Second
	slots = int(time.Minute / slot)
)

type account struct {
	id     etcdauth.Identity
	writes []etcdauth.Perm    // its write permissions
	keys   int                // keys it holds now
	meter  prometheus.Counter // its anysched_etcdguard_written_bytes_total
	bytes  [slots]int64       // written in each of the last slots
	at     [slots]int64       // which slot (unix time / slot) each holds
}

func (a *account) written(now time.Time) int64 {
	cur := now.UnixNano() / int64(slot)
	var n int64
	for i := range a.bytes {
		if cur-a.at[i] < int64(slots) {
			n += a.bytes[i]
		}
	}
	return n
}

func (a *account) add(now time.Time, n int64) {
	cur := now.UnixNano() / int64(slot)
	i := int(cur % int64(slots))
	if a.at[i] != cur {
		a.at[i], a.bytes[i] = cur, 0
	}
	a.bytes[i] += n
}

func (a *account) owns(key string) bool {
	return slices.ContainsFunc(a.writes, func(p etcdauth.Perm) bool {
		if p.RangeEnd == "" {
			return key == p.Key
		}
		return key >= p.Key && key < p.RangeEnd
	})
}

// Guard follows the province's writes; see the package comment.
type Guard struct {
	cli    *clientv3.Client
	prefix string
	cfg    Config
	o      Options
	log    *slog.Logger
	m      *metrics

	mu       sync.Mutex
	accounts map[string]*account
	revoked  map[string]Record // as recorded in etcd
	reported map[string]bool   // past a bound, not revoked: reported since the last refresh
}

// New builds a guard over the province under prefix.
func New(cli *clientv3.Client, prefix string, c Config, o Options, reg prometheus.Registerer, log *slog.Logger) *Guard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Identities == nil {
		o.Identities = func(ctx context.Context) ([]etcdauth.Identity, error) { return Users(ctx, cli) }
	}
	return &Guard{cli: cli, prefix: prefix, cfg: c, o: o, log: log, m: newMetrics(reg), accounts: map[string]*account{}, revoked: map[string]Record{}, reported: map[string]bool{}}
}

// Users lists etcd's users that are anysched identities other than the
// center (etcd's UserList needs the root role).
func Users(ctx context.Context, cli *clientv3.Client) ([]etcdauth.Identity, error) {
	r, err := cli.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd user list: %w", err)
	}
	var ids []etcdauth.Identity
	for _, u := range r.Users {
		if id, err := etcdauth.ParseIdentity(u); err == nil && id.Kind != etcdauth.Center {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Revoked lists the identities whose writes are revoked, as recorded.
func (g *Guard) Revoked() []Record {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]Record, 0, len(g.revoked))
	for _, r := range g.revoked {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}

// Run follows the writes until ctx ends; etcd's failures are logged once
// and retried, never returned.
func (g *Guard) Run(ctx context.Context) error {
	if g.cfg.BytesPerMinute == 0 {
		return nil
	}
	backoff := time.Second
	failing := false
	for {
		err := g.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRefresh) {
			failing, backoff = false, time.Second
			continue
		}
		if !failing {
			msg := "etcd write guard interrupted; retrying"
			if errors.Is(err, rpctypes.ErrPermissionDenied) {
				msg = "etcd write guard cannot list etcd's users: the center's etcd user needs the root role (docs/security.md); it retries"
			}
			g.log.Warn(msg, "err", err)
			failing = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// refreshEvery is how often the identities are listed again (a city
// added) and the records reconciled.
const refreshEvery = time.Minute

func (g *Guard) follow(ctx context.Context) error {
	rev, err := g.refresh(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := g.cli.Watch(wctx, g.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			// Identities and key counts are read afresh and the watch
			// begins again after them; the bytes of writes between its
			// last event and that read go uncharged (a moment a minute).
			return errRefresh
		case resp, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			for _, ev := range resp.Events {
				g.charge(ctx, ev)
			}
		}
	}
}

var errRefresh = errors.New("periodic refresh")

// refresh lists the identities and the keys each holds, reconciles the
// revocation records with the roles, and returns the revision read at.
func (g *Guard) refresh(ctx context.Context) (int64, error) {
	ids, err := g.o.Identities(ctx)
	if err != nil {
		return 0, err
	}
	recs, err := g.cli.Get(ctx, g.prefix+keyspace.PrefixGuardRevoked, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", keyspace.PrefixGuardRevoked, err)
	}
	rev := recs.Header.Revision
	accounts := map[string]*account{}
	for _, id := range ids {
		a := &account{id: id, meter: g.m.written.WithLabelValues(id.Name)}
		for _, p := range etcdauth.Permissions(g.prefix, id) {
			if p.Type != etcdauth.Read {
				a.writes = append(a.writes, p)
			}
		}
		for _, p := range a.writes {
			opts := []clientv3.OpOption{clientv3.WithCountOnly(), clientv3.WithRev(rev)}
			if p.RangeEnd != "" {
				opts = append(opts, clientv3.WithRange(p.RangeEnd))
			}
			r, err := g.cli.Get(ctx, p.Key, opts...)
			if err != nil {
				return 0, fmt.Errorf("count %s's keys: %w", id.Name, err)
			}
			a.keys += int(r.Count)
		}
		g.mu.Lock()
		if old, ok := g.accounts[id.Name]; ok {
			a.bytes, a.at = old.bytes, old.at
		}
		g.mu.Unlock()
		accounts[id.Name] = a
	}
	revoked := map[string]Record{}
	for _, kv := range recs.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil || r.Identity == "" {
			r = Record{Identity: strings.TrimPrefix(string(kv.Key), g.prefix+keyspace.PrefixGuardRevoked), Reason: "unreadable record"}
		}
		revoked[r.Identity] = r
	}
	g.mu.Lock()
	g.accounts = accounts
	prev := g.revoked
	g.revoked = revoked
	clear(g.reported) // reported again, at most once a refresh, while past a bound
	g.mu.Unlock()
	lead := g.leads(ctx)
	for name, r := range revoked {
		if a, ok := accounts[name]; ok && lead {
			// Again at every refresh: a center's start provisions roles
			// afresh, which grants what was revoked.
			if err := g.setWrites(ctx, a, false); err != nil {
				return 0, err
			}
			if _, was := prev[name]; !was {
				g.log.Warn("identity's etcd writes stay revoked", "identity", name, "reason", r.Reason, "since", r.At)
			}
		}
	}
	for name := range prev {
		if _, still := revoked[name]; !still {
			if a, ok := accounts[name]; ok && lead {
				if err := g.setWrites(ctx, a, true); err != nil {
					return 0, err
				}
				g.log.Info("identity's etcd writes granted back (its revocation record was deleted)", "identity", name)
			}
		}
	}
	g.publish()
	return rev, nil
}

func (g *Guard) leads(ctx context.Context) bool {
	if g.o.Lead == nil {
		return true
	}
	lead, err := g.o.Lead(ctx)
	return err == nil && lead
}

// charge counts one event against the identity that may write its key.
func (g *Guard) charge(ctx context.Context, ev *clientv3.Event) {
	key := string(ev.Kv.Key)
	if strings.HasPrefix(key, g.prefix+keyspace.PrefixGuardRevoked) {
		g.recordChanged(ctx, ev)
		return
	}
	g.mu.Lock()
	var a *account
	for _, acc := range g.accounts {
		if acc.owns(key) {
			a = acc
			break
		}
	}
	if a == nil {
		g.mu.Unlock()
		return
	}
	now := g.o.Now()
	switch ev.Type {
	case mvccpb.PUT:
		a.add(now, int64(len(ev.Kv.Key)+len(ev.Kv.Value)))
		if ev.Kv.CreateRevision == ev.Kv.ModRevision {
			a.keys++
		}
	case mvccpb.DELETE:
		a.keys = max(a.keys-1, 0)
	}
	written, keys := a.written(now), a.keys
	_, revoked := g.revoked[a.id.Name]
	revoked = revoked || g.reported[a.id.Name]
	g.mu.Unlock()
	a.meter.Add(float64(len(ev.Kv.Key) + len(ev.Kv.Value)))
	var reason string
	switch {
	case revoked:
		return
	case written > g.cfg.BytesPerMinute:
		reason = fmt.Sprintf("wrote %d bytes in a minute, over etcd.write_guard.bytes_per_minute %d", written, g.cfg.BytesPerMinute)
	case keys > g.cfg.Keys:
		reason = fmt.Sprintf("holds %d keys, over etcd.write_guard.keys %d", keys, g.cfg.Keys)
	default:
		return
	}
	g.over(ctx, a, reason)
}

// over handles an identity past a bound: revoke and record, or report.
func (g *Guard) over(ctx context.Context, a *account, reason string) {
	g.m.over.WithLabelValues(a.id.Name).Inc()
	if !g.cfg.Revoke || !g.leads(ctx) {
		g.log.Error("identity past its etcd write bound (etcd.write_guard.revoke is off, or another center enforces)", "identity", a.id.Name, "reason", reason)
		g.mu.Lock()
		g.reported[a.id.Name] = true
		g.mu.Unlock()
		return
	}
	r := Record{Identity: a.id.Name, Reason: reason, At: g.o.Now().UTC()}
	g.mu.Lock()
	g.revoked[a.id.Name] = r
	g.mu.Unlock()
	// The record first: whoever sees the writes refused finds why, and
	// a center restarting meanwhile revokes them again from it.
	b, _ := json.Marshal(r)
	if _, err := g.cli.Put(ctx, g.prefix+keyspace.PrefixGuardRevoked+a.id.Name, string(b)); err != nil {
		g.log.Error("the revocation record could not be written: a center restart would grant the writes back", "identity", a.id.Name, "err", err)
	}
	if err := g.setWrites(ctx, a, false); err != nil {
		g.log.Error("identity past its etcd write bound; revoking its writes failed", "identity", a.id.Name, "reason", reason, "err", err)
		return
	}
	g.log.Error("identity's etcd writes revoked: it wrote past its bound (delete the record to grant them back, docs/operations.md)",
		"identity", a.id.Name, "reason", reason, "record", g.prefix+keyspace.PrefixGuardRevoked+a.id.Name)
	g.publish()
}

// recordChanged follows the revocation records: a deleted one grants the
// identity's writes back.
func (g *Guard) recordChanged(ctx context.Context, ev *clientv3.Event) {
	name := strings.TrimPrefix(string(ev.Kv.Key), g.prefix+keyspace.PrefixGuardRevoked)
	if ev.Type != mvccpb.DELETE {
		return
	}
	g.mu.Lock()
	_, was := g.revoked[name]
	delete(g.revoked, name)
	a := g.accounts[name]
	if a != nil {
		a.bytes, a.at = [slots]int64{}, [slots]int64{} // a fresh minute
	}
	g.mu.Unlock()
	if was && a != nil && g.leads(ctx) {
		if err := g.setWrites(ctx, a, true); err != nil {
			g.log.Error("granting an identity's etcd writes back failed", "identity", name, "err", err)
			return
		}
		g.log.Info("identity's etcd writes granted back (its revocation record was deleted)", "identity", name)
	}
	g.publish()
}

// setWrites grants or revokes a's write permissions on its role (the
// role is named as the user: etcdauth.Provision).
func (g *Guard) setWrites(ctx context.Context, a *account, grant bool) error {
	for _, p := range a.writes {
		var err error
		if grant {
			_, err = g.cli.RoleGrantPermission(ctx, a.id.Name, p.Key, p.RangeEnd, p.Type)
		} else if _, err = g.cli.RoleRevokePermission(ctx, a.id.Name, p.Key, p.RangeEnd); err != nil && strings.Contains(err.Error(), "permission is not granted") {
			err = nil // revoked already
		}
		if err != nil {
			return fmt.Errorf("role %s: %s: %w", a.id.Name, p, err)
		}
	}
	return nil
}

func (g *Guard) publish() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m.revoked.Reset()
	for name := range g.revoked {
		g.m.revoked.WithLabelValues(name).Set(1)
	}
}

type metrics struct {
	written *prometheus.CounterVec
	over    *prometheus.CounterVec
	revoked *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_etcdguard_written_bytes_total",
			Help: "Bytes (keys and values) each identity other than the center wrote into etcd, as the write guard saw them."}, []string{"identity"}),
		over: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_etcdguard_over_bound_total",
			Help: "Times an identity was found past its etcd write bound (etcd.write_guard)."}, []string{"identity"}),
		revoked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "anysched_etcdguard_revoked_bool",
			Help: "1 while an identity's etcd writes are revoked for writing past its bound (guard/revoked/<identity>)."}, []string{"identity"}),
	}
	reg.MustRegister(m.written, m.over, m.revoked)
	return m
}
