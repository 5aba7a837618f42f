package failplan_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/failplan"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// bigState is a city of n sessions over 400 zone places and 200 channels,
// three desired bitrates, each on the city's server at its desired rung.
func bigState(region, server string, lat, lon float64, n int) *store.AllocState {
	st := &store.AllocState{Made: time.Now(), Services: []store.ServiceState{{Name: "live"}}, Servers: []string{server}}
	st.Sessions = make([]store.SessionState, n)
	desired := [...]float64{1200, 2500, 5000}
	for i := range st.Sessions {
		z := i % 400
		st.Sessions[i] = store.SessionState{User: fmt.Sprint(i), Addr: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}),
			Channel: fmt.Sprint("ch", (i*7919)%200), Desired: desired[i%3], Danmaku: 1,
			Lat: lat + float64(z/20)*0.01, Lon: lon + float64(z%20)*0.01, Kbps: desired[i%3]}
	}
	return st
}

// BenchmarkSummarize: grouping a 600,000-session city's plan state, as the
// center does for each region it reads (reported: groups, and the heap the
// groups keep against the state's).
func BenchmarkSummarize(b *testing.B) {
	snap := fixture.CompileYAML(b, province, 1)
	st := bigState("hefei", "h1", 31.82, 117.23, 600_000)
	var v *failplan.Viewers
	for b.Loop() {
		v = failplan.Summarize(snap, st, false)
	}
	b.ReportMetric(float64(v.Groups()), "groups")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/600_000, "ns/session")
	var m0, m1 runtime.MemStats
	v = nil
	runtime.GC()
	runtime.ReadMemStats(&m0)
	v = failplan.Summarize(snap, st, false)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/(1<<20), "MiB-kept")
	runtime.KeepAlive(v)
	runtime.KeepAlive(st) // the state is the caller's until it drops it
}

// BenchmarkPlanProvinceLoss: every city's loss when hefei has 600,000
// viewers and wuhu 300,000 (1 s a solve).
func BenchmarkPlanProvinceLoss(b *testing.B) {
	snap := fixture.CompileYAML(b, province, 1)
	in := failplan.Input{Snap: snap, Budget: time.Second, Viewers: map[string]*failplan.Viewers{
		"hefei": failplan.Summarize(snap, bigState("hefei", "h1", 31.82, 117.23, 600_000), false),
		"wuhu":  failplan.Summarize(snap, bigState("wuhu", "w1", 31.33, 118.38, 300_000), false),
	}}
	for b.Loop() {
		rep, err := failplan.Plan(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Cities[0].Viewers != 600_000 {
			b.Fatal(rep.Cities[0])
		}
	}
}

// BenchmarkPlanProvince3M: every city's loss in the design's province at
// prime time: 16 regions, 10,000 servers (3 Gbps each here, so that a
// lost city's viewers do not fit anywhere for free), 3,000,000 viewers
// split by the cities' census populations, each region's viewers spread
// over its 25 zones, 200 channels and the ladder's six rungs. The regions'
// states are built and grouped one at a time, as the center reads them.
// Reported: the grouping and the plan separately, and the groups kept.
func BenchmarkPlanProvince3M(b *testing.B) {
	tp := fixture.Scale()
	tp.Services[0].Selection = topology.SelectQoE
	for n := range tp.Nodes {
		for s := range tp.Nodes[n].Servers {
			tp.Nodes[n].Servers[s].Capacity.BandwidthMbps = 3000
		}
	}
	snap := fixture.Compile(b, tp)
	split := topogen.AnhuiSplit(3_000_000)
	in := failplan.Input{Snap: snap, Budget: time.Second, Viewers: map[string]*failplan.Viewers{}}
	began, groups := time.Now(), 0
	for r := range snap.Regions {
		var zones []topology.Location
		for _, z := range snap.Zones {
			if z.Region == int32(r) {
				zones = append(zones, z.Loc)
			}
		}
		st := provinceState(snap, int32(r), zones, split[r%len(split)].N)
		in.Viewers[snap.Regions[r].Name] = failplan.Summarize(snap, st, false)
		groups += in.Viewers[snap.Regions[r].Name].Groups()
	}
	grouping := time.Since(began)
	b.ResetTimer()
	var rep *failplan.Report
	for b.Loop() {
		var err error
		if rep, err = failplan.Plan(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	short, unplanned := 0.0, 0
	for _, c := range rep.Cities {
		short += c.ShortKbps
		unplanned += c.Configured.Unplanned
	}
	b.ReportMetric(grouping.Seconds(), "s-to-group")
	b.ReportMetric(float64(groups), "groups")
	b.ReportMetric(float64(unplanned), "unplanned-as-configured")
	b.ReportMetric(short/1e6, "Gbps-short")
}

// provinceState is region r's plan state: n viewers over its zones, each on
// one of its servers at its desired rung.
func provinceState(snap *topology.Snapshot, r int32, zones []topology.Location, n int) *store.AllocState {
	servers := snap.Regions[r].Servers
	st := &store.AllocState{Made: time.Now(), Services: []store.ServiceState{{Name: snap.Services[0].Name}}}
	for _, si := range servers {
		st.Servers = append(st.Servers, snap.Servers[si].Name)
	}
	ladder := snap.Services[0].BitratesKbps
	st.Sessions = make([]store.SessionState, n)
	for i := range st.Sessions {
		z := zones[i%len(zones)]
		d := float64(ladder[(i/7)%len(ladder)])
		st.Sessions[i] = store.SessionState{User: strconv.Itoa(i), Channel: "ch" + strconv.Itoa((i*7919)%200), Desired: d, Danmaku: 1,
			Lat: z.Lat, Lon: z.Lon, Server: int32(i % len(servers)), Kbps: d}
	}
	return st
}
