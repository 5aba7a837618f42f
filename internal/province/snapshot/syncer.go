// Package snapshot keeps a scheduler's copy of the province current: it
// watches the store, compiles each new topology into an immutable Snapshot off
// the hot path, swaps it in through an atomic.Pointer, and persists the last
// good one on disk so that a scheduler restarted while etcd is down still
// serves.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Source is what the syncer needs from the store.
type Source interface {
	CurrentRevision(ctx context.Context) (int64, error)
	CurrentPointer(ctx context.Context) (*store.Pointer, error)
	Load(ctx context.Context, p *store.Pointer) (*store.Stored, error)
	WatchCurrent(ctx context.Context) clientv3.WatchChan
}

// ErrNeedsTrustedKeys: the store is shared (Syncer.Shared) and no trusted
// key is configured (snapshot.trusted_keys), a configuration error.
var ErrNeedsTrustedKeys = errors.New("snapshot.trusted_keys: required: others may write this store, and without the center's public key whoever can write it could redirect the province (schedctl keygen --signing)")

// Syncer follows the store and holds the current Snapshot.
type Syncer struct {
	Source          Source
	CacheFile       string        // "" disables the disk cache
	ConfirmInterval time.Duration // how often the revision is checked besides the watch
	MaxStaleness    time.Duration // older than this, Ready reports an error
	Logger          *slog.Logger
	// OnSwap, if set, is called after each swap, off the hot path.
	OnSwap func(*topology.Snapshot)
	// Verifier checks the center's signature of each document, from the
	// store and from the cache (snapshot.trusted_keys); nil accepts
	// unsigned documents, with a warning at start.
	Verifier *signing.Verifier
	// Limits are the province's route-safety limits
	// (anycast.center_prefix_min_length); zero: the defaults.
	Limits topology.Limits
	// Endpoints name the store in messages about reaching it.
	Endpoints []string
	// Shared, with no Verifier, says why others than this host may write
	// the store ("" when none may): asked before anything is read from it,
	// at every connection, since loopback endpoints can reach a member of
	// a cluster. A shared store stops Run with an error wrapping
	// ErrNeedsTrustedKeys: unsigned documents are believed only from a
	// store no one else writes.
	Shared func(context.Context) (string, error)

	// cur is the snapshot in use with what is said of it, swapped as one
	// so that a reader never pairs one document's digest with another's
	// snapshot.
	cur       atomic.Pointer[inUse]
	confirmed atomic.Int64 // unix nanoseconds of the last confirmation against the store
	// held is the pointer the snapshot in use came from, bad one that
	// failed to load, compile or verify (not retried): the store is
	// compared with them by content and place, not by revision alone,
	// since a rebuilt store numbers its revisions anew.
	held, bad pointerID
	// last is the verified snapshot's pointer: one made before it
	// (signing.Pointer.Before), or at its place with another document,
	// is an old one put back.
	last      signing.Pointer
	lastTouch time.Time

	// The current outage, for Run's goroutine: when it began and how many
	// attempts failed since; outageErr is the last failure, for Ready.
	outageSince    time.Time
	outageFailures int
	outageErr      atomic.Pointer[outage]

	swaps      prometheus.Counter
	errs       *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	buildTime  prometheus.Histogram
	metricsSet bool
}

