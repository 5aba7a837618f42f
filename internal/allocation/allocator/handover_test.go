package allocator

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/fakeclock"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
)

// handoverViewers: two STBs in the north (zones a, b), one in the south (c).
var handoverViewers = []string{"100.64.1.1", "100.64.1.2", "100.64.2.3"}

// handover is a city's scheduler (rank 0, routed while routed holds) and a
// center's planner of the city (CenterRank) on one embedded etcd, both
// publishing their states there and reading time from clk.
type handover struct {
	etcd         *etcdtest.Etcd
	city, center *rig
	routed       atomic.Bool
	clk          *fakeclock.Clock
}

func newHandover(t *testing.T, city, center Config) *handover {
	t.Helper()
	e := etcdtest.Start(t)
	eng := engine(t)
	h := &handover{etcd: e, clk: fakeclock.New(time.Now())}
	h.routed.Store(true)
	city.States, city.Routed = e.Store(), h.routed.Load
	center.States, center.Rank = e.Store(), CenterRank
	h.city = newRig(t, e, eng, "hefei-1", city)
	h.center = newRig(t, e, eng, "center-1", center)
	h.city.a.now, h.center.a.now = h.clk.Now, h.clk.Now
	return h
}

// ask sends one request of every viewer to r, 100 ms after the last ones,
// viewer i asking for channel ch+i, and returns where each was sent.
func (h *handover) ask(t *testing.T, r *rig, ch int) map[string]string {
	t.Helper()
	h.clk.Advance(100 * time.Millisecond)
	got := map[string]string{}
	for i, ip := range handoverViewers {
		code, loc, body := r.get(ip, "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8?token=%s", ch+i, signed(t, fmt.Sprintf("u%d", i), 5000)), "")
		if code != 302 {
			t.Fatalf("%s: %d %s", r.a.cfg.Instance, code, body)
		}
		got[ip] = loc
	}
	return got
}

// TestHandoverToTheCenterAndBack: a city's scheduler plans its viewers
// and publishes its plan; its route is withdrawn (a drill) and the STBs
// reach the center, which plans them from the city's published plan; the
// route comes back and the city plans them from the center's. Nobody
// switches server or drops a rung at either handover, and the capacity
// goes with the planning.
func TestHandoverToTheCenterAndBack(t *testing.T) {
	h := newHandover(t, Config{ArrivalReserve: 0.1, StateInterval: time.Minute}, Config{ArrivalReserve: 0.1})
	city, center, e, eng := h.city, h.center, h.etcd, h.city.eng
	ctx := context.Background()
	viewers := handoverViewers
	placed := map[string]string{}
	ask := func(r *rig) map[string]string {
		t.Helper()
		return h.ask(t, r, 0)
	}
	noMoves := func(what string, r *rig) {
		t.Helper()
		st := r.a.Status()
		if st.PlannedN != len(viewers) || st.Switches != 0 || st.Drops != 0 || st.AtDesired != len(viewers) || st.Starved != 0 {
			t.Fatalf("%s: %s's plan moved viewers: %+v", what, r.a.cfg.Instance, st)
		}
		if got := ask(r); fmt.Sprint(got) != fmt.Sprint(placed) {
			t.Fatalf("%s: viewers were sent to\n%v\nbefore to\n%v", what, got, placed)
		}
	}

	// The city plans; its first active plan is published.
	ask(city)
	city.a.Solve(ctx)
	placed = ask(city)
	st, err := e.Store().AllocState(ctx, "hefei", "")
	if err != nil || st == nil || st.Instance != "hefei-1" || len(st.Sessions) != len(viewers) {
		t.Fatalf("the city's published state: %+v, %v", st, err)
	}

	// Drill: the route is withdrawn. The city goes idle at once (claims:
	// the reserve), publishing where its viewers are.
	h.routed.Store(false)
	city.a.Solve(ctx)
	if s := city.a.Status(); !s.Idle {
		t.Fatalf("the withdrawn city is not idle: %+v", s)
	}
	// The STBs reach the center: its first answers are the steer
	// decision's (no plan yet), then it plans from the city's state.
	ask(center)
	// What the center adopts: the sessions and the plan's prices, which
	// its first solve starts from.
	center.a.solveMu.Lock()
	center.a.adoptState(ctx, eng.Snapshot(), h.clk.Now(), true)
	seeded := len(center.a.seeds["live"])
	center.a.solveMu.Unlock()
	if seeded != 3 {
		t.Fatalf("the center adopted prices for %d of live's 3 servers", seeded)
	}
	center.a.Solve(ctx)
	if len(center.a.seeds) != 0 {
		t.Fatalf("the adopted prices were not used: %v", center.a.seeds)
	}
	noMoves("the center took over", center)
	if s := center.a.Summary(); s.HeldKbps < 27000-1e-6 {
		t.Fatalf("the center holds %.0f of 30000 kbps while the city is idle", s.HeldKbps)
	}
	center.a.Solve(ctx)
	noMoves("the center's second plan", center)

	// The route is back: the city's STBs return; it plans them from the
	// center's state, and the center yields at its next solve.
	h.routed.Store(true)
	ask(city)
	city.a.Solve(ctx)
	noMoves("the city took them back", city)
	center.a.Solve(ctx)
	if s := center.a.Status(); !s.Idle {
		t.Fatalf("the center did not yield to the city: %+v", s)
	}
	wait.ForErr(t, "the city holds its capacity again", 10*time.Second, func() error {
		city.a.Solve(ctx)
		if s := city.a.Summary(); s.HeldKbps < 27000-1e-6 {
			return fmt.Errorf("held %.0f kbps", s.HeldKbps)
		}
		return nil
	})
	noMoves("the city's next plan", city)
	peers, _, err := (&store.ClaimBoard{Store: e.Store(), Region: "hefei", Instance: "x"}).Peers(ctx)
	if err != nil || !peers["center-1"].Idle || peers["center-1"].Rank != CenterRank {
		t.Fatalf("the center's claims after the handback: %+v %v", peers["center-1"], err)
	}
	// A center's planner (NewRegions sets it) claims nothing while idle.
	center.a.cfg.IdleNoReserve = true
	center.a.Solve(ctx)
	peers, _, err = (&store.ClaimBoard{Store: e.Store(), Region: "hefei", Instance: "x"}).Peers(ctx)
	for name, c := range peers["center-1"].Servers {
		if err != nil || c.BandwidthKbps != 0 {
			t.Fatalf("the idle center claims %.0f kbps of %s (%v)", c.BandwidthKbps, name, err)
		}
	}
}

