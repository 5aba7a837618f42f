package ctl

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/admin/drillwatch"
	"github.com/anysched/anysched/internal/admin/statusview"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// at is t0 + s seconds.
func at(s float64) *timestamppb.Timestamp {
	return timestamppb.New(t0.Add(time.Duration(s * float64(time.Second))))
}

// clockTime is how a drill prints the end of t0 + s seconds.
func clockTime(s float64) string { return at(s).AsTime().Local().Format(time.TimeOnly) }

// wuhuDrill is a province where wuhu-1 withdraws from +1 s to +3 s, as a
// drill of wuhu's makes it, and center-1 answers wuhu's STBs meanwhile:
// from +1.1 s, 5 more requests every 250 ms, the last at +3.4 s, one of them
// with an error. hefei-1 is withdrawn all along, but is not in the drill.
// backAt < 0: wuhu-1 never announces again.
func wuhuDrill(backAt time.Duration) func(now func() time.Time) map[string]handler {
	return func(now func() time.Time) map[string]handler {
		status := func(int, proto.Message) (proto.Message, error) {
			el := now().Sub(t0)
			withdrawn := el >= time.Second && (backAt < 0 || el < backAt)
			wuhu := &pb.Instance{Id: "wuhu-1", Role: "regional", Region: "wuhu", UpdatedAt: timestamppb.New(now()), Announced: !withdrawn}
			if withdrawn {
				wuhu.AnnounceReason = "drill"
			}
			traffic := &pb.RegionTraffic{ClientRegion: "wuhu", Answered: 10, RunStart: at(-100), Last: at(-90)}
			if el >= 1250*time.Millisecond {
				a := min(el, 3500*time.Millisecond)
				traffic = &pb.RegionTraffic{ClientRegion: "wuhu", Answered: 10 + 5*uint64(a/(250*time.Millisecond)-4), RunStart: at(1.1), Last: timestamppb.New(t0.Add(a - 100*time.Millisecond))}
				if el >= 2*time.Second {
					traffic.Failed = 1
				}
			}
			return &pb.StatusResponse{CenterId: "center-1", CenterTraffic: []*pb.RegionTraffic{traffic}, Instances: []*pb.Instance{
				wuhu,
				{Id: "hefei-1", Role: "regional", Region: "hefei", UpdatedAt: timestamppb.New(now()), AnnounceReason: "no healthy server"},
			}}, nil
		}
		return map[string]handler{"Status": status, "Drill": reply(&pb.DrillResponse{Until: at(3), Instances: []string{"wuhu-1"}})}
	}
}

// wuhuQoE is wuhuDrill(3 s) with the QoE of wuhu's viewers: wuhu-1 plans
// them (a plan made at -2 s) until it goes idle at +1.5 s; with
// centerPlans, center-1 plans them from +1.5 s (plans made at +1.5 s and
// +3.5 s) until +4.5 s; wuhu-1 plans them again from cityAgain (a plan
// made then; < 0: never before the watch ends).
func wuhuQoE(centerPlans bool, cityAgain float64) func(now func() time.Time) map[string]handler {
	return func(now func() time.Time) map[string]handler {
		h := wuhuDrill(3 * time.Second)(now)
		inner := h["Status"]
		h["Status"] = func(n int, req proto.Message) (proto.Message, error) {
			m, err := inner(n, req)
			st, ok := m.(*pb.StatusResponse)
			if !ok {
				return m, err
			}
			el := now().Sub(t0).Seconds()
			age := func(made float64) float64 { return el - made }
			wuhu := st.Instances[0]
			switch {
			case el < 1.5:
				wuhu.Qoe = &pb.QoEPlan{Sessions: 400, Planned: 396, Fallback: 4, Starved: 1, Objective: 812.5, AtDesired: 0.95, Switches: 3, Drops: 1, AgeSeconds: age(-2)}
			case cityAgain >= 0 && el >= cityAgain:
				wuhu.Qoe = &pb.QoEPlan{Sessions: 402, Planned: 400, Fallback: 2, Objective: 805, AtDesired: 0.94, Switches: 350, Drops: 12, AgeSeconds: age(cityAgain)}
			default:
				wuhu.Qoe = &pb.QoEPlan{Idle: true, AgeSeconds: 0.5}
			}
			center := &pb.Instance{Id: "center-1", Role: "central", UpdatedAt: timestamppb.New(now())}
			switch {
			case !centerPlans || el < 1.5 || el >= 4.5:
			case el < 3.5:
				center.Planning = []*pb.QoEPlan{{Region: "wuhu", Sessions: 380, Planned: 370, Fallback: 10, Starved: 6, Objective: 610.25, AtDesired: 0.71, Switches: 380, Drops: 150, AgeSeconds: age(1.5)}}
			default:
				center.Planning = []*pb.QoEPlan{{Region: "wuhu", Sessions: 390, Planned: 385, Fallback: 5, Starved: 2, Objective: 640, AtDesired: 0.78, Switches: 20, Drops: 5, AgeSeconds: age(3.5)}}
			}
			st.Instances = append(st.Instances, center)
			return st, nil
		}
		return h
	}
}

