// Package topogen generates synthetic but realistic province topologies for
// tests, benchmarks, the lab and the example in deploy/examples.
//
// Everything it produces is deterministic: the same cities and options always
// give the same document, byte for byte, so generated topologies can be
// compared, stored as golden files and used as fuzz seeds.
//
// A province has one region per city (the first city is the capital) and, per
// region, edge nodes with their media servers and coverage zones with client
// networks. The shapes follow the province of docs/design.md:
//
//   - anycast: service_ip 198.18.0.1, center_prefix 198.18.0.0/26.
//   - regions: one per city, at the city's location. Fallbacks never form a
//     cycle: cities are ranked by their distance from the capital and each
//     city falls back to up to FallbackPerRegion of its nearest cities among
//     those ranked before it (closer to the capital). The capital has none;
//     the center is always the implicit last fallback.
//   - nodes: "<city>-<n>" (n from 1) on a small ring around the city.
//   - servers: "<node>-<a|b|c...>" (letters for up to 26 servers per node,
//     then "<node>-<n>"), each with its own IPv4 address on port 8080. When
//     the province is small enough (at most 254 regions, 254 nodes per region
//     and 244 servers per node) the address spells out where the server is:
//     10.<region>.<node>.<10+server>, all 1-based, e.g. 10.1.1.10 for the
//     first server of the capital's first node. Larger provinces number the
//     servers consecutively through 10.0.0.0/8 instead. Health URL
//     http://ADDR/health, weight 100, coverage radius 15 km (the whole city:
//     every zone of its region, so `selection: qoe` places viewers in their
//     own city), capacity 10,000 Mbit/s and 400 transcode units.
//   - zones: "<city>-z<k>" near the city, each with its client networks in
//     CGNAT space 100.64.0.0/10, where the set-top boxes live. The /10 is cut
//     into equal aligned blocks, one per region (16 regions: a /14 each, so
//     the capital has 100.64.0.0/14, the second city 100.68.0.0/14, ...), and
//     each region's networks are carved in order from its block: /24s when
//     they fit, smaller equal networks when a region needs more of them
//     (the province-scale case uses /27s). Networks never overlap.
//   - one service "live" (live.iptv.example, the HLS URL template of §3,
//     ladder 730..6000 kbps, selection nearest).
//   - with Options.VODServersPerNode, a second service on a fleet of its own:
//     every node gets that many more servers ("<node>-vod-<a|b...>",
//     addresses after the live ones) labelled fleet: vod, the live servers
//     are labelled fleet: edge (a node label the VOD servers override), the
//     pool "vod" matches fleet: vod, the service "vod" (vod.iptv.example,
//     /vod/ URLs, selection chash: a title stays on one server's cache)
//     takes its servers from that pool and live selects fleet: edge with an
//     inline match. Neither service is ever sent to the other's servers.
//
// Province builds a uniform province (the same counts in every region);
// Large spreads totals over the regions as evenly as possible, which is how
// ProvinceScale builds the size the design says the system must handle:
// 16 regions, 200 nodes, 10,000 servers and 100,000 zone networks.
//
// Invalid options (a negative count, a node without servers, more networks
// than CGNAT space holds) are programming errors and make the generators panic
// with a message saying which; valid options always give a topology that
// topology.Compile accepts.
package topogen

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
	"gopkg.in/yaml.v3"
)

