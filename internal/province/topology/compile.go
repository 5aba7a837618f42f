package topology

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	"github.com/gaissmai/bart"
)

// Validate checks the meaning of a decoded document and returns every problem,
// each naming its field path. It builds the same structures Compile does, so a
// document that validates always compiles.
func Validate(t *Topology) error {
	return DefaultLimits.Validate(t)
}

// Validate is Validate under the limits l.
func (l Limits) Validate(t *Topology) error {
	_, err := l.Compile(t, 0)
	return err
}

// Compile validates t and builds the immutable Snapshot schedulers answer from.
// t must not be modified afterwards: the Snapshot keeps it as its document.
func Compile(t *Topology, revision int64) (*Snapshot, error) {
	return DefaultLimits.Compile(t, revision)
}

// Compile is Compile under the limits l (a province that configured a
// different anycast.center_prefix_min_length).
func (l Limits) Compile(t *Topology, revision int64) (*Snapshot, error) {
	c := compiler{t: t, lim: l, s: &Snapshot{Revision: revision, Doc: t}}
	c.anycast()
	c.regions()
	c.nodes()
	c.pools()
	c.zones()
	c.services()
	if err := c.errs.Err(); err != nil {
		return nil, err
	}
	return c.s, nil
}

type compiler struct {
	t    *Topology
	lim  Limits
	s    *Snapshot
	errs yamlstrict.Errors
}

func (c *compiler) add(path, format string, args ...any) { c.errs.Add(path, format, args...) }

func (c *compiler) anycast() {
	a := c.t.Anycast
	ip, err := netip.ParseAddr(a.ServiceIP)
	switch {
	case a.ServiceIP == "":
		c.add("anycast.service_ip", "required")
	case err != nil || ip.Zone() != "":
		c.add("anycast.service_ip", "not an IP address: %q", a.ServiceIP)
	case ip.Is4In6():
		c.add("anycast.service_ip", "%s is an IPv4-mapped address: write it as IPv4", a.ServiceIP)
	case CheckServiceIP(ip) != nil:
		c.add("anycast.service_ip", "%v", CheckServiceIP(ip))
	default:
		c.s.ServiceIP = ip
	}
	pfx, err := netip.ParsePrefix(a.CenterPrefix)
	switch {
	case a.CenterPrefix == "":
		c.add("anycast.center_prefix", "required")
	case err != nil:
		c.add("anycast.center_prefix", "not a CIDR prefix: %q", a.CenterPrefix)
	case pfx.Addr().Is4In6():
		c.add("anycast.center_prefix", "%s is IPv4-mapped: write it as IPv4", a.CenterPrefix)
	case pfx.Masked() != pfx:
		c.add("anycast.center_prefix", "host bits set: %q (did you mean %s?)", a.CenterPrefix, pfx.Masked())
	default:
		if err := c.lim.CheckCenterPrefix(pfx, c.s.ServiceIP); err != nil {
			c.add("anycast.center_prefix", "%v", err)
		} else {
			c.s.CenterPrefix = pfx
		}
	}
	c.anycast6()
}

