package outlier

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/anysched/anysched/internal/testbed/wait"
)

func TestReask(t *testing.T) {
	type ask struct {
		client, content uint64
		server          int32
		after           time.Duration
	}
	cases := []struct {
		name   string
		asks   []ask
		failed []uint64 // failures of servers 0..2 afterwards
	}{
		{"within window is a failure of the first server", []ask{{1, 10, 0, 0}, {1, 10, 1, 3 * time.Second}}, []uint64{1, 0, 0}},
		{"just within the window", []ask{{1, 10, 0, 0}, {1, 10, 1, 10 * time.Second}}, []uint64{1, 0, 0}},
		{"after the window is not", []ask{{1, 10, 0, 0}, {1, 10, 1, 11 * time.Second}}, []uint64{0, 0, 0}},
		{"different content is not", []ask{{1, 10, 0, 0}, {1, 11, 1, time.Second}}, []uint64{0, 0, 0}},
		{"different client is not", []ask{{1, 10, 0, 0}, {2, 10, 1, time.Second}}, []uint64{0, 0, 0}},
		{"swapped keys are another pair", []ask{{1, 10, 0, 0}, {10, 1, 1, time.Second}}, []uint64{0, 0, 0}},
		{"the same instant is one request seen twice", []ask{{1, 10, 0, 0}, {1, 10, 1, 0}}, []uint64{0, 0, 0}},
		{"same server again still failed", []ask{{1, 10, 2, 0}, {1, 10, 2, time.Second}}, []uint64{0, 0, 1}},
		{"a chain fails each answer", []ask{{1, 10, 0, 0}, {1, 10, 1, time.Second}, {1, 10, 2, 2 * time.Second}}, []uint64{1, 1, 0}},
		{"the window restarts at each answer", []ask{{1, 10, 0, 0}, {1, 10, 1, 8 * time.Second}, {1, 10, 2, 16 * time.Second}}, []uint64{1, 1, 0}},
		{"an earlier clock is not a re-ask", []ask{{1, 10, 0, time.Second}, {1, 10, 1, 0}}, []uint64{0, 0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{}, nodesOf(3), names(3))
			for _, a := range tc.asks {
				h.d.Observe(a.client, a.content, a.server, t0.Add(a.after).UnixNano())
			}
			var want uint64
			for s, w := range tc.failed {
				if got := h.failures(int32(s)); got != w {
					t.Errorf("server %d: %d failures, want %d", s, got, w)
				}
				want += w
			}
			if got := h.counter("reasks"); got != float64(want) {
				t.Errorf("reasks_total %v, want %d", got, want)
			}
		})
	}
}

func TestObserveIgnoresUnknownServers(t *testing.T) {
	h := newHarness(t, Config{}, nodesOf(2), names(2))
	for _, s := range []int32{-1, 2, 1 << 20} {
		h.d.Observe(1, 1, s, t0.UnixNano())
		h.d.Observe(1, 1, s, t0.Add(time.Second).UnixNano())
		h.d.Report(s, 10, 10)
	}
	if h.counter("reasks") != 0 || h.failures(0)+h.failures(1) != 0 {
		t.Error("requests to unknown servers were counted")
	}
}