// Fixed values of every generated province.
const (
	ServiceIP    = "198.18.0.1"
	CenterPrefix = "198.18.0.0/26"
	// ZoneSpace is where generated client networks come from (RFC 6598 CGNAT space).
	ZoneSpace = "100.64.0.0/10"

	ServerPort   = 8080
	ServerWeight = 100
	// CoverageRadiusM reaches every zone of a server's region: nodes are
	// ~3.3 km from the city centre, zones ~6.7 km, so at most ~10 km apart.
	CoverageRadiusM = 15_000
	BandwidthMbps   = 10000
	TranscodeUnits  = 400

	ServiceName = "live"
	Hostname    = "live.iptv.example"
	URLTemplate = "http://{server}/live/{channel}/{bitrate}/index.m3u8"

	// The VOD service and fleet (Options.VODServersPerNode).
	VODServiceName = "vod"
	VODHostname    = "vod.iptv.example"
	VODURLTemplate = "http://{server}/vod/{channel}/{bitrate}/index.m3u8"
	VODPool        = "vod"
	// FleetLabel is the label key saying which fleet a server is in; the
	// live servers are FleetLive, the VOD servers FleetVOD.
	FleetLabel = "fleet"
	FleetLive  = "edge"
	FleetVOD   = "vod"
)

// Bitrates is the ladder of the generated service, in kbps.
var Bitrates = []int{730, 1100, 2000, 3000, 4500, 6000}

// City is one prefecture-level city: a region of the province.
type City struct {
	Name     string
	Lat, Lon float64
}

// LoadCities reads a CSV file with the header "city,lat,lon" and one city per
// line (the format of data/anhui-cities.csv). The first city is the
// capital. Errors name the file and line.
func LoadCities(path string) ([]City, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cities, err := ReadCities(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cities, nil
}

// ReadCities is LoadCities on a reader.
func ReadCities(r io.Reader) ([]City, error) {
	var cities []City
	err := readTable(r, []string{"city", "lat", "lon"}, "cities", func(line int, rec []string) error {
		c := City{Name: rec[0]}
		var err error
		if c.Lat, err = parseCoord(rec[1], 90); err != nil {
			return fmt.Errorf("line %d: lat: %v", line, err)
		}
		if c.Lon, err = parseCoord(rec[2], 180); err != nil {
			return fmt.Errorf("line %d: lon: %v", line, err)
		}
		cities = append(cities, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return cities, nil
}

// readTable reads a CSV table of one city a line under header, whose first
// column is "city", and checks what every such table must be: the header,
// the number of fields, valid and unique city names, at least one row
// (rows names what the rows are, for that error). It hands each row, its
// fields trimmed, to row with its line number; row's error ends the read.
func readTable(r io.Reader, header []string, rows string, row func(line int, rec []string) error) error {
	want := strings.Join(header, ",")
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // counted below, with a better message
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	got, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("empty file; expected the header %s", want)
	}
	if err != nil {
		return err
	}
	if len(got) > 0 {
		got[0] = strings.TrimPrefix(got[0], "\ufeff")
	}
	if !slices.Equal(got, header) {
		line, _ := cr.FieldPos(0)
		return fmt.Errorf("line %d: header is %q, want %q", line, strings.Join(got, ","), want)
	}
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err // csv.ParseError already names the line
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return fmt.Errorf("line %d: %d fields, want %d (%s)", line, len(rec), len(header), want)
		}
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if !validName(rec[0]) {
			return fmt.Errorf("line %d: city %q is not a valid region name (lowercase letters, digits, and '-', '_', '.' inside)", line, rec[0])
		}
		if first, dup := seen[rec[0]]; dup {
			return fmt.Errorf("line %d: city %q already on line %d", line, rec[0], first)
		}
		seen[rec[0]] = line
		if err := row(line, rec); err != nil {
			return err
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("no %s after the header", rows)
	}
	return nil
}

func parseCoord(s string, limit float64) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if math.IsNaN(v) || v < -limit || v > limit {
		return 0, fmt.Errorf("%v is out of range [%v, %v]", v, -limit, limit)
	}
	return v, nil
}

// validName mirrors the topology's rule for names.
func validName(n string) bool {
	if n == "" || len(n) > 128 {
		return false
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		alnum := b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || i == len(n)-1 || (b != '-' && b != '_' && b != '.')) {
			return false
		}
	}
	return true
}

