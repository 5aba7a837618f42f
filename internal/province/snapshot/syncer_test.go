package snapshot_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/snapshot"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type running struct {
	s    *snapshot.Syncer
	reg  *prometheus.Registry
	stop func()
}

func startSyncer(t *testing.T, src snapshot.Source, cache string, maxStale time.Duration) *running {
	t.Helper()
	s := &snapshot.Syncer{
		Source: src, CacheFile: cache, ConfirmInterval: 100 * time.Millisecond, MaxStaleness: maxStale,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if err := s.LoadCache(); err != nil {
		t.Fatalf("LoadCache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	r := &running{s: s, reg: reg, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			r.stop()
		}
	})
	return r
}

func apply(t *testing.T, st *store.Store, tp *topology.Topology) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := st.Apply(ctx, tp, store.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Revision
}

func revision(s *snapshot.Syncer) int64 {
	if snap := s.Snapshot(); snap != nil {
		return snap.Revision
	}
	return 0
}

func TestSwapsWithinOneSecondOfApply(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	r := startSyncer(t, st, "", time.Minute)
	if err := r.s.Ready(); err == nil {
		t.Fatal("ready without a snapshot")
	}
	for i := range 3 {
		rev := apply(t, st, fixture.Weighted(t, 100+i))
		// The requirement itself: a second, however loaded the machine.
		took := wait.For(t, "new revision swapped in", time.Second, func() bool { return revision(r.s) == rev })
		t.Logf("apply %d: swapped in after %s", i, took)
		if got := r.s.Snapshot().Servers[0].Weight; got != 100+i {
			t.Fatalf("snapshot weight %d, want %d", got, 100+i)
		}
	}
	if err := r.s.Ready(); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if got := testutil.ToFloat64(metric(t, r.reg, "anysched_snapshot_swaps_total")); got != 3 {
		t.Fatalf("swaps_total = %v, want 3", got)
	}
}

// TestStoreOutage stops etcd under a running syncer: the snapshot stays, its
// age grows past max_staleness (not ready), and etcd's return heals both.
func TestStoreOutage(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	r := startSyncer(t, st, "", 700*time.Millisecond)
	rev := apply(t, st, fixture.Weighted(t, 100))
	wait.For(t, "first snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == rev })

	e.Stop()
	wait.For(t, "staleness noticed", wait.DefaultTimeout, func() bool { return r.s.Ready() != nil })
	if revision(r.s) != rev {
		t.Fatalf("snapshot changed to %d during the outage", revision(r.s))
	}
	if age := testutil.ToFloat64(metric(t, r.reg, "anysched_snapshot_age_seconds")); age < 0.7 {
		t.Fatalf("anysched_snapshot_age_seconds = %v during the outage, want >= 0.7", age)
	}

	e.Restart()
	wait.For(t, "ready again after etcd returns", wait.DefaultTimeout, func() bool { return r.s.Ready() == nil })
	rev2 := apply(t, st, fixture.Weighted(t, 200))
	wait.For(t, "following again", wait.DefaultTimeout, func() bool { return revision(r.s) == rev2 })
}

// TestRestartWithStoreDownServesFromCache: a scheduler restarted while etcd
// is unreachable serves the last good snapshot from disk.
func TestRestartWithStoreDownServesFromCache(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	cache := filepath.Join(t.TempDir(), "snapshot.cache")
	first := startSyncer(t, st, cache, time.Minute)
	rev := apply(t, st, fixture.Weighted(t, 150))
	wait.For(t, "snapshot", wait.DefaultTimeout, func() bool { return revision(first.s) == rev })
	wait.For(t, "cache written", wait.DefaultTimeout, func() bool { _, err := os.Stat(cache); return err == nil })
	first.stop()
	e.Stop()

	src := &asking{Source: st}
	second := startSyncer(t, src, cache, time.Minute)
	snap := second.s.Snapshot()
	if snap == nil || snap.Revision != rev || snap.Servers[0].Weight != 150 {
		t.Fatalf("restarted without etcd: snapshot %+v, want revision %d from the cache", snap, rev)
	}
	if err := second.s.Ready(); err != nil {
		t.Fatalf("a fresh cache should be ready: %v", err)
	}
	// The syncer keeps trying the unreachable store, counting each
	// failure; the snapshot stays.
	wait.For(t, "failed attempts counted", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, second.reg, "anysched_snapshot_errors_total", "fetch")) >= 2
	})
	if revision(second.s) != rev {
		t.Fatal("snapshot lost while etcd is down")
	}
	if age := testutil.ToFloat64(metric(t, second.reg, "anysched_snapshot_age_seconds")); age <= 0 {
		t.Fatalf("anysched_snapshot_age_seconds = %v, want > 0", age)
	}
}

