package topogen

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
)

var update = flag.Bool("update", false, "rewrite deploy/examples/topology.yaml")

const (
	// relative to this package's directory
	citiesPath  = "../../../../data/anhui-cities.csv"
	examplePath = "../../../../deploy/examples/topology.yaml"
)

// testCities is a fixed province, smaller than the sample.
var testCities = []City{
	{"hefei", 31.82, 117.23}, {"wuhu", 31.35, 118.43}, {"bengbu", 32.92, 117.39},
	{"huainan", 32.63, 116.98}, {"maanshan", 31.67, 118.51}, {"anqing", 30.54, 117.06},
}

func compile(t testing.TB, top *topology.Topology) *topology.Snapshot {
	t.Helper()
	s, err := topology.Compile(top, 1)
	if err != nil {
		t.Fatalf("generated topology does not compile:\n%v", err)
	}
	return s
}

func TestProvinceCompilesWithRightCounts(t *testing.T) {
	o := Options{NodesPerRegion: 3, ServersPerNode: 5, ZonesPerRegion: 2, NetworksPerZone: 7, FallbackPerRegion: 2}
	top := Province(testCities, o)
	s := compile(t, top)
	want := topology.Counts{Regions: 6, Nodes: 18, Servers: 90, Zones: 12, Networks: 84, Services: 1}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	// names and shapes
	if got := top.Nodes[4].Name; got != "wuhu-2" {
		t.Errorf("nodes[4].name = %q, want wuhu-2", got)
	}
	if got := top.Nodes[0].Servers[4].Name; got != "hefei-1-e" {
		t.Errorf("first server name = %q, want hefei-1-e", got)
	}
	srv := top.Nodes[0].Servers[0]
	if srv.Address != "10.1.1.10:8080" || srv.Health == nil || srv.Health.URL != "http://10.1.1.10:8080/health" ||
		srv.Weight != 100 || srv.CoverageRadiusM != 15000 || srv.Capacity != (topology.Capacity{BandwidthMbps: 10000, TranscodeUnits: 400}) {
		t.Errorf("first server = %+v", srv)
	}
	if got := top.Zones[3].Name; got != "wuhu-z2" {
		t.Errorf("zones[3].name = %q, want wuhu-z2", got)
	}
	if got := top.Zones[0].Networks[0]; got != "100.64.0.0/24" {
		t.Errorf("first network = %q, want 100.64.0.0/24", got)
	}
	if len(top.Regions[0].Fallback) != 0 {
		t.Errorf("the capital falls back to %v, want nothing", top.Regions[0].Fallback)
	}
	for i, r := range top.Regions[1:] {
		if len(r.Fallback) == 0 || len(r.Fallback) > 2 {
			t.Errorf("regions[%d] falls back to %v, want 1 or 2 regions", i+1, r.Fallback)
		}
	}
	// every node and zone is near its city
	for _, n := range s.Nodes {
		if d := Distance(cityAt(s.Regions[n.Region].Loc), cityAt(n.Loc)); d > 10_000 {
			t.Errorf("node %s is %.0f m from its city", n.Name, d)
		}
	}
	for _, z := range s.Zones {
		if d := Distance(cityAt(s.Regions[z.Region].Loc), cityAt(z.Loc)); d > 10_000 {
			t.Errorf("zone %s is %.0f m from its city", z.Name, d)
		}
	}
	svc := top.Services[0]
	if svc.Name != "live" || svc.Hostnames[0] != "live.iptv.example" || svc.Selection != "nearest" ||
		fmt.Sprint(svc.BitratesKbps) != "[730 1100 2000 3000 4500 6000]" || !strings.Contains(svc.URLTemplate, "{server}") {
		t.Errorf("service = %+v", svc)
	}
}

func cityAt(l topology.Location) City { return City{Lat: l.Lat, Lon: l.Lon} }

