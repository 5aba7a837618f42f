package topology

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The kinds a diff reports, in the order it reports them.
const (
	KindRegions  = "regions"
	KindNodes    = "nodes"
	KindServers  = "servers"
	KindZones    = "zones"
	KindNetworks = "networks"
	KindServices = "services"
	KindPools    = "pools"
	KindSettings = "settings"
)

// Changes is what one document changes against another: what an operator
// confirms before an apply, what the removal guard judges and what the
// audit log summarises.
type Changes struct {
	// Sections has one entry per kind that changed, in the order of the
	// Kind constants.
	Sections []Section
	// Servers and zone networks before and after.
	ServersBefore, ServersAfter   int
	NetworksBefore, NetworksAfter int
	NodesBefore, NodesAfter       int
	// EmptiedRegions had servers before and have none after (the region
	// is still in the document: its zones' STBs would get 503s), sorted.
	EmptiedRegions []string
}

// Section is the change of one kind. Names are sorted.
type Section struct {
	Kind    string
	Added   []string
	Removed []string
	Changed []Change
}

// Change is one entity that is in both documents with different fields.
type Change struct {
	Name string
	// Fields has one line per field: "bandwidth_mbps: 1000 -> 2000".
	Fields []string
}

// Empty reports whether the documents are the same in every reported field.
func (c *Changes) Empty() bool { return len(c.Sections) == 0 }

// Section returns the section of a kind, nil when that kind did not change.
func (c *Changes) Section(kind string) *Section {
	for i := range c.Sections {
		if c.Sections[i].Kind == kind {
			return &c.Sections[i]
		}
	}
	return nil
}

// Diff compares two documents; old may be nil (nothing applied yet). The
// result is deterministic: sections in a fixed order, names sorted.
func Diff(old, new *Topology) *Changes {
	if old == nil {
		old = &Topology{}
	}
	if new == nil {
		new = &Topology{}
	}
	oc, nc := old.Counts(), new.Counts()
	c := &Changes{
		ServersBefore: oc.Servers, ServersAfter: nc.Servers,
		NetworksBefore: oc.Networks, NetworksAfter: nc.Networks,
		NodesBefore: oc.Nodes, NodesAfter: nc.Nodes,
	}
	add := func(s Section) {
		if len(s.Added)+len(s.Removed)+len(s.Changed) > 0 {
			c.Sections = append(c.Sections, s)
		}
	}
	add(diffNamed(KindRegions, index(old.Regions, regionName), index(new.Regions, regionName), regionFields))
	add(diffNamed(KindNodes, index(old.Nodes, nodeName), index(new.Nodes, nodeName), nodeFields))
	add(diffNamed(KindServers, servers(old), servers(new), serverFields))
	add(diffNamed(KindZones, index(old.Zones, zoneName), index(new.Zones, zoneName), zoneFields))
	add(diffNamed(KindNetworks, networks(old), networks(new), func(a, b string) []string {
		return field(nil, "zone", a, b)
	}))
	add(diffNamed(KindServices, index(old.Services, serviceName), index(new.Services, serviceName), serviceFields))
	add(diffNamed(KindPools, index(old.Pools, poolName), index(new.Pools, poolName), poolFields))
	add(diffNamed(KindSettings, settings(old), settings(new), func(a, b string) []string {
		if a == b {
			return nil
		}
		return []string{a + " -> " + b}
	}))
	before, after := regionServers(old), regionServers(new)
	for _, r := range new.Regions {
		if before[r.Name] > 0 && after[r.Name] == 0 {
			c.EmptiedRegions = append(c.EmptiedRegions, r.Name)
		}
	}
	slices.Sort(c.EmptiedRegions)
	c.EmptiedRegions = slices.Compact(c.EmptiedRegions)
	return c
}