// Options shapes a uniform province: every region gets the same counts.
type Options struct {
	NodesPerRegion  int // >= 1
	ServersPerNode  int // >= 1
	ZonesPerRegion  int // >= 0
	NetworksPerZone int // >= 1 when there are zones
	// FallbackPerRegion is the most fallback regions a region lists (>= 0).
	FallbackPerRegion int
	// VODServersPerNode (>= 0) adds the VOD service and that many VOD
	// servers to every node, after its ServersPerNode live ones (see the
	// package comment); 0: the live service alone, on every server.
	VODServersPerNode int
}

// SampleOptions is the shape of deploy/examples/topology.yaml: small enough to
// read, big enough to show every feature (a VOD fleet beside the live one).
var SampleOptions = Options{NodesPerRegion: 2, ServersPerNode: 4, ZonesPerRegion: 2, NetworksPerZone: 3, FallbackPerRegion: 2, VODServersPerNode: 1}

// Province builds one region per city with the same counts in each. The first
// city is the capital. It panics when cities is empty or o is invalid.
func Province(cities []City, o Options) *topology.Topology {
	if o.NodesPerRegion < 1 || o.ServersPerNode < 1 || o.ZonesPerRegion < 0 || o.FallbackPerRegion < 0 ||
		(o.ZonesPerRegion > 0 && o.NetworksPerZone < 1) || o.VODServersPerNode < 0 {
		panic(fmt.Sprintf("topogen: invalid options %+v: need NodesPerRegion >= 1, ServersPerNode >= 1, ZonesPerRegion >= 0, NetworksPerZone >= 1 with zones, FallbackPerRegion >= 0, VODServersPerNode >= 0", o))
	}
	n := len(cities)
	return build(cities, plan{
		nodes:    repeat(n, func(int) []int { return repeat(o.NodesPerRegion, func(int) int { return o.ServersPerNode }) }),
		zones:    repeat(n, func(int) []int { return repeat(o.ZonesPerRegion, func(int) int { return o.NetworksPerZone }) }),
		fallback: o.FallbackPerRegion,
		vod:      o.VODServersPerNode,
	})
}

// LargeOptions gives the totals of a province; Large spreads each total over
// its parents as evenly as possible (the first ones get the remainder).
type LargeOptions struct {
	Regions  int // >= 1
	Nodes    int // >= Regions
	Servers  int // >= Nodes
	Zones    int // >= 0; with zones, >= Regions
	Networks int // >= Zones; 0 only without zones
	// FallbackPerRegion is the most fallback regions a region lists (>= 0).
	FallbackPerRegion int
}

// ProvinceScaleOptions is the size the design requires: 16 regions, 200
// nodes (12 or 13 per region), 10,000 servers (50 per node), 400 zones (25 per
// region) and 100,000 zone networks (250 per zone, /27s).
var ProvinceScaleOptions = LargeOptions{Regions: 16, Nodes: 200, Servers: 10_000, Zones: 400, Networks: 100_000, FallbackPerRegion: 2}

// ProvinceScale builds the province-scale topology of ProvinceScaleOptions
// from the given cities (synthesising cities when fewer than 16 are given).
func ProvinceScale(cities []City) *topology.Topology {
	return Large(cities, ProvinceScaleOptions)
}