func TestDisabled(t *testing.T) {
	d, err := New(Config{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.SetServers(nodesOf(2), names(2))
	for i := range 100 {
		d.Observe(1, 1, 0, t0.Add(time.Duration(i)*time.Second/10).UnixNano())
	}
	d.Report(0, 100, 100)
	if d.Evaluate(t0.Add(time.Minute)) || len(d.Ejected()) != 0 {
		t.Error("a disabled detector ejected")
	}
}

func TestConsecutive(t *testing.T) {
	// min_requests is out of reach: only the consecutive rule can eject.
	cfg := Config{MinRequests: 1000}
	cases := []struct {
		name string
		// seq: f = a request re-asked, o = one that held, in the order
		// sent to server 0.
		seq  string
		want bool
	}{
		{"five in a row", "fffff", true},
		{"four in a row", "ffff", false},
		{"after successes", "ooooofffff", true},
		{"broken by a success", "ffffofff", false},
		{"broken twice", "ffoffoff", false},
		{"six in a row", "offffffo", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, cfg, nodesOf(3), names(3))
			h.d.Evaluate(t0)
			at := t0
			for _, r := range tc.seq {
				at = at.Add(10 * time.Millisecond)
				if r == 'f' {
					h.fail(0, 1, at)
				} else {
					h.ok(0, at)
				}
			}
			changed := h.d.Evaluate(t0.Add(5 * time.Second))
			if got := h.ejected()[0]; got != tc.want || changed != tc.want {
				t.Fatalf("ejected %v (changed %v), want %v", got, changed, tc.want)
			}
			if !tc.want {
				return
			}
			e := h.d.Ejected()
			n := strings.Count(tc.seq, "f")
			if len(e) != 1 || e[0].Name != "a" || e[0].Count != 1 || !strings.HasSuffix(e[0].Reason, "consecutive re-asks") {
				t.Fatalf("Ejected() = %+v", e)
			}
			if n == 5 && e[0].Reason != "5 consecutive re-asks" {
				t.Errorf("reason %q", e[0].Reason)
			}
			if got := h.counter("ejections", "consecutive"); got != 1 {
				t.Errorf("consecutive ejections %v", got)
			}
			if !strings.Contains(h.d.Why(0), "consecutive re-asks") {
				t.Errorf("Why(0) = %q", h.d.Why(0))
			}
		})
	}
}

// TestConsecutiveOutOfOrder: a dead server's re-asks come back in any
// order (players time out differently) and still make a run.
func TestConsecutiveOutOfOrder(t *testing.T) {
	h := newHarness(t, Config{MinRequests: 1000}, nodesOf(2), names(2))
	var clients []uint64
	for i := range 5 {
		c := h.fresh()
		clients = append(clients, c)
		h.d.Observe(c, 7, 0, t0.Add(time.Duration(i)*time.Millisecond).UnixNano())
	}
	for i, j := range []int{3, 0, 4, 2, 1} {
		h.d.Observe(clients[j], 7, 1, t0.Add(time.Second+time.Duration(i)*time.Millisecond).UnixNano())
	}
	if h.d.Evaluate(t0.Add(2 * time.Second)); !h.ejected()[0] {
		t.Fatal("not ejected")
	}
}

// TestConsecutiveIgnoresNoise: re-asks of a healthy server that are
// noise (zapping back, boxes behind one address) are independent of the
// server; 5% of them must not make it look dead, however long it runs.
func TestConsecutiveIgnoresNoise(t *testing.T) {
	h := newHarness(t, Config{MinRequests: 1 << 40}, nodesOf(2), names(2))
	rng := uint64(42)
	at := t0
	for i := range 200_000 {
		rng = rng*6364136223846793005 + 1442695040888963407
		at = at.Add(10 * time.Millisecond) // 100 requests a second
		if rng>>33%100 < 5 {
			h.fail(0, 1, at)
		} else {
			h.ok(0, at)
		}
		if i%100 == 99 {
			h.d.Evaluate(at)
		}
	}
	if f := h.failures(0); f < 9000 {
		t.Fatalf("only %d failures: the noise was not generated", f)
	}
	if e := h.d.Ejected(); len(e) != 0 {
		t.Fatalf("ejected on noise: %+v", e)
	}
}

func TestRate(t *testing.T) {
	cases := []struct {
		name         string
		cfg          Config
		held, failed int
		want         bool
		reasonPrefix string
	}{
		{"half of 40", Config{}, 20, 20, true, "failure rate 50% (20/40) over 5s"},
		{"below the rate", Config{}, 21, 19, false, ""},
		{"below min_requests", Config{MinRequests: 50}, 20, 20, false, ""},
		{"at min_requests", Config{MinRequests: 10}, 5, 5, true, "failure rate 50% (5/10)"},
		{"lower rate configured", Config{FailureRate: 0.2}, 40, 10, true, "failure rate 20% (10/50)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg, nodesOf(3), names(3))
			h.d.Evaluate(t0)
			at := t0
			// Interleaved so that no run of consecutive failures forms.
			for i := range max(tc.held, tc.failed) {
				at = at.Add(10 * time.Millisecond)
				if i < tc.held {
					h.ok(0, at)
				}
				if i < tc.failed {
					h.fail(0, 1, at)
				}
			}
			h.d.Evaluate(t0.Add(5 * time.Second))
			got := h.ejected()[0]
			if got != tc.want {
				t.Fatalf("ejected %v, want %v (Why %q)", got, tc.want, h.d.Why(0))
			}
			if tc.want {
				if r := h.d.Ejected()[0].Reason; !strings.HasPrefix(r, tc.reasonPrefix) {
					t.Errorf("reason %q, want %q...", r, tc.reasonPrefix)
				}
				if h.counter("ejections", "rate") != 1 {
					t.Error("rate ejection not counted")
				}
			}
		})
	}
}

