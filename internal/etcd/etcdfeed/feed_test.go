package etcdfeed_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdfeed"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// follower keeps what a Feed told it, as health's Merger and opstate's
// Watcher do.
type follower struct {
	mu      sync.Mutex
	state   map[string]string
	changed int
}

func (f *follower) list(kvs []etcdfeed.KV) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = map[string]string{}
	for _, kv := range kvs {
		f.state[kv.Key] = string(kv.Value)
	}
}

func (f *follower) update(kvs []etcdfeed.KV) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, kv := range kvs {
		if kv.Deleted {
			delete(f.state, kv.Key)
		} else {
			f.state[kv.Key] = string(kv.Value)
		}
	}
	return true
}

func (f *follower) change() {
	f.mu.Lock()
	f.changed++
	f.mu.Unlock()
}

func (f *follower) is(want map[string]string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Equal(f.state, want)
}

// TestFeedListsWatchesAndFollowsAfterAnOutage: the follower gets its keys
// (a key and a prefix, nothing else under the etcd prefix) listed, then
// every change, and keeps its state through an etcd outage.
func TestFeedListsWatchesAndFollowsAfterAnOutage(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	put := putter(t, e)
	put("a/1", "one")
	put("b", "bee")
	put("bb", "not b") // a key, not a prefix: its neighbours stay out
	put("c/1", "not followed")

	f := follow(t, e, "a/", "b")

	wait.For(t, "the listing, then Changed", wait.DefaultTimeout, func() bool {
		f.mu.Lock()
		changed := f.changed > 0
		f.mu.Unlock()
		return changed && f.is(map[string]string{"a/1": "one", "b": "bee"})
	})

	put("a/2", "two")
	put("c/2", "still not followed")
	if _, err := cli.Delete(ctx, e.Prefix+"b"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the watched changes", wait.DefaultTimeout, func() bool { return f.is(map[string]string{"a/1": "one", "a/2": "two"}) })

	// An outage: the follower keeps its state, and once etcd is back it
	// follows again (by a new listing, or by a watch the client resumed).
	e.Stop()
	if !f.is(map[string]string{"a/1": "one", "a/2": "two"}) {
		t.Fatal("the state was lost with etcd")
	}
	e.Restart()
	put("a/3", "three")
	if _, err := cli.Delete(ctx, e.Prefix+"a/1"); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "following after the outage", wait.DefaultTimeout, func() bool { return f.is(map[string]string{"a/2": "two", "a/3": "three"}) })
}

// A feed watches what it follows, not the whole province: a follower
// whose etcd role may read only its keys gets them listed and every change
// (a watch on the whole prefix is refused by etcd's permissions), and
// receives nothing of the rest.
func TestFeedNeedsReadOnlyOnItsKeys(t *testing.T) {
	e := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.EnableAuth(etcdtest.User{Name: "follower", Perms: []etcdauth.Perm{{Key: e.Prefix + "drain/", RangeEnd: clientv3.GetPrefixRangeEnd(e.Prefix + "drain/"), Type: etcdauth.Read}}})
	root, restricted := e.Login(etcdauth.RootUser), e.Login("follower")
	if _, err := root.Put(ctx, e.Prefix+"drain/server/a", "1"); err != nil {
		t.Fatal(err)
	}
	fl := &follower{}
	logs := logtest.New()
	f := &etcdfeed.Feed{Client: restricted, Prefix: e.Prefix, Keys: []string{"drain/"}, Logger: logs.Logger(),
		Listed: fl.list, Updated: fl.update, Changed: fl.change, Retry: 50 * time.Millisecond}
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(fctx) }()
	defer func() { fcancel(); <-done }()
	wait.For(t, "the drain listed", wait.DefaultTimeout, func() bool { return fl.is(map[string]string{"drain/server/a": "1"}) })
	for _, kv := range [][2]string{{"alloc/state/hefei/x/h", "state"}, {"drain/server/b", "2"}} {
		if _, err := root.Put(ctx, e.Prefix+kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "the new drain watched", wait.DefaultTimeout, func() bool {
		return fl.is(map[string]string{"drain/server/a": "1", "drain/server/b": "2"})
	})
	if warned := logs.Records(slog.LevelWarn); len(warned) > 0 {
		t.Fatalf("the feed failed (relisting, not watching): %v", warned)
	}
}

// TestFeedCarriesLeaseAndRevision: listed and watched keys come with the
// lease etcd holds them under and their revision, the store's word on
// liveness and order that health's Merger judges verdicts by (a
// checker's own clock and claims are not believed).
func TestFeedCarriesLeaseAndRevision(t *testing.T) {
	e := etcdtest.Start(t)
	cli := e.Client()
	ctx := context.Background()
	g, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ lease, rev int64 }
	var mu sync.Mutex
	got := map[string]seen{}
	record := func(kvs []etcdfeed.KV) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range kvs {
			got[kv.Key] = seen{kv.Lease, kv.ModRevision}
		}
		return true
	}
	listed, err := cli.Put(ctx, e.Prefix+"a/1", "x", clientv3.WithLease(g.ID))
	if err != nil {
		t.Fatal(err)
	}
	feed := &etcdfeed.Feed{Client: cli, Prefix: e.Prefix, Keys: []string{"a/"},
		Listed: func(kvs []etcdfeed.KV) { record(kvs) }, Updated: record, Changed: func() {},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- feed.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, "the listing", wait.DefaultTimeout, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	watched, err := cli.Put(ctx, e.Prefix+"a/2", "y", clientv3.WithLease(g.ID))
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the watched put", wait.DefaultTimeout, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if want := (seen{int64(g.ID), listed.Header.Revision}); got["a/1"] != want {
		t.Errorf("listed a/1: %+v, want %+v", got["a/1"], want)
	}
	if want := (seen{int64(g.ID), watched.Header.Revision}); got["a/2"] != want {
		t.Errorf("watched a/2: %+v, want %+v", got["a/2"], want)
	}
}

// A store lost whole and rebuilt numbers its revisions anew: the feed
// lists it again rather than waiting, in a watch the client resumed, for
// revisions past the lost store's.
func TestFeedFollowsARebuiltStore(t *testing.T) {
	e := etcdtest.Start(t)
	put := putter(t, e)
	for range 50 { // the lost store's revisions, past what the rebuild writes
		put("a/1", "old")
	}
	f := follow(t, e, "a/")
	wait.For(t, "the lost store listed", wait.DefaultTimeout, func() bool { return f.is(map[string]string{"a/1": "old"}) })

	e.Wipe()
	put("a/2", "rebuilt")
	wait.For(t, "the rebuilt store followed", wait.DefaultTimeout, func() bool { return f.is(map[string]string{"a/2": "rebuilt"}) })
}

// putter writes a key under e's prefix.
func putter(t *testing.T, e *etcdtest.Etcd) func(k, v string) {
	cli := e.Client()
	return func(k, v string) {
		t.Helper()
		if _, err := cli.Put(context.Background(), e.Prefix+k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// follow runs a Feed of keys into a follower until the test ends.
func follow(t *testing.T, e *etcdtest.Etcd, keys ...string) *follower {
	f := &follower{}
	feed := &etcdfeed.Feed{
		Client: e.Client(), Prefix: e.Prefix, Keys: keys,
		Listed: f.list, Updated: f.update, Changed: f.change,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Retry: 50 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return f
}
