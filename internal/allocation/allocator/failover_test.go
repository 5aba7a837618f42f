package allocator

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestCapacityFollowsTheSTBs plays an operator's worst minute in a city
// with a primary (rank 0) and a standby (rank 1): the primary freezes and
// the standby takes the STBs and the capacity; the primary comes back,
// wins the route, and etcd loses quorum before the standby gave anything
// back. The capacity must follow the STBs: an idle instance keeps only
// its reserve, and without etcd the instance ranked first plans on the
// whole city.
func TestCapacityFollowsTheSTBs(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	clk := time.Now()
	now := func() time.Time { return clk }
	ra := newRig(t, e, eng, "hefei-1", Config{Rank: 0, ArrivalReserve: 0.1})
	rb := newRig(t, e, eng, "hefei-2", Config{Rank: 1, ArrivalReserve: 0.1})
	ra.a.now, rb.a.now = now, now
	ctx := context.Background()
	// Two viewers in the north zone (servers a and b, 10 Mbps each, 10%
	// held for arrivals) wanting 5 Mbps: they fit on the city's servers.
	ask := func(r *rig) {
		t.Helper()
		for i := range 2 {
			if code, _, body := r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", "/x/index.m3u8?token="+signed(t, fmt.Sprintf("u%d", i), 5000), ""); code != 302 {
				t.Fatalf("%s: %d %s", r.a.cfg.Instance, code, body)
			}
		}
	}
	claimsOf := func(id string) store.Claims {
		t.Helper()
		peers, _, err := (&store.ClaimBoard{Store: e.Store(), Region: "hefei", Instance: "nobody"}).Peers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return peers[id]
	}
	served := func(r *rig, what string) Status {
		t.Helper()
		st := r.a.Status()
		if st.PlannedN != 2 || st.Fallback != 0 || st.AtDesired != 2 || st.Starved != 0 {
			t.Fatalf("%s: %s should plan its 2 viewers at 5 Mbps on the city's servers: %+v", what, r.a.cfg.Instance, st)
		}
		return st
	}

	// 1. The primary takes the STBs; the idle standby holds its reserve
	// (10% of each server) and nothing else.
	ask(ra)
	ra.a.Solve(ctx)
	rb.a.Solve(ctx)
	ra.a.Solve(ctx)
	served(ra, "normal")
	if st := rb.a.Status(); !st.Idle || st.PlannedN != 0 {
		t.Fatalf("the standby that saw no STB is not idle: %+v", st)
	}
	for name, c := range claimsOf("hefei-2").Servers {
		if c.BandwidthKbps > 1000+1e-6 {
			t.Errorf("the idle standby claims %.0f kbps of %s (reserve: 1000)", c.BandwidthKbps, name)
		}
	}
	if c := claimsOf("hefei-2"); !c.Idle || c.Rank != 1 {
		t.Errorf("the standby's claims say idle %t rank %d", c.Idle, c.Rank)
	}
	if held := ra.a.Status().HeldKbps; held < 27000-1e-6 {
		t.Errorf("the primary holds %.0f kbps of 30000 beside an idle standby", held)
	}

	// 2. The primary freezes: the standby gets the STBs, and the
	// capacity once the primary's claims are older than two periods and
	// a second (its lease has not expired yet).
	clk = clk.Add(30 * time.Second)
	ask(rb)
	rb.a.Solve(ctx)
	served(rb, "primary frozen")
	if c := claimsOf("hefei-1"); c.Servers == nil {
		t.Fatal("the frozen primary's claims are gone: the test no longer shows they are passed over")
	}

	// 3. The primary is back and wins the route: the standby's claims are
	// not in its way (it ranks after the primary), and the standby yields
	// at its next solve although its last STB is recent.
	clk = clk.Add(time.Second)
	ask(ra)
	ra.a.Solve(ctx)
	served(ra, "primary back")
	rb.a.Solve(ctx)
	if st := rb.a.Status(); !st.Idle || st.PlannedN != 0 {
		t.Fatalf("the standby did not yield to the primary: %+v", st)
	}
	if c := claimsOf("hefei-2"); !c.Idle {
		t.Fatalf("the yielding standby's claims: %+v", c)
	}
	// The standby ranked after the primary cannot take from it: had the
	// primary held the city, a standby's STBs would be starved, and its
	// summary says so.
	rb2 := newRig(t, e, eng, "hefei-3", Config{Rank: 1, ArrivalReserve: 0.1})
	rb2.a.now = now
	ra.a.Solve(ctx) // the primary takes what the standby gave back
	for i := range 2 {
		rb2.get(fmt.Sprintf("100.64.1.%d", 100+i), "live.iptv.example", "/x/index.m3u8?token="+signed(t, fmt.Sprintf("x%d", i), 5000), "")
	}
	rb2.a.Solve(ctx)
	if s := rb2.a.Summary(); !s.Idle {
		t.Fatalf("a standby beside the active primary should yield: %+v", s)
	}

	// 4. etcd loses quorum. The primary ranks first: it plans on the
	// whole city although its claims are small.
	e.Stop()
	ask(ra)
	ra.a.Solve(ctx)
	st := served(ra, "etcd lost, primary ranked first")
	if !st.SafeMode || st.HeldKbps != 30000 {
		t.Fatalf("without etcd the primary should plan in safe mode on all 30000 kbps: %+v", st)
	}
	// The standby, which no longer gets STBs, goes idle and hands out nothing.
	clk = clk.Add(30 * time.Second)
	ask(ra)
	rb.a.Solve(ctx)
	if st := rb.a.Status(); !st.Idle || !st.SafeMode || st.PlannedN != 0 {
		t.Fatalf("the standby without STBs and etcd: %+v", st)
	}
	// Its first STB (a failover back to it) asks for a plan at once.
	select {
	case <-rb.a.kick:
	default:
	}
	rb.get("100.64.1.50", "live.iptv.example", "/x/index.m3u8?token="+signed(t, "late", 5000), "")
	if len(rb.a.kick) != 1 {
		t.Error("an STB reaching an idle instance did not ask for a solve")
	}

	// 5. etcd is back: the standby gives its claims back and the primary,
	// still taking the STBs, holds the city within its claims again.
	e.Restart()
	clk = clk.Add(30 * time.Second)
	wait.ForErr(t, "claims follow the STBs after etcd came back", 20*time.Second, func() error {
		ask(ra)
		rb.a.Solve(ctx)
		ra.a.Solve(ctx)
		sa := ra.a.Status()
		if sa.SafeMode || sa.PlannedN != 2 || sa.AtDesired != 2 {
			return fmt.Errorf("primary %+v", sa)
		}
		if c := claimsOf("hefei-2"); !c.Idle {
			return fmt.Errorf("standby claims %+v", c)
		}
		return nil
	})
	_, sum, err := (&store.ClaimBoard{Store: e.Store(), Region: "hefei"}).Totals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range sum {
		if c.BandwidthKbps > 10000*(1+1e-9) {
			t.Fatalf("claims on %s add up to %v kbps", name, c.BandwidthKbps)
		}
	}
}