// TestRateWindow: failures older than the interval no longer count.
func TestRateWindow(t *testing.T) {
	h := newHarness(t, Config{ConsecutiveFailures: 32}, nodesOf(2), names(2))
	h.d.Evaluate(t0)
	// 15 failures: under min_requests.
	for i := range 15 {
		h.fail(0, 1, t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	for s := 3; s <= 15; s++ {
		h.d.Evaluate(t0.Add(time.Duration(s) * time.Second))
	}
	// 20 held, 5 failed: 20% of 25. With the first 15 it would be 50% of 40.
	for i := range 20 {
		at := t0.Add(16*time.Second + time.Duration(i)*10*time.Millisecond)
		h.ok(0, at)
		if i%4 == 0 {
			h.fail(0, 1, at)
		}
	}
	for s := 19; s <= 25; s++ {
		h.d.Evaluate(t0.Add(time.Duration(s) * time.Second))
		if h.ejected()[0] {
			t.Fatalf("ejected at %ds on failures from before the interval: %s", s, h.d.Why(0))
		}
	}
}

func TestReportFeedsRate(t *testing.T) {
	cases := []struct {
		name       string
		reports    [][2]int64
		want       bool
		wantReason string
	}{
		{"errors over the rate", [][2]int64{{20, 15}, {20, 15}}, true, "edge reported 30 errors in 40 requests over 5s"},
		{"errors under the rate", [][2]int64{{100, 10}}, false, ""},
		{"too few requests", [][2]int64{{10, 10}}, false, ""},
		{"negative counts ignored", [][2]int64{{-100, 50}, {10, -5}}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{}, nodesOf(2), names(2))
			h.d.Evaluate(t0)
			for _, r := range tc.reports {
				h.d.Report(1, r[0], r[1])
			}
			h.d.Evaluate(t0.Add(5 * time.Second))
			if got := h.ejected()[1]; got != tc.want {
				t.Fatalf("ejected %v, want %v", got, tc.want)
			}
			if tc.want {
				if r := h.d.Ejected()[0].Reason; r != tc.wantReason {
					t.Errorf("reason %q, want %q", r, tc.wantReason)
				}
			}
		})
	}
}

// ejectOnce makes server 0 fail five times in a row at now and evaluates.
func (h *harness) ejectOnce(now time.Time) Ejection {
	h.t.Helper()
	for i := range 5 {
		h.fail(0, 1, now.Add(-3*time.Second+time.Duration(i)*time.Millisecond))
	}
	h.d.Evaluate(now)
	e := h.d.Ejected()
	if len(e) != 1 || e[0].Server != 0 {
		h.t.Fatalf("at %v: ejected %+v, want server 0", now.Sub(t0), e)
	}
	return e[0]
}

func TestEjectionGrows(t *testing.T) {
	h := newHarness(t, Config{}, nodesOf(2), names(2))
	now := t0.Add(time.Minute)
	want := []time.Duration{30, 60, 90, 120, 150, 180, 210, 240, 270, 300, 300, 300}
	for n, w := range want {
		e := h.ejectOnce(now)
		if got := e.Until.Sub(now); got != w*time.Second || e.Count != n+1 {
			t.Fatalf("ejection %d: for %v (count %d), want %v", n+1, got, e.Count, w*time.Second)
		}
		// Not back a moment early; back at the end.
		if h.d.Evaluate(e.Until.Add(-time.Millisecond)) || !h.ejected()[0] {
			t.Fatalf("ejection %d ended early", n+1)
		}
		if !h.d.Evaluate(e.Until) || h.ejected()[0] {
			t.Fatalf("ejection %d did not end", n+1)
		}
		now = e.Until.Add(5 * time.Second)
	}
	if h.counter("ejected") != 0 || h.counter("ejections", "consecutive") != float64(len(want)) {
		t.Errorf("metrics: ejected %v, ejections %v", h.counter("ejected"), h.counter("ejections", "consecutive"))
	}
}

