package topology

import (
	"net/netip"
	"strings"

	"github.com/gaissmai/bart"
)

// Snapshot is a validated topology with every lookup structure a scheduler
// needs precomputed. It is immutable: schedulers share one through an
// atomic.Pointer and replace it whole, so a request never sees half a province.
// References between entities are indices into the slices.
type Snapshot struct {
	Revision     int64
	Doc          *Topology // the validated document; read-only
	ServiceIP    netip.Addr
	CenterPrefix netip.Prefix
	// ServiceIP6 and CenterPrefix6: a dual-stack province's IPv6 pair
	// (ServiceIP is then IPv4); zero otherwise.
	ServiceIP6    netip.Addr
	CenterPrefix6 netip.Prefix
	Regions       []RegionView
	Nodes         []NodeView
	Servers       []ServerView
	Zones         []ZoneView
	Services      []ServiceView
	// Pools are the named pools, then the services' distinct inline matches.
	Pools []PoolView

	poolIdx                                            map[string]int32 // named pools
	poolBySelector                                     map[string]int32 // match set -> pool, shared by services
	regionIdx, nodeIdx, serverIdx, zoneIdx, serviceIdx map[string]int32
	hostIdx                                            map[string]int32 // normalised hostname -> service
	defaultService                                     int32            // for requests addressed to the service IP
	zoneTable                                          *bart.Table[int32]
}

// RegionView is a region with its resolved references.
type RegionView struct {
	Name     string
	Loc      Location
	Fallback []int32 // region indices, in order
	Nodes    []int32
	Servers  []int32
}

// NodeView is an edge node.
type NodeView struct {
	Name    string
	Region  int32
	Loc     Location
	Servers []int32
}

// ServerView is an edge server with parsed address and defaults applied.
type ServerView struct {
	Name       string
	Node       int32
	Region     int32
	Addr       netip.AddrPort
	AddrString string // Addr formatted once, for answers and logs
	// Addr6 is a dual-stack server's IPv6 address (Addr is then IPv4);
	// invalid otherwise.
	Addr6           netip.AddrPort
	Addr6String     string
	Loc             Location
	Weight          int
	HealthURL       string
	CoverageRadiusM float64
	Capacity        Capacity
	Labels          Labels       // the node's and the server's own
	Health          HealthPolicy // probe expectations and thresholds in force
}

// ZoneView is a coverage zone.
type ZoneView struct {
	Name     string
	Region   int32
	Loc      Location
	Networks []netip.Prefix
}

// ServiceView is a delivery service with normalised hostnames, its URL
// template compiled and its selection defaulted.
type ServiceView struct {
	Name         string
	Hostnames    []string
	URLTemplate  string
	Template     Template // URLTemplate compiled
	BitratesKbps []int
	Selection    Selection // never empty
	// Channel says where requests name their channel; nil: the first path
	// segment (steer keys as the balance policy's key says).
	Channel *ChannelPattern
	// Pool is the service's servers (an index into Pools); -1: every server.
	Pool int32
	// Answers: locations per JSON or DNS answer (at least 1).
	Answers          int
	AlternatesHeader bool
	// FamilySkip: family_fallback skip (a client of one family is only
	// given servers with an address of it up); false: other.
	FamilySkip bool
	Overflow   *Overflow // thresholds with Resume defaulted; nil: none
	Bypass     *BypassView
	Rights     Rights
	Steering   *SteeringView // nil: no content steering
}

// Counts summarises a snapshot's size.
type Counts struct {
	Regions, Nodes, Servers, Zones, Networks, Services int
}

// Counts returns how many of each entity the snapshot holds.
func (s *Snapshot) Counts() Counts { return s.Doc.Counts() }

// Counts returns how many of each entity the document holds.
func (t *Topology) Counts() Counts {
	c := Counts{Regions: len(t.Regions), Nodes: len(t.Nodes), Zones: len(t.Zones), Services: len(t.Services)}
	for _, n := range t.Nodes {
		c.Servers += len(n.Servers)
	}
	for _, z := range t.Zones {
		c.Networks += len(z.Networks)
	}
	return c
}

func lookup(m map[string]int32, name string) (int32, bool) {
	i, ok := m[name]
	return i, ok
}

// Region returns the index of the named region.
func (s *Snapshot) Region(name string) (int32, bool) { return lookup(s.regionIdx, name) }

// Node returns the index of the named node.
func (s *Snapshot) Node(name string) (int32, bool) { return lookup(s.nodeIdx, name) }

// Server returns the index of the named server.
func (s *Snapshot) Server(name string) (int32, bool) { return lookup(s.serverIdx, name) }

// Zone returns the index of the named zone.
func (s *Snapshot) Zone(name string) (int32, bool) { return lookup(s.zoneIdx, name) }

// Service returns the index of the named service.
func (s *Snapshot) Service(name string) (int32, bool) { return lookup(s.serviceIdx, name) }

// ServiceByHost returns the service that owns a hostname (case-insensitive,
// trailing dot and port ignored). It does not allocate for lowercase input.
func (s *Snapshot) ServiceByHost(host string) (int32, bool) {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 && isPort(host[i+1:]) {
		host = host[:i]
	}
	host = strings.TrimSuffix(host, ".")
	if i, ok := s.hostIdx[host]; ok {
		return i, true
	}
	if i, ok := s.hostIdx[strings.ToLower(host)]; ok {
		return i, true
	}
	// An STB that was given the Anycast address itself as its URL host.
	if len(host) > 0 && (host[0] == '[' || host[0] >= '0' && host[0] <= '9') {
		a, err := netip.ParseAddr(strings.Trim(host, "[]"))
		if ap, perr := netip.ParseAddrPort(host); perr == nil {
			a, err = ap.Addr(), nil
		}
		if err == nil && s.IsServiceIP(a.Unmap()) && s.defaultService >= 0 {
			return s.defaultService, true
		}
	}
	return -1, false
}

// AnycastPair is one family's service address and the center's aggregate
// for it.
type AnycastPair struct {
	ServiceIP    netip.Addr
	CenterPrefix netip.Prefix
}

// Anycast returns the province's service addresses with their aggregates:
// one pair for a single-family province, IPv4 then IPv6 for a dual-stack one.
func (s *Snapshot) Anycast() []AnycastPair {
	out := []AnycastPair{{s.ServiceIP, s.CenterPrefix}}
	if s.ServiceIP6.IsValid() {
		out = append(out, AnycastPair{s.ServiceIP6, s.CenterPrefix6})
	}
	return out
}

// IsServiceIP reports whether a is one of the province's service addresses.
func (s *Snapshot) IsServiceIP(a netip.Addr) bool {
	return a.IsValid() && (a == s.ServiceIP || a == s.ServiceIP6)
}

// AddrFor is the address of v to give a client of family v6 (true:
// IPv6), and whether v has one of that family.
func (v *ServerView) AddrFor(v6 bool) (netip.AddrPort, string, bool) {
	switch {
	case v.Addr.Addr().Is6() == v6 && v.Addr.IsValid():
		return v.Addr, v.AddrString, true
	case v.Addr6.IsValid() && v6:
		return v.Addr6, v.Addr6String, true
	}
	return netip.AddrPort{}, "", false
}

// ZoneOf returns the coverage zone whose most specific network contains addr.
func (s *Snapshot) ZoneOf(addr netip.Addr) (int32, bool) {
	return s.zoneTable.Lookup(addr.Unmap())
}

func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
