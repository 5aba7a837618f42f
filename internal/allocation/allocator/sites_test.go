package allocator

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// siteProvince: hefei's four servers at one place (one node), 400 Mbps
// each: one site to the solve; its viewers must still be split so that no
// server carries more than its own capacity.
const siteProvince = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - {name: a, address: 10.1.1.1:8080, location: {lat: 31.86, lon: 117.28}, coverage_radius_m: 3000, capacity: {bandwidth_mbps: 400, transcode_units: 400}}
      - {name: b, address: 10.1.1.2:8080, location: {lat: 31.86, lon: 117.28}, coverage_radius_m: 3000, capacity: {bandwidth_mbps: 400, transcode_units: 400}}
      - {name: c, address: 10.1.1.3:8080, location: {lat: 31.86, lon: 117.28}, coverage_radius_m: 3000, capacity: {bandwidth_mbps: 400, transcode_units: 400}}
      - {name: d, address: 10.1.1.4:8080, location: {lat: 31.86, lon: 117.28}, coverage_radius_m: 3000, capacity: {bandwidth_mbps: 400, transcode_units: 400}}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.33, lon: 118.38}
    servers:
      - {name: w, address: 10.2.1.1:8080}
zones:
  - {name: north, region: hefei, networks: [100.64.0.0/16], location: {lat: 31.8605, lon: 117.2805}}
  - {name: wuhu, region: wuhu, networks: [100.65.9.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`

// Servers alike are solved as one site and split after: every server
// within its own capacity, viewers kept on their own server across plans,
// and the bound still above the plan.
func TestSiteSplitKeepsEachServerWithinCapacity(t *testing.T) {
	const viewers = 400
	stb := func(i int) string { return fmt.Sprintf("100.64.%d.%d", i/250, i%250+1) }
	e := etcdtest.Start(t)
	eng := engineFor(t, siteProvince)
	r := newRig(t, e, eng, "site", Config{ArrivalReserve: 0.1})
	for i := range viewers { // 2 Gbps wanted of 1.6
		r.get(stb(i), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%3), signed(t, fmt.Sprintf("v%d", i), 5000))
	}
	r.a.Solve(context.Background())
	p := r.a.plan.Load()
	if c := maxChunk(p.snap, p, 5000); c < 2 {
		t.Fatalf("chunks of %d: servers too small for sites", c)
	}
	if s := siteServers(p.services[0].inst, true); len(s.pos) != 1 {
		t.Fatalf("sites %v, want the four servers as one", s.pos)
	}
	check := func(p *plan) map[string]int32 {
		t.Helper()
		load := map[int32]float64{}
		where := map[string]int32{}
		for _, s := range r.a.sessions.sweep(0) {
			as := p.plannedOf(s)
			if as == nil || as.gen != p.gen {
				t.Fatalf("session %s is not in plan %d", s.key.user, p.gen)
			}
			if as.server >= 0 {
				load[as.server] += as.kbps
			}
			where[s.key.user] = as.server
		}
		for si, kbps := range load {
			if kbps > 400000*(1-0.1)+1e-6 {
				t.Fatalf("server %s carries %v kbps of 360,000 (400 Mbps less the reserve)", p.snap.Servers[si].Name, kbps)
			}
		}
		if len(load) < 4 {
			t.Fatalf("viewers on %d servers, want all four used", len(load))
		}
		if st := p.stats; st.Bound < st.Objective-1e-6 {
			t.Fatalf("bound %v below the objective %v", st.Bound, st.Objective)
		}
		return where
	}
	before := check(p)
	// The STBs come back (each request gives it its planned place), and
	// the next plan keeps every viewer on its server: no switch.
	for i := range viewers {
		r.get(stb(i), "live.iptv.example", fmt.Sprintf("/ch%d/index.m3u8", i%3), signed(t, fmt.Sprintf("v%d", i), 5000))
	}
	r.a.Solve(context.Background())
	p = r.a.plan.Load()
	after := check(p)
	moved := []string{}
	for v, si := range before {
		if si >= 0 && after[v] != si {
			moved = append(moved, v)
		}
	}
	if len(moved) > 0 || p.stats.Switches != 0 {
		t.Fatalf("the second plan moved %s (switches %d)", strings.Join(moved, ", "), p.stats.Switches)
	}
}