// Large builds a province with the given totals. It uses the first o.Regions
// cities; when fewer are given it synthesises the rest ("syn-1", "syn-2", ...)
// on a spiral around the first city (or around Hefei when there is none). It
// panics when o is invalid.
func Large(cities []City, o LargeOptions) *topology.Topology {
	if o.Regions < 1 || o.Nodes < o.Regions || o.Servers < o.Nodes || o.Zones < 0 || o.FallbackPerRegion < 0 ||
		(o.Zones > 0 && (o.Zones < o.Regions || o.Networks < o.Zones)) || (o.Zones == 0 && o.Networks != 0) {
		panic(fmt.Sprintf("topogen: invalid options %+v: need Regions >= 1, Nodes >= Regions, Servers >= Nodes, Zones 0 or >= Regions, Networks >= Zones (0 without zones), FallbackPerRegion >= 0", o))
	}
	cities = Cities(cities, o.Regions)
	p := plan{fallback: o.FallbackPerRegion}
	nodesPer := spread(o.Nodes, o.Regions)
	zonesPer := spread(o.Zones, o.Regions)
	serversPer := spread(o.Servers, o.Nodes)
	netsPer := spread(o.Networks, max(o.Zones, 1))
	var ni, zi int
	for r := range o.Regions {
		var nodes, zones []int
		for range nodesPer[r] {
			nodes = append(nodes, serversPer[ni])
			ni++
		}
		for range zonesPer[r] {
			zones = append(zones, netsPer[zi])
			zi++
		}
		p.nodes = append(p.nodes, nodes)
		p.zones = append(p.zones, zones)
	}
	return build(cities, p)
}

// Cities returns exactly n cities: the first n of the given ones, then
// synthesised ones ("syn-<k>") on a spiral around the first city (or around
// Hefei when none is given).
func Cities(given []City, n int) []City {
	if len(given) >= n {
		return slices.Clone(given[:n])
	}
	out := slices.Clone(given)
	center := City{Name: "hefei", Lat: 31.82, Lon: 117.23}
	if len(given) > 0 {
		center = given[0]
	}
	taken := map[string]bool{}
	for _, c := range given {
		taken[c.Name] = true
	}
	for k := 1; len(out) < n; k++ {
		name := "syn-" + strconv.Itoa(k)
		if taken[name] {
			continue
		}
		// golden-angle spiral: evenly spread, 0.25 degrees (~25 km) apart
		a := float64(k) * 2.399963229728653
		r := 0.25 * math.Sqrt(float64(k))
		out = append(out, City{Name: name, Lat: clampLat(center.Lat + r*math.Sin(a)), Lon: wrapLon(center.Lon + r*math.Cos(a))})
	}
	return out
}

// plan is what build lays out: per region, the (live) server count of each
// node and the network count of each zone; vod VOD servers per node.
type plan struct {
	nodes    [][]int
	zones    [][]int
	fallback int
	vod      int
}

