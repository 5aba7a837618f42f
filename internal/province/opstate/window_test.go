package opstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fakeclock"
	"github.com/anysched/anysched/internal/testbed/logtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// fakeClock adapts fakeclock.Clock to the watcher's clock.
type fakeClock struct{ *fakeclock.Clock }

func (f fakeClock) NewTimer(d time.Duration) health.Timer { return f.Clock.NewTimer(d) }

// clocked is a watcher on a fake clock, counting its OnChange calls (each
// one an engine rebuild in a scheduler).
type clocked struct {
	w       *opstate.Watcher
	clk     *fakeclock.Clock
	changes atomic.Int64
	reg     *prometheus.Registry
}

func watchClocked(t *testing.T, cli *clientv3.Client, start time.Time) *clocked {
	t.Helper()
	c := &clocked{clk: fakeclock.New(start), reg: prometheus.NewRegistry()}
	c.w = &opstate.Watcher{Client: cli, Prefix: prefix, Logger: logtest.New().Logger(), Clock: fakeClock{c.clk}, OnChange: func() { c.changes.Add(1) }}
	c.w.Register(c.reg)
	run(t, c.w)
	return c
}

// run runs w until the test ends, from its first listing on.
func run(t *testing.T, w *opstate.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, "first listing", wait.DefaultTimeout, w.Synced)
}

func revision(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "/none")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// TestScheduledDrainFollowsItsWindowByTheClock: a drain with a window is
// not applied before its start, is applied from its start and not after its
// end, and the watcher rebuilds (OnChange) at each boundary by its own
// clock: etcd is not written at either.
func TestScheduledDrainFollowsItsWindowByTheClock(t *testing.T) {
	s := snap(t)
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Second)
	c := watchClocked(t, cli, t0)
	from, until := t0.Add(time.Hour), t0.Add(3*time.Hour)
	if err := opstate.SetDrain(ctx, cli, prefix, nil, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[1].Name, Reason: "firmware", From: from, Until: until}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the scheduled drain read", wait.DefaultTimeout, func() bool { return len(c.w.Drains()) == 1 })
	if r := c.w.DrainReasons(s)[1]; r != "" {
		t.Fatalf("before its window the server is drained: %q", r)
	}
	if got := metric(t, c.reg, "anysched_opstate_drains_pending", nil); got != 1 {
		t.Errorf("anysched_opstate_drains_pending = %v before the window, want 1", got)
	}
	rev := revision(t, cli)
	before := c.changes.Load()

	if at := c.clk.Step(t, 1); !at.Equal(from) {
		t.Fatalf("the watcher's timer fired at %s, want the window's start %s", at, from)
	}
	wait.For(t, "a rebuild at the window's start", wait.DefaultTimeout, func() bool { return c.changes.Load() > before })
	if r := c.w.DrainReasons(s)[1]; !strings.Contains(r, "firmware") {
		t.Fatalf("inside its window the server is not drained: %q", r)
	}
	if got := metric(t, c.reg, "anysched_opstate_drains", nil); got != 1 {
		t.Errorf("anysched_opstate_drains = %v inside the window, want 1", got)
	}
	before = c.changes.Load()

	if at := c.clk.Step(t, 1); !at.Equal(until) {
		t.Fatalf("the watcher's timer fired at %s, want the window's end %s", at, until)
	}
	wait.For(t, "a rebuild at the window's end", wait.DefaultTimeout, func() bool { return c.changes.Load() > before })
	if r := c.w.DrainReasons(s)[1]; r != "" {
		t.Fatalf("after its window the server is still drained: %q", r)
	}
	if got := revision(t, cli); got != rev {
		t.Errorf("etcd revision %d after the window, %d before its start: the boundaries wrote etcd", got, rev)
	}
	if n := c.clk.Armed(); n != 0 {
		t.Errorf("%d timers armed after the last boundary, want none", n)
	}
}

// TestAlteredWindowRefused: the window is in the signed value, so a drain
// whose window was edited in etcd (moved to start now, say) is refused like
// a forged drain, while the center's scheduled drain is kept, pending.
func TestAlteredWindowRefused(t *testing.T) {
	s := snap(t)
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	center := signer(t)
	v := watchVerified(t, cli, center, true)
	now := time.Now().UTC()
	from, until := now.Add(time.Hour), now.Add(2*time.Hour)
	for i := range 2 {
		if err := opstate.SetDrain(ctx, cli, prefix, center, opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[i].Name, From: from, Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	key := prefix + keyspace.Drain("server", s.Servers[1].Name)
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the signed drain back: %v", err)
	}
	stamp, _ := json.Marshal(from)
	altered := bytes.Replace(resp.Kvs[0].Value, stamp, []byte(`"2000-01-01T00:00:00Z"`), 1)
	if bytes.Equal(altered, resp.Kvs[0].Value) {
		t.Fatalf("the window's start %s is not in the stored value %s", stamp, resp.Kvs[0].Value)
	}
	if _, err := cli.Put(ctx, key, string(altered)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the altered window refused", wait.DefaultTimeout, func() bool {
		return metric(t, v.reg, "anysched_opstate_refused_total", map[string]string{"kind": "drain", "reason": "bad_signature"}) == 1
	})
	ds := v.w.Drains()
	if len(ds) != 1 || ds[0].Name != s.Servers[0].Name || !ds[0].From.Equal(from) || !ds[0].Until.Equal(until) {
		t.Fatalf("drains kept %+v, want only server 0's, with its window", ds)
	}
	if r := v.w.DrainReasons(s); r[0] != "" || r[1] != "" {
		t.Fatalf("drain reasons %q before the window: want none applied", r)
	}
}