// Register adds the syncer's metrics to reg. Call once, before Run.
func (s *Syncer) Register(reg prometheus.Registerer) {
	s.swaps = prometheus.NewCounter(prometheus.CounterOpts{Name: "anysched_snapshot_swaps_total", Help: "Snapshots swapped in."})
	s.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_snapshot_errors_total", Help: "Failures keeping the snapshot current, by stage (fetch, build, cache)."}, []string{"stage"})
	s.buildTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "anysched_snapshot_build_duration_seconds", Help: "Time to fetch and compile a new snapshot.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	for _, st := range []string{"fetch", "build", "cache"} {
		s.errs.WithLabelValues(st)
	}
	s.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "anysched_snapshot_rejected_total", Help: "Topology revisions refused (snapshot.trusted_keys), by reason (unsigned, unknown_key, bad_signature, old_format: the digest alone signed, replayed: made before the last verified, an older epoch or a sequence not after it; corrupt: a pointer or document that cannot be read as stored); the previous snapshot stays in use."}, []string{"reason"})
	for _, r := range rejectReasons {
		s.rejected.WithLabelValues(r)
	}
	reg.MustRegister(s.swaps, s.errs, s.rejected, s.buildTime,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "anysched_snapshot_signature_verified_bool", Help: "1 when the snapshot in use was verified against a trusted key (snapshot.trusted_keys), 0 when none is configured and an unsigned document was accepted, or there is no snapshot."}, func() float64 {
			if c := s.cur.Load(); c != nil && c.verified {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "anysched_snapshot_age_seconds", Help: "Seconds since the snapshot was last confirmed current against the store; -1 when there is none."}, func() float64 {
			if s.cur.Load() == nil {
				return -1
			}
			return s.Age().Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "anysched_snapshot_revision_number", Help: "Topology revision of the snapshot in use (0: none)."}, func() float64 {
			if c := s.cur.Load(); c != nil {
				return float64(c.snap.Revision)
			}
			return 0
		}),
	)
	s.metricsSet = true
}

// Snapshot returns the current snapshot, or nil before the first one.
func (s *Syncer) Snapshot() *topology.Snapshot {
	if c := s.cur.Load(); c != nil {
		return c.snap
	}
	return nil
}

// inUse is a snapshot in use: the digest of the document it was compiled
// from, and whether that was verified against a trusted key.
type inUse struct {
	snap     *topology.Snapshot
	digest   string
	verified bool
}

// Digest is the digest of the document the current snapshot was compiled
// from ("" before the first): what `schedctl status` compares with the
// store's, whatever the revision numbers say.
func (s *Syncer) Digest() string {
	if c := s.cur.Load(); c != nil {
		return c.digest
	}
	return ""
}

// Age is the time since the snapshot was last confirmed current.
func (s *Syncer) Age() time.Duration {
	c := s.confirmed.Load()
	if c == 0 {
		return 0
	}
	return time.Since(time.Unix(0, c))
}

// Ready says whether the scheduler has a snapshot fresh enough to answer from.
func (s *Syncer) Ready() error {
	if s.cur.Load() == nil {
		if o := s.outageErr.Load(); o != nil {
			return fmt.Errorf("no topology snapshot yet: the store at %s does not answer: %s", strings.Join(o.endpoints, ","), o.err)
		}
		return errors.New("no topology snapshot yet")
	}
	if age := s.Age(); s.MaxStaleness > 0 && age > s.MaxStaleness {
		return fmt.Errorf("snapshot is %s old, more than snapshot.max_staleness %s", age.Round(time.Second), s.MaxStaleness)
	}
	return nil
}

// LoadCache swaps in the snapshot persisted on disk, if there is one. Call it
// before Run so that the scheduler serves before etcd answers.
func (s *Syncer) LoadCache() error {
	if s.CacheFile == "" {
		return nil
	}
	c, err := readCache(s.CacheFile)
	if err != nil {
		s.count("cache")
		return err
	}
	if c == nil {
		return nil
	}
	verified, err := s.verifyCached(c)
	if err != nil {
		return fmt.Errorf("snapshot cache %s: revision %d refused: %w", s.CacheFile, c.Revision, err)
	}
	if verified {
		s.last = c.pointer
	}
	snap, err := s.Limits.Compile(c.topology, c.Revision)
	if err != nil {
		s.count("cache")
		return fmt.Errorf("snapshot cache %s: %w", s.CacheFile, err)
	}
	s.held = pointerID{rev: c.Revision, epoch: c.pointer.Epoch, seq: c.pointer.Seq, digest: c.Digest}
	s.swap(snap, verified, c.Digest)
	s.confirmed.Store(c.confirmedAt.UnixNano())
	s.Logger.Info("serving the cached snapshot until the store answers", "revision", c.Revision, "age", time.Since(c.confirmedAt).Round(time.Second).String(), "file", s.CacheFile)
	return nil
}

