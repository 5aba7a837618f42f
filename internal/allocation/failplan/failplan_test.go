package failplan_test

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/failplan"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// province: hefei's viewers fall back to wuhu, whose one server is small;
// feixi, next door to hefei and not in its order, has room for them all;
// bozhou is far. The vod service is not planned by QoE.
const province = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
  - {name: feixi, location: {lat: 31.70, lon: 117.16}}
  - {name: bozhou, location: {lat: 33.84, lon: 115.78}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.82, lon: 117.23}
    servers:
      - {name: h1, address: 10.1.1.1:8080, capacity: {bandwidth_mbps: 1000}}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.33, lon: 118.38}
    servers:
      - {name: w1, address: 10.2.1.1:8080, capacity: {bandwidth_mbps: 50}}
  - name: feixi-1
    region: feixi
    location: {lat: 31.70, lon: 117.16}
    servers:
      - {name: f1, address: 10.3.1.1:8080, capacity: {bandwidth_mbps: 1000}}
      - {name: f2, address: 10.3.1.2:8080, capacity: {bandwidth_mbps: 1000}}
  - name: bozhou-1
    region: bozhou
    location: {lat: 33.84, lon: 115.78}
    servers:
      - {name: b1, address: 10.4.1.1:8080, capacity: {bandwidth_mbps: 1000}}