func build(cities []City, p plan) *topology.Topology {
	if len(cities) == 0 {
		panic("topogen: no cities")
	}
	if len(cities) != len(p.nodes) || len(cities) != len(p.zones) {
		panic("topogen: internal error: plan does not match the cities")
	}
	t := &topology.Topology{
		Anycast: topology.Anycast{ServiceIP: ServiceIP, CenterPrefix: CenterPrefix},
		Services: []topology.Service{{
			Name:         ServiceName,
			Hostnames:    []string{Hostname},
			URLTemplate:  URLTemplate,
			BitratesKbps: slices.Clone(Bitrates),
			Selection:    "nearest",
		}},
	}
	if p.vod > 0 {
		t.Services[0].Match = topology.Labels{FleetLabel: FleetLive}
		t.Services = append(t.Services, topology.Service{
			Name:         VODServiceName,
			Hostnames:    []string{VODHostname},
			URLTemplate:  VODURLTemplate,
			BitratesKbps: slices.Clone(Bitrates),
			Selection:    "chash",
			Pool:         VODPool,
		})
		t.Pools = []topology.Pool{{Name: VODPool, Match: topology.Labels{FleetLabel: FleetVOD}}}
	}
	fallbacks := Fallbacks(cities, p.fallback)
	for r, c := range cities {
		t.Regions = append(t.Regions, topology.Region{Name: c.Name, Location: loc(c.Lat, c.Lon), Fallback: fallbacks[r]})
	}

	// Servers: readable 10.<region>.<node>.<10+server> when every part fits an
	// octet, else one counter through 10.0.0.0/8.
	readable := len(cities) <= 254
	total := 0
	for _, nodes := range p.nodes {
		readable = readable && len(nodes) <= 254
		for _, s := range nodes {
			readable = readable && s+p.vod <= 244
			total += s + p.vod
		}
	}
	if !readable && total > 1<<24-2 {
		panic(fmt.Sprintf("topogen: %d servers do not fit in 10.0.0.0/8", total))
	}
	counter := uint32(0)
	for r, c := range cities {
		for n, servers := range p.nodes[r] {
			name := c.Name + "-" + strconv.Itoa(n+1)
			nlat, nlon := ring(c.Lat, c.Lon, 0.03, n, len(p.nodes[r]), 0)
			node := topology.Node{Name: name, Region: c.Name, Location: loc(nlat, nlon)}
			if p.vod > 0 {
				node.Labels = topology.Labels{FleetLabel: FleetLive}
			}
			for s := range servers + p.vod {
				var ip netip.Addr
				if readable {
					ip = netip.AddrFrom4([4]byte{10, byte(r + 1), byte(n + 1), byte(s + 10)})
				} else {
					counter++
					ip = netip.AddrFrom4([4]byte{10, byte(counter >> 16), byte(counter >> 8), byte(counter)})
				}
				addr := netip.AddrPortFrom(ip, ServerPort).String()
				sv := topology.Server{
					Name:            name + "-" + serverSuffix(s, servers),
					Address:         addr,
					Health:          &topology.HealthCheck{URL: "http://" + addr + "/health"},
					Weight:          ServerWeight,
					CoverageRadiusM: CoverageRadiusM,
					Capacity:        topology.Capacity{BandwidthMbps: BandwidthMbps, TranscodeUnits: TranscodeUnits},
				}
				if s >= servers { // the node's VOD servers come after its live ones
					sv.Name = name + "-vod-" + serverSuffix(s-servers, p.vod)
					sv.Labels = topology.Labels{FleetLabel: FleetVOD}
				}
				node.Servers = append(node.Servers, sv)
			}
			t.Nodes = append(t.Nodes, node)
		}
	}

	// Zones: one aligned block of 100.64.0.0/10 per region, carved in order.
	maxNets := 0
	for _, zones := range p.zones {
		sum := 0
		for _, k := range zones {
			sum += k
		}
		maxNets = max(maxNets, sum)
	}
	if maxNets > 0 {
		space := netip.MustParsePrefix(ZoneSpace)
		regionBits := bits.Len(uint(len(cities) - 1)) // log2 of the block count, rounded up
		blockBits := 32 - space.Bits() - regionBits   // host bits of one region's block
		netBits := min(8, blockBits-bits.Len(uint(maxNets-1)))
		if blockBits < 0 || netBits < 0 {
			panic(fmt.Sprintf("topogen: %d regions with up to %d networks each do not fit in %s", len(cities), maxNets, ZoneSpace))
		}
		base := ipv4(space.Addr())
		for r, c := range cities {
			next := base + uint32(r)<<blockBits
			for z, nets := range p.zones[r] {
				zlat, zlon := ring(c.Lat, c.Lon, 0.06, z, len(p.zones[r]), math.Pi/float64(max(2, len(p.zones[r]))))
				zone := topology.Zone{Name: c.Name + "-z" + strconv.Itoa(z+1), Region: c.Name, Location: loc(zlat, zlon)}
				for range nets {
					zone.Networks = append(zone.Networks, netip.PrefixFrom(fromIPv4(next), 32-netBits).String())
					next += 1 << netBits
				}
				t.Zones = append(t.Zones, zone)
			}
		}
	}
	return t
}