// asking is a Source that counts the syncer's calls.
type asking struct {
	snapshot.Source
	calls atomic.Int64
}

func (a *asking) CurrentRevision(ctx context.Context) (int64, error) {
	a.calls.Add(1)
	return a.Source.CurrentRevision(ctx)
}

func (a *asking) WatchCurrent(ctx context.Context) clientv3.WatchChan {
	a.calls.Add(1)
	return a.Source.WatchCurrent(ctx)
}

func TestCacheAgeSurvivesRestart(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	cache := filepath.Join(t.TempDir(), "snapshot.cache")
	first := startSyncer(t, st, cache, time.Minute)
	rev := apply(t, st, fixture.Weighted(t, 100))
	wait.For(t, "snapshot", wait.DefaultTimeout, func() bool { return revision(first.s) == rev })
	first.stop()
	e.Stop()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(cache, old, old); err != nil {
		t.Fatal(err)
	}
	second := startSyncer(t, st, cache, 10*time.Minute)
	if age := second.s.Age(); age < 59*time.Minute {
		t.Fatalf("age after restart = %s, want about an hour (the cache's confirmation time)", age)
	}
	if second.s.Ready() == nil {
		t.Fatal("an hour-old snapshot with max_staleness 10m must not be ready")
	}
}

func TestCorruptCacheIsRefused(t *testing.T) {
	for name, content := range map[string][]byte{
		"not gzip":  []byte("hello"),
		"truncated": {0x1f, 0x8b, 0x08, 0x00},
	} {
		t.Run(name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "snapshot.cache")
			if err := os.WriteFile(cache, content, 0o644); err != nil {
				t.Fatal(err)
			}
			s := &snapshot.Syncer{CacheFile: cache, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if err := s.LoadCache(); err == nil {
				t.Fatal("a corrupt cache was accepted")
			}
			if s.Snapshot() != nil {
				t.Fatal("a corrupt cache produced a snapshot")
			}
		})
	}
}

// TestUncompilableStoredTopologyKeepsPrevious: a document in the store that
// this build cannot compile (written past validation, or by a newer version)
// leaves the previous snapshot in service and counts a build error.
func TestUncompilableStoredTopologyKeepsPrevious(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	r := startSyncer(t, st, "", time.Minute)
	rev := apply(t, st, fixture.Weighted(t, 100))
	wait.For(t, "snapshot", wait.DefaultTimeout, func() bool { return revision(r.s) == rev })
	bad := fixture.Weighted(t, 100)
	bad.Services[0].Selection = "from-the-future"
	apply(t, st, bad) // the store keeps what it is given; schedctl validates first
	wait.For(t, "build error counted", wait.DefaultTimeout, func() bool {
		return testutil.ToFloat64(metricWith(t, r.reg, "anysched_snapshot_errors_total", "build")) == 1
	})
	if revision(r.s) != rev {
		t.Fatalf("snapshot moved to %d, want to keep %d", revision(r.s), rev)
	}
}

func metric(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	return metricWith(t, reg, name, "")
}

// metricWith wraps one series of a gathered metric as a collector for testutil.ToFloat64.
func metricWith(t *testing.T, reg *prometheus.Registry, name, stage string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if stage != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != stage) {
				continue
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "probe", Help: "probe"}, func() float64 { return v })
		}
	}
	t.Fatalf("metric %s{%s} not found", name, stage)
	return nil
}