// TestVODFleet: with VOD servers, each node gets its VOD servers after its
// live ones, and each service selects only its own fleet.
func TestVODFleet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		o          Options
		firstVOD   string // name and address of the first node's first VOD server
		firstAddr  string
		liveCount  int
		vodPerNode int
	}{
		{"one per node", Options{NodesPerRegion: 2, ServersPerNode: 3, ZonesPerRegion: 1, NetworksPerZone: 1, FallbackPerRegion: 1, VODServersPerNode: 1},
			"hefei-1-vod-a", "10.1.1.13:8080", 3, 1},
		{"two per node", Options{NodesPerRegion: 1, ServersPerNode: 2, VODServersPerNode: 2}, "hefei-1-vod-a", "10.1.1.12:8080", 2, 2},
		{"beyond the readable scheme", Options{NodesPerRegion: 1, ServersPerNode: 240, VODServersPerNode: 5}, "hefei-1-vod-a", "10.0.0.241:8080", 240, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := Province(testCities[:3], tc.o)
			s := compile(t, top)
			if got := s.Counts(); got.Services != 2 || got.Servers != 3*tc.o.NodesPerRegion*(tc.liveCount+tc.vodPerNode) {
				t.Errorf("counts = %+v", got)
			}
			if sv := top.Nodes[0].Servers[tc.liveCount]; sv.Name != tc.firstVOD || sv.Address != tc.firstAddr {
				t.Errorf("first VOD server = %s at %s, want %s at %s", sv.Name, sv.Address, tc.firstVOD, tc.firstAddr)
			}
			live, liveOK := s.ServiceByHost(Hostname)
			vod, vodOK := s.ServiceByHost(VODHostname)
			if !liveOK || !vodOK || s.Services[live].Name != ServiceName || s.Services[vod].Name != VODServiceName {
				t.Fatalf("services by host: live %d %v, vod %d %v", live, liveOK, vod, vodOK)
			}
			for _, n := range top.Nodes {
				for i, sv := range n.Servers {
					k, ok := s.Server(sv.Name)
					if !ok {
						t.Fatalf("server %s not in the snapshot", sv.Name)
					}
					isVOD := i >= tc.liveCount
					if s.InPool(live, k) == isVOD || s.InPool(vod, k) != isVOD {
						t.Errorf("server %s (VOD %v): in live's pool %v, in vod's %v", sv.Name, isVOD, s.InPool(live, k), s.InPool(vod, k))
					}
					if isVOD != strings.Contains(sv.Name, "-vod-") {
						t.Errorf("server %s: VOD %v", sv.Name, isVOD)
					}
				}
			}
		})
	}
	// Without VOD servers: the live service alone, on every server, no labels.
	top := Province(testCities[:2], Options{NodesPerRegion: 1, ServersPerNode: 2})
	if len(top.Services) != 1 || top.Services[0].Match != nil || top.Pools != nil || top.Nodes[0].Labels != nil || top.Nodes[0].Servers[1].Labels != nil {
		t.Errorf("a province without VOD has VOD parts: services %+v, pools %+v, node %+v", top.Services, top.Pools, top.Nodes[0])
	}
}

func TestZoneNetworksInCGNATAndRegionBlocks(t *testing.T) {
	top := Province(testCities, Options{NodesPerRegion: 1, ServersPerNode: 1, ZonesPerRegion: 3, NetworksPerZone: 4})
	s := compile(t, top)
	space := netip.MustParsePrefix(ZoneSpace)
	// 6 regions round up to 8 blocks: a /13 each
	for _, z := range s.Zones {
		block := netip.PrefixFrom(space.Addr(), 13)
		b := ipv4(block.Addr()) + uint32(z.Region)<<19
		block = netip.PrefixFrom(fromIPv4(b), 13)
		for _, n := range z.Networks {
			if !space.Contains(n.Addr()) || !block.Contains(n.Addr()) || n.Bits() != 24 {
				t.Errorf("zone %s network %s not a /24 in its region's block %s", z.Name, n, block)
			}
		}
		// a client of the zone maps back to it
		zi, ok := s.ZoneOf(z.Networks[0].Addr().Next())
		if !ok || s.Zones[zi].Name != z.Name {
			t.Errorf("ZoneOf(%s) = %d, %v; want zone %s", z.Networks[0].Addr().Next(), zi, ok, z.Name)
		}
	}
}

