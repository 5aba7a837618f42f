package health_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/testbed/logtest"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// Two regions, syn-1 and syn-2, one node of two servers each.
func twoRegions(t *testing.T) *topology.Snapshot {
	t.Helper()
	return fixture.Compile(t, fixture.Shaped(t, topogen.Options{NodesPerRegion: 1, ServersPerNode: 2, ZonesPerRegion: 1, NetworksPerZone: 1}, topogen.Cities(nil, 2)...))
}

// serverIn is the index of the first server of region name in s.
func serverIn(t *testing.T, s *topology.Snapshot, region string) int {
	t.Helper()
	for i, sv := range s.Servers {
		if sv.Region >= 0 && s.Regions[sv.Region].Name == region {
			return i
		}
	}
	t.Fatalf("no server in region %s", region)
	return -1
}

// publisherIn runs a checker's publisher registered for region.
func (h *harness) publisherIn(id, region string) *health.Publisher {
	p := &health.Publisher{Client: h.e.Client(), Prefix: "/anysched/", Info: avail.CheckerInfo{ID: id, Region: region, StartedAt: time.Now()}, TTL: 5 * time.Second, Logger: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	h.t.Cleanup(func() { cancel(); <-done })
	return p
}

// TestForeignCheckerCannotKeepAServerUp: under the default optimistic rule one "up" kept a
// server in rotation whatever its own region's checkers said, so a checker
// of another region (compromised, or misconfigured) kept a dead server
// in rotation province-wide. Only the checkers of the server's region (or
// a province-wide checker) count.
func TestForeignCheckerCannotKeepAServerUp(t *testing.T) {
	s := twoRegions(t)
	victim := serverIn(t, s, "syn-2")
	name := s.Servers[victim].Name
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute})
	own1, own2 := h.publisherIn("syn-2-a", "syn-2"), h.publisherIn("syn-2-b", "syn-2")
	liar := h.publisherIn("syn-1-a", "syn-1")
	own1.Publish(report(name, "syn-2-a", false))
	own2.Publish(report(name, "syn-2-b", false))
	liar.Publish(report(name, "syn-1-a", true))
	h.waitKeys("health/", 3, 5*time.Second)
	// A sentinel after the liar's word: the liar's down on a server of its
	// own region. The merger reads health/ in one watch, in revision
	// order, so once it shows the sentinel it has read everything before.
	own := serverIn(t, s, "syn-1")
	liar.Publish(report(s.Servers[own].Name, "syn-1-a", false))
	av := h.eventually("the sentinel merged", 5*time.Second, s, func(av *avail.Availability) bool { return !av.Available[own] && len(av.Checkers) == 3 })
	if av.Available[victim] || av.Healthy[victim] {
		t.Fatalf("%s (syn-2) is available (why %q) on the word of a syn-1 checker while both syn-2 checkers say down", name, av.Why[victim])
	}
}

// TestFutureReportCannotWinTheFigures: the load figures were the report
// with the latest checker-set time, so one checker claiming a report from
// the future set them alone; they are now the median of the region's
// checkers' figures.
func TestFutureReportCannotWinTheFigures(t *testing.T) {
	s := twoRegions(t)
	sv := serverIn(t, s, "syn-1")
	name := s.Servers[sv].Name
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute})
	// Each honest checker holds the median of one figure, so only the
	// median of all three reports reads cpu 0.6 and 1000 connections.
	for id, l := range map[string]avail.Load{"honest-0": {CPU: 0.6, Connections: 3000}, "honest-1": {CPU: 0.9, Connections: 1000}} {
		r := report(name, id, true)
		r.Load = l
		h.publisherIn(id, "syn-1").Publish(r)
	}
	r := report(name, "liar", true)
	r.Load = avail.Load{CPU: 0.01, Connections: 1}
	r.At = time.Now().Add(24 * time.Hour) // the claimed clock
	h.publisherIn("liar", "syn-1").Publish(r)
	h.waitKeys("health/", 3, 5*time.Second)
	wait.ForErr(t, "the median of the three checkers' figures", 5*time.Second, func() error {
		if got := h.m.Compute(s, nil).Figures[sv].Load; got.CPU != 0.6 || got.Connections != 1000 {
			return fmt.Errorf("figures %+v, want cpu 0.6 and 1000 connections (a future-dated report must not set them)", got)
		}
		return nil
	})
}