// TestStartDuringOutage: a syncer started while its store does not answer
// (a wrong endpoint, or etcd down) counts every failed attempt, says once at
// WARN which endpoints it cannot reach and what to check, not ready says
// why, and the store's return is logged once. The
// clientv3 watch blocks while no endpoint answers: the old syncer waited on
// it, silently.
func TestStartDuringOutage(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	e.Stop()
	rec := logtest.New()
	s := &snapshot.Syncer{
		Source: st, ConfirmInterval: 100 * time.Millisecond, MaxStaleness: time.Minute,
		Logger: rec.Logger(), Endpoints: []string{e.Endpoint()},
	}
	reg := prometheus.NewRegistry()
	s.Register(reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()

	fetchErrs := func() float64 {
		return testutil.ToFloat64(metricWith(t, reg, "anysched_snapshot_errors_total", "fetch"))
	}
	wait.For(t, "failed attempts counted", wait.DefaultTimeout, func() bool { return fetchErrs() >= 3 })
	warns := rec.Records(slog.LevelWarn)
	var outage []logtest.Record
	for _, w := range warns {
		if strings.Contains(w.Message, "store") && !strings.Contains(w.Message, "trusted_keys") {
			outage = append(outage, w)
		}
	}
	if len(outage) != 1 {
		t.Fatalf("want one WARN for the outage after %v failed attempts, got %d: %v", fetchErrs(), len(outage), warns)
	}
	w := outage[0]
	if !strings.Contains(w.Attrs["endpoints"], e.ClientAddr()) || !strings.Contains(w.Attrs["hint"], "etcd.endpoints") || w.Attrs["err"] == "" {
		t.Errorf("the outage WARN must name the endpoint, the error and what to check: %s", w)
	}
	if strings.Contains(w.Message, "lost the store") {
		t.Errorf("never had the store, yet: %s", w)
	}
	if err := s.Ready(); err == nil || !strings.Contains(err.Error(), e.ClientAddr()) {
		t.Errorf("Ready() = %v, want the unreachable endpoint named", err)
	}

	e.Restart()
	rev := apply(t, st, fixture.Weighted(t, 100))
	wait.For(t, "snapshot once the store answers", wait.DefaultTimeout, func() bool { return revision(s) == rev })
	if err := s.Ready(); err != nil {
		t.Errorf("Ready() = %v after the store returned", err)
	}
	if back := rec.Containing(slog.LevelInfo, "store reachable again"); len(back) != 1 || back[0].Attrs["failed_attempts"] == "" {
		t.Errorf("want one \"store reachable again\" with the failed attempts, got %v", back)
	}
	// Applied after the return: the watch, set up once etcd answered, follows.
	rev2 := apply(t, st, fixture.Weighted(t, 200))
	wait.For(t, "following", wait.DefaultTimeout, func() bool { return revision(s) == rev2 })
}

// TestSharedStoreNeedsTrustedKeys: with no trusted key, a syncer believes
// unsigned documents only from a store no one else writes; asked first,
// a shared store (a cluster's member behind a loopback endpoint) stops it
// with ErrNeedsTrustedKeys before anything is read.
func TestSharedStoreNeedsTrustedKeys(t *testing.T) {
	e := etcdtest.Start(t)
	st := e.Store()
	apply(t, st, fixture.Weighted(t, 100))
	s := &snapshot.Syncer{
		Source: st, ConfirmInterval: 100 * time.Millisecond, MaxStaleness: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Shared: func(context.Context) (string, error) { return "etcd has 3 members", nil },
	}
	s.Register(prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Run(ctx)
	if !errors.Is(err, snapshot.ErrNeedsTrustedKeys) || !strings.Contains(err.Error(), "etcd has 3 members") {
		t.Fatalf("Run: %v, want ErrNeedsTrustedKeys naming the members", err)
	}
	if s.Snapshot() != nil {
		t.Fatal("an unsigned document was read from a shared store")
	}
	// A private store: followed as before.
	s.Shared = func(context.Context) (string, error) { return "", nil }
	r := make(chan error, 1)
	rctx, rcancel := context.WithCancel(ctx)
	go func() { r <- s.Run(rctx) }()
	wait.For(t, "snapshot from a private store", wait.DefaultTimeout, func() bool { return s.Snapshot() != nil })
	rcancel()
	if err := <-r; err != nil {
		t.Fatal(err)
	}
}
