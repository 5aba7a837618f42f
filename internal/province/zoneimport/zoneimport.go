// Package zoneimport turns an operator's IP plan into the topology's
// coverage zones and back: a CSV (an IPAM export) or a Traffic Router
// Coverage Zone File (CZF, JSON). Every network is checked before the
// topology sees it, and every problem names where it is in the file (CSV
// line and column, CZF JSON path and line): an IP plan has 100,000 rows,
// and the topology's own paths (zones[17].networks[230]) do not say which.
package zoneimport

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// MaxFileBytes bounds an IP plan read whole: ~40 times a 100,000-network
// CSV, the same bound as a topology document.
const MaxFileBytes = yamlstrict.MaxDocumentBytes

// Options say how zones get their regions, checked against Regions (the
// topology's).
type Options struct {
	Regions []topology.Region
	// CZF only: the region of each zone. RegionMap (zone name -> region)
	// first, then RegionFromName (the name up to its first '-' or '_'),
	// else the region nearest the zone's coordinates.
	RegionMap map[string]string
	// RegionMapName names the map in messages (its file).
	RegionMapName  string
	RegionFromName bool
}

// Plan is the zones read from an IP plan, in the order they first appear,
// each network canonical (masked, IPv6 compressed) and in file order.
type Plan struct {
	Zones []topology.Zone
	// where each zone first appears and each of its networks is
	zonePos []pos
	netPos  [][]pos
}

// Networks is the number of networks in the plan.
func (p *Plan) Networks() int {
	n := 0
	for _, z := range p.Zones {
		n += len(z.Networks)
	}
	return n
}

// pos is a place in the file: a CSV cell (col > 0) or a CZF JSON path.
type pos struct {
	line int
	col  int    // CSV: 1-based column; 0 for a JSON path
	key  string // CSV: the column's name; CZF: the JSON path
}

func (p pos) String() string {
	if p.col > 0 {
		return fmt.Sprintf("line %d, column %d (%s)", p.line, p.col, p.key)
	}
	if p.line > 0 {
		return fmt.Sprintf("%s (line %d)", p.key, p.line)
	}
	return p.key
}

// problem is p as an error's place: CSV cells carry their line in the
// path, JSON paths in Line, as topology errors do.
func (p pos) problem(msg string) *yamlstrict.FieldError {
	if p.col > 0 {
		return &yamlstrict.FieldError{Path: p.String(), Msg: msg}
	}
	path := p.key
	if path == "" {
		path = "(document)"
	}
	return &yamlstrict.FieldError{Path: path, Line: p.line, Msg: msg}
}

// Error is every problem of one file, each with its place.
type Error struct {
	Source   string // the file, as the operator named it
	Problems yamlstrict.Errors
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problem", e.Source, len(e.Problems)) // the file names it: schedctl zones prints it as is
	if len(e.Problems) != 1 {
		b.WriteByte('s')
	}
	b.WriteByte(':')
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Problems }

// builder collects zones from either format and checks them as a whole.
type builder struct {
	o      Options
	errs   yamlstrict.Errors
	zones  []*zone
	byName map[string]int
}

type zone struct {
	name      string
	pos       pos
	region    string
	regionPos pos
	loc       *topology.Location
	locPos    pos
	nets      []netip.Prefix
	netPos    []pos
	bad       int // networks that did not parse (reported already)
}

func newBuilder(o Options) *builder {
	return &builder{o: o, byName: map[string]int{}}
}

func (b *builder) add(p pos, format string, args ...any) {
	b.errs = append(b.errs, p.problem(fmt.Sprintf(format, args...)))
}

// zone returns the zone named name, created at p if new.
func (b *builder) zone(name string, p pos) *zone {
	if i, ok := b.byName[name]; ok {
		return b.zones[i]
	}
	z := &zone{name: name, pos: p}
	b.byName[name] = len(b.zones)
	b.zones = append(b.zones, z)
	return z
}