// anycast6 checks a dual-stack province's IPv6 pair: both or neither, the
// address IPv6 and the first pair IPv4, the aggregate covering the address.
func (c *compiler) anycast6() {
	a := c.t.Anycast
	if a.ServiceIP6 == "" {
		if a.CenterPrefix6 != "" {
			c.add("anycast.center_prefix6", "set without anycast.service_ip6")
		}
		return
	}
	ip, err := netip.ParseAddr(a.ServiceIP6)
	switch {
	case err != nil || ip.Zone() != "":
		c.add("anycast.service_ip6", "not an IP address: %q", a.ServiceIP6)
	case !ip.Is6() || ip.Is4In6():
		c.add("anycast.service_ip6", "%s is not an IPv6 address", a.ServiceIP6)
	case CheckServiceIP(ip) != nil:
		c.add("anycast.service_ip6", "%v", CheckServiceIP(ip))
	default:
		c.s.ServiceIP6 = ip
		if c.s.ServiceIP.IsValid() && !c.s.ServiceIP.Is4() {
			c.add("anycast.service_ip", "%s is IPv6: a dual-stack province writes its IPv4 service address here and the IPv6 one in service_ip6", c.s.ServiceIP)
		}
	}
	if a.CenterPrefix6 == "" {
		c.add("anycast.center_prefix6", "required with anycast.service_ip6")
		return
	}
	pfx, err := netip.ParsePrefix(a.CenterPrefix6)
	switch {
	case err != nil:
		c.add("anycast.center_prefix6", "not a CIDR prefix: %q", a.CenterPrefix6)
	case !pfx.Addr().Is6() || pfx.Addr().Is4In6():
		c.add("anycast.center_prefix6", "%s is not an IPv6 prefix", a.CenterPrefix6)
	case pfx.Masked() != pfx:
		c.add("anycast.center_prefix6", "host bits set: %q (did you mean %s?)", a.CenterPrefix6, pfx.Masked())
	default:
		if err := c.lim.CheckCenterPrefix(pfx, c.s.ServiceIP6); err != nil {
			c.add("anycast.center_prefix6", "%v", err)
		} else {
			c.s.CenterPrefix6 = pfx
		}
	}
}

func (c *compiler) location(path string, l *Location, required bool) (Location, bool) {
	if l == nil {
		if required {
			c.add(path, "required")
		}
		return Location{}, false
	}
	ok := true
	if math.IsNaN(l.Lat) || l.Lat < -90 || l.Lat > 90 {
		c.add(path+".lat", "%v is out of range [-90, 90]", l.Lat)
		ok = false
	}
	if math.IsNaN(l.Lon) || l.Lon < -180 || l.Lon > 180 {
		c.add(path+".lon", "%v is out of range [-180, 180]", l.Lon)
		ok = false
	}
	return *l, ok
}

// name checks a name used in etcd keys, metric labels and CLI arguments.
// entry checks the name of the i-th entry of a kind (node, zone) at path p,
// unique among its kind (recorded in idx), and its region reference; it
// returns the region's index, -1 when the reference is missing or unknown.
func (c *compiler) entry(kind, p string, i int, name, regionName string, idx map[string]int32) int32 {
	if c.name(p+".name", name) {
		if j, dup := idx[name]; dup {
			c.add(p+".name", "duplicate %s %q (first at %ss[%d])", kind, name, kind, j)
		} else {
			idx[name] = int32(i)
		}
	}
	if regionName == "" {
		c.add(p+".region", "required")
		return -1
	}
	r, ok := c.s.regionIdx[regionName]
	if !ok {
		c.add(p+".region", "unknown region %q%s", regionName, c.didYouMean(regionName, c.regionNames()))
		return -1
	}
	return r
}

// at is the path of the i-th entry of a list, with the entry's name when it
// has a valid one (`nodes[32] (tiancheng-1)`): an index alone does not say
// which of 10,000 servers is wrong. yamlstrict.Locate skips the name.
func at(list string, i int, name string) string {
	p := list + "[" + strconv.Itoa(i) + "]"
	if nameProblem(name) == "" {
		p += " (" + name + ")"
	}
	return p
}

func (c *compiler) regionNames() []string {
	names := make([]string, len(c.t.Regions))
	for i, r := range c.t.Regions {
		names[i] = r.Name
	}
	return names
}