// centerDrill: a drill of the center's, of the instances ids. center-1
// withdraws from +0.5 s to +1.5 s; center-2's record predates the drill.
// One Status call, at +0.75 s, fails (and is polled past).
func centerDrill(ids ...string) func(now func() time.Time) map[string]handler {
	return func(now func() time.Time) map[string]handler { return centerProvince(now, ids) }
}

func centerProvince(now func() time.Time, ids []string) map[string]handler {
	status := func(int, proto.Message) (proto.Message, error) {
		el := now().Sub(t0)
		if el == 750*time.Millisecond {
			return fail(codes.Unavailable, "etcdserver: leader changed")(0, nil)
		}
		c := &pb.Instance{Id: "center-1", Role: "central", UpdatedAt: timestamppb.New(now()), Announced: el < 500*time.Millisecond || el >= 1500*time.Millisecond}
		old := &pb.Instance{Id: "center-2", Role: "central", UpdatedAt: at(-5), Announced: true} // in the drill, but its record predates it
		if !c.Announced {
			c.AnnounceReason = "drill"
		}
		return &pb.StatusResponse{Instances: []*pb.Instance{c, old}}, nil
	}
	return map[string]handler{"Status": status, "Drill": reply(&pb.DrillResponse{Until: at(1.5), Instances: ids})}
}

// noQoE is a drill's last line when the city's viewers have no plan.
const noQoE = "qoe: no plan of wuhu's viewers seen (no selection: qoe service there, or its schedulers report none)\n"

