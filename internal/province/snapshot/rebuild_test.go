package snapshot_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// switched is a Source whose store is replaced, as a scheduler's etcd
// endpoints reach a rebuilt store after the one it followed was lost.
type switched struct{ st atomic.Pointer[store.Store] }

func (w *switched) CurrentRevision(ctx context.Context) (int64, error) {
	return w.st.Load().CurrentRevision(ctx)
}
func (w *switched) CurrentPointer(ctx context.Context) (*store.Pointer, error) {
	return w.st.Load().CurrentPointer(ctx)
}
func (w *switched) Load(ctx context.Context, p *store.Pointer) (*store.Stored, error) {
	return w.st.Load().Load(ctx, p)
}
func (w *switched) WatchCurrent(ctx context.Context) clientv3.WatchChan {
	return w.st.Load().WatchCurrent(ctx)
}

func weightOf(r *running) int {
	if snap := r.s.Snapshot(); snap != nil {
		return snap.Servers[0].Weight
	}
	return 0
}

// A store rebuilt from nothing numbers its applies from 1 again and may
// hold another document at the very revision the lost store's pointer had:
// every scheduler, the one following and the one restarted from its disk
// cache, serves what the rebuilt store holds; the lost store's signed
// pointers, put back into the new one, are refused.
func TestRebuiltStoreServedWhateverTheRevision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	center := signer(t)
	v := signing.NewVerifier(center.Public())
	lost := etcdtest.Start(t)
	lostStore := lost.Store()
	for w := 100; w <= 102; w++ {
		applySigned(t, lostStore, fixture.Weighted(t, w), center)
	}
	old, err := lost.Client().Get(ctx, lost.Prefix+"topology/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	lostPtr, err := lostStore.CurrentPointer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src := switchedTo(lostStore)
	cache := filepath.Join(t.TempDir(), "topology.cache")
	following := verifyingSyncer(t, src, cache, v)
	wait.For(t, "the lost store's snapshot", wait.DefaultTimeout, func() bool { return weightOf(following) == 102 })

	// The rebuilt store: padded so that its first apply's pointer lands at
	// the lost pointer's revision (a chunk, then the pointer).
	rebuilt := etcdtest.Start(t)
	cli := rebuilt.Client()
	for {
		resp, err := cli.Put(ctx, rebuilt.Prefix+"pad", "x")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Revision >= lostPtr.Revision-2 {
			break
		}
	}
	newStore := rebuilt.Store()
	if rev := applySigned(t, newStore, fixture.Weighted(t, 200), center); rev != lostPtr.Revision {
		t.Fatalf("the rebuilt store's pointer is at revision %d, want the lost one's %d for this test", rev, lostPtr.Revision)
	}
	newPtr, err := newStore.CurrentPointer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newPtr.Seq != 1 || newPtr.Epoch <= lostPtr.Epoch {
		t.Fatalf("rebuilt store: sequence %d, epoch %d; want 1 and an epoch after the lost store's %d", newPtr.Seq, newPtr.Epoch, lostPtr.Epoch)
	}
	src.st.Store(newStore)
	wait.For(t, "the rebuilt store's snapshot at the same revision", wait.DefaultTimeout, func() bool { return weightOf(following) == 200 })
	if got := following.s.Digest(); got != newPtr.Digest {
		t.Errorf("Digest() = %.12s, want the rebuilt store's %.12s", got, newPtr.Digest)
	}

	// A scheduler restarted from a cache the lost store wrote.
	following.stop()
	stale := filepath.Join(t.TempDir(), "stale.cache")
	r := verifyingSyncer(t, switchedTo(lostStore), stale, v)
	wait.For(t, "a cache from the lost store", wait.DefaultTimeout, func() bool { return weightOf(r) == 102 })
	r.stop()
	fromCache := verifyingSyncer(t, switchedTo(newStore), stale, v)
	wait.For(t, "the restarted scheduler on the rebuilt store", wait.DefaultTimeout, func() bool {
		return weightOf(fromCache) == 200 && fromCache.s.Digest() == newPtr.Digest
	})

	// The lost store's last pointer and its document, put back.
	for _, kv := range old.Kvs {
		if _, err := cli.Put(ctx, string(kv.Key), string(kv.Value)); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the lost store's pointer refused", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, fromCache.reg, "anysched_snapshot_rejected_total", "replayed")) == 1
	})
	if w := weightOf(fromCache); w != 200 {
		t.Errorf("after the put-back serving weight %d, want the rebuilt store's 200", w)
	}
}

func switchedTo(st *store.Store) *switched {
	w := &switched{}
	w.st.Store(st)
	return w
}
