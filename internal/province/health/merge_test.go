package health_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// One region, one node of four servers: syn-1-1-a .. syn-1-1-d.
func snap(t *testing.T) *topology.Snapshot {
	t.Helper()
	return fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 4, ZonesPerRegion: 1, NetworksPerZone: 1}, topogen.Cities(nil, 1)...))
}

type harness struct {
	t       *testing.T
	e       *etcdtest.Etcd
	m       *health.Merger
	changes atomic.Int64
	stop    func()
}

func newHarness(t *testing.T, opts health.MergerOptions) *harness {
	return newHarnessLogging(t, opts, quiet)
}

// newHarnessLogging is newHarness with the merger logging to log.
func newHarnessLogging(t *testing.T, opts health.MergerOptions, log *slog.Logger) *harness {
	h := &harness{t: t, e: etcdtest.Start(t)}
	h.m = &health.Merger{Client: h.e.Client(), Prefix: "/anysched/", Options: opts, Logger: log, OnChange: func() { h.changes.Add(1) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	var once sync.Once
	h.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(h.stop)
	return h
}

// publisher runs a checker's publisher until the returned stop is called.
func (h *harness) publisher(id string, ttl time.Duration) (*health.Publisher, func()) {
	p := &health.Publisher{Client: h.e.Client(), Prefix: "/anysched/", Info: avail.CheckerInfo{ID: id, Region: "syn-1", StartedAt: time.Now()}, TTL: ttl, Logger: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	h.t.Cleanup(stop)
	return p, stop
}

func (h *harness) eventually(what string, limit time.Duration, s *topology.Snapshot, cond func(*avail.Availability) bool) *avail.Availability {
	h.t.Helper()
	var a *avail.Availability
	wait.ForErr(h.t, what, limit, func() error {
		if a = h.m.Compute(s, nil); cond(a) {
			return nil
		}
		return fmt.Errorf("available %v, why %q", a.Available, a.Why)
	})
	return a
}

// waitKeys waits until etcd holds n keys under the store prefix + sub.
func (h *harness) waitKeys(sub string, n int64, limit time.Duration) {
	h.t.Helper()
	wait.ForErr(h.t, fmt.Sprintf("%d keys under %s", n, sub), limit, func() error {
		resp, err := h.e.Client().Get(context.Background(), "/anysched/"+sub, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count != n {
			return fmt.Errorf("%d keys", resp.Count)
		}
		return nil
	})
}

func report(server, checker string, up bool) health.Report {
	r := health.Report{Server: server, Checker: checker, Up: up, At: time.Now()}
	if !up {
		r.Reason = "refused"
	}
	return r
}

func TestMergeRules(t *testing.T) {
	s := snap(t)
	a, b, c := s.Servers[0].Name, s.Servers[1].Name, s.Servers[2].Name
	for _, tt := range []struct {
		rule           string
		wantA, wantB   bool // a: down by 1 of 2; b: down by 2 of 2
		wantC          bool // c: down by 2 of 3
		wantReasonPart string
	}{
		{health.MergeOptimistic, true, false, true, "down by 2 of 2 checkers"},
		{health.MergeMajority, true, false, false, "down by 2 of 2 checkers"},
	} {
		t.Run(tt.rule, func(t *testing.T) {
			h := newHarness(t, health.MergerOptions{Rule: tt.rule, Grace: time.Minute})
			p1, _ := h.publisher("c1", 5*time.Second)
			p2, _ := h.publisher("c2", 5*time.Second)
			p3, _ := h.publisher("c3", 5*time.Second)
			p1.Publish(report(a, "c1", false))
			p2.Publish(report(a, "c2", true))
			p1.Publish(report(b, "c1", false))
			p2.Publish(report(b, "c2", false))
			p1.Publish(report(c, "c1", false))
			p2.Publish(report(c, "c2", false))
			p3.Publish(report(c, "c3", true))
			// Publishers write asynchronously: first wait until all seven
			// reports are in etcd, then until the merger has read them. The
			// merged view only moves towards the final one from here, so a
			// wrong rule shows as a timeout naming the verdicts it reached.
			h.waitKeys("health/", 7, 5*time.Second)
			want := []bool{tt.wantA, tt.wantB, tt.wantC, true}
			// The reason is part of the final view: b is down as soon as
			// one checker's report of it is merged ("down by 1 of 1").
			h.eventually("verdicts merged to "+fmt.Sprint(want)+", b "+tt.wantReasonPart, 5*time.Second, s, func(av *avail.Availability) bool {
				return len(av.Checkers) == 3 && slices.Equal(av.Available, want) &&
					strings.Contains(av.Why[1], tt.wantReasonPart) && strings.Contains(av.Why[1], "refused")
			})
		})
	}
}

// TestCheckerDeath: a checker that dies (its lease expires) takes its
// verdicts with it; the last verdict is kept for the grace period, then the
// server fails open.
func TestCheckerDeath(t *testing.T) {
	s := snap(t)
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: 1500 * time.Millisecond})
	// A checker that is killed: its lease is never revoked, it just expires.
	cli := h.e.Client()
	lease, err := cli.Grant(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := report(s.Servers[0].Name, "dead", false)
	put := func(key, val string) {
		if _, err := cli.Put(context.Background(), key, val, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	put("/anysched/checkers/syn-1/dead", `{"id":"dead","region":"syn-1","targets":4}`)
	put("/anysched/health/syn-1/dead/"+s.Servers[0].Name, `{"server":"`+r.Server+`","checker":"dead","up":false,"reason":"refused"}`)
	h.eventually("verdict seen", 3*time.Second, s, func(av *avail.Availability) bool { return !av.Available[0] && len(av.Checkers) == 1 })

	// Lease expires (~2 s): the checker vanishes, the verdict is kept...
	av := h.eventually("checker gone", 8*time.Second, s, func(av *avail.Availability) bool { return len(av.Checkers) == 0 })
	if av.Available[0] || !strings.Contains(av.Why[0], "no live checker") {
		t.Fatalf("right after the checker died: available %v why %q; want the last verdict kept", av.Available[0], av.Why[0])
	}
	// ...until the grace period ends: fail open.
	h.eventually("fail open after grace", 5*time.Second, s, func(av *avail.Availability) bool { return av.Available[0] })
}

func TestPanicThreshold(t *testing.T) {
	s := snap(t)
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute, PanicThreshold: 0.5})
	p, _ := h.publisher("c1", 5*time.Second)
	// 2 of 4 down: exactly at the threshold, health applies.
	p.Publish(report(s.Servers[0].Name, "c1", false))
	p.Publish(report(s.Servers[1].Name, "c1", false))
	av := h.eventually("two down", 3*time.Second, s, func(av *avail.Availability) bool { return !av.Healthy[0] && !av.Healthy[1] })
	if av.Panic[0] || av.Available[0] || av.Available[1] || !av.Available[2] {
		t.Fatalf("at 50%% healthy: panic %v available %v", av.Panic[0], av.Available)
	}
	// 3 of 4 down: below the threshold, the node ignores health.
	p.Publish(report(s.Servers[2].Name, "c1", false))
	av = h.eventually("panic", 3*time.Second, s, func(av *avail.Availability) bool { return av.Panic[0] })
	for i, ok := range av.Available {
		if !ok {
			t.Fatalf("in panic mode server %d is unavailable", i)
		}
	}
}

// TestEtcdOutage: while etcd is down the merger keeps the last verdicts and
// the publisher keeps what it could not write; both converge when it returns.
func TestEtcdOutage(t *testing.T) {
	s := snap(t)
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute})
	p, _ := h.publisher("c1", 10*time.Second)
	p.Publish(report(s.Servers[0].Name, "c1", false))
	h.eventually("down", 3*time.Second, s, func(av *avail.Availability) bool { return !av.Available[0] })
	h.e.Stop()
	time.Sleep(time.Second) // the outage lasts: the merger's feed fails and retries meanwhile
	if av := h.m.Compute(s, nil); av.Available[0] {
		t.Fatal("verdict lost while etcd is down")
	}
	// The server recovers during the outage; the publisher queues it.
	p.Publish(report(s.Servers[0].Name, "c1", true))
	h.e.Restart()
	h.eventually("recovery published after etcd returns", 15*time.Second, s, func(av *avail.Availability) bool { return av.Available[0] && av.Healthy[0] })
}

// TestMergeFamilies: a dual-stack server's families are merged apart. Its
// IPv6 address down (by every checker) leaves it available with
// FamilyDown[1] and the reason; its IPv4 address down likewise; both down,
// it is down; a report without a verdict on IPv6 (a checker before
// dual-stack) speaks for both; one checker of two seeing IPv6 down is not
// enough under the optimistic rule.
func TestMergeFamilies(t *testing.T) {
	doc := fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 5, ZonesPerRegion: 1, NetworksPerZone: 1}, topogen.Cities(nil, 1)...)
	fixture.DualStack(doc)
	s := fixture.Compile(t, doc)
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute})
	p1, _ := h.publisher("c1", 5*time.Second)
	p2, _ := h.publisher("c2", 5*time.Second)
	fam := func(server string, up, up6 bool) health.Report {
		r := report(server, "c1", up)
		r.Up6 = &up6
		if !up6 {
			r.Reason6 = "refused over IPv6"
		}
		return r
	}
	name := func(i int) string { return s.Servers[i].Name }
	p1.Publish(fam(name(0), true, false))
	p1.Publish(fam(name(1), false, true))
	p1.Publish(fam(name(2), false, false))
	p1.Publish(report(name(3), "c1", true))
	p1.Publish(fam(name(4), true, false))
	other := fam(name(4), true, true)
	other.Checker = "c2"
	p2.Publish(other)
	h.waitKeys("health/", 6, 5*time.Second)
	h.eventually("families merged apart", 5*time.Second, s, func(av *avail.Availability) bool {
		if !slices.Equal(av.Available, []bool{true, true, false, true, true}) || av.FamilyDown == nil || av.FamilyWhy == nil {
			return false
		}
		fd, fw := av.FamilyDown, av.FamilyWhy
		return slices.Equal(fd[0], []bool{false, true, false, false, false}) && slices.Equal(fd[1], []bool{true, false, false, false, false}) &&
			strings.Contains(fw[1][0], "refused over IPv6") && strings.Contains(fw[0][1], "refused") && strings.Contains(av.Why[2], "refused")
	})
}
