package zoneimport

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// base is a two-region province the tests import into.
func base(t testing.TB) *topology.Topology {
	t.Helper()
	top := topogen.Province([]topogen.City{{Name: "hefei", Lat: 31.82, Lon: 117.23}, {Name: "wuhu", Lat: 31.33, Lon: 118.38}}, topogen.SampleOptions)
	if err := topology.Validate(top); err != nil {
		t.Fatal(err)
	}
	return top
}

func opts(t testing.TB) Options { return Options{Regions: base(t).Regions} }

// problems are the messages of err, one a line, as an operator reads them.
func problems(t *testing.T, err error) []string {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want a *zoneimport.Error", err, err)
	}
	var out []string
	for _, p := range e.Problems {
		out = append(out, p.Error())
	}
	return out
}

// TestCSVErrors: every kind of mistake is reported, all at once, each at
// its line and column.
func TestCSVErrors(t *testing.T) {
	cases := []struct {
		name, csv string
		want      []string
	}{
		{"invalid CIDR", "network,region\n10.0.0.0/33,hefei\n10.0.1.0/24,hefei\nbanana,wuhu\n", []string{
			`line 2, column 1 (network): not a CIDR network or an IP address: "10.0.0.0/33"`,
			`line 4, column 1 (network): not a CIDR network or an IP address: "banana"`,
		}},
		{"host bits", "region,network\nhefei,10.0.0.1/24\n", []string{
			`line 2, column 7 (network): host bits set in 10.0.0.1/24 (did you mean 10.0.0.0/24?)`,
		}},
		{"ipv4-mapped", "network,region\n::ffff:10.0.0.0/120,hefei\n", []string{
			`line 2, column 1 (network): ::ffff:10.0.0.0/120 is IPv4-mapped: write it as IPv4 (10.0.0.0/24)`,
		}},
		{"unknown region", "network,region\n10.0.0.0/24,hefie\n10.0.1.0/24,nowhere\n", []string{
			`line 2, column 13 (region): unknown region "hefie"; did you mean "hefei"?`,
			`line 3, column 13 (region): unknown region "nowhere"`,
		}},
		{"duplicate", "network,region,zone\n10.0.0.0/24,hefei,a\n10.0.1.0/24,hefei,a\n10.0.0.0/24,wuhu,b\n10.0.1.0/24,hefei,a\n", []string{
			`line 4, column 1 (network): duplicate network 10.0.0.0/24: already in zone "a" at line 2, column 1 (network)`,
			`line 5, column 1 (network): duplicate network 10.0.1.0/24: already in this zone at line 3, column 1 (network)`,
		}},
		{"overlap across regions", "network,region\n10.0.0.0/16,hefei\n10.0.5.0/24,wuhu\n2001:db8::/32,wuhu\n2001:db8:1::/48,hefei\n", []string{
			`line 3, column 1 (network): 10.0.5.0/24 (zone "wuhu-1", region "wuhu") overlaps 10.0.0.0/16 of zone "hefei-1" (region "hefei") at line 2, column 1 (network)`,
			`line 5, column 1 (network): 2001:db8:1::/48 (zone "hefei-1", region "hefei") overlaps 2001:db8::/32 of zone "wuhu-1" (region "wuhu") at line 4, column 1 (network)`,
		}},
		{"coordinates", "network,region,lat,lon\n10.0.0.0/24,hefei,91,117\n10.0.1.0/24,hefei,31,-181\n10.0.2.0/24,hefei,x,1\n10.0.3.0/24,hefei,31,\n", []string{
			`line 2, column 19 (lat): latitude 91 is out of range [-90, 90]`,
			`line 3, column 22 (lon): longitude -181 is out of range [-180, 180]`,
			`line 4, column 19 (lat): not a number: "x"`,
			`line 5, column 22 (lon): lat and lon come together: one is empty`,
		}},
		{"zone in two regions", "network,region,zone\n10.0.0.0/24,hefei,z\n10.0.1.0/24,wuhu,z\n", []string{
			`line 3, column 13 (region): zone "z" is in region "hefei" at line 2, column 13 (region), here in "wuhu"`,
		}},
		{"header", "network,city\n10.0.0.0/24,hefei\n", []string{
			`line 1, column 9 (header): unknown column "city" (want network, region, zone, lat, lon)`,
		}},
		{"no region column", "network,zone\n", []string{
			`line 1, column 1 (header): no region column (the header names network,zone)`,
		}},
		{"field count and quotes", "network,region\n10.0.0.0/24\n\"10.0.1.0/24,hefei\n", []string{
			`line 2, column 1 (network): 1 field, the header has 2`,
			`line 3, column 20 (csv): extraneous or missing " in quoted-field`,
		}},
		{"empty", "", []string{`line 1, column 1 (header): empty file: want a header row naming the columns network, region (and optionally zone, lat, lon)`}},
		{"bad zone name", "network,region,zone\n10.0.0.0/24,hefei,Hefei Z1\n", []string{
			`zones[0].name: "Hefei Z1" is not a valid name (lowercase letters, digits, and '-', '_', '.' inside) (zone from line 2, column 19 (zone))`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ReadCSV([]byte(c.csv), "plan.csv", opts(t))
			if err == nil {
				_, err = p.Into(base(t), Replace, "plan.csv")
			}
			if err == nil {
				t.Fatal("no error")
			}
			got := problems(t, err)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestCZFErrors: the same, at JSON paths with their lines.
func TestCZFErrors(t *testing.T) {
	doc := `{
  "revision": "7",
  "coverageZones": {
    "hefei-z1": {
      "network": ["10.0.0.0/24", "10.0.1.1/24", "2001:db8::/32"],
      "network6": ["10.9.0.0/16", "2001:db8:0:1::/64"],
      "coordinates": {"latitude": 31.8, "longitude": 117.2}
    },
    "wuhu-z1": {
      "network": ["10.0.0.0/24", 7],
      "coordinates": {"latitude": 95, "longitude": 118.4}
    },
    "far": {
      "network": ["10.1.0.0/16"],
      "color": "red"
    },
    "hefei-z1": {"network": []}
  }
}`
	_, err := ReadCZF([]byte(doc), "czf.json", opts(t))
	want := []string{
		`coverageZones.hefei-z1.network[1]: host bits set in 10.0.1.1/24 (did you mean 10.0.1.0/24?) (line 5)`,
		`coverageZones.hefei-z1.network[2]: 2001:db8::/32 is IPv6: IPv6 networks go in network6 (line 5)`,
		`coverageZones.hefei-z1.network6[0]: 10.9.0.0/16 is IPv4: IPv4 networks go in network (line 6)`,
		`coverageZones.wuhu-z1.network[1]: want a network as a string, not the number 7 (line 10)`,
		`coverageZones.wuhu-z1.coordinates: latitude 95 is out of range [-90, 90] (line 11)`,
		`coverageZones.wuhu-z1: no coordinates to find the zone's region by: give coordinates, a region map, or use the zone names (line 9)`,
		`coverageZones.far.color: unknown key "color" (a coverage zone has network, network6, coordinates) (line 15)`,
		`coverageZones.far: no coordinates to find the zone's region by: give coordinates, a region map, or use the zone names (line 13)`,
		`coverageZones.hefei-z1: zone "hefei-z1" given twice (first at coverageZones.hefei-z1 (line 4)) (line 17)`,
		`coverageZones.wuhu-z1.network[0]: duplicate network 10.0.0.0/24: already in zone "hefei-z1" at coverageZones.hefei-z1.network[0] (line 5) (line 10)`,
	}
	if got := problems(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Regions by name and by map, with their mistakes.
	small := `{"coverageZones": {"hefie-a": {"network": ["10.0.0.0/24"]}, "wuhu-b": {"network": ["10.0.0.0/25"]}}}`
	_, err = ReadCZF([]byte(small), "czf.json", Options{Regions: base(t).Regions, RegionFromName: true})
	want = []string{
		`coverageZones.hefie-a: unknown region "hefie" (from the zone's name); did you mean "hefei"? (line 1)`,
	}
	if got := problems(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, err = ReadCZF([]byte(small), "czf.json", Options{Regions: base(t).Regions, RegionMap: map[string]string{"hefie-a": "hefei", "wuhu-b": "wuhu"}, RegionMapName: "map.yaml"})
	want = []string{
		`coverageZones.wuhu-b.network[0]: 10.0.0.0/25 (zone "wuhu-b", region "wuhu") overlaps 10.0.0.0/24 of zone "hefie-a" (region "hefei") at coverageZones.hefie-a.network[0] (line 1) (line 1)`,
	}
	if got := problems(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, err = ReadCZF([]byte(`{"coverageZones": {"a": {"network": ["10.0.0.0/24"]`), "czf.json", opts(t))
	if got := problems(t, err); len(got) != 1 || !strings.HasPrefix(got[0], "coverageZones") {
		t.Errorf("truncated file: %q", got)
	}
}

// TestCSVDefaults: rows without a zone go to "<region>-<n>", one per region
// and location, skipping names the file gives; a zone at its region's
// location is written without one; a bare address is its host network.
func TestCSVDefaults(t *testing.T) {
	b := base(t)
	hefei := b.Regions[0].Location
	csv := fmt.Sprintf("# IPAM export\nregion,network,zone,lat,lon\nhefei,10.0.0.0/24,,,\nhefei,10.0.1.0/24,hefei-1,,\nhefei,10.0.2.0/24,,31.9,117.3\nwuhu,2001:DB8::/48,,,\nhefei,10.0.3.7,,%v,%v\n", hefei.Lat, hefei.Lon)
	p, err := ReadCSV([]byte(csv), "plan.csv", opts(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []topology.Zone{
		{Name: "hefei-2", Region: "hefei", Networks: []string{"10.0.0.0/24", "10.0.3.7/32"}},
		{Name: "hefei-1", Region: "hefei", Networks: []string{"10.0.1.0/24"}},
		{Name: "hefei-3", Region: "hefei", Networks: []string{"10.0.2.0/24"}, Location: &topology.Location{Lat: 31.9, Lon: 117.3}},
		{Name: "wuhu-1", Region: "wuhu", Networks: []string{"2001:db8::/48"}},
	}
	if !reflect.DeepEqual(p.Zones, want) {
		t.Errorf("zones %+v", p.Zones)
	}
}

// TestRoundTrip: import(export(x)) is x, for both formats, on a province
// with IPv4 and IPv6 zones, some at their own location.
func TestRoundTrip(t *testing.T) {
	top := base(t)
	top.Zones[0].Networks = append(top.Zones[0].Networks, "2001:db8:1::/48")
	top.Zones[1].Location = nil // at its region's
	if err := topology.Validate(top); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"csv", "czf"} {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			var p *Plan
			var err error
			if format == "csv" {
				if err = WriteCSV(&b, top); err == nil {
					p, err = ReadCSV(b.Bytes(), "x", Options{Regions: top.Regions})
				}
			} else {
				if err = WriteCZF(&b, top); err == nil {
					p, err = ReadCZF(b.Bytes(), "x", Options{Regions: top.Regions})
				}
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			got, err := p.Into(top, Replace, "x")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Zones, top.Zones) {
				t.Errorf("zones differ:\n%+v\nwant\n%+v", got.Zones, top.Zones)
			}
		})
	}
}

// TestMerge: merged zones replace those of the same name and keep the rest;
// a conflict with a kept zone is named at the imported network's place.
func TestMerge(t *testing.T) {
	top := base(t)
	kept := top.Zones[1]
	p, err := ReadCSV([]byte("network,region,zone\n10.200.0.0/24,hefei,"+top.Zones[0].Name+"\n10.201.0.0/24,wuhu,new\n"), "m.csv", Options{Regions: top.Regions})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Into(top, Merge, "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Zones) != len(top.Zones)+1 || !reflect.DeepEqual(got.Zones[1], kept) || got.Zones[0].Networks[0] != "10.200.0.0/24" || got.Zones[len(got.Zones)-1].Name != "new" {
		t.Errorf("merged zones %+v", got.Zones)
	}
	if &top.Zones[0] == &got.Zones[0] || top.Zones[0].Networks[0] == "10.200.0.0/24" {
		t.Error("the base topology was changed")
	}
	p, err = ReadCSV([]byte("network,region,zone\n"+kept.Networks[0]+",hefei,other\n"), "m.csv", Options{Regions: top.Regions})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Into(top, Merge, "m.csv")
	got2 := problems(t, err)
	if len(got2) != 1 || !strings.HasPrefix(got2[0], "line 2, column 1 (network): network "+kept.Networks[0]+" is already in zones[1]") {
		t.Errorf("got %q", got2)
	}
}

// TestMove: networks already under other zones move into the imported
// ones (where Merge refuses the overlap); a zone left with no network
// goes, the others keep what was not moved.
func TestMove(t *testing.T) {
	top := base(t)
	a, b := top.Zones[0], top.Zones[1]
	if len(b.Networks) < 2 {
		t.Fatalf("the base's second zone has %d networks; the test needs 2", len(b.Networks))
	}
	// Every network of a, and b's first, into a new zone of a's region.
	doc := "network,region,zone\n"
	for _, n := range append(slices.Clone(a.Networks), b.Networks[0]) {
		doc += n + "," + a.Region + ",moved\n"
	}
	p, err := ReadCSV([]byte(doc), "move.csv", Options{Regions: top.Regions})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Into(top, Merge, "move.csv"); err == nil {
		t.Fatal("merge accepted networks that sit under other zones")
	}
	got, err := p.Into(top, Move, "move.csv")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]topology.Zone{}
	for _, z := range got.Zones {
		byName[z.Name] = z
	}
	if _, ok := byName[a.Name]; ok {
		t.Errorf("zone %s kept with no network left: %+v", a.Name, byName[a.Name])
	}
	if gb := byName[b.Name]; !slices.Equal(gb.Networks, b.Networks[1:]) {
		t.Errorf("zone %s has %v, want %v (its first network moved)", b.Name, gb.Networks, b.Networks[1:])
	}
	if m := byName["moved"]; len(m.Networks) != len(a.Networks)+1 {
		t.Errorf("zone moved has %v", m.Networks)
	}
	if len(got.Zones) != len(top.Zones) { // a gone, moved added
		t.Errorf("%d zones, want %d", len(got.Zones), len(top.Zones))
	}
	if !slices.Equal(top.Zones[1].Networks, b.Networks) || top.Zones[0].Name != a.Name {
		t.Error("the base topology was changed")
	}
}

// province100k is the design's province: 100,000 networks in 400 zones.
func province100k(t testing.TB) (*topology.Topology, []byte) {
	top := topogen.ProvinceScale(nil)
	var b bytes.Buffer
	if err := WriteCSV(&b, top); err != nil {
		t.Fatal(err)
	}
	return top, b.Bytes()
}

// TestImport100k: a 100,000-network CSV imports and validates, and its
// peak heap stays bounded (reported for docs/benchmarks.md).
func TestImport100k(t *testing.T) {
	if testing.Short() {
		t.Skip("province scale")
	}
	top, data := province100k(t)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := ReadCSV(data, "big.csv", Options{Regions: top.Regions})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Into(top, Replace, "big.csv")
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if p.Networks() != 100_000 || !reflect.DeepEqual(got.Zones, top.Zones) {
		t.Fatalf("%d networks, zones equal %v", p.Networks(), reflect.DeepEqual(got.Zones, top.Zones))
	}
	t.Logf("CSV %d bytes; allocated %d MiB during import+validation", len(data), (after.TotalAlloc-before.TotalAlloc)>>20)
}

func BenchmarkImportCSV100k(b *testing.B) {
	top, data := province100k(b)
	benchImport(b, top, data, ReadCSV)
}

func BenchmarkImportCZF100k(b *testing.B) {
	top := topogen.ProvinceScale(nil)
	var buf bytes.Buffer
	if err := WriteCZF(&buf, top); err != nil {
		b.Fatal(err)
	}
	benchImport(b, top, buf.Bytes(), ReadCZF)
}

// benchImport measures read + overlap checks + topology validation of the
// whole province, and reports the peak heap seen after a run (what a
// schedctl process holds at most, give or take the GC's slack).
func benchImport(b *testing.B, top *topology.Topology, data []byte, read func([]byte, string, Options) (*Plan, error)) {
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var peak uint64
	for b.Loop() {
		p, err := read(data, "x", Options{Regions: top.Regions})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Into(top, Replace, "x"); err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// FuzzCSV: any file leaves ReadCSV without a panic, and every problem has
// a place.
func FuzzCSV(f *testing.F) {
	f.Add([]byte("network,region,zone,lat,lon\n10.0.0.0/24,hefei,a,31,117\n"))
	f.Add([]byte("region,network\nwuhu,2001:db8::/48\nhefei,10.0.0.1/24\n\"x\n"))
	f.Add([]byte("# c\nnetwork,region\n10.0.0.0/8,hefei\n10.1.0.0/16,wuhu\n10.1.0.0/16,wuhu\n"))
	regions := base(f).Regions
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ReadCSV(data, "fuzz.csv", Options{Regions: regions})
		checkPlaced(t, err)
	})
}

// FuzzCZF: the same for Coverage Zone Files, with each way of finding
// regions.
func FuzzCZF(f *testing.F) {
	f.Add([]byte(`{"coverageZones": {"hefei-a": {"network": ["10.0.0.0/24"], "network6": ["2001:db8::/48"], "coordinates": {"latitude": 31.8, "longitude": 117.2}}}}`), uint8(0))
	f.Add([]byte(`{"revision": "1", "coverageZones": {"wuhu_b": {"network": ["10.0.0.0/8", 3, {"x": [1]}]}, "hefei-c": {"network": ["10.1.0.0/16"]}}}`), uint8(1))
	f.Add([]byte(`{"coverageZones": {"a": {"network": ["10.0.0.0/24"]}}} []`), uint8(2))
	regions := base(f).Regions
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		o := Options{Regions: regions}
		switch mode % 3 {
		case 1:
			o.RegionFromName = true
		case 2:
			o.RegionMap, o.RegionMapName = map[string]string{"a": "hefei", "hefei-a": "wuhu"}, "map"
		}
		_, err := ReadCZF(data, "fuzz.json", o)
		checkPlaced(t, err)
	})
}

func checkPlaced(t *testing.T, err error) {
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) == 0 {
		t.Fatalf("error %v is no *Error with problems", err)
	}
	for _, p := range e.Problems {
		if p.Path == "" {
			t.Errorf("problem without a place: %v", p)
		}
	}
	var es yamlstrict.Errors
	if !errors.As(err, &es) {
		t.Error("problems do not unwrap to yamlstrict.Errors")
	}
}
