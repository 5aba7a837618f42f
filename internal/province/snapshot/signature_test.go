package snapshot_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/snapshot"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func verifyingSyncer(t *testing.T, src snapshot.Source, cache string, v *signing.Verifier) *running {
	t.Helper()
	s := &snapshot.Syncer{
		Source: src, CacheFile: cache, ConfirmInterval: 100 * time.Millisecond, MaxStaleness: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Verifier: v,
	}
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if err := s.LoadCache(); err != nil {
		t.Fatalf("LoadCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	r := &running{s: s, reg: reg, stop: func() { cancel(); <-done }}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			r.stop()
		}
	})
	return r
}

func applySigned(t *testing.T, st *store.Store, tp *topology.Topology, s *signing.Signer) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := st.Apply(ctx, tp, store.ApplyOptions{Signer: s})
	if err != nil {
		t.Fatal(err)
	}
	return res.Revision
}

func signer(t *testing.T) *signing.Signer {
	k, err := signing.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return signing.NewSigner(k)
}

// Write access to etcd without the center's key cannot redirect a
// scheduler: a document written unsigned, or signed by another key, is
// refused and the previous snapshot stays in service.
func TestUnsignedOrForeignDocumentRefused(t *testing.T) {
	st := etcdtest.Start(t).Store()
	center, intruder := signer(t), signer(t)
	r := verifyingSyncer(t, st, "", signing.NewVerifier(center.Public()))
	weight := 100
	good := applySigned(t, st, fixture.Weighted(t, weight), center)
	wait.For(t, "the signed snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == good })
	if v := testutil.ToFloat64(metric(t, r.reg, "anysched_snapshot_signature_verified_bool")); v != 1 {
		t.Errorf("anysched_snapshot_signature_verified_bool = %v, want 1", v)
	}

	for _, c := range []struct {
		name   string
		signer *signing.Signer
		reason string
	}{{"unsigned", nil, "unsigned"}, {"signed by another key", intruder, "unknown_key"}} {
		applySigned(t, st, fixture.Weighted(t, 999), c.signer)
		wait.For(t, c.name+" refused", wait.DefaultTimeout, func() bool {
			return testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_rejected_total", c.reason)) == 1
		})
		if snap := r.s.Snapshot(); snap.Revision != good || snap.Servers[0].Weight != weight {
			t.Fatalf("%s: serving revision %d weight %d, want the signed revision %d", c.name, snap.Revision, snap.Servers[0].Weight, good)
		}
		// The center's next apply is taken up again.
		weight++
		good = applySigned(t, st, fixture.Weighted(t, weight), center)
		wait.For(t, "the next signed snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == good })
	}
	if err := r.s.Ready(); err != nil {
		t.Errorf("not ready after refusals: %v", err)
	}
}

// Several trusted keys: a rotation keeps the schedulers following.
func TestKeyRotation(t *testing.T) {
	st := etcdtest.Start(t).Store()
	oldKey, newKey := signer(t), signer(t)
	r := verifyingSyncer(t, st, "", signing.NewVerifier(oldKey.Public(), newKey.Public()))
	for i, s := range []*signing.Signer{oldKey, newKey} {
		rev := applySigned(t, st, fixture.Weighted(t, 100+i), s)
		wait.For(t, "snapshot signed by key "+s.KeyID(), wait.DefaultTimeout, func() bool { return revision(r.s) == rev })
	}
}

// The disk cache is verified too: a cache file rewritten by someone who can
// write it but has no key is refused.
func TestCacheSignatureVerified(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	center := signer(t)
	trust := signing.NewVerifier(center.Public())
	cache := filepath.Join(t.TempDir(), "snapshot.cache")
	first := verifyingSyncer(t, st, cache, trust)
	rev := applySigned(t, st, fixture.Weighted(t, 150), center)
	wait.For(t, "snapshot", wait.DefaultTimeout, func() bool { return revision(first.s) == rev })
	wait.For(t, "cache written", wait.DefaultTimeout, func() bool { _, err := os.Stat(cache); return err == nil })
	first.stop()
	e.Stop()

	// A restart from the signed cache serves it.
	s := &snapshot.Syncer{CacheFile: cache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Verifier: trust}
	if err := s.LoadCache(); err != nil || revision(s) != rev {
		t.Fatalf("signed cache: revision %d, %v", revision(s), err)
	}
	// Trusting another key only, it is refused.
	other := &snapshot.Syncer{CacheFile: cache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Verifier: signing.NewVerifier(signer(t).Public())}
	if err := other.LoadCache(); err == nil || !strings.Contains(err.Error(), "not trusted") || other.Snapshot() != nil {
		t.Fatalf("cache signed by an untrusted key: %v", err)
	}
}

// The pointer is verified before anything it points at is read: one
// written without the key, pointing at a document of 100 MiB whose parts
// are not even there, is refused for its signature (not retried as a
// failed fetch), and the signed snapshot stays in service.
func TestPointerVerifiedBeforeDocument(t *testing.T) {
	e, st, center, r, good := servingSigned(t)

	forged := fmt.Sprintf(`{"digest":%q,"chunks":1,"size":%d,"seq":99,"key_id":%q,"pointer_signature":%q}`,
		strings.Repeat("ab", 32), 100<<20, center.KeyID(), base64.StdEncoding.EncodeToString(make([]byte, 64)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.Client().Put(ctx, st.CurrentKey(), forged); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the forged pointer refused", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_rejected_total", "bad_signature")) == 1
	})
	if n := testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_errors_total", "fetch")); n != 0 {
		t.Errorf("%v fetch errors: the forged pointer's document was read", n)
	}
	if got := revision(r.s); got != good {
		t.Fatalf("serving revision %d, want the signed %d", got, good)
	}
}