// didYouMean suggests the known name nearest to an unknown reference.
func (c *compiler) didYouMean(name string, known []string) string {
	if s := yamlstrict.Nearest(name, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

func (c *compiler) name(path, n string) bool {
	if msg := nameProblem(n); msg != "" {
		c.add(path, "%s", msg)
		return false
	}
	return true
}

// nameProblem says what is wrong with a name; "" when it is valid.
func nameProblem(n string) string {
	if n == "" {
		return "required"
	}
	if len(n) > 128 {
		return "longer than 128 characters"
	}
	for i := 0; i < len(n); i++ {
		b := n[i]
		alnum := b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
		if alnum || (i > 0 && i < len(n)-1 && (b == '-' || b == '_' || b == '.')) {
			continue
		}
		return fmt.Sprintf("%q is not a valid name (lowercase letters, digits, and '-', '_', '.' inside)", n)
	}
	return ""
}

func (c *compiler) regions() {
	s := c.s
	if len(c.t.Regions) == 0 {
		c.add("regions", "at least one region is required")
	}
	s.regionIdx = make(map[string]int32, len(c.t.Regions))
	s.Regions = make([]RegionView, len(c.t.Regions))
	for i, r := range c.t.Regions {
		p := at("regions", i, r.Name)
		if r.Name == CenterName {
			c.add(p+".name", "%q is reserved for the central scheduler", r.Name)
		} else if c.name(p+".name", r.Name) {
			if j, dup := s.regionIdx[r.Name]; dup {
				c.add(p+".name", "duplicate region %q (first at regions[%d])", r.Name, j)
			} else {
				s.regionIdx[r.Name] = int32(i)
			}
		}
		loc, _ := c.location(p+".location", r.Location, true)
		s.Regions[i] = RegionView{Name: r.Name, Loc: loc}
	}
	for i, r := range c.t.Regions {
		seen := map[string]bool{}
		for j, f := range r.Fallback {
			p := fmt.Sprintf("%s.fallback[%d]", at("regions", i, r.Name), j)
			idx, ok := s.regionIdx[f]
			switch {
			case !ok:
				c.add(p, "unknown region %q%s", f, c.didYouMean(f, c.regionNames()))
			case f == r.Name:
				c.add(p, "region %q cannot fall back to itself", f)
			case seen[f]:
				c.add(p, "region %q listed twice", f)
			default:
				s.Regions[i].Fallback = append(s.Regions[i].Fallback, idx)
			}
			seen[f] = true
		}
	}
	c.fallbackCycles()
}

// fallbackCycles rejects cyclic fallback chains: each region's fallbacks must
// lead towards the center, never back to itself.
func (c *compiler) fallbackCycles() {
	const (
		white = iota
		grey
		black
	)
	color := make([]int8, len(c.s.Regions))
	var stack []int32
	reported := map[string]bool{}
	var visit func(i int32)
	visit = func(i int32) {
		color[i] = grey
		stack = append(stack, i)
		for _, f := range c.s.Regions[i].Fallback {
			switch color[f] {
			case white:
				visit(f)
			case grey:
				start := slices.Index(stack, f)
				cycle := stack[start:]
				// The same cycle is found from each of its members; report it once.
				first := slices.Index(cycle, slices.Min(cycle))
				key := fmt.Sprint(append(slices.Clone(cycle[first:]), cycle[:first]...))
				if !reported[key] {
					reported[key] = true
					names := make([]string, 0, len(cycle)+1)
					for _, k := range cycle {
						names = append(names, c.s.Regions[k].Name)
					}
					names = append(names, c.s.Regions[f].Name)
					c.add(at("regions", int(i), c.s.Regions[i].Name)+".fallback", "fallback cycle: %s", strings.Join(names, " -> "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range c.s.Regions {
		if color[i] == white {
			visit(int32(i))
		}
	}
}

func (c *compiler) nodes() {
	s := c.s
	s.nodeIdx = make(map[string]int32, len(c.t.Nodes))
	s.serverIdx = make(map[string]int32)
	addrs := make(map[netip.AddrPort]string)
	s.Nodes = make([]NodeView, len(c.t.Nodes))
	for i, n := range c.t.Nodes {
		p := at("nodes", i, n.Name)
		region := c.entry("node", p, i, n.Name, n.Region, s.nodeIdx)
		loc, _ := c.location(p+".location", n.Location, true)
		nv := NodeView{Name: n.Name, Region: region, Loc: loc}
		c.labels(p+".labels", n.Labels)
		if len(n.Servers) == 0 {
			c.add(p+".servers", "at least one server is required")
		}
		for j, sv := range n.Servers {
			sp := p + "." + at("servers", j, sv.Name)
			idx := int32(len(s.Servers))
			if c.name(sp+".name", sv.Name) {
				if k, dup := s.serverIdx[sv.Name]; dup {
					c.add(sp+".name", "duplicate server %q (first in node %q)", sv.Name, c.t.Nodes[s.Servers[k].Node].Name)
				} else {
					s.serverIdx[sv.Name] = idx
				}
			}
			view := ServerView{Name: sv.Name, Node: int32(i), Region: region, Loc: loc, Weight: int(sv.Weight), CoverageRadiusM: sv.CoverageRadiusM, Capacity: sv.Capacity,
				Labels: serverLabels(&n, &sv)}
			c.labels(sp+".labels", sv.Labels)
			c.healthFields(sp+".health", sv.Health)
			view.Addr = c.address(sp+".address", sv.Address, addrs)
			view.AddrString = view.Addr.String()
			if sv.Address6 != "" {
				view.Addr6 = c.address(sp+".address6", sv.Address6, addrs)
				switch {
				case !view.Addr6.IsValid():
				case !view.Addr6.Addr().Is6():
					c.add(sp+".address6", "%s is not an IPv6 address", view.Addr6.Addr())
					view.Addr6 = netip.AddrPort{}
				case view.Addr.IsValid() && !view.Addr.Addr().Is4():
					c.add(sp+".address", "%s is IPv6: a dual-stack server writes its IPv4 address here and the IPv6 one in address6", view.Addr.Addr())
				default:
					view.Addr6String = view.Addr6.String()
				}
			}
			if sv.Health != nil && sv.Health.URL != "" {
				u, err := url.Parse(sv.Health.URL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					c.add(sp+".health.url", "not an http(s) URL: %q", sv.Health.URL)
				}
				view.HealthURL = sv.Health.URL
			}
			switch {
			case sv.Weight < 0 || sv.Weight > 1_000_000:
				c.add(sp+".weight", "%d is out of range [1, 1000000] (leave it out for %d)", sv.Weight, DefaultWeight)
			case sv.Weight == 0: // left out (a document cannot say 0: Weight.UnmarshalYAML)
				view.Weight = DefaultWeight
			}
			if l, ok := c.location(sp+".location", sv.Location, false); ok {
				view.Loc = l
			}
			c.upTo(sp+".coverage_radius_m", sv.CoverageRadiusM, MaxCoverageRadiusM)
			c.upTo(sp+".capacity.bandwidth_mbps", sv.Capacity.BandwidthMbps, MaxBandwidthMbps)
			c.upTo(sp+".capacity.transcode_units", sv.Capacity.TranscodeUnits, MaxTranscodeUnits)
			nv.Servers = append(nv.Servers, idx)
			s.Servers = append(s.Servers, view)
		}
		s.Nodes[i] = nv
		if region >= 0 {
			rv := &s.Regions[region]
			rv.Nodes = append(rv.Nodes, int32(i))
			rv.Servers = append(rv.Servers, nv.Servers...)
		}
	}
}

func (c *compiler) address(path, a string, seen map[netip.AddrPort]string) netip.AddrPort {
	if a == "" {
		c.add(path, "required")
		return netip.AddrPort{}
	}
	ap, err := netip.ParseAddrPort(a)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" || ap.Addr().IsUnspecified() {
		c.add(path, "not host:port with an IP address and a non-zero port: %q", a)
		return netip.AddrPort{}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if c.s.IsServiceIP(ap.Addr()) {
		c.add(path, "%s is the anycast service address; redirecting there would loop", ap.Addr())
	}
	if other, dup := seen[ap]; dup {
		c.add(path, "address %s is already used at %s", ap, other)
	} else {
		seen[ap] = path
	}
	return ap
}

// Capacity ceilings: far above any real server (a 10 Tbit/s edge), low
// enough that sums and products in the QoE planner stay finite.
const (
	MaxBandwidthMbps  = 1e7
	MaxTranscodeUnits = 1e6
	MaxBitrateKbps    = 1_000_000 // 1 Gbit/s for one stream
	// MaxCoverageRadiusM is half the Earth's circumference: any larger
	// radius covers everything already.
	MaxCoverageRadiusM = 2e7
)

// upTo checks a finite number in [0, max].
func (c *compiler) upTo(path string, v, max float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > max {
		c.add(path, "%v is out of range [0, %g]", v, max)
	}
}

func (c *compiler) zones() {
	s := c.s
	s.zoneIdx = make(map[string]int32, len(c.t.Zones))
	s.Zones = make([]ZoneView, len(c.t.Zones))
	s.zoneTable = new(bart.Table[int32])
	// where each network was declared, for error messages
	type origin struct{ zone, net int }
	origins := make(map[netip.Prefix]origin)
	for i, z := range c.t.Zones {
		p := at("zones", i, z.Name)
		region := c.entry("zone", p, i, z.Name, z.Region, s.zoneIdx)
		zv := ZoneView{Name: z.Name, Region: region}
		if region >= 0 {
			zv.Loc = s.Regions[region].Loc
		}
		if l, ok := c.location(p+".location", z.Location, false); ok {
			zv.Loc = l
		}
		if len(z.Networks) == 0 {
			c.add(p+".networks", "at least one network is required")
		}
		for j, n := range z.Networks {
			np := fmt.Sprintf("%s.networks[%d]", p, j)
			pfx, err := netip.ParsePrefix(n)
			if err != nil {
				c.add(np, "not a CIDR prefix: %q", n)
				continue
			}
			if pfx.Masked() != pfx {
				c.add(np, "host bits set: %q (did you mean %s?)", n, pfx.Masked())
				continue
			}
			if pfx.Addr().Is4In6() {
				c.add(np, "%s is IPv4-mapped: write it as IPv4", n)
				continue
			}
			if o, dup := origins[pfx]; dup {
				c.add(np, "network %s is already in %s.networks[%d]", pfx, at("zones", o.zone, c.t.Zones[o.zone].Name), o.net)
				continue
			}
			origins[pfx] = origin{i, j}
			zv.Networks = append(zv.Networks, pfx)
			s.zoneTable.Insert(pfx, int32(i))
		}
		s.Zones[i] = zv
	}
	// A network nested in another zone's network is fine within one region (a
	// more specific zone), but across regions it makes the region ambiguous.
	// The overlap is reported on the zone later in the document, usually the
	// one just added, naming the other zone's network.
	for i, zv := range s.Zones {
		if zv.Region < 0 {
			continue
		}
		for _, pfx := range zv.Networks {
			for super, zi := range s.zoneTable.Supernets(pfx) {
				if super == pfx {
					continue
				}
				other := s.Zones[zi]
				if other.Region < 0 || other.Region == zv.Region {
					continue
				}
				mine, theirs := origins[pfx], origins[super]
				if int(zi) < i {
					c.add(fmt.Sprintf("%s.networks[%d]", at("zones", i, zv.Name), mine.net), "%s overlaps %s of zone %q (%s.networks[%d]) in region %q",
						pfx, super, other.Name, at("zones", int(zi), other.Name), theirs.net, s.Regions[other.Region].Name)
				} else {
					c.add(fmt.Sprintf("%s.networks[%d]", at("zones", int(zi), other.Name), theirs.net), "%s contains %s of zone %q (%s.networks[%d]) in region %q",
						super, pfx, zv.Name, at("zones", i, zv.Name), mine.net, s.Regions[zv.Region].Name)
				}
			}
		}
	}
}

func (c *compiler) services() {
	s := c.s
	if len(c.t.Services) == 0 {
		c.add("services", "at least one service is required")
	}
	s.serviceIdx = make(map[string]int32, len(c.t.Services))
	s.hostIdx = make(map[string]int32)
	s.Services = make([]ServiceView, len(c.t.Services))
	for i, sv := range c.t.Services {
		p := at("services", i, sv.Name)
		if c.name(p+".name", sv.Name) {
			if j, dup := s.serviceIdx[sv.Name]; dup {
				c.add(p+".name", "duplicate service %q (first at services[%d])", sv.Name, j)
			} else {
				s.serviceIdx[sv.Name] = int32(i)
			}
		}
		view := ServiceView{Name: sv.Name, URLTemplate: sv.URLTemplate, BitratesKbps: sv.BitratesKbps}
		if len(sv.Hostnames) == 0 {
			c.add(p+".hostnames", "at least one hostname is required")
		}
		for j, h := range sv.Hostnames {
			hp := fmt.Sprintf("%s.hostnames[%d]", p, j)
			norm, ok := NormalizeHost(h)
			if !ok {
				c.add(hp, "not a valid DNS name: %q", h)
				continue
			}
			if k, dup := s.hostIdx[norm]; dup {
				c.add(hp, "hostname %q already belongs to service %q", norm, c.t.Services[k].Name)
				continue
			}
			s.hostIdx[norm] = int32(i)
			view.Hostnames = append(view.Hostnames, norm)
		}
		view.Template = c.urlTemplate(p+".url_template", sv.URLTemplate)
		view.Channel = c.channel(p+".channel", sv.Channel)
		view.Pool = c.servicePool(p, i, &sv)
		c.serviceExtras(p, &sv, &view)
		c.rights(p, &sv, &view)
		if sv.Steering != nil {
			view.Steering = c.steering(p+".steering", sv.Steering)
		}
		if len(sv.BitratesKbps) == 0 {
			c.add(p+".bitrates_kbps", "at least one bitrate is required")
		}
		for j, b := range sv.BitratesKbps {
			if b <= 0 || b > MaxBitrateKbps {
				c.add(fmt.Sprintf("%s.bitrates_kbps[%d]", p, j), "%d is out of range [1, %d]", b, MaxBitrateKbps)
			} else if j > 0 && b <= sv.BitratesKbps[j-1] {
				c.add(fmt.Sprintf("%s.bitrates_kbps[%d]", p, j), "%d is not above the previous %d: the ladder must be strictly ascending", b, sv.BitratesKbps[j-1])
			}
		}
		if sel, err := ParseSelection(string(sv.Selection)); err != nil {
			c.add(p+".selection", "%v", err)
		} else {
			view.Selection = sel
		}
		s.Services[i] = view
	}
	for i, sv := range s.Services {
		if b := sv.Bypass; b != nil && b.CNAME != "" {
			if k, own := s.hostIdx[b.CNAME]; own {
				c.add(at("services", i, sv.Name)+".bypass.cname", "%q is a hostname of service %q: the bypass would come back here", b.CNAME, c.t.Services[k].Name)
			}
		}
	}
	s.defaultService = -1
	if len(s.Services) > 0 {
		s.defaultService = 0
	}
	if d := c.t.Anycast.DefaultService; d != "" {
		if i, ok := s.serviceIdx[d]; ok {
			s.defaultService = i
		} else {
			names := make([]string, len(c.t.Services))
			for i, sv := range c.t.Services {
				names[i] = sv.Name
			}
			c.add("anycast.default_service", "unknown service %q%s", d, c.didYouMean(d, names))
		}
	}
}

// urlTemplate checks a url_template and compiles it (nil when invalid).
func (c *compiler) urlTemplate(path, tpl string) Template {
	if tpl == "" {
		c.add(path, "required")
		return nil
	}
	ok := true
	if !strings.HasPrefix(tpl, "http://") && !strings.HasPrefix(tpl, "https://") {
		c.add(path, "must start with http:// or https://: %q", tpl)
		ok = false
	}
	t, unknown, err := parseTemplate(tpl)
	if err != nil {
		c.add(path, "%v", err)
		return nil
	}
	if !t.Has(PlaceServer) && !t.Has(PlaceHost) {
		c.add(path, "must contain {server} or {host}: %q", tpl)
		ok = false
	}
	for _, name := range unknown {
		c.add(path, "%v", unknownPlaceholder(name))
		ok = false
	}
	if !ok {
		return nil
	}
	return t
}

// NormalizeHost lowercases a DNS name and drops a trailing dot; ok is false
// when it is not a valid hostname.
func NormalizeHost(h string) (string, bool) {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			b := label[i]
			if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
				return "", false
			}
		}
	}
	if _, err := strconv.Atoi(h[strings.LastIndexByte(h, '.')+1:]); err == nil {
		return "", false // all-numeric TLD: an IP address, not a name
	}
	return h, true
}