func TestEjectionCountDecays(t *testing.T) {
	cases := []struct {
		back      time.Duration // after the first ejection ended, before failing again
		wantCount int
	}{
		{time.Minute, 2},
		{4*time.Minute + 59*time.Second, 2},
		{5 * time.Minute, 1},
		{time.Hour, 1},
	}
	for _, tc := range cases {
		t.Run(tc.back.String(), func(t *testing.T) {
			h := newHarness(t, Config{}, nodesOf(2), names(2))
			e := h.ejectOnce(t0.Add(time.Minute))
			h.d.Evaluate(e.Until)
			// Evaluations in between, as Run would make them.
			for at := e.Until; at.Before(e.Until.Add(tc.back)); at = at.Add(10 * time.Second) {
				h.d.Evaluate(at)
			}
			e2 := h.ejectOnce(e.Until.Add(tc.back))
			if e2.Count != tc.wantCount || e2.Until.Sub(e.Until.Add(tc.back)) != time.Duration(tc.wantCount)*30*time.Second {
				t.Fatalf("second ejection %+v, want count %d", e2, tc.wantCount)
			}
		})
	}
}

// TestReturnIsClean: re-asks arriving during an ejection, of answers sent
// before it, do not eject the server again when it returns.
func TestReturnIsClean(t *testing.T) {
	h := newHarness(t, Config{}, nodesOf(2), names(2))
	h.d.Evaluate(t0)
	var late []uint64
	for i := range 30 {
		c := h.fresh()
		h.d.Observe(c, 7, 0, t0.Add(time.Duration(i)*time.Millisecond).UnixNano())
		late = append(late, c)
	}
	for _, c := range late[:5] {
		h.d.Observe(c, 7, 1, t0.Add(time.Second).UnixNano())
	}
	h.d.Evaluate(t0.Add(2 * time.Second))
	if !h.ejected()[0] {
		t.Fatal("not ejected")
	}
	for _, c := range late[5:] {
		h.d.Observe(c, 7, 1, t0.Add(5*time.Second).UnixNano())
	}
	for s := 3; s <= 60; s++ {
		h.d.Evaluate(t0.Add(time.Duration(s) * time.Second))
	}
	if h.ejected()[0] {
		t.Fatalf("ejected again on its past: %s", h.d.Why(0))
	}
}

func TestMaxEjectedShare(t *testing.T) {
	cases := []struct {
		name    string
		size    int
		failing int
		share   float64
		want    int
	}{
		{"two servers, both failing: one out", 2, 2, 0.5, 1},
		{"one server: stays", 1, 1, 0.5, 0},
		{"one server, share 1: stays", 1, 1, 1, 0},
		{"share 1 keeps one", 3, 3, 1, 2},
		{"four, three failing: two out", 4, 3, 0.5, 2},
		{"three, share 0.5 rounds down", 3, 3, 0.5, 1},
		{"ten at 0.3", 10, 10, 0.3, 3},
		{"under the share", 10, 2, 0.5, 2},
		{"share too small for the node", 2, 2, 0.3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A second node whose failing server must not use the first's share.
			h := newHarness(t, Config{MaxEjectedShare: tc.share}, nodesOf(tc.size, 4), names(tc.size+4))
			other := int32(tc.size)
			for s := range tc.failing {
				for i := range 5 {
					h.fail(int32(s), other+1, t0.Add(time.Duration(i*10+s)*time.Millisecond))
				}
			}
			for i := range 5 {
				h.fail(other, other+1, t0.Add(time.Duration(i)*time.Millisecond))
			}
			h.d.Evaluate(t0.Add(5 * time.Second))
			set := h.ejected()
			if got := count(set[:tc.size]); got != tc.want {
				t.Fatalf("%d ejected in the node, want %d", got, tc.want)
			}
			if !set[other] {
				t.Error("the other node's failing server was not ejected")
			}
			if skipped := tc.failing - tc.want; h.counter("skipped") != float64(skipped) {
				t.Errorf("skipped %v, want %d", h.counter("skipped"), skipped)
			}
			for s := range tc.failing {
				if !set[s] && !strings.Contains(h.d.Why(int32(s)), "max_ejected_share") {
					t.Errorf("Why(%d) = %q", s, h.d.Why(int32(s)))
				}
			}
			// Counted once per episode, not once per evaluation.
			h.d.Evaluate(t0.Add(6 * time.Second))
			if skipped := tc.failing - tc.want; h.counter("skipped") != float64(skipped) {
				t.Errorf("skipped counted again: %v", h.counter("skipped"))
			}
		})
	}
}