func TestServerNamesAndAddressesBeyond26(t *testing.T) {
	top := Province(testCities[:2], Options{NodesPerRegion: 2, ServersPerNode: 30})
	compile(t, top)
	if got := top.Nodes[1].Servers[29].Name; got != "hefei-2-30" {
		t.Errorf("last server of hefei-2 = %q, want hefei-2-30", got)
	}
	if got := top.Nodes[3].Servers[29].Address; got != "10.2.2.39:8080" {
		t.Errorf("last server address = %q, want 10.2.2.39:8080", got)
	}
	// too many servers per node for the readable scheme: counter through 10/8
	top = Province(testCities[:2], Options{NodesPerRegion: 1, ServersPerNode: 300})
	compile(t, top)
	if got := top.Nodes[1].Servers[299].Address; got != "10.0.2.88:8080" {
		t.Errorf("600th server address = %q, want 10.0.2.88:8080", got)
	}
}

func TestFallbacksAreAcyclicAndTowardsTheCapital(t *testing.T) {
	cities := Cities(testCities, 40) // given + synthesised
	for _, k := range []int{1, 2, 3, 5} {
		fb := Fallbacks(cities, k)
		dist := func(name string) float64 {
			for _, c := range cities {
				if c.Name == name {
					return Distance(cities[0], c)
				}
			}
			t.Fatalf("unknown fallback %q", name)
			return 0
		}
		for i, list := range fb {
			if i == 0 && len(list) != 0 {
				t.Errorf("k=%d: capital falls back to %v", k, list)
			}
			if i > 0 && len(list) != min(k, countCloser(cities, i)) {
				t.Errorf("k=%d: %s has %d fallbacks %v, want %d", k, cities[i].Name, len(list), list, min(k, countCloser(cities, i)))
			}
			for _, f := range list {
				if dist(f) > Distance(cities[0], cities[i]) {
					t.Errorf("k=%d: %s falls back to %s, which is further from the capital", k, cities[i].Name, f)
				}
			}
		}
		top := Province(cities, Options{NodesPerRegion: 1, ServersPerNode: 1, FallbackPerRegion: k})
		compile(t, top) // Compile rejects cycles
	}
}

func countCloser(cities []City, i int) int {
	n := 0
	for j := range cities {
		if j != i && Distance(cities[0], cities[j]) <= Distance(cities[0], cities[i]) {
			n++
		}
	}
	return n
}

func TestFallbacksNearestFirst(t *testing.T) {
	// on a line east of the capital: each city's nearest closer-to-capital
	// city is its western neighbour
	cities := []City{{"c0", 30, 110}, {"c3", 30, 113}, {"c1", 30, 111}, {"c2", 30, 112}}
	fb := Fallbacks(cities, 2)
	want := [][]string{nil, {"c2", "c1"}, {"c0"}, {"c1", "c0"}}
	if fmt.Sprint(fb) != fmt.Sprint(want) {
		t.Errorf("fallbacks = %v, want %v", fb, want)
	}
}

