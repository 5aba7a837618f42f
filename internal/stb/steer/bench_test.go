package steer_test

import (
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/overflow"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// clients spreads requests over every zone of the province.
func clients(s *topology.Snapshot, n int) []netip.Addr {
	out := make([]netip.Addr, 0, n)
	for i := 0; len(out) < n; i++ {
		z := s.Zones[i%len(s.Zones)]
		p := z.Networks[(i/len(s.Zones))%len(z.Networks)]
		a := p.Addr().As4()
		a[3] += byte(i % 16)
		out = append(out, netip.AddrFrom4(a))
	}
	return out
}

// BenchmarkDecide: one STB decision on the province-scale snapshot (16
// regions, 200 nodes, 10,000 servers, 100,000 networks). Target: < 2 µs and
// <= 2 allocations.
func BenchmarkDecide(b *testing.B) {
	s := fixture.ScaleSnapshot(b)
	e := steer.New(s, steer.Options{DefaultRegion: s.Regions[0].Name})
	cs := clients(s, 4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := e.Decide(steer.Request{Client: cs[i&4095], Host: "live.iptv.example"})
		if d.Server < 0 {
			b.Fatal("no server")
		}
		i++
	}
}

// BenchmarkDecideIPv6: BenchmarkDecide on the province-scale snapshot
// made dual-stack (fixture.DualStack), for IPv6 clients (their own zone
// networks, the servers' IPv6 addresses), rendering the URL as the front
// end does; its baseline is the same for IPv4 clients of that snapshot.
// The Skip pair is the service with family_fallback skip while one server
// in ten has its IPv6 address down: the family-restricted pool.
func BenchmarkDecideIPv6(b *testing.B)              { benchFamily(b, false, steer.FamilyV6) }
func BenchmarkDecideIPv6_Baseline(b *testing.B)     { benchFamily(b, false, steer.FamilyV4) }
func BenchmarkDecideIPv6Skip(b *testing.B)          { benchFamily(b, true, steer.FamilyV6) }
func BenchmarkDecideIPv6Skip_Baseline(b *testing.B) { benchFamily(b, true, steer.FamilyV4) }

func benchFamily(b *testing.B, skip bool, f steer.Family) {
	doc := scaleDoc(b)
	fixture.DualStack(doc)
	var up func(int32, bool) bool
	if skip {
		doc.Services[0].FamilyFallback = topology.FamilySkip
		up = func(i int32, v6 bool) bool { return !v6 || i%10 != 0 }
	}
	s, err := topology.Compile(doc, 2)
	if err != nil {
		b.Fatal(err)
	}
	cs := clients(s, 4096)
	if f == steer.FamilyV6 {
		for i := range cs {
			a := fixture.Zone6(i % len(s.Zones)).Addr().As16()
			a[15] = byte(i/len(s.Zones)) + 1
			cs[i] = netip.AddrFrom16(a)
		}
	}
	e := steer.New(s, steer.Options{DefaultRegion: s.Regions[0].Name, FamilyUp: up})
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := e.Decide(steer.Request{Client: cs[i&4095], Host: "live.iptv.example", Family: f})
		if d.Result != steer.ResultCZ {
			b.Fatal(d.Result)
		}
		buf = e.AppendLocation(buf[:0], &d, "/cctv1/index.m3u8", "")
		i++
	}
}

// BenchmarkDecide_Baseline: only the two lookups any router must do (client
// address in the CIDR table, hostname in the service map), no choosing.
func BenchmarkDecide_Baseline(b *testing.B) {
	s := fixture.ScaleSnapshot(b)
	cs := clients(s, 4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := s.ZoneOf(cs[i&4095]); !ok {
			b.Fatal("no zone")
		}
		if _, ok := s.ServiceByHost("live.iptv.example"); !ok {
			b.Fatal("no service")
		}
		i++
	}
}

// BenchmarkDecideFallback: the client's region has no available server.
func BenchmarkDecideFallback(b *testing.B) {
	s := fixture.ScaleSnapshot(b)
	first := s.Regions[0].Name
	e := steer.New(s, steer.Options{Available: func(i int32) bool { return s.Regions[s.Servers[i].Region].Name != first }})
	z, _ := s.Zone(first + "-z1")
	c := s.Zones[z].Networks[0].Addr()
	b.ReportAllocs()
	for b.Loop() {
		if d := e.Decide(steer.Request{Client: c, Host: "live.iptv.example"}); d.Result != steer.ResultFallback {
			b.Fatal(d.Result)
		}
	}
}

// BenchmarkNewEngine: rebuilding the routing tables for the province (done
// off the hot path on every snapshot or availability change).
func BenchmarkNewEngine(b *testing.B) {
	s := fixture.ScaleSnapshot(b)
	b.ReportAllocs()
	for b.Loop() {
		steer.New(s, steer.Options{})
	}
}

// BenchmarkNewEngineSkip: BenchmarkNewEngine on the province made
// dual-stack with family_fallback skip and one server's IPv6 address in
// ten down, so the per-family pools are built too; its baseline is the
// same province with every address up (no family pool differs).
func BenchmarkNewEngineSkip(b *testing.B) {
	benchNewFamily(b, func(i int32, v6 bool) bool { return !v6 || i%10 != 0 })
}
func BenchmarkNewEngineSkip_Baseline(b *testing.B) {
	benchNewFamily(b, func(int32, bool) bool { return true })
}

func benchNewFamily(b *testing.B, up func(int32, bool) bool) {
	doc := scaleDoc(b)
	fixture.DualStack(doc)
	doc.Services[0].FamilyFallback = topology.FamilySkip
	s, err := topology.Compile(doc, 2)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		steer.New(s, steer.Options{FamilyUp: up})
	}
}

// BenchmarkDecidePoolsOverflow: BenchmarkDecide with the service on a pool
// (every other node's servers), overflow thresholds on and one node in ten
// over them, counting requests per node as a scheduler does. Target:
// within 1.5x of BenchmarkDecide, 0 allocations.
func BenchmarkDecidePoolsOverflow(b *testing.B) {
	doc := scaleDoc(b)
	for i := range doc.Nodes {
		fleet := "edge"
		if i%2 == 1 {
			fleet = "vod"
		}
		doc.Nodes[i].Labels = topology.Labels{"fleet": fleet}
	}
	doc.Services[0].Match = topology.Labels{"fleet": "edge"}
	doc.Services[0].Overflow = &topology.Overflow{RPSPerServer: 1e6}
	s, err := topology.Compile(doc, 2)
	if err != nil {
		b.Fatal(err)
	}
	over := overState{}
	for n := range s.Nodes {
		if n%10 == 0 {
			over[[2]int32{0, int32(n)}] = true
		}
	}
	counts := overflow.NewCounters(len(s.Services), len(s.Nodes))
	e := steer.New(s, steer.Options{DefaultRegion: s.Regions[0].Name, Overflow: over, Count: counts})
	cs := clients(s, 4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := e.Decide(steer.Request{Client: cs[i&4095], Host: "live.iptv.example"})
		if d.Server < 0 {
			b.Fatal("no server")
		}
		i++
	}
}

// scaleDoc is a copy of fixture.ScaleSnapshot's document to change.
func scaleDoc(b *testing.B) *topology.Topology {
	js, err := fixture.ScaleSnapshot(b).Doc.EncodeJSON()
	if err != nil {
		b.Fatal(err)
	}
	doc, err := topology.DecodeJSON(js)
	if err != nil {
		b.Fatal(err)
	}
	return doc
}