// A plan counts its moves against the one before: switches (another
// server), drops (a lower bitrate), and the share at the desired bitrate.
func TestPlanCountsSwitchesAndDrops(t *testing.T) {
	e := etcdtest.Start(t)
	eng := engine(t)
	r := newRig(t, e, eng, "i1", Config{})
	ctx := context.Background()
	for i := range 4 {
		r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", "/x/index.m3u8?token="+signed(t, fmt.Sprintf("u%d", i), 5000), "")
	}
	r.a.Solve(ctx)
	for i := range 4 { // sent where the plan says
		r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", "/x/index.m3u8?token="+signed(t, fmt.Sprintf("u%d", i), 5000), "")
	}
	first := r.a.Status()
	if first.PlannedN != 4 || first.Switches != 0 || first.Drops != 0 || first.AtDesired != 4 {
		t.Fatalf("first plan: %+v", first)
	}
	// The summary carries what draining each server and node would do.
	onA := 0
	for _, sv := range first.Servers {
		if sv.Name == "a" {
			onA = sv.Sessions
		}
	}
	found := false
	for _, f := range r.a.Summary().Drain {
		if f.Kind == "server" && f.Name == "a" {
			found = f.Sessions == onA && onA > 0
		}
	}
	if !found {
		t.Fatalf("no drain forecast of server a's %d sessions in %+v", onA, r.a.Summary().Drain)
	}
	// Server a goes: its viewers move to b, which cannot hold four at 5
	// Mbps: someone switches, someone drops.
	snap := eng.Snapshot()
	ai, _ := snap.Server("a")
	down := steer.New(snap, steer.Options{DefaultRegion: "hefei", Available: func(i int32) bool { return i != ai }})
	r.a.engine = func() *steer.Engine { return down }
	r.a.Solve(ctx)
	st := r.a.Status()
	if st.Switches == 0 || st.Drops == 0 || st.AtDesired == 4 {
		t.Fatalf("after server a went: %+v", st)
	}
	if s := r.a.Summary(); s.Switches != st.Switches || s.Drops != st.Drops || math.Abs(s.AtDesired-float64(st.AtDesired)/float64(st.PlannedN-st.Fallback)) > 1e-9 {
		t.Fatalf("summary %+v vs status %+v", s, st)
	}
	// More viewers than b can carry even at the lowest rung: the ones
	// left over are starved, and the summary says so.
	for i := range 10 {
		r.get(fmt.Sprintf("100.64.1.%d", 50+i), "live.iptv.example", "/x/index.m3u8?token="+signed(t, fmt.Sprintf("m%d", i), 5000), "")
	}
	r.a.Solve(ctx)
	if s := r.a.Summary(); s.Starved == 0 || s.Starved != s.Fallback || s.HeldKbps != 20000 || s.CapacityKbps != 20000 {
		t.Fatalf("overloaded: %+v", s)
	}
}