func TestProvinceScale(t *testing.T) {
	top := ProvinceScale(testCities) // 6 given, 10 synthesised
	s := compile(t, top)
	want := topology.Counts{Regions: 16, Nodes: 200, Servers: 10_000, Zones: 400, Networks: 100_000, Services: 1}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	if s.Regions[0].Name != "hefei" || s.Regions[6].Name != "syn-1" {
		t.Errorf("regions start %s ... %s, want hefei ... syn-1", s.Regions[0].Name, s.Regions[6].Name)
	}
	if n := len(s.Regions[0].Nodes); n != 13 {
		t.Errorf("capital has %d nodes, want 13", n)
	}
	if n := len(s.Regions[15].Nodes); n != 12 {
		t.Errorf("last region has %d nodes, want 12", n)
	}
	if got := top.Zones[0].Networks[1]; got != "100.64.0.32/27" {
		t.Errorf("second network = %q, want 100.64.0.32/27", got)
	}
	// Under QoE every zone has a covering server of its region.
	s.Services[0].Selection = topology.SelectQoE
	if w := topology.Warnings(s); len(w) > 0 {
		t.Errorf("province scale with selection qoe: %d warnings, first: %s", len(w), w[0])
	}
	// no cities at all: every city synthesised
	s = compile(t, ProvinceScale(nil))
	if got := s.Counts(); got != want {
		t.Errorf("counts without cities = %+v, want %+v", got, want)
	}
}

func TestLargeBigCounter(t *testing.T) {
	// beyond the readable address scheme and with more networks than /24s fit
	top := Large(nil, LargeOptions{Regions: 300, Nodes: 300, Servers: 600, Zones: 300, Networks: 70_000})
	s := compile(t, top)
	want := topology.Counts{Regions: 300, Nodes: 300, Servers: 600, Zones: 300, Networks: 70_000, Services: 1}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	for name, gen := range map[string]func() *topology.Topology{
		"province": func() *topology.Topology { return Province(testCities, SampleOptions) },
		"scale":    func() *topology.Topology { return ProvinceScale(testCities) },
	} {
		a, err := gen().EncodeJSON()
		if err != nil {
			t.Fatal(err)
		}
		b, err := gen().EncodeJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two generations differ", name)
		}
	}
}

func TestInvalidOptionsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"no servers":      func() { Province(testCities, Options{NodesPerRegion: 1}) },
		"negative VOD":    func() { Province(testCities, Options{NodesPerRegion: 1, ServersPerNode: 1, VODServersPerNode: -1}) },
		"zones, no nets":  func() { Province(testCities, Options{NodesPerRegion: 1, ServersPerNode: 1, ZonesPerRegion: 1}) },
		"no cities":       func() { Province(nil, Options{NodesPerRegion: 1, ServersPerNode: 1}) },
		"nodes < regions": func() { Large(nil, LargeOptions{Regions: 2, Nodes: 1, Servers: 1}) },
		"too many nets":   func() { Large(nil, LargeOptions{Regions: 1, Nodes: 1, Servers: 1, Zones: 1, Networks: 1<<22 + 1}) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				} else if !strings.HasPrefix(fmt.Sprint(r), "topogen: ") {
					t.Errorf("%s: panic %v does not say where it comes from", name, r)
				}
			}()
			f()
		}()
	}
}