// TestDrainOfTheReleaseBeforeReads: a drain without a window marshals to
// the very bytes the release before wrote (so signatures over them still
// verify), and one the release before stored is in force until undrained.
func TestDrainOfTheReleaseBeforeReads(t *testing.T) {
	type oldDrain struct { // the release before's Drain
		Kind   opstate.DrainKind `json:"kind"`
		Name   string            `json:"name"`
		Reason string            `json:"reason,omitempty"`
		At     time.Time         `json:"at"`
		Forced bool              `json:"forced,omitempty"`
	}
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	s := snap(t)
	old, _ := json.Marshal(oldDrain{Kind: opstate.DrainServer, Name: s.Servers[2].Name, Reason: "disk", At: at})
	now, _ := json.Marshal(opstate.Drain{Kind: opstate.DrainServer, Name: s.Servers[2].Name, Reason: "disk", At: at})
	if !bytes.Equal(old, now) {
		t.Fatalf("a drain without a window marshals to %s, the release before's to %s", now, old)
	}
	var d opstate.Drain
	if err := json.Unmarshal(old, &d); err != nil || d.Scheduled() || d.State(time.Now()) != opstate.DrainActive {
		t.Fatalf("the release before's drain reads as %+v (scheduled %v, state %s), %v", d, d.Scheduled(), d.State(time.Now()), err)
	}
	cli := etcdtest.Start(t).Client()
	x := watch(t, cli)
	if _, err := cli.Put(context.Background(), prefix+keyspace.Drain("server", s.Servers[2].Name), string(old)); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "the release before's drain applied", wait.DefaultTimeout, func() bool { return x.w.DrainReasons(s)[2] != "" })
}

// TestEndDrain: the center's housekeeping deletes a drain whose window
// ended, and neither one still in its window nor one set again meanwhile.
func TestEndDrain(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	now := time.Now().UTC()
	d := opstate.Drain{Kind: opstate.DrainNode, Name: "n1", At: now.Add(-2 * time.Hour), From: now.Add(-2 * time.Hour), Until: now.Add(-time.Hour)}
	if err := opstate.SetDrain(ctx, cli, prefix, nil, d); err != nil {
		t.Fatal(err)
	}
	running := d
	running.Until = now.Add(time.Hour)
	if ended, err := opstate.EndDrain(ctx, cli, prefix, running, now); ended || err != nil {
		t.Fatalf("ending a drain still in its window: ended %v, %v", ended, err)
	}
	again := d
	again.At = now
	if ended, err := opstate.EndDrain(ctx, cli, prefix, again, now); ended || err != nil {
		t.Fatalf("ending a drain other than the one stored: ended %v, %v", ended, err)
	}
	if ended, err := opstate.EndDrain(ctx, cli, prefix, d, now); !ended || err != nil {
		t.Fatalf("ending the ended drain: ended %v, %v", ended, err)
	}
	if resp, err := cli.Get(ctx, prefix+keyspace.Drain("node", "n1")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the ended drain is still stored (%v)", err)
	}
}

// TestMaintenanceDrillWindow: a maintenance drill scheduled ahead is not
// in force before its start and is past an ordinary drill's hour; an
// ordinary drill is not.
func TestMaintenanceDrillWindow(t *testing.T) {
	cli := etcdtest.Start(t).Client()
	ctx := context.Background()
	x := watch(t, cli)
	now := time.Now().UTC()
	m := opstate.Drill{Target: opstate.RegionTarget("hefei"), Started: now.Add(time.Hour), Until: now.Add(5 * time.Hour), Maintenance: true}
	if err := opstate.ScheduleDrill(ctx, cli, prefix, nil, m, 0); err != nil {
		t.Fatal(err)
	}
	plain := m
	plain.Target, plain.Maintenance = opstate.RegionTarget("wuhu"), false
	if err := opstate.ScheduleDrill(ctx, cli, prefix, nil, plain, 0); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "both drills seen", wait.DefaultTimeout, func() bool { return len(x.seen()) == 2 })
	for _, c := range []struct {
		target string
		at     time.Time
		want   bool
	}{
		{"hefei", now, false},
		{"hefei", now.Add(4 * time.Hour), true},
		{"hefei", now.Add(5 * time.Hour), false},
		{"wuhu", now.Add(90 * time.Minute), true},
		{"wuhu", now.Add(4 * time.Hour), false},
	} {
		if _, ok := x.w.Drill(opstate.RegionTarget(c.target), c.at); ok != c.want {
			t.Errorf("drill of %s in force at +%s: %v, want %v", c.target, c.at.Sub(now), ok, c.want)
		}
	}
	if existed, err := opstate.ClearDrill(ctx, cli, prefix, opstate.RegionTarget("hefei")); !existed || err != nil {
		t.Fatalf("clearing the maintenance drill: existed %v, %v", existed, err)
	}
	wait.For(t, "the cleared drill gone", wait.DefaultTimeout, func() bool {
		_, ok := x.w.Drill(opstate.RegionTarget("hefei"), now.Add(4*time.Hour))
		return !ok
	})
}