// The center's planners start with a city's first STB, plan from then on,
// and stop once a city scheduler takes the STBs back.
func TestRegionsStartAndStop(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	v, err := token.NewVerifier([]token.Key{key1, key2}, token.Options{Leeway: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	gate, err := NewGate(AuthOptional, v, DefaultProfile(), nil)
	if err != nil {
		t.Fatal(err)
	}
	boards := func(region string) Board {
		return &store.ClaimBoard{Store: e.Store(), Region: region, Instance: "center-1", TTL: 10 * time.Second}
	}
	rs := NewRegions(Config{Instance: "center-1", Period: time.Second, Gate: gate, States: e.Store()}, boards, func() *steer.Engine { return eng }, prometheus.NewRegistry(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rs.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := &rig{a: nil, eng: eng, srv: httpd.New(httpd.Config{Allocator: rs, InstanceID: "center-1"}, func() *steer.Engine { return eng }, nil, nil)}
	ask := func() {
		t.Helper()
		for i := range 3 {
			if code, _, body := srv.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8?token=%s", i, signed(t, fmt.Sprintf("u%d", i), 5000)), ""); code != 302 {
				t.Fatalf("%d %s", code, body)
			}
		}
	}
	if len(rs.Summaries()) != 0 {
		t.Fatal("a planner before any STB")
	}
	wait.ForErr(t, "the center plans hefei's viewers", 15*time.Second, func() error {
		ask()
		s := rs.Summaries()
		if len(s) != 1 || s[0].Region != "hefei" || s[0].Planned != 3 || s[0].Idle {
			return fmt.Errorf("%+v", s)
		}
		return nil
	})
	// hefei's scheduler takes the STBs: the center yields and stops.
	city := newRig(t, e, eng, "hefei-1", Config{States: e.Store()})
	wait.ForErr(t, "the center stops planning hefei", 15*time.Second, func() error {
		for i := range 3 {
			city.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8?token=%s", i, signed(t, fmt.Sprintf("u%d", i), 5000)), "")
		}
		city.a.Solve(context.Background())
		if s := rs.Summaries(); len(s) != 0 {
			return fmt.Errorf("still planning: %+v", s)
		}
		return nil
	})
	if st := city.a.Status(); st.PlannedN != 3 || st.Switches != 0 {
		t.Fatalf("the city's plan after the center: %+v", st)
	}
}

// TestStandInPublishesEveryPeriod: while the center stands in for a city
// whose scheduler is up (idle: its route is withdrawn), it publishes every
// periodic plan, so that the city, taking its STBs back, starts from where
// they are now: viewers who zapped during the drill keep the center's
// servers, and the sessions they left are not planned. The city, ranked
// first, publishes only at its state interval.
func TestStandInPublishesEveryPeriod(t *testing.T) {
	const period = 10 * time.Second
	h := newHandover(t, Config{Period: period, StateInterval: time.Minute}, Config{Period: period})
	city, center, e, clk := h.city, h.center, h.etcd, h.clk
	ctx := context.Background()
	ask := func(r *rig, channel int) map[string]string {
		t.Helper()
		return h.ask(t, r, channel)
	}
	published := func(by string) (time.Time, []string) {
		t.Helper()
		except := "center-1"
		if by == except {
			except = "hefei-1"
		}
		st, err := e.Store().AllocState(ctx, "hefei", except)
		if err != nil || st == nil || st.Instance != by {
			t.Fatalf("%s's published state: %+v, %v", by, st, err)
		}
		var chans []string
		for _, s := range st.Sessions {
			chans = append(chans, s.Channel)
		}
		slices.Sort(chans)
		return st.Made, chans
	}

	ask(city, 0)
	city.a.Solve(ctx)
	ask(city, 0)
	h.routed.Store(false)
	city.a.Solve(ctx) // idle: it publishes, and its claims stay up
	cityMade, _ := published("hefei-1")

	ask(center, 0)
	center.a.Solve(ctx)
	ask(center, 0)
	// Two periods of the drill; the viewers zap in each.
	var where map[string]string
	for _, ch := range []int{10, 20} {
		ask(center, ch)
		clk.Advance(period)
		center.a.Solve(ctx)
		made, chans := published("center-1")
		if want := []string{fmt.Sprintf("ch%d", ch), fmt.Sprintf("ch%d", ch+1), fmt.Sprintf("ch%d", ch+2)}; !made.Equal(clk.Now()) || fmt.Sprint(chans) != fmt.Sprint(want) {
			t.Fatalf("the center's state after a period standing in: made %v (plan at %v), channels %v, want %v", made, clk.Now(), chans, want)
		}
		where = ask(center, ch)
	}

	// The route is back: the city plans the viewers where they are.
	h.routed.Store(true)
	ask(city, 20) // before its first plan: the steer decision
	city.a.Solve(ctx)
	if st := city.a.Status(); st.PlannedN != len(handoverViewers) || st.Switches != 0 {
		t.Fatalf("the city's first plan after the drill: %+v", st)
	}
	if got := ask(city, 20); fmt.Sprint(got) != fmt.Sprint(where) {
		t.Fatalf("after the drill the city sent the viewers to\n%v\nthe center to\n%v", got, where)
	}
	clk.Advance(period)
	city.a.Solve(ctx)
	if made, _ := published("hefei-1"); !made.Equal(cityMade) {
		t.Fatalf("the city, ranked first, published at %v within its state interval of its last at %v", made, cityMade)
	}
}

// TestHandOnPublishesThePlanNow: a stopping scheduler hands its plan on
// before its route is withdrawn, however recently it last published: the
// state in etcd then holds every viewer the plan has, not the few of its
// first plan (state_interval later).
func TestHandOnPublishesThePlanNow(t *testing.T) {
	h := newHandover(t, Config{StateInterval: time.Hour}, Config{})
	city, ctx := h.city, context.Background()
	h.ask(t, city, 0)
	city.a.Solve(ctx) // the first active plan is published
	viewers := []string{"100.64.1.9", "100.64.2.9"}
	for i, ip := range viewers { // two more viewers, planned a period later
		if code, _, body := city.get(ip, "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8?token=%s", 7+i, signed(t, fmt.Sprintf("late%d", i), 5000)), ""); code != 302 {
			t.Fatalf("%d %s", code, body)
		}
	}
	h.clk.Advance(time.Second)
	city.a.Solve(ctx)
	sessions := func() int {
		st, err := h.etcd.Store().AllocState(ctx, "hefei", "")
		if err != nil || st == nil {
			t.Fatalf("state: %v %v", st, err)
		}
		return len(st.Sessions)
	}
	if n := sessions(); n != len(handoverViewers) {
		t.Fatalf("published before the hand-on: %d sessions, want the first plan's %d (state_interval not over)", n, len(handoverViewers))
	}
	city.a.HandOn(ctx)
	if n := sessions(); n != len(handoverViewers)+len(viewers) {
		t.Errorf("handed on: %d sessions, want %d", n, len(handoverViewers)+len(viewers))
	}
	// Idle (the route withdrawn, the plan published): nothing more to hand on.
	h.routed.Store(false)
	city.a.Solve(ctx)
	before, _ := h.etcd.Store().AllocState(ctx, "hefei", "")
	city.a.HandOn(ctx)
	if after, _ := h.etcd.Store().AllocState(ctx, "hefei", ""); !after.Made.Equal(before.Made) {
		t.Errorf("an idle planner published again: %v then %v", before.Made, after.Made)
	}
}

// TestHandOnGivesUpOnALongSolve: a solve holding the planner past the
// hand-on's context does not hold up the withdrawal the hand-on runs
// before (TestHandOnPublishesThePlanNow: what it publishes otherwise).
func TestHandOnGivesUpOnALongSolve(t *testing.T) {
	h := newHandover(t, Config{StateInterval: time.Hour}, Config{})
	city := h.city
	h.ask(t, city, 0)
	city.a.Solve(context.Background())
	city.a.solveMu.Lock() // a solve under way
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { city.a.HandOn(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("HandOn still waits for the solve 30 s after its context ended")
	}
	city.a.solveMu.Unlock()
}