// Run follows the store until ctx ends. It never gives up: while the store is
// unreachable the current snapshot stays in service and its age grows. Every
// failed attempt counts (anysched_snapshot_errors_total{stage="fetch"}); an
// outage is logged once at WARN, naming the endpoints, and its end once.
func (s *Syncer) Run(ctx context.Context) error {
	if s.Verifier == nil {
		s.Logger.Warn("no snapshot.trusted_keys: topology documents are used unverified; anyone who can write to etcd can redirect this scheduler")
	} else {
		s.Logger.Info("topology documents must be signed by a trusted key", "key_ids", s.Verifier.KeyIDs())
	}
	backoff := 100 * time.Millisecond
	for {
		err := s.follow(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrNeedsTrustedKeys) {
			return err
		}
		s.count("fetch")
		s.lost(err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		if s.outageSince.IsZero() {
			// follow() reached the store before it failed again.
			backoff = 100 * time.Millisecond
		}
	}
}

// storeHint is what to check when the store does not answer: the client's
// own error is often only "context deadline exceeded".
const storeHint = "check that etcd runs and is reachable from this host at etcd.endpoints, that each endpoint's scheme (http, https) is the server's, and with https that etcd.tls.ca_file signs the server's certificate and etcd.tls.cert_file is a client certificate the server accepts (its CN an etcd user with a role)"

// lost records a failed attempt to follow the store: the first of an
// outage is logged at WARN, the rest only counted.
func (s *Syncer) lost(err error) {
	s.outageErr.Store(&outage{err: err.Error(), endpoints: s.Endpoints})
	if !s.outageSince.IsZero() {
		s.outageFailures++
		return
	}
	s.outageSince, s.outageFailures = time.Now(), 1
	args := []any{"endpoints", s.Endpoints, "err", err}
	if errors.Is(err, errUnreachable) {
		args = append(args, "hint", storeHint)
	}
	if rev := s.revision(); rev != 0 {
		s.Logger.Warn("lost the store; keeping the current snapshot until it answers", append(args, "revision", rev)...)
	} else {
		s.Logger.Warn("cannot reach the store, and there is no snapshot to serve: not ready until it answers", args...)
	}
}

// reachable records that the store answered; it ends an outage.
func (s *Syncer) reachable() {
	s.outageErr.Store(nil)
	if s.outageSince.IsZero() {
		return
	}
	s.Logger.Info("store reachable again", "endpoints", s.Endpoints, "after", time.Since(s.outageSince).Round(time.Millisecond).String(), "failed_attempts", s.outageFailures)
	s.outageSince, s.outageFailures = time.Time{}, 0
}

// errUnreachable marks a failure to get any answer from the store.
var errUnreachable = errors.New("store unreachable")

// outage is the last failure to follow the store, for Ready.
type outage struct {
	err       string
	endpoints []string
}

func (s *Syncer) follow(ctx context.Context) error {
	if s.Verifier == nil && s.Shared != nil {
		pctx, cancel := context.WithTimeout(ctx, max(s.ConfirmInterval, time.Second))
		why, err := s.Shared(pctx)
		cancel()
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%w: %s", ErrNeedsTrustedKeys, why)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// clientv3's Watch blocks until an endpoint answers: started aside, so
	// that the bounded probes below notice a store that is unreachable
	// from the start (a scheduler started during an outage, or pointed at
	// a wrong endpoint).
	watches := make(chan clientv3.WatchChan, 1)
	go func() { watches <- s.Source.WatchCurrent(wctx) }()
	if err := s.refresh(ctx); err != nil {
		return err
	}
	var wch clientv3.WatchChan // nil, never ready, until the watch is set up
	tick := time.NewTicker(s.ConfirmInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wch = <-watches:
		case resp, ok := <-wch:
			if !ok {
				return errors.New("watch closed")
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			if err := s.refresh(ctx); err != nil {
				return err
			}
		case <-tick.C:
			if err := s.refresh(ctx); err != nil {
				return err
			}
		}
	}
}

func (s *Syncer) revision() int64 {
	if c := s.cur.Load(); c != nil {
		return c.snap.Revision
	}
	return 0
}

// pointerID is what tells one stored pointer from another: its revision,
// and its place and document, which a store rebuilt from nothing or from
// a backup may hold at a revision the one before used for another.
type pointerID struct {
	rev, epoch, seq int64
	digest          string
}

func idOf(p *store.Pointer) pointerID {
	return pointerID{rev: p.Revision, epoch: p.Epoch, seq: p.Seq, digest: p.Digest}
}

// refresh confirms the held pointer against the store and loads the
// document when the store's differs.
func (s *Syncer) refresh(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, max(s.ConfirmInterval, time.Second))
	ptr, err := s.Source.CurrentPointer(cctx)
	cancel()
	switch {
	case errors.Is(err, store.ErrNoTopology):
		s.reachable()
		s.confirm()
		return nil
	case errors.Is(err, store.ErrCorrupt):
		s.reachable()
		cctx, cancel := context.WithTimeout(ctx, max(s.ConfirmInterval, time.Second))
		rev, rerr := s.Source.CurrentRevision(cctx)
		cancel()
		if rerr != nil {
			return fmt.Errorf("%w: %w", errUnreachable, rerr)
		}
		if id := (pointerID{rev: rev}); id != s.bad {
			return s.failedLoad(id, err)
		}
		s.confirm()
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", errUnreachable, err) // "store: read topology pointer: ..."
	}
	s.reachable()
	id := idOf(ptr)
	if id == s.held || id == s.bad {
		s.confirm()
		return nil
	}
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The pointer is verified before anything it points at is read: a
	// pointer not signed by a trusted key, or an old one put back, costs
	// one signature check, not a download and decompression.
	verified, err := s.verify(ptr)
	if err != nil {
		// Someone with write access to etcd but not the center's key, or a
		// center signing with a key not trusted here: keep the last good
		// snapshot; logged once per revision (badRev is not fetched again).
		s.bad = id
		s.Logger.Error("stored topology refused: its pointer does not verify; keeping the previous snapshot", "revision", ptr.Revision, "seq", ptr.Seq, "serving", s.revision(), "err", err)
		return nil
	}
	st, err := s.Source.Load(lctx, ptr)
	if err != nil {
		return s.failedLoad(id, err)
	}
	snap, err := s.Limits.Compile(st.Topology, st.Revision)
	if err != nil {
		// Written by a newer version or corrupted: keep serving what we have,
		// let staleness grow so readiness and alerts notice.
		s.count("build")
		s.bad = id
		s.Logger.Error("stored topology does not compile; keeping the previous snapshot", "revision", st.Revision, "err", err)
		return nil
	}
	s.swap(snap, verified, st.Digest)
	s.held = id
	if verified {
		s.last = ptr.Signed
	}
	s.confirm()
	if s.metricsSet {
		s.buildTime.Observe(time.Since(start).Seconds())
	}
	c := snap.Counts()
	s.Logger.Info("snapshot swapped in", "revision", snap.Revision, "regions", c.Regions, "servers", c.Servers, "networks", c.Networks, "took", time.Since(start).Round(time.Millisecond).String())
	if s.CacheFile != "" {
		if err := writeCache(s.CacheFile, ptr.Signed.Province, st); err != nil {
			s.count("cache")
			s.Logger.Warn("persisting the snapshot failed; a restart without etcd would start empty", "file", s.CacheFile, "err", err)
		}
		s.lastTouch = time.Now()
	}
	return nil
}

// failedLoad handles a topology revision that could not be read: one
// that is there but wrong (store.ErrCorrupt: a bad pointer, parts missing
// or replaced, a size or digest that does not match) is refused like a bad
// signature, once, and the last good snapshot stays in use and confirmed,
// so that one bad write does not make every daemon unready; anything else
// (etcd unreachable, a compaction meanwhile) is retried by Run.
func (s *Syncer) failedLoad(id pointerID, err error) error {
	if !errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("load topology revision %d: %w", id.rev, err)
	}
	s.bad = id
	s.refused(err)
	s.Logger.Error("stored topology refused: it cannot be read as stored; keeping the previous snapshot", "revision", id.rev, "serving", s.revision(), "err", err)
	s.confirm()
	return nil
}