func TestDrillFailover(t *testing.T) {
	started := func(req *pb.DrillRequest) []call {
		return []call{{method: "Status", req: &pb.StatusRequest{}}, {method: "Drill", req: req}}
	}
	wuhu := &pb.DrillRequest{Region: "wuhu", DurationSeconds: 2}
	runCases(t, []cmdCase{
		{
			name: "followed", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: wuhuDrill(3 * time.Second),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" +
				"  +  3.0s  wuhu-1 announces again\n" +
				"  +  3.4s  the last answer of a center to a wuhu STB: the city took its traffic back\n" +
				"drill done: the center (center-1) answered 50 requests of wuhu's STBs from +1.1s to +3.4s, 1 of them with an error; " +
				"requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n" + noQoE,
			sent: append(started(wuhu), call{method: "Status", req: &pb.StatusRequest{}}), sentMore: true,
		},
		{
			name: "qoe: the center plans the city", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: wuhuQoE(true, 4),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" +
				"  +  1.5s  qoe: wuhu-1 stopped planning; center-1 plans wuhu (380 sessions)\n" +
				"  +  3.0s  wuhu-1 announces again\n" +
				"  +  4.0s  qoe: wuhu-1 plans wuhu (402 sessions)\n" +
				"  +  4.5s  qoe: center-1 stopped planning\n" +
				"  +  3.4s  the last answer of a center to a wuhu STB: the city took its traffic back\n" +
				"drill done: the center (center-1) answered 50 requests of wuhu's STBs from +1.1s to +3.4s, 1 of them with an error; " +
				"requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n" +
				"qoe of wuhu's viewers (each phase's last plans; switches and drops summed over the plans made in it):\n" +
				"  PHASE   SESSIONS  OBJECTIVE  AT_DESIRED  FALLBACK  STARVED  SWITCHES  DROPS  PLANS  PLANNED_BY\n" +
				"  before  400       812.5      95.0%       4         1        3         1      1      wuhu-1\n" +
				"  during  390       640.0      78.0%       5         2        400       155    2      wuhu-1 → center-1\n" +
				"  after   402       805.0      94.0%       2         0        350       12     1      center-1 → wuhu-1\n",
			sent: append(started(wuhu), call{method: "Status", req: &pb.StatusRequest{}}), sentMore: true,
		},
		{
			name: "qoe: no center plan, the city plans again late", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: wuhuQoE(false, 10),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" +
				"  +  1.5s  qoe: wuhu-1 stopped planning; center: no plan (viewers get their own rung)\n" +
				"  +  3.0s  wuhu-1 announces again\n" +
				"  + 10.0s  qoe: wuhu-1 plans wuhu (402 sessions)\n" +
				"  +  3.4s  the last answer of a center to a wuhu STB: the city took its traffic back\n" +
				"drill done: the center (center-1) answered 50 requests of wuhu's STBs from +1.1s to +3.4s, 1 of them with an error; " +
				"requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n" +
				"qoe of wuhu's viewers (each phase's last plans; switches and drops summed over the plans made in it):\n" +
				"  PHASE   SESSIONS  OBJECTIVE  AT_DESIRED  FALLBACK  STARVED  SWITCHES  DROPS  PLANS  PLANNED_BY\n" +
				"  before  400       812.5      95.0%       4         1        3         1      1      wuhu-1\n" +
				"  during  -         -          -           -         -        -         -      0      wuhu-1 → center: no plan (viewers get their own rung)\n" +
				"  after   402       805.0      94.0%       2         0        350       12     1      wuhu-1\n",
			sent: append(started(wuhu), call{method: "Status", req: &pb.StatusRequest{}}), sentMore: true,
		},
		{
			name: "qoe: no plan since the return", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: wuhuQoE(false, -1),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" +
				"  +  1.5s  qoe: wuhu-1 stopped planning; center: no plan (viewers get their own rung)\n" +
				"  +  3.0s  wuhu-1 announces again\n" +
				"  +  3.4s  the last answer of a center to a wuhu STB: the city took its traffic back\n" +
				"drill done: the center (center-1) answered 50 requests of wuhu's STBs from +1.1s to +3.4s, 1 of them with an error; " +
				"requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n" +
				"qoe of wuhu's viewers (each phase's last plans; switches and drops summed over the plans made in it):\n" +
				"  PHASE   SESSIONS  OBJECTIVE  AT_DESIRED  FALLBACK  STARVED  SWITCHES  DROPS  PLANS  PLANNED_BY\n" +
				"  before  400       812.5      95.0%       4         1        3         1      1      wuhu-1\n" +
				"  during  -         -          -           -         -        -         -      0      wuhu-1 → center: no plan (viewers get their own rung)\n" +
				"  after   -         -          -           -         -        -         -      0      center: no plan (viewers get their own rung); no new plan of wuhu's schedulers since their return\n",
			sent: append(started(wuhu), call{method: "Status", req: &pb.StatusRequest{}}), sentMore: true,
		},
		{
			name: "never back", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: wuhuDrill(-1),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" + noQoE,
			wantErr: "schedctl drill: not every instance announced again within 60 s of the drill's end: wuhu-1 did not",
			sent:    started(wuhu), sentMore: true,
		},
		{
			name: "the center", args: []string{"drill", "failover", "--region", "center", "--duration", "1s"}, rpcAt: centerDrill("center-1"),
			want: "drill: center's schedulers [center-1] withdraw their route until " + clockTime(1.5) + "\n" +
				"  +  0.5s  center-1 withdrew its route (drill)\n" +
				"  +  1.5s  center-1 announces again\n" +
				"drill done: the center announces again (status is polled every 250 ms; STB-side figures: the load generator)\n",
			sent: started(&pb.DrillRequest{Region: "center", DurationSeconds: 1}), sentMore: true,
		},
		{
			name: "a record from before", args: []string{"drill", "failover", "--region", "center", "--duration", "1s", "--i-know-this-is-production"}, rpcAt: centerDrill("center-1", "center-2"),
			want: "drill: center's schedulers [center-1 center-2] withdraw their route until " + clockTime(1.5) + "\n" +
				"  +  0.5s  center-1 withdrew its route (drill)\n" +
				"  +  1.5s  center-1 announces again\n",
			wantErr: "schedctl drill: not every instance announced again within 60 s of the drill's end: center-2 did not",
			sent:    started(&pb.DrillRequest{Region: "center", DurationSeconds: 1, ProductionConfirmed: true}), sentMore: true,
		},
		{
			// The loopback province: wuhu-2 never announced (announce.mode
			// none), hefei-2 was not ready before the drill; the watch
			// waits for wuhu-1 only, and says so.
			name: "some never announced", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, rpcAt: withOthers(wuhuDrill(3*time.Second),
				&pb.Instance{Id: "wuhu-2", Role: "regional", Region: "wuhu", AnnounceReason: "announce.mode none"},
				&pb.Instance{Id: "wuhu-3", Role: "regional", Region: "wuhu", AnnounceReason: "snapshot is stale"}),
			want: "drill: wuhu's schedulers [wuhu-1 wuhu-2 wuhu-3] withdraw their route until " + clockTime(3) + "\n" +
				"  wuhu-2 did not announce a route before the drill (announce.mode none): not waited for\n" +
				"  wuhu-3 did not announce a route before the drill (snapshot is stale): not waited for\n" +
				"  +  1.0s  wuhu-1 withdrew its route (drill)\n" +
				"  +  1.1s  the center (center-1) answered its first wuhu STB: it took the city over\n" +
				"  +  3.0s  wuhu-1 announces again\n" +
				"  +  3.4s  the last answer of a center to a wuhu STB: the city took its traffic back\n" +
				"drill done: the center (center-1) answered 50 requests of wuhu's STBs from +1.1s to +3.4s, 1 of them with an error; " +
				"requests lost in flight while routes changed are seen only by the STBs (bin/lab load counts them)\n" + noQoE,
			sent: append(started(wuhu), call{method: "Status", req: &pb.StatusRequest{}}), sentMore: true,
		},
		{
			// No status before the drill: a mode-none instance is dropped
			// from the watch when it is first seen, rather than waited for
			// until the deadline (schedctl once failed after 63 s).
			name: "mode none seen during the watch", args: []string{"drill", "failover", "--region", "center", "--duration", "1s"}, rpcAt: modeNoneCenter,
			want: "drill: center's schedulers [center-1] withdraw their route until " + clockTime(1.5) + "\n" +
				"  center-1 announces nothing itself (announce.mode none): not waited for\n",
			sent: append(started(&pb.DrillRequest{Region: "center", DurationSeconds: 1}), call{method: "Status", req: &pb.StatusRequest{}}),
		},
		{
			name: "no watch", args: []string{"drill", "failover", "--region", "wuhu", "--no-watch"}, rpcAt: wuhuDrill(3 * time.Second),
			want: "drill: wuhu's schedulers [wuhu-1] withdraw their route until " + clockTime(3) + "\n",
			sent: started(&pb.DrillRequest{Region: "wuhu", DurationSeconds: 30}),
		},
		{
			name: "nobody to withdraw", args: []string{"drill", "failover", "--region", "bozhou"},
			rpc:  map[string]handler{"Status": fail(codes.Unavailable, "down"), "Drill": reply(&pb.DrillResponse{Until: at(30)})},
			want: "drill: bozhou's schedulers [] withdraw their route until " + clockTime(30) + "\n",
			sent: started(&pb.DrillRequest{Region: "bozhou", DurationSeconds: 30}),
		},
		{
			name: "refused", args: []string{"drill", "failover", "--region", "wuhu"},
			rpc:     map[string]handler{"Status": reply(&pb.StatusResponse{}), "Drill": fail(codes.FailedPrecondition, "not a lab: confirm with --i-know-this-is-production")},
			wantErr: "schedctl drill: not a lab: confirm with --i-know-this-is-production",
			sent:    started(&pb.DrillRequest{Region: "wuhu", DurationSeconds: 30}),
		},
		// Mistakes found before any RPC.
		{name: "no region", args: []string{"drill", "failover", "--duration", "10s"}, wantErr: "schedctl drill: missing --region", usage: true},
		{name: "bad duration", args: []string{"drill", "failover", "--region", "wuhu", "--duration", "10"}, wantErr: `schedctl drill: invalid value "10" for flag -duration: parse error`, usage: true},
		{name: "no kind", args: []string{"drill", "--region", "wuhu"}, wantErr: "schedctl drill: drill failover --region R --duration D, or drill etcd-loss --duration D [--members N] [--leader]", usage: true},
		{name: "unknown kind", args: []string{"drill", "bgp-loss"}, wantErr: "schedctl drill: drill failover --region R --duration D, or drill etcd-loss --duration D [--members N] [--leader]", usage: true},
	})
}