// TestShareFreedOnReturn: a server left in for the share is ejected once
// the share frees up, if it still fails.
func TestShareFreedOnReturn(t *testing.T) {
	h := newHarness(t, Config{MinRequests: 1000}, nodesOf(2, 1), names(3))
	for s := range int32(2) {
		for i := range 5 {
			h.fail(s, 2, t0.Add(time.Duration(int(s)*10+i)*time.Millisecond))
		}
	}
	h.d.Evaluate(t0.Add(3 * time.Second))
	if got := h.ejected(); !got[0] || got[1] {
		t.Fatalf("ejected %v, want [true false ...]", got)
	}
	// 0 returns at 33s; 1's run is still there.
	h.d.Evaluate(t0.Add(33 * time.Second))
	if got := h.ejected(); got[0] || !got[1] {
		t.Fatalf("after 0 returned: ejected %v, want [false true ...]", got)
	}
}

func TestSetServersKeepsStateByName(t *testing.T) {
	h := newHarness(t, Config{MinRequests: 1000}, nodesOf(4), []string{"a", "b", "c", "d"})
	// Eject b.
	for i := range 5 {
		h.fail(1, 0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	h.d.Evaluate(t0.Add(3 * time.Second))
	// c: three failures in a row, and one more answer sent, not yet
	// re-asked, before the re-index.
	for i := range 3 {
		h.fail(2, 0, t0.Add(4*time.Second+time.Duration(i)*time.Millisecond))
	}
	pending := h.fresh()
	h.d.Observe(pending, 9, 2, t0.Add(5*time.Second).UnixNano())

	h.d.SetServers(nodesOf(4), []string{"c", "e", "b", "a"}) // d left, e joined
	if got, want := h.ejected(), []bool{false, false, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("EjectedSet after re-index %v, want %v", got, want)
	}
	if e := h.d.Ejected(); len(e) != 1 || e[0].Name != "b" || e[0].Server != 2 {
		t.Fatalf("Ejected() = %+v", e)
	}
	// The pending answer (old index 2) is re-asked under the new table: c,
	// now index 0, failed it, and that is its fourth in a row.
	h.d.Observe(pending, 9, 1, t0.Add(6*time.Second).UnixNano())
	if h.failures(0) != 4 {
		t.Fatalf("c has %d failures, want 4", h.failures(0))
	}
	h.fail(0, 1, t0.Add(7*time.Second))
	h.d.Evaluate(t0.Add(10 * time.Second))
	if got := h.ejected(); !got[0] {
		t.Fatalf("c not ejected after five in a row across the re-index: %v", got)
	}
	// Same servers again: nothing changes, no new table.
	tb := h.d.table.Load()
	h.d.SetServers(nodesOf(4), []string{"c", "e", "b", "a"})
	if h.d.table.Load() != tb {
		t.Error("an unchanged topology swapped the table")
	}
	// A server that left and came back starts clean.
	h.d.SetServers(nodesOf(3), []string{"a", "c", "e"})
	h.d.SetServers(nodesOf(4), []string{"a", "c", "e", "b"})
	if got := h.ejected(); got[3] {
		t.Error("b kept its ejection after leaving the topology")
	}
}

func TestSetServersShrinkReturnsOverShare(t *testing.T) {
	h := newHarness(t, Config{MaxEjectedShare: 1}, nodesOf(4), names(4))
	for s := range int32(3) {
		for i := range 5 {
			h.fail(s, 3, t0.Add(time.Duration(int(s)*10+i)*time.Millisecond))
		}
	}
	h.d.Evaluate(t0.Add(3 * time.Second))
	if n := count(h.ejected()); n != 3 {
		t.Fatalf("%d ejected, want 3", n)
	}
	h.d.SetServers(nodesOf(2), []string{"a", "b"}) // both ejected, none left in
	if !h.d.Evaluate(t0.Add(4 * time.Second)) {
		t.Error("Evaluate did not report the change")
	}
	if n := count(h.ejected()); n != 1 {
		t.Fatalf("%d of 2 ejected, want 1", n)
	}
}

// TestConcurrent runs the hot path against evaluation and re-indexing;
// it is meant for -race.
func TestConcurrent(t *testing.T) {
	h := newHarness(t, Config{Slots: 1 << 8}, nodesOf(3, 3), names(6))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := uint64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				at := t0.Add(time.Duration(i) * time.Millisecond).UnixNano()
				h.d.Observe(i%50, uint64(g), int32(i%7), at)
				if i%100 == 0 {
					h.d.Report(int32(i%6), 10, int64(i%11))
				}
			}
		})
	}
	wg.Go(func() {
		orders := [][]string{names(6), {"f", "e", "d", "c", "b", "a"}, {"a", "b", "x"}}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			o := orders[i%len(orders)]
			h.d.SetServers(nodesOf(len(o)), o)
		}
	})
	for i := range 2000 {
		h.d.Evaluate(t0.Add(time.Duration(i) * 100 * time.Millisecond))
		h.d.Ejected()
		h.d.EjectedSet()
		h.d.Why(int32(i % 6))
	}
	close(stop)
	wg.Wait()
}