// rejectReasons are anysched_snapshot_rejected_total's reasons.
var rejectReasons = []string{"unsigned", "unknown_key", "bad_signature", "old_format", "replayed", "corrupt"}

// errOldFormat: a pointer whose signature covers the digest alone, which
// any earlier document's signature would match.
var errOldFormat = errors.New("the pointer is signed in the old format (the document's digest alone, which an older document put back would match too): apply again from a center of this release to sign the pointer")

// verify checks the signature of the pointer p from the store, and that
// it is not an older apply put back; verified is false when no key is
// trusted (accepted unsigned). A refusal is counted by its reason.
func (s *Syncer) verify(p *store.Pointer) (verified bool, err error) {
	if s.Verifier == nil {
		return false, nil
	}
	switch {
	case !p.SignedPointer && len(p.Signature) > 0:
		err = errOldFormat
	default:
		err = s.Verifier.VerifyPointer(p.Signed, p.KeyID, p.Signature)
	}
	if l := s.last; err == nil && l.Digest != "" && (p.Signed.Before(l) || !l.Before(p.Signed) && p.Digest != l.Digest) {
		err = fmt.Errorf("%w: %s is not after %s, the last verified here (document %.12s)", errReplayed, place(p.Signed), place(l), l.Digest)
	}
	s.refused(err)
	return err == nil, err
}