// A signed pointer of an earlier apply, put back by someone who can write
// etcd, is an old document: refused (the sequence is not after the one
// verified), and the newer snapshot stays in service.
func TestReplayedPointerRefused(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	center := signer(t)
	r := verifyingSyncer(t, st, "", signing.NewVerifier(center.Public()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	applySigned(t, st, fixture.Weighted(t, 100), center)
	old, err := e.Client().Get(ctx, st.CurrentKey())
	if err != nil {
		t.Fatal(err)
	}
	newer := applySigned(t, st, fixture.Weighted(t, 200), center)
	wait.For(t, "the newer snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == newer })
	if _, err := e.Client().Put(ctx, st.CurrentKey(), string(old.Kvs[0].Value)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the old pointer refused", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_rejected_total", "replayed")) == 1
	})
	if snap := r.s.Snapshot(); snap.Revision != newer || snap.Servers[0].Weight != 200 {
		t.Fatalf("serving revision %d weight %d, want the newer %d (weight 200)", snap.Revision, snap.Servers[0].Weight, newer)
	}
}

// A signed pointer put back unchanged (a new revision) over parts that
// were deleted is a document that cannot be read as stored: refused once
// as corrupt, the last good snapshot kept and still confirmed (the daemon
// stays ready), not fetched again and again.
func TestCorruptRevisionRefusedOnce(t *testing.T) {
	e, st, _, r, good := servingSigned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cur, err := e.Client().Get(ctx, st.CurrentKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Delete(ctx, st.Prefix()+"topology/blobs/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Put(ctx, st.CurrentKey(), string(cur.Kvs[0].Value)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the revision refused as corrupt", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_rejected_total", "corrupt")) == 1
	})
	time.Sleep(300 * time.Millisecond) // three confirm intervals: it must not be fetched again
	if n := testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_rejected_total", "corrupt")); n != 1 {
		t.Errorf("refused %v times, want once", n)
	}
	if n := testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_errors_total", "fetch")); n != 0 {
		t.Errorf("%v fetch errors", n)
	}
	if got := revision(r.s); got != good || r.s.Ready() != nil || r.s.Age() > 5*time.Second {
		t.Fatalf("serving %d (want %d), ready %v, age %v", got, good, r.s.Ready(), r.s.Age())
	}
}

// servingSigned is a verifying syncer serving a signed apply: the etcd, its
// store, the center's signer, the syncer and the revision it serves.
func servingSigned(t *testing.T) (*etcdtest.Etcd, *store.Store, *signing.Signer, *running, int64) {
	t.Helper()
	e := etcdtest.Start(t)
	st := e.Store()
	center := signer(t)
	r := verifyingSyncer(t, st, "", signing.NewVerifier(center.Public()))
	good := applySigned(t, st, fixture.Weighted(t, 100), center)
	wait.For(t, "the signed snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == good })
	return e, st, center, r, good
}