func TestReadCities(t *testing.T) {
	good := "city,lat,lon\nhefei,31.82,117.23\n# comment\nwuhu, 31.35, 118.43\r\n"
	cities, err := ReadCities(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cities) != "[{hefei 31.82 117.23} {wuhu 31.35 118.43}]" {
		t.Errorf("cities = %v", cities)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty file"},
		{"name,lat,lon\n", `line 1: header is "name,lat,lon"`},
		{"city,lat,lon\n", "no cities"},
		{"city,lat,lon\nhefei,31.82\n", "line 2: 2 fields, want 3"},
		{"city,lat,lon\nhefei,31.82,117.23\nwuhu,north,118\n", `line 3: lat: "north" is not a number`},
		{"city,lat,lon\nhefei,31.82,200\n", "line 2: lon: 200 is out of range [-180, 180]"},
		{"city,lat,lon\nhefei,95,117\n", "line 2: lat: 95 is out of range [-90, 90]"},
		{"city,lat,lon\nhefei,NaN,117\n", "line 2: lat: NaN is out of range"},
		{"city,lat,lon\nHefei,31,117\n", `line 2: city "Hefei" is not a valid region name`},
		{"city,lat,lon\n,31,117\n", `line 2: city "" is not a valid region name`},
		{"city,lat,lon\nhefei,31,117\nwuhu,31,118\nhefei,32,117\n", `line 4: city "hefei" already on line 2`},
		{"city,lat,lon\nhe\"fei,31,117\n", "line 2"},
	} {
		_, err := ReadCities(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadCities(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestLoadCities(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.csv")
	if err := os.WriteFile(p, []byte("city,lat,lon\nhefei,31.82,x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCities(p); err == nil || !strings.Contains(err.Error(), p+": line 2: lon:") {
		t.Errorf("LoadCities = %v, want an error naming the file and line 2", err)
	}
	if _, err := LoadCities(filepath.Join(dir, "missing.csv")); err == nil {
		t.Error("LoadCities of a missing file succeeded")
	}
}

// TestExampleTopology keeps deploy/examples/topology.yaml equal to the sample
// province generated from data/anhui-cities.csv.
func TestExampleTopology(t *testing.T) {
	cities, err := LoadCities(citiesPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(cities) != 16 {
		t.Fatalf("%d cities in %s, want 16", len(cities), citiesPath)
	}
	top := Province(cities, SampleOptions)
	s := compile(t, top)
	want := topology.Counts{Regions: 16, Nodes: 32, Servers: 160, Zones: 32, Networks: 96, Services: 2}
	if got := s.Counts(); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
	body, err := YAML(top)
	if err != nil {
		t.Fatal(err)
	}
	header := "# Sample province: the 16 cities of Anhui (data/anhui-cities.csv), each a\n" +
		"# region with 2 edge nodes of 4 live media servers and 1 VOD server, and 2\n" +
		"# coverage zones of 3 client networks; each city falls back to its 2 nearest\n" +
		"# cities closer to the capital. Two services on their own fleets: live\n" +
		"# (live.iptv.example) on the servers labelled fleet: edge, vod\n" +
		"# (vod.iptv.example) on the pool vod, the servers labelled fleet: vod.\n" +
		"# Format: docs/operations.md. Apply with: schedctl apply -f topology.yaml\n" +
		"# Generated by internal/province/topology/topogen; do not edit by hand, regenerate with:\n" +
		"#   go test ./internal/province/topology/topogen -run TestExampleTopology -update\n\n"
	got := append([]byte(header), body...)

	if *update {
		if err := os.MkdirAll(filepath.Dir(examplePath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(examplePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", examplePath)
	}
	committed, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(committed, got) {
		t.Errorf("%s is out of date: %s; regenerate with: go test ./internal/province/topology/topogen -run TestExampleTopology -update",
			examplePath, firstDiff(committed, got))
	}
	// With `selection: qoe` every zone is covered by its own region's
	// servers (300 m radii once covered none, so QoE sent every viewer
	// to another city at the lowest rung).
	qoe := *top
	qoe.Services = slices.Clone(top.Services)
	for i := range qoe.Services {
		qoe.Services[i].Selection = topology.SelectQoE
	}
	if w := topology.Warnings(compile(t, &qoe)); len(w) > 0 {
		t.Errorf("the sample with selection qoe has %d warnings, first: %s", len(w), w[0])
	}
	// The committed file is what operators copy: it must parse on its own
	// and describe the same province.
	parsed, err := topology.Parse(committed)
	if err != nil {
		t.Fatalf("%s does not parse:\n%v", examplePath, err)
	}
	a, _ := parsed.EncodeJSON()
	b, _ := top.EncodeJSON()
	if !bytes.Equal(a, b) {
		t.Errorf("%s parses to a different topology than the generator's", examplePath)
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d is %q, generator gives %q", i+1, x, y)
		}
	}
	return "no difference"
}