// Fallbacks returns, for each city, the names of up to k fallback regions:
// its nearest cities among those closer to the capital (cities[0]), nearest
// first. Ranking by distance from the capital makes every fallback edge point
// towards the capital, so the chains never form a cycle.
func Fallbacks(cities []City, k int) [][]string {
	out := make([][]string, len(cities))
	if len(cities) == 0 || k <= 0 {
		return out
	}
	capital := cities[0]
	rank := make([]int, len(cities)) // city indices, capital first
	for i := range rank {
		rank[i] = i
	}
	slices.SortStableFunc(rank[1:], func(a, b int) int {
		return cmp.Compare(Distance(capital, cities[a]), Distance(capital, cities[b]))
	})
	for pos := 1; pos < len(rank); pos++ {
		me := cities[rank[pos]]
		closer := slices.Clone(rank[:pos])
		slices.SortStableFunc(closer, func(a, b int) int {
			return cmp.Or(cmp.Compare(Distance(me, cities[a]), Distance(me, cities[b])), cmp.Compare(a, b))
		})
		for _, c := range closer[:min(k, len(closer))] {
			out[rank[pos]] = append(out[rank[pos]], cities[c].Name)
		}
	}
	return out
}

// Distance is the great-circle distance between two cities in metres.
func Distance(a, b City) float64 { return geo.DistanceM(a.Lat, a.Lon, b.Lat, b.Lon) }

// serverSuffix names the i-th (0-based) of n servers of a node.
func serverSuffix(i, n int) string {
	if n <= 26 {
		return string(rune('a' + i))
	}
	return strconv.Itoa(i + 1)
}

// ring places the i-th of n points on a circle of radius r degrees around a
// point, starting at angle phase; coordinates are rounded to 4 decimals
// (about 10 m) so the documents stay readable.
func ring(lat, lon, r float64, i, n int, phase float64) (float64, float64) {
	a := phase + 2*math.Pi*float64(i)/float64(max(n, 1))
	return clampLat(lat + r*math.Sin(a)), wrapLon(lon + r*math.Cos(a))
}

func loc(lat, lon float64) *topology.Location {
	return &topology.Location{Lat: round4(lat), Lon: round4(lon)}
}

func round4(v float64) float64 {
	r := math.Round(v*1e4) / 1e4
	if r == 0 {
		return 0 // no -0 in documents
	}
	return r
}

func clampLat(v float64) float64 { return max(-90, min(90, v)) }

func wrapLon(v float64) float64 {
	for v > 180 {
		v -= 360
	}
	for v < -180 {
		v += 360
	}
	return v
}

func ipv4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func fromIPv4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// spread divides total into n parts differing by at most one, larger first.
func spread(total, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = total / n
		if i < total%n {
			out[i]++
		}
	}
	return out
}

func repeat[T any](n int, f func(int) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// YAML renders a topology the way operators write it (docs/operations.md): two
// spaces of indentation, block style for the entities, and flow style for the
// small leaves (locations, health, capacity, fallback, hostnames, networks and
// the bitrate ladder), so each server fits in a few lines.
func YAML(t *topology.Topology) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(t); err != nil {
		return nil, err
	}
	flowLeaves(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// flowKeys are the fields rendered in flow style.
var flowKeys = map[string]bool{
	"location": true, "health": true, "capacity": true,
	"fallback": true, "hostnames": true, "networks": true, "bitrates_kbps": true,
	"labels": true, "match": true,
}

func flowLeaves(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if flowKeys[n.Content[i].Value] {
				n.Content[i+1].Style = yaml.FlowStyle
			}
		}
		labelsFirst(n)
	}
	for _, c := range n.Content {
		flowLeaves(c)
	}
}

// labelsFirst moves a node's labels before its servers, where a reader
// sees them before the servers they apply to.
func labelsFirst(n *yaml.Node) {
	key := func(k string) int {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				return i
			}
		}
		return -1
	}
	l, s := key("labels"), key("servers")
	if l < 0 || s < 0 || l < s {
		return
	}
	pair := slices.Clone(n.Content[l : l+2])
	n.Content = slices.Delete(n.Content, l, l+2)
	n.Content = slices.Insert(n.Content, s, pair...)
}