// parseNetwork reads a CIDR network, or a bare address as its host
// prefix; msg says what is wrong, "" when nothing is.
func parseNetwork(s string) (pfx netip.Prefix, msg string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return pfx, "required"
	}
	var err error
	if strings.Contains(s, "/") {
		pfx, err = netip.ParsePrefix(s)
	} else {
		var a netip.Addr
		if a, err = netip.ParseAddr(s); err == nil {
			if a.Zone() != "" {
				return pfx, fmt.Sprintf("%q has an IPv6 zone: write the network without it", s)
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
	}
	switch {
	case err != nil:
		return pfx, fmt.Sprintf("not a CIDR network or an IP address: %q", s)
	case pfx.Addr().Is4In6():
		return pfx, fmt.Sprintf("%s is IPv4-mapped: write it as IPv4 (%s)", s, netip.PrefixFrom(pfx.Addr().Unmap(), max(0, pfx.Bits()-96)).Masked())
	case pfx.Masked() != pfx:
		return pfx, fmt.Sprintf("host bits set in %s (did you mean %s?)", s, pfx.Masked())
	}
	return pfx, ""
}

// network adds the network s at p to z, or reports what is wrong with it.
func (b *builder) network(z *zone, s string, p pos) {
	pfx, msg := parseNetwork(s)
	if msg != "" {
		b.add(p, "%s", msg)
		z.bad++
		return
	}
	z.nets = append(z.nets, pfx)
	z.netPos = append(z.netPos, p)
}

// location checks a point; its problems are reported at p.
func (b *builder) location(p pos, lat, lon float64) bool {
	ok := true
	if math.IsNaN(lat) || lat < -90 || lat > 90 {
		b.add(p, "latitude %v is out of range [-90, 90]", lat)
		ok = false
	}
	if math.IsNaN(lon) || lon < -180 || lon > 180 {
		b.add(p, "longitude %v is out of range [-180, 180]", lon)
		ok = false
	}
	return ok
}

// regionNames are the topology's regions, for "did you mean".
func (b *builder) regionNames() []string {
	names := make([]string, len(b.o.Regions))
	for i, r := range b.o.Regions {
		names[i] = r.Name
	}
	return names
}

func (b *builder) regionByName(name string) *topology.Region {
	for i := range b.o.Regions {
		if b.o.Regions[i].Name == name {
			return &b.o.Regions[i]
		}
	}
	return nil
}

// checkRegion reports an unknown region at p, with the nearest known name.
func (b *builder) checkRegion(p pos, name string, how string) bool {
	if b.regionByName(name) != nil {
		return true
	}
	hint := ""
	if s := yamlstrict.Nearest(name, b.regionNames()); s != "" {
		hint = fmt.Sprintf("; did you mean %q?", s)
	}
	b.add(p, "unknown region %q%s%s", name, how, hint)
	return false
}

// nearestRegion is the region whose location is nearest l; nil when no
// region has one.
func (b *builder) nearestRegion(l topology.Location) *topology.Region {
	var best *topology.Region
	bestD := math.Inf(1)
	for i := range b.o.Regions {
		r := &b.o.Regions[i]
		if r.Location == nil {
			continue
		}
		if d := geo.DistanceM(l.Lat, l.Lon, r.Location.Lat, r.Location.Lon); d < bestD {
			best, bestD = r, d
		}
	}
	return best
}

// entry is one network with its zone, for the overlap sweep.
type entry struct {
	pfx      netip.Prefix
	zone, in int // zone index, network index in it
}

// overlaps reports duplicate networks anywhere, and networks nested in
// another region's network: both would make a client's region ambiguous.
// A network nested in one of its own region's is a more specific zone, as
// the topology allows. Zones without a known region are skipped (their
// region is reported already).
func (b *builder) overlaps(known []bool) {
	n := 0
	for _, z := range b.zones {
		n += len(z.nets)
	}
	es := make([]entry, 0, n)
	for zi, z := range b.zones {
		for j, p := range z.nets {
			es = append(es, entry{p, zi, j})
		}
	}
	// Families apart, then by first address, shorter prefix first: every
	// network comes after all that contain it.
	slices.SortStableFunc(es, func(a, c entry) int {
		if a.pfx.Addr().Is4() != c.pfx.Addr().Is4() {
			if a.pfx.Addr().Is4() {
				return -1
			}
			return 1
		}
		if d := a.pfx.Addr().Compare(c.pfx.Addr()); d != 0 {
			return d
		}
		return a.pfx.Bits() - c.pfx.Bits()
	})
	var stack []entry // the networks containing the current one, outermost first
	for i, e := range es {
		if i > 0 && es[i-1].pfx == e.pfx {
			first := es[i-1]
			for k := i - 1; k > 0 && es[k-1].pfx == e.pfx; k-- {
				first = es[k-1]
			}
			fz := b.zones[first.zone]
			where := "zone " + strconv.Quote(fz.name)
			if first.zone == e.zone {
				where = "this zone"
			}
			b.add(b.zones[e.zone].netPos[e.in], "duplicate network %s: already in %s at %s", e.pfx, where, fz.netPos[first.in])
			continue
		}
		for len(stack) > 0 && !stack[len(stack)-1].pfx.Overlaps(e.pfx) {
			stack = stack[:len(stack)-1]
		}
		z := b.zones[e.zone]
		if known[e.zone] {
			for _, s := range stack {
				o := b.zones[s.zone]
				if known[s.zone] && o.region != z.region {
					b.add(z.netPos[e.in], "%s (zone %q, region %q) overlaps %s of zone %q (region %q) at %s",
						e.pfx, z.name, z.region, s.pfx, o.name, o.region, o.netPos[s.in])
				}
			}
		}
		stack = append(stack, e)
	}
}

// finish checks the zones as a whole and returns the plan.
func (b *builder) finish(source string) (*Plan, error) {
	known := make([]bool, len(b.zones))
	for i, z := range b.zones {
		if len(z.nets) == 0 && z.bad == 0 {
			b.add(z.pos, "zone %q has no networks", z.name)
		}
		known[i] = z.region != "" && b.regionByName(z.region) != nil
	}
	b.overlaps(known)
	if err := b.errs.Err(); err != nil {
		return nil, &Error{Source: source, Problems: b.errs}
	}
	p := &Plan{}
	for _, z := range b.zones {
		tz := topology.Zone{Name: z.name, Region: z.region, Networks: make([]string, len(z.nets))}
		for j, n := range z.nets {
			tz.Networks[j] = n.String()
		}
		// A zone at its region's location is written without one: the
		// topology defaults it to the region's, and stays so when the
		// region moves.
		if z.loc != nil {
			if r := b.regionByName(z.region); r == nil || r.Location == nil || *r.Location != *z.loc {
				tz.Location = z.loc
			}
		}
		p.Zones = append(p.Zones, tz)
		p.zonePos = append(p.zonePos, z.pos)
		p.netPos = append(p.netPos, z.netPos)
	}
	return p, nil
}

// Mode is how Into puts a plan's zones in a topology.
type Mode int

const (
	// Replace: the plan's zones replace all of the topology's.
	Replace Mode = iota
	// Merge: the plan's zones replace the topology's zones of the same
	// names and are added after the others; a network already in another
	// zone is an overlap (refused by validation).
	Merge
	// Move is Merge, but a network the plan puts in a zone leaves the
	// topology's other zones first (a renumbering, a zone split); a zone
	// left with no network goes.
	Move
)

// Into returns a copy of base with the plan's zones as mode says. The
// result is validated as the center would (its problems about imported
// zones name their place in the file); base itself is not changed.
func (p *Plan) Into(base *topology.Topology, mode Mode, source string) (*topology.Topology, error) {
	t := *base
	baseZones := base.Zones
	if mode == Move {
		baseZones = p.withoutMoved(baseZones)
	}
	from := make([]int, 0, len(p.Zones)+len(baseZones)) // plan index of each zone of t, -1: base's
	if mode != Replace {
		idx := make(map[string]int, len(p.Zones))
		for i, z := range p.Zones {
			idx[z.Name] = i
		}
		used := make([]bool, len(p.Zones))
		t.Zones = make([]topology.Zone, 0, len(baseZones)+len(p.Zones))
		for _, z := range baseZones {
			if i, ok := idx[z.Name]; ok {
				t.Zones = append(t.Zones, p.Zones[i])
				from = append(from, i)
				used[i] = true
			} else {
				t.Zones = append(t.Zones, z)
				from = append(from, -1)
			}
		}
		for i, z := range p.Zones {
			if !used[i] {
				t.Zones = append(t.Zones, z)
				from = append(from, i)
			}
		}
	} else {
		t.Zones = slices.Clone(p.Zones)
		for i := range p.Zones {
			from = append(from, i)
		}
	}
	// The loosest route limits: the center checks the province's own on
	// apply; refusing here what it would accept helps nobody.
	if err := topology.LoosestLimits.Validate(&t); err != nil {
		es, ok := yamlstrict.AsErrors(err)
		if !ok {
			return nil, fmt.Errorf("zoneimport: the topology with the imported zones: %w", err)
		}
		out := make(yamlstrict.Errors, len(es))
		for i, e := range es {
			out[i] = p.locate(e, from)
		}
		return nil, &Error{Source: source + " (in the topology)", Problems: out}
	}
	return &t, nil
}

// withoutMoved is zones without the networks the plan places (copies
// where something goes), dropping zones it leaves empty; zones the plan
// replaces by name are kept whole, as Merge replaces them anyway.
func (p *Plan) withoutMoved(zones []topology.Zone) []topology.Zone {
	planned := map[string]bool{}
	names := map[string]bool{}
	for _, z := range p.Zones {
		names[z.Name] = true
		for _, n := range z.Networks {
			planned[canonical(n)] = true
		}
	}
	out := make([]topology.Zone, 0, len(zones))
	for _, z := range zones {
		if names[z.Name] {
			out = append(out, z)
			continue
		}
		keep := slices.DeleteFunc(slices.Clone(z.Networks), func(n string) bool { return planned[canonical(n)] })
		if len(keep) == 0 {
			continue
		}
		z.Networks = keep
		out = append(out, z)
	}
	return out
}

// canonical is a network as a masked prefix, so that 10.0.0.1/24 and
// 10.0.0.0/24 are the same network; as written when it does not parse.
func canonical(n string) string {
	if p, err := netip.ParsePrefix(n); err == nil {
		return p.Masked().String()
	}
	return n
}

var zonePath = regexp.MustCompile(`^zones\[(\d+)\](?: \([^)]*\))?(?:\.networks\[(\d+)\])?`)

// locate names the place in the file of a topology problem about an
// imported zone.
func (p *Plan) locate(e *yamlstrict.FieldError, from []int) *yamlstrict.FieldError {
	m := zonePath.FindStringSubmatch(e.Path)
	if m == nil {
		return e
	}
	zi, _ := strconv.Atoi(m[1])
	if zi >= len(from) || from[zi] < 0 {
		return e
	}
	pi := from[zi]
	if m[2] != "" && len(m[0]) == len(e.Path) {
		if j, _ := strconv.Atoi(m[2]); j < len(p.netPos[pi]) {
			return p.netPos[pi][j].problem(e.Msg)
		}
	}
	return &yamlstrict.FieldError{Path: e.Path, Line: e.Line, Msg: e.Msg + " (zone from " + p.zonePos[pi].String() + ")"}
}