// TestDrillWaitsForTheCityPlan: once the city is back, the watch goes on
// until a plan the city made since is seen, for AfterWait at most; it
// does not wait for one when the city's viewers had no plan at all.
func TestDrillWaitsForTheCityPlan(t *testing.T) {
	for _, tt := range []struct {
		name     string
		province func(now func() time.Time) map[string]handler
		endsAt   float64 // the clock's time when the watch ends, seconds after t0
	}{
		{"no QoE: as soon as the center is quiet", wuhuDrill(3 * time.Second), 6.25},
		{"a plan soon after the return", wuhuQoE(true, 4), 6.25},
		{"a plan late after the return", wuhuQoE(false, 10), 10.25},
		{"no plan since the return", wuhuQoE(false, -1), 3 + statusview.AfterWait.Seconds()},
	} {
		f := &fakeAdmin{}
		e := testEnv(f, &bytes.Buffer{}, &bytes.Buffer{})
		f.handlers = tt.province(e.clock.Now)
		if err := run(context.Background(), []string{"drill", "failover", "--region", "wuhu", "--duration", "2s"}, e); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := e.clock.Now().Sub(t0).Seconds(); got != tt.endsAt {
			t.Errorf("%s: the watch ended at +%.2fs, want +%.2fs", tt.name, got, tt.endsAt)
		}
	}
}

