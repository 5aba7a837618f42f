package qoe_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/topology"
)

// extremeDoc is a small valid province whose numbers the fuzzer picks.
const extremeDoc = `anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/24}
regions: [{name: r1, location: {lat: 31.8, lon: 117.2}}]
nodes:
  - name: n1
    region: r1
    location: {lat: %v, lon: %v}
    servers:
      - {name: s1, address: "10.0.0.1:80", weight: %d, coverage_radius_m: %v, capacity: {bandwidth_mbps: %v, transcode_units: %v}}
      - {name: s2, address: "10.0.0.2:80", capacity: {bandwidth_mbps: 10, transcode_units: 1}}
zones: [{name: z1, region: r1, networks: [100.64.0.0/24]}]
services:
  - {name: live, hostnames: [live.example], url_template: "http://{server}/{path}", bitrates_kbps: [%d, %d], selection: qoe}
`

// FuzzCompileAndPlan: bandwidth_mbps: 1e308 used to be accepted, and the
// QoE planner then failed with NaN every period. Whatever numbers a
// document holds, either Compile refuses them with a field error or the
// planner, given the compiled servers as the allocator gives them, returns
// a finite objective and gap (or an error), never NaN, never a panic.
//
//	go test ./internal/allocation/qoe -run '^$' -fuzz FuzzCompileAndPlan -fuzztime 60s
func FuzzCompileAndPlan(f *testing.F) {
	f.Add(31.8, 117.2, 100, 300.0, 10000.0, 400.0, 1200, 5000, 2500.0, 1.0, 0.0)
	f.Add(31.8, 117.2, 1, 0.0, 1e308, 1e308, 1, 1_000_000, 1e308, 1e308, 1e308)
	f.Add(90.0, -180.0, 1_000_000, 2e7, 1e7, 1e6, 999_999, 1_000_000, 1e6, 1e6, 1e6)
	f.Add(math.NaN(), math.Inf(1), 0, math.Inf(-1), math.NaN(), -1.0, 0, -5, math.NaN(), -1.0, math.Inf(1))
	f.Fuzz(func(t *testing.T, lat, lon float64, weight int, radius, mbps, units float64, r1, r2 int, desired, danmaku, gift float64) {
		doc := fmt.Sprintf(extremeDoc, lat, lon, weight, radius, mbps, units, r1, r2)
		top, err := topology.Decode([]byte(doc))
		if err != nil {
			return // .nan spelled by %v, a bad number: refused with a field error (FuzzDecodeTopology checks that)
		}
		snap, err := topology.Compile(top, 1)
		if err != nil {
			return
		}
		// The profile comes from the config's ranges (alloc.default_profile)
		// or a token: clamp as validation does.
		clamp := func(x, hi float64) float64 {
			if math.IsNaN(x) || x < 0 {
				return 0
			}
			return math.Min(x, hi)
		}
		in := &qoe.Instance{Params: qoe.DefaultParams()}
		for _, b := range snap.Services[0].BitratesKbps {
			in.Ladder = append(in.Ladder, float64(b))
		}
		for _, s := range snap.Servers {
			r := s.CoverageRadiusM
			if r <= 0 {
				r = 1e6
			}
			in.Servers = append(in.Servers, qoe.Server{Lat: s.Loc.Lat, Lon: s.Loc.Lon, RadiusM: r,
				Bandwidth: s.Capacity.BandwidthMbps * 1000, Compute: s.Capacity.TranscodeUnits})
		}
		prof := qoe.Profile{DesiredKbps: max(1, clamp(desired, topology.MaxBitrateKbps)), Danmaku: clamp(danmaku, 1e6), Gift: clamp(gift, 1e6)}
		for i := range 20 {
			in.Users = append(in.Users, qoe.User{Lat: snap.Servers[0].Loc.Lat + float64(i)*1e-4, Lon: snap.Servers[0].Loc.Lon,
				Profile: prof, RoomMean: prof.Danmaku, Ingest: -1, PrevServer: -1})
		}
		res, err := qoe.Lagrangian{TimeLimit: 200 * time.Millisecond}.Solve(context.Background(), in)
		if err != nil {
			t.Fatalf("a document Compile accepted made the planner fail: %v\n%s", err, doc)
		}
		if math.IsNaN(res.Objective) || math.IsInf(res.Objective, 0) || math.IsNaN(res.Gap()) || math.IsInf(res.Gap(), 0) {
			t.Fatalf("objective %v, gap %v\n%s", res.Objective, res.Gap(), doc)
		}
	})
}

// TestPlannerRefusesNonFinite: the planner names a non-finite input rather
// than planning with it.
func TestPlannerRefusesNonFinite(t *testing.T) {
	in := &qoe.Instance{Params: qoe.DefaultParams(), Ladder: []float64{1200, 2500},
		Servers: []qoe.Server{{Lat: 31.8, Lon: 117.2, RadiusM: 1000, Bandwidth: math.Inf(1), Compute: 10}},
		Users:   []qoe.User{{Lat: 31.8, Lon: 117.2, Profile: qoe.Profile{DesiredKbps: 2500}, Ingest: -1, PrevServer: -1}}}
	if _, err := (qoe.Lagrangian{}).Solve(context.Background(), in); err == nil {
		t.Fatal("an infinite bandwidth was planned with")
	}
}

// TestExtremeDocCompiles keeps the fuzz target honest: its first seed
// compiles, so the planner really runs.
func TestExtremeDocCompiles(t *testing.T) {
	if _, err := topology.Parse(fmt.Appendf(nil, extremeDoc, 31.8, 117.2, 100, 300.0, 10000.0, 400.0, 1200, 5000)); err != nil {
		t.Fatal(err)
	}
}