func TestRun(t *testing.T) {
	h := newHarness(t, Config{}, nodesOf(2), names(2))
	now := time.Now()
	for i := range 5 {
		c := h.fresh()
		h.d.Observe(c, 1, 0, now.Add(time.Duration(i)*time.Millisecond).UnixNano())
		h.d.Observe(c, 1, 1, now.Add(time.Second).UnixNano())
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	go func() {
		h.d.Run(ctx, 5*time.Millisecond, func() { mu.Lock(); calls++; mu.Unlock() })
		close(done)
	}()
	wait.For(t, "onChange after the ejection", wait.DefaultTimeout, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls > 0
	})
	if !h.ejected()[0] {
		t.Error("onChange called without an ejection")
	}
	cancel()
	<-done
}

func TestNewRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := New(Config{Enabled: true}, reg, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// ejections{consecutive,rate}, ejected, reasks, skipped
	if n != 5 {
		t.Errorf("%d series, want 5", n)
	}
	if _, err := New(Config{Slots: 3}, reg, nil); err == nil || !strings.Contains(err.Error(), "slots") {
		t.Errorf("New with a bad config: %v", err)
	}
}

// TestSetServersNodesOnly: servers moving between nodes without changing
// index keep the table, and the share follows the new nodes.
func TestSetServersNodesOnly(t *testing.T) {
	h := newHarness(t, Config{MinRequests: 1000}, nodesOf(1, 1, 2), names(4))
	for s := range int32(2) {
		for i := range 5 {
			h.fail(s, 3, t0.Add(time.Duration(int(s)*10+i)*time.Millisecond))
		}
	}
	tb := h.d.table.Load()
	h.d.SetServers([]int32{0, 0, 1, 1}, names(4)) // a and b now share a node
	if h.d.table.Load() != tb {
		t.Error("a node change without re-indexing swapped the table")
	}
	h.d.Evaluate(t0.Add(3 * time.Second))
	if got := h.ejected(); !got[0] || got[1] {
		t.Fatalf("ejected %v, want only a (b shares its node now)", got)
	}
}