// A drill being followed stops when schedctl is interrupted.
func TestDrillInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fakeAdmin{}
	e := testEnv(f, &bytes.Buffer{}, &bytes.Buffer{})
	f.handlers = wuhuDrill(3 * time.Second)(e.clock.Now)
	inner := f.handlers["Status"]
	f.handlers["Status"] = func(n int, req proto.Message) (proto.Message, error) {
		if n == 3 {
			cancel()
		}
		return inner(n, req)
	}
	err := run(ctx, []string{"drill", "failover", "--region", "wuhu"}, e)
	if err == nil || err.Error() != "schedctl drill: context canceled" {
		t.Fatalf("error %v, want context canceled", err)
	}
	if n := len(f.sent()); n != 5 { // Status, Drill, three polls
		t.Errorf("%d calls, want 5", n)
	}
}

// TestTakeoverCountsEveryCenter: a drill counts what every central
// scheduler answered the city's STBs (the one it talks to live, the others
// from their registrations), from the earliest takeover to the latest answer.
func TestTakeoverCountsEveryCenter(t *testing.T) {
	traffic := func(n, failed uint64, run, last float64) []*pb.RegionTraffic {
		return []*pb.RegionTraffic{
			{ClientRegion: "hefei", Answered: 999, RunStart: at(-500), Last: at(run)}, // another city: not counted
			{ClientRegion: "wuhu", Answered: n, Failed: failed, RunStart: at(run), Last: at(last)},
		}
	}
	status := func(live, record []*pb.RegionTraffic) *pb.StatusResponse {
		return &pb.StatusResponse{CenterId: "center-1", CenterTraffic: live, Instances: []*pb.Instance{
			{Id: "center-1", Role: "central", Traffic: traffic(1, 0, -900, -900)}, // stale record: the live count wins
			{Id: "center-2", Role: "central", Traffic: record},
			{Id: "wuhu-1", Role: "regional", Region: "wuhu", Traffic: traffic(5000, 0, -900, 0)}, // not a center
		}}
	}
	var out bytes.Buffer
	f := drillwatch.NewCenters("wuhu", t0, statusview.CenterTraffic(status(traffic(10, 1, -100, -90), traffic(5, 0, -100, -95)), "wuhu"))
	observe := func(st *pb.StatusResponse) { printEvents(&out, t0, f.Observe(st, t0)) }
	observe(status(traffic(10, 1, -100, -90), traffic(5, 0, -100, -95))) // nothing new yet
	if len(f.Answering()) != 0 || out.Len() != 0 {
		t.Fatalf("no new answers, but: %v %q", f.Answering(), out.String())
	}
	observe(status(traffic(30, 1, 0.2, 3), traffic(5, 0, -100, -95)))
	observe(status(traffic(42, 2, 0.2, 4.5), traffic(25, 0, 0.1, 4.9))) // center-2's record comes later, with an earlier start
	writeTakeover(&out, t0, f.Takeover())
	for _, want := range []string{
		"+  0.2s  the center (center-1) answered its first wuhu STB",
		"+  4.9s  the last answer of a center to a wuhu STB",
		"the centers (center-1 32, center-2 20) answered 52 requests of wuhu's STBs from +0.1s to +4.9s, 1 of them with an error",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	writeTakeover(&out, t0, drillwatch.NewCenters("wuhu", t0, nil).Takeover())
	if !strings.Contains(out.String(), "no center answered") {
		t.Errorf("without traffic: %q", out.String())
	}
}

// withOthers adds instances to every Status answer of province, and the
// drill's answer names them too.
func withOthers(province func(now func() time.Time) map[string]handler, others ...*pb.Instance) func(now func() time.Time) map[string]handler {
	return func(now func() time.Time) map[string]handler {
		h := province(now)
		inner := h["Status"]
		h["Status"] = func(n int, req proto.Message) (proto.Message, error) {
			m, err := inner(n, req)
			if st, ok := m.(*pb.StatusResponse); ok {
				st.Instances = append(st.Instances, others...)
			}
			return m, err
		}
		dr := h["Drill"]
		h["Drill"] = func(n int, req proto.Message) (proto.Message, error) {
			m, err := dr(n, req)
			if r, ok := m.(*pb.DrillResponse); ok {
				r = proto.Clone(r).(*pb.DrillResponse)
				for _, o := range others {
					r.Instances = append(r.Instances, o.GetId())
				}
				return r, err
			}
			return m, err
		}
		return h
	}
}

// modeNoneCenter: the status before the drill fails; afterwards the
// center reports announce.mode none.
func modeNoneCenter(now func() time.Time) map[string]handler {
	status := func(n int, _ proto.Message) (proto.Message, error) {
		if n == 0 {
			return fail(codes.Unavailable, "down")(0, nil)
		}
		return &pb.StatusResponse{Instances: []*pb.Instance{{Id: "center-1", Role: "central", UpdatedAt: timestamppb.New(now()), AnnounceReason: "announce.mode none"}}}, nil
	}
	return map[string]handler{"Status": status, "Drill": reply(&pb.DrillResponse{Until: at(1.5), Instances: []string{"center-1"}})}
}