// TestVerdictCountsOnlyUnderItsCheckersLease: the store, not the report,
// says whether a verdict is current. A verdict written without a lease
// (it would outlive its checker) or under another lease than the
// checker's live registration counts for nothing; the layout before
// regions is ignored, and said once.
func TestVerdictCountsOnlyUnderItsCheckersLease(t *testing.T) {
	s := twoRegions(t)
	sv := serverIn(t, s, "syn-1")
	name := s.Servers[sv].Name
	rec := logtest.New()
	h := newHarnessLogging(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute}, rec.Logger())
	cli := h.e.Client()
	put := func(key, val string, opts ...clientv3.OpOption) {
		t.Helper()
		if _, err := cli.Put(context.Background(), "/anysched/"+key, val, opts...); err != nil {
			t.Fatal(err)
		}
	}
	lease := func() clientv3.LeaseID {
		t.Helper()
		g, err := cli.Grant(context.Background(), 30)
		if err != nil {
			t.Fatal(err)
		}
		return g.ID
	}
	up := `{"up":true,"load":{"cpu":0.01},"at":"2099-01-01T00:00:00Z"}`
	live, other := lease(), lease()
	put(keyspace.Checker("syn-1", "c1"), `{"id":"c1"}`, clientv3.WithLease(live))
	put(keyspace.Verdict("syn-1", "c1", name), up)                                // no lease
	put(keyspace.Checker("syn-1", "c2"), `{"id":"c2"}`, clientv3.WithLease(live)) // c2 is live...
	put(keyspace.Verdict("syn-1", "c2", name), up, clientv3.WithLease(other))     // ...but this is another life's
	put(keyspace.Verdict("syn-1", "c3", name), up, clientv3.WithLease(live))      // c3 never registered
	put("checkers/old", `{"id":"old","region":"syn-1"}`, clientv3.WithLease(live))
	put("health/old/"+name, up, clientv3.WithLease(live))
	// The sentinel, last: a counted down on the other server of the node.
	put(keyspace.Checker("syn-1", "c4"), `{"id":"c4"}`, clientv3.WithLease(live))
	put(keyspace.Verdict("syn-1", "c4", s.Servers[sv+1].Name), `{"up":false,"reason":"refused"}`, clientv3.WithLease(live))
	av := h.eventually("the sentinel merged", 5*time.Second, s, func(av *avail.Availability) bool { return !av.Available[sv+1] })
	if av.Figures[sv].Measured || av.Why[sv] != "" {
		t.Errorf("%s: figures %+v why %q, want unchecked: no verdict on it counts", name, av.Figures[sv], av.Why[sv])
	}
	if w := rec.Containing(slog.LevelWarn, "layout before regions"); len(w) != 1 || !strings.Contains(w[0].String(), "checkers/old") {
		t.Errorf("warnings %v, want one about checkers/old", w)
	}
	// The same verdict under the checker's lease counts.
	put(keyspace.Verdict("syn-1", "c1", name), `{"up":false,"reason":"refused","load":{"cpu":0.5}}`, clientv3.WithLease(live))
	h.eventually("c1's verdict under its lease", 5*time.Second, s, func(av *avail.Availability) bool {
		return !av.Available[sv] && av.Figures[sv].Load.CPU == 0.5 && strings.Contains(av.Why[sv], "down by 1 of 1 checkers (c1: refused)")
	})
}

// TestProvinceWideChecker: a checker bound to the province (region
// center, keyspace.ProvinceRegion) speaks for the servers of every region,
// as a city's checker does for its own.
func TestProvinceWideChecker(t *testing.T) {
	s := twoRegions(t)
	a, b := serverIn(t, s, "syn-1"), serverIn(t, s, "syn-2")
	h := newHarness(t, health.MergerOptions{Rule: health.MergeOptimistic, Grace: time.Minute})
	p := h.publisherIn("central-1", keyspace.ProvinceRegion)
	p.Publish(report(s.Servers[a].Name, "central-1", false))
	p.Publish(report(s.Servers[b].Name, "central-1", false))
	h.eventually("both regions' servers down by the province's checker", 5*time.Second, s, func(av *avail.Availability) bool {
		return !av.Available[a] && !av.Available[b] && len(av.Checkers) == 1 && av.Checkers[0].Region == keyspace.ProvinceRegion
	})
	if keyspace.ProvinceRegion != topology.CenterName {
		t.Errorf("keyspace.ProvinceRegion %q is not topology.CenterName %q, the region no city may take", keyspace.ProvinceRegion, topology.CenterName)
	}
}