// Summary is one line for logs and the audit record: "+2 servers, -1 node,
// 3 zones changed"; "no change" when there is none.
func (c *Changes) Summary() string {
	var parts []string
	for _, s := range c.Sections {
		if n := len(s.Added); n > 0 {
			parts = append(parts, "+"+count(n, s.Kind))
		}
		if n := len(s.Removed); n > 0 {
			parts = append(parts, "-"+count(n, s.Kind))
		}
		if n := len(s.Changed); n > 0 {
			parts = append(parts, count(n, s.Kind)+" changed")
		}
	}
	if r := c.rightsChanged(); len(r) > 0 {
		// Rights decide who may watch what: the audit line names them.
		parts = append(parts, "rights changed in "+strings.Join(r, ", "))
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

// count is "1 node", "3 nodes".
func count(n int, plural string) string {
	if n == 1 {
		return "1 " + strings.TrimSuffix(plural, "s")
	}
	return strconv.Itoa(n) + " " + plural
}

// Dangers lists why the change is too large to apply without an explicit
// override: it removes more than maxShare (0..1) of the servers or of the
// zone networks, leaves a region with no server, or removes every node.
// Empty when the change is safe by these rules.
func (c *Changes) Dangers(maxShare float64) []string {
	var out []string
	share := func(what string, before, after int) {
		removed := removedCount(c.Section(what))
		if before == 0 || removed == 0 {
			return
		}
		if f := float64(removed) / float64(before); f > maxShare {
			name := what
			if what == KindNetworks {
				name = "zone networks"
			}
			out = append(out, fmt.Sprintf("removes %d of %d %s (%s > %s)", removed, before, name, percent(f), percent(maxShare)))
		}
	}
	if c.NodesBefore > 0 && c.NodesAfter == 0 {
		out = append(out, fmt.Sprintf("removes every node (%d)", c.NodesBefore))
	}
	share(KindServers, c.ServersBefore, c.ServersAfter)
	share(KindNetworks, c.NetworksBefore, c.NetworksAfter)
	if len(c.EmptiedRegions) > 0 {
		out = append(out, fmt.Sprintf("leaves %s with no server: %s", count(len(c.EmptiedRegions), "regions"), strings.Join(c.EmptiedRegions, ", ")))
	}
	return out
}

func removedCount(s *Section) int {
	if s == nil {
		return 0
	}
	return len(s.Removed)
}

// percent renders a share without hiding a change: 0.2 is "20%", 0.2049
// "20.5%".
func percent(f float64) string {
	p := f * 100
	if p == math.Trunc(p) {
		return strconv.FormatFloat(p, 'f', 0, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 1, 64) + "%"
}

// diffNamed compares two name-keyed sets of comparable values with fields
// describing how one value changed.
func diffNamed[T any](kind string, old, new map[string]T, fields func(a, b T) []string) Section {
	s := Section{Kind: kind}
	for name, o := range old {
		n, ok := new[name]
		if !ok {
			s.Removed = append(s.Removed, name)
			continue
		}
		if f := fields(o, n); len(f) > 0 {
			s.Changed = append(s.Changed, Change{Name: name, Fields: f})
		}
	}
	for name := range new {
		if _, ok := old[name]; !ok {
			s.Added = append(s.Added, name)
		}
	}
	slices.Sort(s.Added)
	slices.Sort(s.Removed)
	slices.SortFunc(s.Changed, func(a, b Change) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// index keys entries by name; a duplicate (which Validate refuses) keeps
// the first, as the compiler does.
func index[T any](xs []T, name func(*T) string) map[string]*T {
	m := make(map[string]*T, len(xs))
	for i := range xs {
		if _, dup := m[name(&xs[i])]; !dup {
			m[name(&xs[i])] = &xs[i]
		}
	}
	return m
}

func regionName(r *Region) string   { return r.Name }
func nodeName(n *Node) string       { return n.Name }
func zoneName(z *Zone) string       { return z.Name }
func serviceName(s *Service) string { return s.Name }
func poolName(p *Pool) string       { return p.Name }

// field appends "name: a -> b" when a and b differ.
func field(out []string, name, a, b string) []string {
	if a != b {
		out = append(out, name+": "+a+" -> "+b)
	}
	return out
}

func loc(l *Location) string {
	if l == nil {
		return "(none)"
	}
	return strconv.FormatFloat(l.Lat, 'f', -1, 64) + "," + strconv.FormatFloat(l.Lon, 'f', -1, 64)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func list[T any](xs []T) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func regionFields(a, b *Region) []string {
	out := field(nil, "location", loc(a.Location), loc(b.Location))
	return field(out, "fallback", list(a.Fallback), list(b.Fallback))
}

func nodeFields(a, b *Node) []string {
	out := field(nil, "region", a.Region, b.Region)
	out = field(out, "labels", labelString(a.Labels), labelString(b.Labels))
	return field(out, "location", loc(a.Location), loc(b.Location))
}

// placedServer is a server with the node it is in.
type placedServer struct {
	node string
	s    *Server
}

func servers(t *Topology) map[string]placedServer {
	m := make(map[string]placedServer)
	for i := range t.Nodes {
		n := &t.Nodes[i]
		for j := range n.Servers {
			if _, dup := m[n.Servers[j].Name]; !dup {
				m[n.Servers[j].Name] = placedServer{node: n.Name, s: &n.Servers[j]}
			}
		}
	}
	return m
}

func serverFields(a, b placedServer) []string {
	out := field(nil, "node", a.node, b.node)
	out = field(out, "address", a.s.Address, b.s.Address)
	out = field(out, "address6", orNone(a.s.Address6), orNone(b.s.Address6))
	out = field(out, "health", healthString(a.s.Health), healthString(b.s.Health))
	out = field(out, "labels", labelString(a.s.Labels), labelString(b.s.Labels))
	out = field(out, "weight", weight(a.s.Weight), weight(b.s.Weight))
	out = field(out, "location", loc(a.s.Location), loc(b.s.Location))
	out = field(out, "coverage_radius_m", num(a.s.CoverageRadiusM), num(b.s.CoverageRadiusM))
	out = field(out, "bandwidth_mbps", num(a.s.Capacity.BandwidthMbps), num(b.s.Capacity.BandwidthMbps))
	return field(out, "transcode_units", num(a.s.Capacity.TranscodeUnits), num(b.s.Capacity.TranscodeUnits))
}

// healthString shows a health block's set fields ("(none)" for none).
func healthString(h *HealthCheck) string {
	if h == nil || *h == (HealthCheck{}) {
		return "(none)"
	}
	var parts []string
	add := func(name, v string) { parts = append(parts, name+"="+v) }
	if h.URL != "" {
		add("url", h.URL)
	}
	if h.ExpectStatus != 0 {
		add("expect_status", strconv.Itoa(h.ExpectStatus))
	}
	if h.ExpectBody != "" {
		add("expect_body", strconv.Quote(h.ExpectBody))
	}
	if h.MaxCPU != 0 {
		add("max_cpu", num(h.MaxCPU))
	}
	if h.MaxMemory != 0 {
		add("max_memory", num(h.MaxMemory))
	}
	if h.MaxConnections != 0 {
		add("max_connections", strconv.Itoa(h.MaxConnections))
	}
	if h.MaxLoad != 0 {
		add("max_load", num(h.MaxLoad))
	}
	return strings.Join(parts, " ")
}

func poolFields(a, b *Pool) []string {
	out := field(nil, "match", labelString(a.Match), labelString(b.Match))
	return field(out, "health", healthString(a.Health), healthString(b.Health))
}

func overflowString(o *Overflow) string {
	if o == nil {
		return "(none)"
	}
	return fmt.Sprintf("bandwidth_share=%s claims_share=%s sessions_per_server=%d rps_per_server=%s resume=%s",
		num(o.BandwidthShare), num(o.ClaimsShare), o.SessionsPerServer, num(o.RPSPerServer), num(o.Resume))
}

// weight shows the weight in effect: 0 (left out) means DefaultWeight.
func weight(w Weight) string {
	if w == 0 {
		w = DefaultWeight
	}
	return strconv.Itoa(int(w))
}

func zoneFields(a, b *Zone) []string {
	out := field(nil, "region", a.Region, b.Region)
	out = field(out, "location", loc(a.Location), loc(b.Location))
	// The networks themselves are in the networks section; here, how many.
	an, bn := make(map[string]bool, len(a.Networks)), make(map[string]bool, len(b.Networks))
	for _, n := range a.Networks {
		an[n] = true
	}
	for _, n := range b.Networks {
		bn[n] = true
	}
	var plus, minus int
	for n := range bn {
		if !an[n] {
			plus++
		}
	}
	for n := range an {
		if !bn[n] {
			minus++
		}
	}
	if plus+minus > 0 {
		out = append(out, fmt.Sprintf("networks: +%d -%d", plus, minus))
	}
	return out
}

// networks maps each zone network to its zone.
func networks(t *Topology) map[string]string {
	m := make(map[string]string)
	for _, z := range t.Zones {
		for _, n := range z.Networks {
			if _, dup := m[n]; !dup {
				m[n] = z.Name
			}
		}
	}
	return m
}

func serviceFields(a, b *Service) []string {
	out := field(nil, "hostnames", list(a.Hostnames), list(b.Hostnames))
	out = field(out, "url_template", a.URLTemplate, b.URLTemplate)
	out = field(out, "bitrates_kbps", list(a.BitratesKbps), list(b.BitratesKbps))
	out = field(out, "selection", string(a.Selection.OrDefault()), string(b.Selection.OrDefault()))
	out = field(out, "channel", a.Channel.String(), b.Channel.String())
	out = field(out, "pool", orNone(a.Pool), orNone(b.Pool))
	out = field(out, "match", labelString(a.Match), labelString(b.Match))
	out = field(out, "answers", strconv.Itoa(max(a.Answers, 1)), strconv.Itoa(max(b.Answers, 1)))
	out = field(out, "alternates_header", strconv.FormatBool(a.AlternatesHeader), strconv.FormatBool(b.AlternatesHeader))
	out = field(out, "family_fallback", string(a.FamilyFallback.OrDefault()), string(b.FamilyFallback.OrDefault()))
	out = field(out, "overflow", overflowString(a.Overflow), overflowString(b.Overflow))
	out = field(out, "steering", a.Steering.String(), b.Steering.String())
	return rightsFields(out, a, b)
}

// settings are the document's scalar settings by their path.
func settings(t *Topology) map[string]string {
	return map[string]string{
		"anycast.service_ip":      orNone(t.Anycast.ServiceIP),
		"anycast.center_prefix":   orNone(t.Anycast.CenterPrefix),
		"anycast.service_ip6":     orNone(t.Anycast.ServiceIP6),
		"anycast.center_prefix6":  orNone(t.Anycast.CenterPrefix6),
		"anycast.default_service": orNone(t.Anycast.DefaultService),
	}
}

// regionServers counts the servers of each region.
func regionServers(t *Topology) map[string]int {
	m := make(map[string]int)
	for _, n := range t.Nodes {
		m[n.Region] += len(n.Servers)
	}
	return m
}