// With the model's origin cost, a channel's viewers are grouped on the
// server that pulls it, and a new viewer priced onto a server that does
// not pull its channel pays the cost.
func TestOriginCostGroupsAChannel(t *testing.T) {
	for _, cost := range []float64{0, 1} {
		t.Run(fmt.Sprint("cost ", cost), func(t *testing.T) {
			e := etcdtest.Start(t)
			params := qoe.DefaultParams()
			params.OriginCost = cost
			eng := engine(t)
			r := newRig(t, e, eng, "i1", Config{Params: params})
			for i := range 3 {
				r.get(fmt.Sprintf("100.64.1.%d", i+1), "live.iptv.example", "/news/index.m3u8?token="+signed(t, fmt.Sprintf("u%d", i), 2500), "")
			}
			r.a.Solve(context.Background())
			st := r.a.Status()
			if st.PlannedN != 3 || st.Fallback != 0 || st.OriginPulls < 1 || st.OriginPulls > 2 || st.OriginKbps != float64(st.OriginPulls)*5000 {
				t.Fatalf("plan: %d planned, %d fallback, %d pulls (%.0f kbps)", st.PlannedN, st.Fallback, st.OriginPulls, st.OriginKbps)
			}
			if cost > 0 && st.OriginPulls != 1 {
				t.Fatalf("with the origin cost the channel's viewers are on %d servers", st.OriginPulls)
			}
			// Price a fourth viewer of the channel on each covering server.
			p := r.a.plan.Load()
			var sp *servicePlan
			for _, x := range p.services {
				if x != nil {
					sp = x
				}
			}
			u := qoe.User{Lat: 31.8605, Lon: 117.2805, Profile: qoe.Profile{DesiredKbps: 2500, Danmaku: 1}, RoomMean: sp.roomOf("/news"), Ingest: -1, PrevServer: -1, Channel: sp.channelOf(eng.Channel(sp.svc, "/news/index.m3u8", ""))}
			if u.Channel < 0 {
				t.Fatal("the plan does not know the channel its viewers watch")
			}
			for pos := range p.servers {
				only := []int32{int32(pos)}
				got, k, v := choose(eng, sp, p.servers, only, nil, p.bwLeft, p.cpuLeft, &u, nil)
				if got < 0 {
					continue // full
				}
				want := sp.inst.ValueFor(&u, pos, k)
				if cost > 0 && !sp.pulls[pull{int32(pos), u.Channel}] {
					want -= cost
				}
				if math.Abs(v-want) > 1e-9 {
					t.Errorf("server %s: value %v, want %v (pulled: %t)", p.snap.Servers[p.servers[pos]].Name, v, want, sp.pulls[pull{int32(pos), u.Channel}])
				}
			}
		})
	}
}