zones:
  - {name: hefei, region: hefei, networks: [100.64.1.0/24]}
  - {name: wuhu, region: wuhu, networks: [100.64.2.0/24]}
  - {name: feixi, region: feixi, networks: [100.64.3.0/24]}
  - {name: bozhou, region: bozhou, networks: [100.64.4.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
  - name: vod
    hostnames: [vod.iptv.example]
    url_template: "http://{server}/{path}"
    bitrates_kbps: [2000]
`

// state is a region's plan state: n live viewers wanting desired kbps
// (on server, at kbps, when server is not ""), and m vod sessions.
func state(region string, lat, lon float64, n int, desired float64, server string, kbps float64, m int) *store.AllocState {
	st := &store.AllocState{Instance: region + "-1", Made: time.Now(), Services: []store.ServiceState{{Name: "live"}, {Name: "vod"}}}
	srv := int32(-1)
	if server != "" {
		st.Servers, srv = []string{server}, 0
	}
	for i := range n {
		st.Sessions = append(st.Sessions, store.SessionState{Service: 0, User: fmt.Sprintf("%s-%d", region, i), Addr: netip.AddrFrom4([4]byte{100, 64, 0, byte(i)}),
			Channel: fmt.Sprintf("ch%d", i%3), Desired: desired, Danmaku: 1, Lat: lat, Lon: lon, Server: srv, Kbps: kbps})
	}
	for i := range m {
		st.Sessions = append(st.Sessions, store.SessionState{Service: 1, User: fmt.Sprintf("%s-vod-%d", region, i), Channel: "film", Lat: lat, Lon: lon, Server: -1})
	}
	return st
}

func viewers(snap *topology.Snapshot, states map[string]*store.AllocState) map[string]*failplan.Viewers {
	out := map[string]*failplan.Viewers{}
	for r, st := range states {
		out[r] = failplan.Summarize(snap, st, false)
	}
	return out
}

// TestSummarize: sessions the model cannot tell apart are one group (the
// channel counts only with an origin cost); the services not planned by
// QoE are left out.
func TestSummarize(t *testing.T) {
	snap := fixture.CompileYAML(t, province, 1)
	st := state("hefei", 31.82, 117.23, 40, 5000, "h1", 5000, 7) // 3 channels
	st.Sessions[0].Kbps = 2500                                   // a fourth group
	if v := failplan.Summarize(snap, st, true); v.Count != 40 || v.Groups() != 4 {
		t.Errorf("by channel: %d sessions in %d groups, want 40 in 4", v.Count, v.Groups())
	}
	// Without an origin cost the channel is nothing to the model.
	if v := failplan.Summarize(snap, st, false); v.Count != 40 || v.Groups() != 2 {
		t.Errorf("%d sessions in %d groups, want 40 in 2", v.Count, v.Groups())
	}
}

func TestLossOfACity(t *testing.T) {
	snap := fixture.CompileYAML(t, province, 7)
	in := failplan.Input{Snap: snap, Nearest: 1, Budget: time.Second, Viewers: viewers(snap, map[string]*store.AllocState{
		// 40 viewers wanting 5000 kbps: 200 Mbps at their desired bitrate.
		"hefei": state("hefei", 31.82, 117.23, 40, 5000, "h1", 5000, 7),
		// wuhu's own 5 at 2500 kbps leave its 50 Mbps server 37.5 Mbps.
		"wuhu": state("wuhu", 31.33, 118.38, 5, 2500, "w1", 2500, 0),
	})}
	rep, err := failplan.Plan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Revision != 7 || len(rep.Cities) != 4 {
		t.Fatalf("report of revision %d with %d cities, want 7 and 4", rep.Revision, len(rep.Cities))
	}
	hefei := rep.Cities[0]
	if hefei.Region != "hefei" || hefei.Viewers != 40 || fmt.Sprint(hefei.Order) != "[wuhu]" {
		t.Fatalf("hefei: %+v", hefei)
	}
	// The configured order: wuhu's 37.5 Mbps left hold at most 31 viewers at
	// the lowest rung; the rest have no server.
	c := hefei.Configured
	if c.Planned == 0 || c.Planned > 31 || c.Unplanned != 40-c.Planned {
		t.Errorf("configured: %d planned, %d unplanned; want 1..31 planned, the rest unplanned", c.Planned, c.Unplanned)
	}
	if len(c.Taken) != 1 || c.Taken[0].Region != "wuhu" || c.Taken[0].Viewers != c.Planned || c.Taken[0].Kbps > 37500+1e-6 {
		t.Errorf("configured: taken %+v, want wuhu's %d viewers within its 37.5 Mbps left", c.Taken, c.Planned)
	}
	if c.HostsAtDesired != 1 {
		t.Errorf("wuhu's own viewers at their desired bitrate: %.2f, want 1 (its planner keeps them)", c.HostsAtDesired)
	}
	// The proposal adds feixi (the nearest), which has room for them all.
	p := hefei.ProposedOutcome
	if p.Unplanned != 0 || p.Planned != 40 || p.AtDesired != 40 || p.MeanKbps != 5000 {
		t.Errorf("proposed: %d planned, %d unplanned, %d at desired, %.0f kbps mean; want all 40 at 5000", p.Planned, p.Unplanned, p.AtDesired, p.MeanKbps)
	}
	if len(hefei.Proposed) == 0 || hefei.Proposed[0] != "feixi" {
		t.Errorf("proposed order %v, want feixi first", hefei.Proposed)
	}
	if len(hefei.Reserves) == 0 || hefei.Reserves[0].Region != "feixi" || hefei.Reserves[0].ReserveKbps != 200000 || hefei.Reserves[0].SpareKbps != 2e6 || hefei.ShortKbps != 0 {
		t.Errorf("reserves %+v short %.0f; want feixi holding 200 Mbps of its 2 Gbps, nothing short", hefei.Reserves, hefei.ShortKbps)
	}
	if !(p.Gap >= 0 && p.Gap < 0.05) {
		t.Errorf("proposed gap %.4f, want a certified plan", p.Gap)
	}
	// Regions without viewers have nothing to lose.
	for _, city := range rep.Cities[2:] {
		if city.Viewers != 0 || city.Configured.Planned != 0 || city.Proposed != nil {
			t.Errorf("%s without viewers: %+v", city.Region, city)
		}
	}
}

// TestShortfall: a lost city whose only host is small and down in part:
// the reserve is what the host has, the rest is short.
func TestShortfall(t *testing.T) {
	snap := fixture.CompileYAML(t, province, 1)
	w1, _ := snap.Server("w1")
	in := failplan.Input{Snap: snap, Nearest: 0, Budget: time.Second, Viewers: viewers(snap, map[string]*store.AllocState{
		"wuhu": state("wuhu", 31.33, 118.38, 10, 5000, "w1", 5000, 0),
	})}
	in.Up = func(s int32) bool { return s != w1 }
	rep, err := failplan.Plan(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	wuhu := rep.Cities[1]
	// No order configured: the center plans wuhu's viewers on nothing; the
	// proposal's nearest regions (3 by default) take them.
	if len(wuhu.Order) != 0 || len(wuhu.Configured.Taken) != 0 || wuhu.Configured.Unplanned != 10 {
		t.Errorf("wuhu configured: order %v, %+v; want no host and all 10 unplanned", wuhu.Order, wuhu.Configured)
	}
	if wuhu.ProposedOutcome.Unplanned != 0 || len(wuhu.Proposed) == 0 {
		t.Errorf("wuhu proposed: %v %+v; want its 10 viewers planned", wuhu.Proposed, wuhu.ProposedOutcome)
	}
	// hefei's loss with wuhu's only server down: wuhu takes nobody, and the
	// proposal (feixi, the nearest) everyone.
	in.Viewers = viewers(snap, map[string]*store.AllocState{"hefei": state("hefei", 31.82, 117.23, 10, 5000, "h1", 5000, 0)})
	in.Nearest = 1
	if rep, err = failplan.Plan(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	hefei := rep.Cities[0]
	if hefei.Configured.Planned != 0 || hefei.Configured.Unplanned != 10 {
		t.Errorf("hefei with wuhu down: %+v, want all 10 unplanned", hefei.Configured)
	}
	if hefei.ShortKbps != 0 || len(hefei.Reserves) != 1 || hefei.Reserves[0].ReserveKbps != 50000 {
		t.Errorf("hefei reserves %+v short %.0f, want feixi holding 50 Mbps", hefei.Reserves, hefei.ShortKbps)
	}
	if !math.IsNaN(hefei.Configured.HostsAtDesired) {
		t.Errorf("hosts at desired with no host viewers: %v, want NaN", hefei.Configured.HostsAtDesired)
	}
}

func TestCancelled(t *testing.T) {
	snap := fixture.CompileYAML(t, province, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := failplan.Plan(ctx, failplan.Input{Snap: snap}); err == nil {
		t.Fatal("a cancelled plan answered")
	}
	if _, err := failplan.Plan(context.Background(), failplan.Input{}); err == nil {
		t.Fatal("a plan without a topology answered")
	}
}

// TestReads: a plan of some cities' loss reads those cities' viewers and
// their possible hosts' (the order, then the nearest), not the province's.
func TestReads(t *testing.T) {
	snap := fixture.CompileYAML(t, province, 7)
	for _, c := range []struct {
		regions []string
		nearest int
		want    string
	}{
		{[]string{"hefei"}, 1, "[hefei wuhu feixi]"},        // wuhu by order, feixi nearest
		{[]string{"bozhou"}, 1, "[hefei bozhou]"},           // hefei is bozhou's nearest
		{[]string{"hefei"}, 3, "[hefei wuhu feixi bozhou]"}, // every other region near enough
		{nil, 1, "[hefei wuhu feixi bozhou]"},
	} {
		in := failplan.Input{Snap: snap, Regions: c.regions, Nearest: c.nearest}
		if got := fmt.Sprint(in.Reads()); got != c.want {
			t.Errorf("Reads(%v, nearest %d) = %s, want %s", c.regions, c.nearest, got, c.want)
		}
	}
}
