package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Record is one audited admin call.
type Record struct {
	At       time.Time `json:"at"`
	Identity string    `json:"identity"` // certificate CN, or "local"
	Role     string    `json:"role"`
	Peer     string    `json:"peer"`
	Method   string    `json:"method"` // the gRPC full method name
	Target   string    `json:"target,omitempty"`
	Code     string    `json:"code"` // the gRPC status code: OK, PermissionDenied, ...
	Message  string    `json:"message,omitempty"`
	Revision int64     `json:"revision,omitempty"`
	Detail   string    `json:"detail,omitempty"`
}

// Options bound the trail.
type Options struct {
	Keep   int           // newest records kept
	MaxAge time.Duration // older records are trimmed
}

// Trail is the audit trail in etcd: one key per record,
// <prefix>audit/<zero-padded unix nanos>-<random>, so that keys sort by
// time and two centers writing in the same nanosecond do not collide.
// Refused calls (PermissionDenied, Unauthenticated) are kept apart, under
// audit/refused/, each part trimmed to its own bounds: anyone can make
// refused calls by the thousand, and they must not push the record of a
// change out of the trail.
type Trail struct {
	cli     *clientv3.Client
	changes part // audit/<nanos>-<random>: every call but the refused
	refused part // audit/refused/<nanos>-<random>
	opts    Options
	log     *slog.Logger
	// trimEvery: retention is enforced every trimEvery writes to a part
	// (about 1% of Keep), so a write costs one put, and a part overshoots
	// Keep by at most that much.
	trimEvery uint64
	failures  prometheus.Counter
	now       func() time.Time
}

// part is one of the trail's key ranges, [from, to): its keys are
// prefix + 20 digits + ...
type part struct {
	prefix   string
	from, to string
	writes   atomic.Uint64
}

func newPart(prefix string) part { return part{prefix: prefix, from: prefix + "0", to: prefix + ":"} } // ':' follows '9'

// New returns the trail under etcdPrefix (etcd.prefix), registering its
// metric on reg.
func New(cli *clientv3.Client, etcdPrefix string, opts Options, reg prometheus.Registerer, log *slog.Logger) *Trail {
	root := etcdPrefix + keyspace.PrefixAudit
	t := &Trail{
		cli: cli, changes: newPart(root), refused: newPart(root + "refused/"), opts: opts, log: log.With("component", "audit"),
		trimEvery: uint64(min(max(opts.Keep/100, 1), 100)),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "anysched_audit_write_failures_total",
			Help: "Audit records that could not be written to etcd (each is still in the log).",
		}),
		now: time.Now,
	}
	if reg != nil {
		reg.MustRegister(t.failures)
	}
	return t
}

// Failures counts the records that could not be stored.
func (t *Trail) Failures() prometheus.Counter { return t.failures }

func (p *part) key(at time.Time) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%s%020d-%s", p.prefix, at.UnixNano(), hex.EncodeToString(r[:]))
}

// Refused reports whether a record's code is a refusal of the caller.
func Refused(code string) bool { return code == "PermissionDenied" || code == "Unauthenticated" }

// Write stores r (its At set now if zero) and trims its part of the trail
// every trimEvery writes. A failure is logged and counted here; the
// caller only learns of it.
func (t *Trail) Write(ctx context.Context, r Record) error {
	if r.At.IsZero() {
		r.At = t.now()
	}
	r.At = r.At.UTC()
	p := &t.changes
	if Refused(r.Code) {
		p = &t.refused
	}
	b, err := json.Marshal(r)
	if err == nil {
		_, err = t.cli.Put(ctx, p.key(r.At), string(b))
	}
	if err != nil {
		t.failures.Inc()
		t.log.Error("audit record not stored in etcd", "err", err, "identity", r.Identity, "method", r.Method, "code", r.Code)
		return fmt.Errorf("audit: %w", err)
	}
	if p.writes.Add(1)%t.trimEvery == 1%t.trimEvery { // the first write trims too
		if err := t.trim(ctx, p); err != nil {
			t.log.Warn("audit trail not trimmed", "err", err)
		}
	}
	return nil
}

// Trim deletes, in each part, records older than MaxAge, then the oldest
// beyond Keep.
func (t *Trail) Trim(ctx context.Context) error {
	return errors.Join(t.trim(ctx, &t.changes), t.trim(ctx, &t.refused))
}

// trim trims one part. Both are range deletes: the keys sort by time.
func (t *Trail) trim(ctx context.Context, p *part) error {
	if t.opts.MaxAge > 0 {
		cut := fmt.Sprintf("%s%020d", p.prefix, t.now().Add(-t.opts.MaxAge).UnixNano())
		if _, err := t.cli.Delete(ctx, p.from, clientv3.WithRange(cut)); err != nil {
			return fmt.Errorf("audit: trim by age: %w", err)
		}
	}
	if t.opts.Keep <= 0 {
		return nil
	}
	cnt, err := t.cli.Get(ctx, p.from, clientv3.WithRange(p.to), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("audit: trim: %w", err)
	}
	extra := cnt.Count - int64(t.opts.Keep)
	if extra <= 0 {
		return nil
	}
	// The extra-th oldest key ends the range to delete; read at the
	// count's revision so that records written since are not counted.
	old, err := t.cli.Get(ctx, p.from, clientv3.WithRange(p.to), clientv3.WithKeysOnly(), clientv3.WithRev(cnt.Header.Revision),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(extra))
	if err != nil {
		return fmt.Errorf("audit: trim: %w", err)
	}
	if len(old.Kvs) == 0 {
		return nil
	}
	last := string(old.Kvs[len(old.Kvs)-1].Key)
	if _, err := t.cli.Delete(ctx, p.from, clientv3.WithRange(last+"\x00")); err != nil {
		return fmt.Errorf("audit: trim: %w", err)
	}
	return nil
}

// List returns up to limit records (0: all kept), newest first, not older
// than since (zero: any age): changes and refusals together.
func (t *Trail) List(ctx context.Context, limit int, since time.Time) ([]Record, error) {
	var out []Record
	for _, p := range []*part{&t.changes, &t.refused} {
		recs, err := t.list(ctx, p, limit, since)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	slices.SortStableFunc(out, func(a, b Record) int { return b.At.Compare(a.At) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (t *Trail) list(ctx context.Context, p *part, limit int, since time.Time) ([]Record, error) {
	start := p.from
	if !since.IsZero() {
		start = fmt.Sprintf("%s%020d", p.prefix, since.UnixNano())
	}
	opts := []clientv3.OpOption{clientv3.WithRange(p.to), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := t.cli.Get(ctx, start, opts...)
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", err)
	}
	out := make([]Record, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			t.log.Warn("unreadable audit record", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, r)
	}
	return out, nil
}