// verifyCached checks the signature a disk cache carries: of its pointer,
// or of its digest alone (written before pointers were signed).
func (s *Syncer) verifyCached(c *cached) (verified bool, err error) {
	if s.Verifier == nil {
		return false, nil
	}
	switch {
	case c.signedPointer:
		err = s.Verifier.VerifyPointer(c.pointer, c.KeyID, c.Signature)
	case c.version == 1: // written before pointers were signed
		err = s.Verifier.Verify(c.Digest, c.KeyID, c.Signature)
	default:
		err = errOldFormat
	}
	s.refused(err)
	return err == nil, err
}

// errReplayed: a signed pointer older than the one last verified.
var errReplayed = errors.New("an older apply's signed pointer put back")

// place names where an apply stands: its sequence, and the store's
// founding when it has one.
func place(p signing.Pointer) string {
	if p.Epoch == 0 {
		return fmt.Sprintf("sequence %d", p.Seq)
	}
	return fmt.Sprintf("sequence %d of the store founded %s", p.Seq, time.Unix(0, p.Epoch).UTC().Format(time.RFC3339Nano))
}

// refused counts a refusal by its reason.
func (s *Syncer) refused(err error) {
	if err == nil || !s.metricsSet {
		return
	}
	reason := "bad_signature"
	switch {
	case errors.Is(err, signing.ErrUnsigned):
		reason = "unsigned"
	case errors.Is(err, signing.ErrUnknownKey):
		reason = "unknown_key"
	case errors.Is(err, errOldFormat):
		reason = "old_format"
	case errors.Is(err, errReplayed):
		reason = "replayed"
	case errors.Is(err, store.ErrCorrupt):
		reason = "corrupt"
	}
	s.rejected.WithLabelValues(reason).Inc()
}

func (s *Syncer) swap(snap *topology.Snapshot, verified bool, digest string) {
	s.cur.Store(&inUse{snap: snap, digest: digest, verified: verified})
	if s.metricsSet {
		s.swaps.Inc()
	}
	if s.OnSwap != nil {
		s.OnSwap(snap)
	}
}

// confirm records that the held snapshot is the store's current one. The
// cache file's mtime carries the confirmation time across restarts.
func (s *Syncer) confirm() {
	now := time.Now()
	s.confirmed.Store(now.UnixNano())
	if s.CacheFile != "" && s.cur.Load() != nil && now.Sub(s.lastTouch) > 10*time.Second {
		if err := touch(s.CacheFile, now); err == nil {
			s.lastTouch = now
		}
	}
}

func (s *Syncer) count(stage string) {
	if s.metricsSet {
		s.errs.WithLabelValues(stage).Inc()
	}
}
