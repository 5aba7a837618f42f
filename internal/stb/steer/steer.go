// Package steer is the request-routing engine: (client address, hostname,
// path) -> the edge server and bitrate an STB is sent to. An Engine is built
// once per topology snapshot and availability change, off the hot path, and
// is immutable afterwards: Decide takes no locks, does no I/O and does not
// allocate.
package steer

import (
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/geo"
)

// Result classifies a decision, after Apache Traffic Control's result types.
type Result uint8

// Result types.
const (
	ResultCZ       Result = iota + 1 // client in a coverage zone, served in its region
	ResultDefault                    // client in no zone, served from the default region
	ResultFallback                   // client's region had no available server; served by another region
	ResultMiss                       // hostname belongs to no service
	ResultError                      // no available server anywhere
	ResultGeo                        // client in no zone, placed by the GeoIP database
	ResultOverflow                   // the client's node (or region) was over its service's thresholds; served by the next
	ResultBlackout                   // a rights rule blacks the channel out where the client is: sent to the slate
	ResultBypass                     // every node that could serve the client is over the thresholds: sent to the service's bypass
)

// The zero Result is NONE: an answer that needed no decision (a DNS SOA or
// NS query, a refused or malformed query).
var resultNames = [...]string{"NONE", "CZ", "DEFAULT", "FALLBACK", "MISS", "ERROR", "GEO", "OVERFLOW", "BLACKOUT", "BYPASS"}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "UNKNOWN"
}

// Results lists every result type, for pre-creating metric series.
var Results = []Result{ResultCZ, ResultDefault, ResultFallback, ResultMiss, ResultError, ResultGeo, ResultOverflow, ResultBlackout, ResultBypass}

// Redirected reports whether the result sends the STB somewhere other than
// an edge server: a slate (BLACKOUT) or the bypass (BYPASS).
func (r Result) Redirected() bool { return r == ResultBlackout || r == ResultBypass }

// Served reports whether the result names a server to send the STB to.
func (r Result) Served() bool {
	switch r {
	case ResultCZ, ResultDefault, ResultFallback, ResultGeo, ResultOverflow:
		return true
	}
	return false
}

// Reasons for MISS and ERROR decisions (static, so Decide does not allocate).
const (
	ReasonUnknownHost   = "hostname belongs to no service"
	ReasonNoServer      = "no available server in any region"
	ReasonNoClientPlace = "client is in no coverage zone and there is no default region"
)

// Family is the address family a client is given a server's address of.
type Family uint8

// Families. The zero Family asks for none: the server's first address
// (ServerView.Addr), what a single-family province gives everyone.
const (
	FamilyAny Family = iota
	FamilyV4
	FamilyV6
)

var familyNames = [...]string{"", "ipv4", "ipv6"}

func (f Family) String() string {
	if int(f) < len(familyNames) {
		return familyNames[f]
	}
	return "unknown"
}

// FamilyOf is the family of a client address (IPv4-mapped IPv6 is IPv4);
// FamilyAny for the zero Addr.
func FamilyOf(a netip.Addr) Family {
	switch {
	case a.Is4() || a.Is4In6():
		return FamilyV4
	case a.Is6():
		return FamilyV6
	}
	return FamilyAny
}

// Request is what the engine needs from one STB request.
type Request struct {
	Client netip.Addr // where the STB is (TCP peer, trusted X-Forwarded-For, or ECS)
	// Family is the family of the address the answer gives: the client's
	// own over HTTP, the record type's over DNS (whatever the transport or
	// ECS). FamilyAny: the server's first address, as before dual-stack.
	Family Family
	Host   string // the service hostname asked for
	// Path and Query (raw) give the content key for consistent hashing;
	// empty for DNS.
	Path, Query string
	// Now is when the request arrived, for rights rules with a window;
	// zero: the engine reads the clock when a rule needs it.
	Now time.Time
}

// Decision is the engine's answer. Indices refer to the engine's snapshot;
// -1 means none.
type Decision struct {
	Result       Result
	Service      int32
	Zone         int32
	ClientRegion int32 // where the client is (its zone's region, or the default)
	Region       int32 // the region of the chosen server
	Node         int32
	Server       int32
	BitrateKbps  int
	Reason       string // why there is no server, for MISS and ERROR
	// Rule is the service's rights rule that matched (an index into its
	// Rights.Rules): the one that blacked the request out, or allowed it.
	Rule int32
	// Family is the request's: Engine.Addr gives the chosen server's
	// address of it, or by the service's family_fallback the other one.
	Family Family
}

// Options configure an Engine.
type Options struct {
	// DefaultRegion serves clients in no coverage zone: a regional scheduler's
	// own region, or the center's configured default. Empty: the first region
	// of the topology.
	DefaultRegion string
	// Available reports whether a server may take new STBs (health and
	// operator drain). Nil means every server is available.
	Available func(server int32) bool
	// Why says why a server is unavailable, for Explain; may be nil.
	Why func(server int32) string
	// Down reports whether an unavailable server is out for a fault
	// (health, ejection) rather than only drained, so still serving the
	// sessions it has; nil: every unavailable server is down.
	Down func(server int32) bool
	// Balance holds the in-node policies (swrr, chash, p2c) of services
	// that select by them; nil: every service picks as "nearest" does.
	Balance *balance.Table
	// StripQuery names query parameters {query} leaves out, besides
	// TokenParam (always left out).
	StripQuery []string
	// NodeRank orders a region's nodes for clients at from (nearest first by
	// default); the scheduler ranks by the RTT + loss network distance where
	// checkers measured it, and puts nodes over capacity or in panic last.
	NodeRank func(nodes []int32, from topology.Location) []int32
	// PoolBalance holds the in-node policies of the services that select
	// by swrr, chash or p2c among a pool's servers, by snapshot pool index
	// (nil entries: the pool's services pick as nearest does).
	PoolBalance []*balance.Table
	// Weight is the weight nearest picks a server by (slow start applied);
	// nil: the topology's.
	Weight func(server int32) float64
	// Locate places a client in no coverage zone (GeoIP); nil or false:
	// the default region.
	Locate func(netip.Addr) (topology.Location, bool)
	// Overflow says which nodes are over their service's thresholds; nil:
	// none ever is.
	Overflow Overflow
	// Count is told of every node a decision sends an STB to, for services
	// with overflow thresholds (requests per second); may be nil.
	Count Counter
	// FamilyUp reports whether server's address of a family (v6: IPv6)
	// is up, for servers that have one; nil: every address is. A server
	// with no address up is unavailable.
	FamilyUp func(server int32, v6 bool) bool
	// FamilyBalance makes the in-node policy tables of pool p's servers
	// (-1: every server) restricted to those with an address of family v6
	// up (avail, by server), for services with family_fallback skip whose
	// pool has a balance table; nil: they pick as nearest does.
	FamilyBalance func(p int32, v6 bool, avail []bool) *balance.Table
}

// Overflow reports the nodes over a service's overflow thresholds.
type Overflow interface {
	Over(service, node int32) bool
	Reason(service, node int32) string
}

// Counter counts decisions per service and node.
type Counter interface{ Add(service, node int32) }

// pool is the availability of one pool's servers: pools[0] is every server.
type pool struct {
	avail       []bool  // by server: available and in the pool
	nodeAvail   []int32 // available servers of the pool per node
	regionAvail []int32 // per region
	balance     *balance.Table
}

// Engine is an immutable routing table over one snapshot.
type Engine struct {
	snap          *topology.Snapshot
	defaultRegion int32
	avail         []bool  // by server
	down          []bool  // by server: unavailable for a fault, not only drained
	nodeAvail     []int32 // available servers per node
	regionAvail   []int32 // available servers per region
	// pools[0] is avail, nodeAvail, regionAvail and balance; pools[p+1]
	// is snapshot pool p; after them, the family-restricted pools of
	// services with family_fallback skip (famPools says which). svcPool
	// maps a request's Family and a service to its entry: every family
	// shares the entry of a service that falls back to the other family.
	pools    []pool
	svcPool  [3][]int32
	famPools []famPool
	// famUp[0] (IPv4) and famUp[1] (IPv6), by server: available with an
	// address of the family up.
	famUp   [2][]bool
	weight  []float64 // by server: what nearest weighs it by (slow start applied)
	locate  func(netip.Addr) (topology.Location, bool)
	over    Overflow
	count   Counter
	hasOver []bool // by service: overflow thresholds set
	// ramp is slow start's share of each server's weight (nil: none);
	// rampUntil when the last ramp ends.
	ramp      []float64
	rampUntil time.Time
	// nodesByZone[z]: the nodes of zone z's region, nearest to the zone first.
	nodesByZone [][]int32
	// nodesByRegion[r]: region r's nodes, nearest to the region's centre first.
	nodesByRegion [][]int32
	// regionsByRegion[r]: every region, nearest to region r first (r itself first).
	regionsByRegion [][]int32
	// colocated[n]: every server of node n sits at the node's location.
	colocated []bool
	// uniform[n]: every server of node n has the same weight, so rendezvous
	// hashing needs no logarithm.
	uniform   []bool
	why       func(int32) string
	balance   *balance.Table
	selection []topology.Selection // by service
	strip     []string             // query parameters {query} leaves out
	queryPart []int                // by service: the first template part after its '?'
}

// New builds an engine. It is the slow part (sorting nodes per zone); call it
// off the hot path when the snapshot or availability changes.
func New(snap *topology.Snapshot, o Options) *Engine {
	e := &Engine{snap: snap, defaultRegion: -1, why: o.Why, balance: o.Balance, strip: stripList(o.StripQuery), queryPart: queryParts(snap)}
	e.selection = make([]topology.Selection, len(snap.Services))
	for i, sv := range snap.Services {
		e.selection[i] = sv.Selection
	}
	if len(snap.Regions) > 0 {
		e.defaultRegion = 0
	}
	if o.DefaultRegion != "" {
		if r, ok := snap.Region(o.DefaultRegion); ok {
			e.defaultRegion = r
		}
	}
	e.avail = make([]bool, len(snap.Servers))
	e.down = make([]bool, len(snap.Servers))
	e.nodeAvail = make([]int32, len(snap.Nodes))
	e.regionAvail = make([]int32, len(snap.Regions))
	e.famUp = [2][]bool{make([]bool, len(snap.Servers)), make([]bool, len(snap.Servers))}
	for i := range snap.Servers {
		s := &snap.Servers[i]
		ok := o.Available == nil || o.Available(int32(i))
		for f, v6 := range [2]bool{false, true} {
			_, _, has := s.AddrFor(v6)
			e.famUp[f][i] = ok && has && (o.FamilyUp == nil || o.FamilyUp(int32(i), v6))
		}
		if o.FamilyUp != nil {
			ok = ok && (e.famUp[0][i] || e.famUp[1][i])
		}
		e.avail[i] = ok
		e.down[i] = !ok && (o.Down == nil || o.Down(int32(i)))
		if ok {
			e.nodeAvail[s.Node]++
			if s.Region >= 0 {
				e.regionAvail[s.Region]++
			}
		}
	}
	e.pools = make([]pool, 1+len(snap.Pools))
	e.pools[0] = pool{avail: e.avail, nodeAvail: e.nodeAvail, regionAvail: e.regionAvail, balance: o.Balance}
	for p := range snap.Pools {
		pl := pool{avail: make([]bool, len(snap.Servers)), nodeAvail: make([]int32, len(snap.Nodes)), regionAvail: make([]int32, len(snap.Regions))}
		if p < len(o.PoolBalance) {
			pl.balance = o.PoolBalance[p]
		}
		for _, si := range snap.Pools[p].Servers {
			if e.avail[si] {
				pl.avail[si] = true
				sv := &snap.Servers[si]
				pl.nodeAvail[sv.Node]++
				if sv.Region >= 0 {
					pl.regionAvail[sv.Region]++
				}
			}
		}
		e.pools[p+1] = pl
	}
	e.hasOver = make([]bool, len(snap.Services))
	for f := range e.svcPool {
		e.svcPool[f] = make([]int32, len(snap.Services))
	}
	for i, sv := range snap.Services {
		for f := range e.svcPool {
			e.svcPool[f][i] = sv.Pool + 1
		}
		if sv.FamilySkip {
			e.svcPool[FamilyV4][i] = e.familyPool(sv.Pool+1, false, o.FamilyBalance)
			e.svcPool[FamilyV6][i] = e.familyPool(sv.Pool+1, true, o.FamilyBalance)
		}
		e.hasOver[i] = sv.Overflow != nil && o.Overflow != nil
	}
	e.locate, e.over, e.count = o.Locate, o.Overflow, o.Count
	e.weight = make([]float64, len(snap.Servers))
	for i := range snap.Servers {
		e.weight[i] = float64(snap.Servers[i].Weight)
		if o.Weight != nil {
			e.weight[i] = o.Weight(int32(i))
		}
	}
	e.colocated = make([]bool, len(snap.Nodes))
	e.uniform = make([]bool, len(snap.Nodes))
	for i, n := range snap.Nodes {
		e.colocated[i], e.uniform[i] = true, true
		for _, s := range n.Servers {
			e.colocated[i] = e.colocated[i] && snap.Servers[s].Loc == n.Loc
			e.uniform[i] = e.uniform[i] && e.weight[s] == e.weight[n.Servers[0]]
		}
	}
	rank := e.sortNodes
	if o.NodeRank != nil {
		rank = o.NodeRank
	}
	e.nodesByRegion = make([][]int32, len(snap.Regions))
	for r, rv := range snap.Regions {
		e.nodesByRegion[r] = rank(rv.Nodes, rv.Loc)
	}
	// Zones of one region at one location share their ordering.
	type key struct {
		region int32
		loc    topology.Location
	}
	shared := map[key][]int32{}
	e.nodesByZone = make([][]int32, len(snap.Zones))
	for z, zv := range snap.Zones {
		if zv.Region < 0 {
			continue
		}
		k := key{zv.Region, zv.Loc}
		if order, ok := shared[k]; ok {
			e.nodesByZone[z] = order
			continue
		}
		order := rank(snap.Regions[zv.Region].Nodes, zv.Loc)
		shared[k] = order
		e.nodesByZone[z] = order
	}
	e.regionsByRegion = make([][]int32, len(snap.Regions))
	for r, rv := range snap.Regions {
		order := make([]int32, len(snap.Regions))
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			da, db := dist(rv.Loc, snap.Regions[a].Loc), dist(rv.Loc, snap.Regions[b].Loc)
			switch {
			case a == int32(r):
				return -1
			case b == int32(r):
				return 1
			case da < db:
				return -1
			case da > db:
				return 1
			}
			return 0
		})
		e.regionsByRegion[r] = order
	}
	return e
}

// famPool says which pool a family-restricted pool restricts.
type famPool struct {
	base int32 // index into pools
	v6   bool
}

// familyPool is the index of pools[base] restricted to servers with an
// address of family v6 up: base itself when that leaves every server in,
// else a pool added (once per base and family).
func (e *Engine) familyPool(base int32, v6 bool, mk func(int32, bool, []bool) *balance.Table) int32 {
	for i, fp := range e.famPools {
		if fp.base == base && fp.v6 == v6 {
			return int32(1 + len(e.snap.Pools) + i)
		}
	}
	bp, up := &e.pools[base], e.famUp[b2i(v6)]
	pl := pool{avail: make([]bool, len(bp.avail)), nodeAvail: make([]int32, len(bp.nodeAvail)), regionAvail: make([]int32, len(bp.regionAvail))}
	same := true
	for si, ok := range bp.avail {
		if ok && !up[si] {
			same = false
			continue
		}
		if pl.avail[si] = ok; ok {
			sv := &e.snap.Servers[si]
			pl.nodeAvail[sv.Node]++
			if sv.Region >= 0 {
				pl.regionAvail[sv.Region]++
			}
		}
	}
	if same {
		return base
	}
	if bp.balance != nil && mk != nil {
		pl.balance = mk(base-1, v6, pl.avail)
	}
	e.pools = append(e.pools, pl)
	e.famPools = append(e.famPools, famPool{base, v6})
	return int32(len(e.pools) - 1)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pool is the entry of service svc for a client of family f.
func (e *Engine) pool(svc int32, f Family) *pool { return &e.pools[e.svcPool[f][svc]] }

// Addr is the address d's server gives its client: of d's family when it
// has one up, else (family_fallback other) of the other family; the
// server's first address for FamilyAny. ok is false without a server.
func (e *Engine) Addr(d *Decision) (ap netip.AddrPort, text string, f Family, ok bool) {
	if d.Server < 0 {
		return netip.AddrPort{}, "", FamilyAny, false
	}
	return e.ServerAddr(d.Server, d.Family)
}

// ServerAddr is the address server gives a client of family f (see Addr).
func (e *Engine) ServerAddr(server int32, f Family) (netip.AddrPort, string, Family, bool) {
	sv := &e.snap.Servers[server]
	v6 := f == FamilyV6 || f == FamilyAny && sv.Addr.Addr().Is6()
	if !e.famUp[b2i(v6)][server] && e.famUp[b2i(!v6)][server] {
		v6 = !v6 // none of the family up: the other one (skip never gets here)
	}
	ap, text, ok := sv.AddrFor(v6)
	if !ok { // a server whose addresses are all down, given by a test or explain
		ap, text, v6 = sv.Addr, sv.AddrString, sv.Addr.Addr().Is6()
	}
	if v6 {
		return ap, text, FamilyV6, true
	}
	return ap, text, FamilyV4, true
}

func (e *Engine) sortNodes(nodes []int32, from topology.Location) []int32 {
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b int32) int {
		da, db := dist(from, e.snap.Nodes[a].Loc), dist(from, e.snap.Nodes[b].Loc)
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	return out
}

func dist(a, b topology.Location) float64 { return geo.DistanceM(a.Lat, a.Lon, b.Lat, b.Lon) }

// Snapshot returns the snapshot the engine was built from.
func (e *Engine) Snapshot() *topology.Snapshot { return e.snap }

// AnyAvailable reports whether any server anywhere may take STBs: a
// scheduler with none has nowhere to send its region's boxes, not even by
// fallback, and should stop attracting them.
func (e *Engine) AnyAvailable() bool { return anyAvail(&e.pools[0]) }

// Available reports whether the engine may send STBs to server.
func (e *Engine) Available(server int32) bool { return e.avail[server] }

// Down reports whether server is unavailable for a fault (failed health
// checks, ejected), not only drained: a drained server still serves the
// sessions it has, a down one does not.
func (e *Engine) Down(server int32) bool { return e.down[server] }

// Decide routes one request.
func (e *Engine) Decide(req Request) Decision { return e.decide(req, false) }

// Peek is the decision a new request would get, without counting it in
// the balance policies' state or the overflow counters: for a request
// that is not a new session (a playing session's steering manifest),
// which must neither rotate swrr nor look like demand on a node.
func (e *Engine) Peek(req Request) Decision { return e.decide(req, true) }

// FamilyAvailable reports whether server's address of family f is up
// (FamilyAny: any of its addresses).
func (e *Engine) FamilyAvailable(server int32, f Family) bool {
	if f == FamilyAny {
		return e.avail[server]
	}
	return e.famUp[b2i(f == FamilyV6)][server]
}

// decide routes one request; dry decides without counting the pick in the
// balance policies' state (swrr's rotation, chash's bounded loads, p2c's
// in-flight counts) or in the overflow counters, so that explaining a
// decision does not change the next STB's.
func (e *Engine) decide(req Request, dry bool) Decision {
	d := Decision{Service: -1, Zone: -1, ClientRegion: -1, Region: -1, Node: -1, Server: -1, Rule: -1, Family: req.Family}
	svc, ok := e.snap.ServiceByHost(req.Host)
	if !ok {
		d.Result, d.Reason = ResultMiss, ReasonUnknownHost
		return d
	}
	d.Service = svc
	ladder := e.snap.Services[svc].BitratesKbps
	d.BitrateKbps = ladder[len(ladder)-1] // the top of the ladder until QoE allocation decides
	var loc topology.Location
	var order []int32
	if z, ok := e.snap.ZoneOf(req.Client); ok && e.snap.Zones[z].Region >= 0 {
		d.Zone, d.ClientRegion, d.Result = z, e.snap.Zones[z].Region, ResultCZ
		loc, order = e.snap.Zones[z].Loc, e.nodesByZone[z]
	} else if l, r, ok := e.geoLocate(req.Client); ok {
		// Placed by GeoIP: the region nearest to where the database puts
		// the client, its nodes nearest to that point first.
		d.ClientRegion, d.Result, loc = r, ResultGeo, l
	} else if e.defaultRegion >= 0 {
		d.ClientRegion, d.Result = e.defaultRegion, ResultDefault
		loc, order = e.snap.Regions[e.defaultRegion].Loc, e.nodesByRegion[e.defaultRegion]
	} else {
		d.Result, d.Reason = ResultError, ReasonNoClientPlace
		return d
	}
	if rt := &e.snap.Services[svc].Rights; len(rt.Rules) > 0 {
		if d.Rule = e.rule(rt, &d, &req); d.Rule >= 0 && rt.Rules[d.Rule].Blackout {
			d.Result = ResultBlackout
			return d
		}
	}
	pl := e.pool(svc, req.Family)
	over := e.hasOver[svc]
	if over && !dry && e.count != nil {
		// Demand is counted where the STB would go without overflow, so
		// that a node over its request budget does not look idle (and flap
		// back) because its STBs went elsewhere.
		defer func() {
			if n := e.preferred(&d, pl, order, loc, &req); n >= 0 {
				e.count.Add(svc, n)
			}
		}()
	}
	if pl.regionAvail[d.ClientRegion] > 0 {
		if e.pickInRegion(&d, pl, d.ClientRegion, order, loc, &req, dry, over) {
			return d
		}
		// Every node of the client's region with a server is over the
		// service's thresholds: the next regions in the fallback order take
		// the new STBs; with nowhere to spill, the region serves anyway.
		if e.elsewhere(&d, pl, loc, &req, dry, true) {
			d.Result = ResultOverflow
			return d
		}
		// The whole province is over: the bypass takes the STB out of
		// it, when the service has one.
		if e.canBypass(svc, &req) {
			toBypass(&d)
			return d
		}
		e.pickInRegion(&d, pl, d.ClientRegion, order, loc, &req, dry, false)
		return d
	}
	// The client's region has nothing: its fallbacks in order, then every
	// region nearest first (regions not over the thresholds first).
	if over && e.elsewhere(&d, pl, loc, &req, dry, true) {
		d.Result = ResultFallback
		return d
	}
	if e.canBypass(svc, &req) && anyAvail(pl) {
		toBypass(&d)
		return d
	}
	if e.elsewhere(&d, pl, loc, &req, dry, false) {
		d.Result = ResultFallback
		return d
	}
	d.Result, d.Reason = ResultError, ReasonNoServer
	return d
}

// preferred is the node d's STB would have gone to with no node over the
// overflow thresholds: the first of its region with an available server of
// the pool (d's own node when the region had none; for a BYPASS from such
// a region, the node its fallback would have reached).
func (e *Engine) preferred(d *Decision, pl *pool, order []int32, loc topology.Location, req *Request) int32 {
	if d.Result != ResultOverflow && d.Result != ResultBypass {
		return d.Node
	}
	if d.Result == ResultBypass && pl.regionAvail[d.ClientRegion] == 0 {
		c := *d
		if e.elsewhere(&c, pl, loc, req, true, false) {
			return c.Node
		}
		return -1
	}
	if order != nil {
		for _, n := range order {
			if pl.nodeAvail[n] > 0 {
				return n
			}
		}
		return d.Node
	}
	best, bestD := d.Node, math.Inf(1)
	for _, n := range e.snap.Regions[d.ClientRegion].Nodes {
		if pl.nodeAvail[n] > 0 {
			if dd := dist(loc, e.snap.Nodes[n].Loc); dd < bestD {
				best, bestD = n, dd
			}
		}
	}
	return best
}

// geoLocate places a client in no coverage zone with the GeoIP database:
// the point it gives and the region nearest to it.
func (e *Engine) geoLocate(a netip.Addr) (topology.Location, int32, bool) {
	if e.locate == nil || len(e.snap.Regions) == 0 {
		return topology.Location{}, -1, false
	}
	l, ok := e.locate(a)
	if !ok {
		return topology.Location{}, -1, false
	}
	best, bestD := int32(-1), math.Inf(1)
	for r := range e.snap.Regions {
		if dd := dist(l, e.snap.Regions[r].Loc); dd < bestD {
			best, bestD = int32(r), dd
		}
	}
	return l, best, true
}

// elsewhere decides d in a region other than the client's: its fallbacks
// in order, then every region nearest first; skipOver passes over regions
// whose every node is over the service's thresholds. It reports whether a
// region took the client.
func (e *Engine) elsewhere(d *Decision, pl *pool, loc topology.Location, req *Request, dry, skipOver bool) bool {
	try := func(r int32) bool {
		return r != d.ClientRegion && pl.regionAvail[r] > 0 && e.pickInRegion(d, pl, r, nil, loc, req, dry, skipOver)
	}
	for _, r := range e.snap.Regions[d.ClientRegion].Fallback {
		if try(r) {
			return true
		}
	}
	for _, r := range e.regionsByRegion[d.ClientRegion] {
		if try(r) {
			return true
		}
	}
	return false
}

// pickInRegion chooses the nearest node with an available server of the
// pool (order, if given, is the region's nodes sorted by distance from
// loc), then the server. With skipOver it passes over nodes over the
// service's overflow thresholds (the result becomes OVERFLOW when it did)
// and reports false when every node is; otherwise it always succeeds.
func (e *Engine) pickInRegion(d *Decision, pl *pool, region int32, order []int32, loc topology.Location, req *Request, dry, skipOver bool) bool {
	best, skipped := int32(-1), false
	if order != nil {
		for _, n := range order {
			if pl.nodeAvail[n] == 0 {
				continue
			}
			if skipOver && e.over.Over(d.Service, n) {
				skipped = true
				continue
			}
			best = n
			break
		}
	} else {
		bestD := math.Inf(1)
		for _, n := range e.snap.Regions[region].Nodes {
			if pl.nodeAvail[n] == 0 {
				continue
			}
			if skipOver && e.over.Over(d.Service, n) {
				skipped = true
				continue
			}
			if dd := dist(loc, e.snap.Nodes[n].Loc); dd < bestD {
				best, bestD = n, dd
			}
		}
	}
	if best < 0 {
		return false
	}
	if skipped && region == d.ClientRegion {
		d.Result = ResultOverflow
	}
	d.Region, d.Node = region, best
	if sel := e.selection[d.Service]; sel != topology.SelectNearest && pl.balance != nil {
		var key uint64
		if sel == topology.SelectCHash {
			key = e.contentHash(d.Service, req.Path, req.Query)
		}
		var s int32
		if dry {
			s = pl.balance.Explain(sel, best, key, addrHash(req.Client)).Pick
		} else {
			s = pl.balance.Pick(sel, best, key, addrHash(req.Client))
		}
		if s >= 0 && pl.avail[s] {
			d.Server = s
			return true
		}
	}
	d.Server = e.pickInNode(pl, best, loc, req.Client)
	return true
}

// tieM: servers closer than this to each other count as equally near.
const tieM = 1.0

// pickInNode returns the nearest available server of node n; equally near
// servers share clients in proportion to their weights by rendezvous hashing
// of the client address, so one STB keeps its server while the set is stable.
func (e *Engine) pickInNode(pl *pool, n int32, loc topology.Location, client netip.Addr) int32 {
	servers := e.snap.Nodes[n].Servers
	nearest := 0.0
	if !e.colocated[n] {
		nearest = math.Inf(1)
		for _, s := range servers {
			if pl.avail[s] {
				nearest = min(nearest, dist(loc, e.snap.Servers[s].Loc))
			}
		}
	}
	h := addrHash(client)
	if e.colocated[n] && e.uniform[n] {
		// Equal weights: the highest hash wins (what -w/ln(u) would pick).
		best, bestX := int32(-1), uint64(0)
		for _, s := range servers {
			if x := mix(h ^ (uint64(s)+1)*0x9E3779B97F4A7C15); pl.avail[s] && (best < 0 || x > bestX) {
				best, bestX = s, x
			}
		}
		return best
	}
	best, bestScore := int32(-1), math.Inf(-1)
	for _, s := range servers {
		if !pl.avail[s] {
			continue
		}
		if !e.colocated[n] && dist(loc, e.snap.Servers[s].Loc) > nearest+tieM {
			continue
		}
		if sc := hrwScore(h, uint64(s), e.weight[s]); sc > bestScore {
			best, bestScore = s, sc
		}
	}
	return best
}

// addrHash is a fixed (unseeded) hash of the client address, so that every
// scheduler, and every rebuild of the tables, sends one STB to the same server.
func addrHash(a netip.Addr) uint64 {
	b := a.Unmap().As16()
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	return mix(hi*0x9E3779B97F4A7C15 ^ mix(lo))
}

// mix is balance's finaliser: one definition of the hashes schedulers must agree on.
func mix(x uint64) uint64 { return balance.Mix(x) }

// hrwScore is weighted rendezvous hashing: -w / ln(u), u uniform in (0,1)
// from the client's hash mixed with the server's index.
func hrwScore(clientHash, server uint64, weight float64) float64 {
	x := mix(clientHash ^ (server+1)*0x9E3779B97F4A7C15)
	u := (float64(x>>11) + 0.5) / (1 << 53)
	return -weight / math.Log(u)
}

// Elsewhere re-decides d (a success for a client in d.ClientRegion) outside
// the client's region: its fallbacks in order, then the nearest region with
// an available server of the service's pool. The QoE allocation sends there
// a session no server of its own region can take. d is left as it was when
// no other region has an available server.
func (e *Engine) Elsewhere(d *Decision, req Request) {
	if d.ClientRegion < 0 || d.Service < 0 {
		return
	}
	loc := e.snap.Regions[d.ClientRegion].Loc
	if d.Zone >= 0 {
		loc = e.snap.Zones[d.Zone].Loc
	}
	c := *d
	if e.elsewhere(&c, e.pool(d.Service, d.Family), loc, &req, false, false) {
		c.Result = ResultFallback
		*d = c
	}
}

// AvailableFor reports whether the engine may send STBs of service svc to
// server: available, and in the service's pool.
func (e *Engine) AvailableFor(svc, server int32) bool {
	return e.pools[e.svcPool[FamilyAny][svc]].avail[server]
}

// AvailableTo reports whether the engine may send d's client to server:
// available, in the service's pool, and (family_fallback skip) with an
// address of the client's family up.
func (e *Engine) AvailableTo(d *Decision, server int32) bool {
	return e.pool(d.Service, d.Family).avail[server]
}

// Alternates appends to dst up to n-1 servers besides d's, in the order an
// STB should try them: the other nodes of d's region (nearest first), then
// the nearest node of each other region in the fallback order, then by
// distance, and last the nodes over the service's overflow thresholds. One server per node, so
// that an alternate does not share the failure of the first answer's node.
// It is dry: no balance or overflow state changes.
func (e *Engine) Alternates(d *Decision, req Request, n int, dst []int32) []int32 {
	if !d.Result.Served() || d.Server < 0 || n <= 1 {
		return dst
	}
	pl := e.pool(d.Service, d.Family)
	loc, order := e.clientPlace(d, req.Client)
	want := len(dst) + n - 1
	// The region's other nodes; with overPass, those over the thresholds.
	regionNodes := func(overPass bool) {
		if overPass && !e.hasOver[d.Service] {
			return
		}
		nodes := order
		if d.Region != d.ClientRegion || nodes == nil {
			nodes = e.sortNodes(e.snap.Regions[d.Region].Nodes, loc)
		}
		for _, nd := range nodes {
			if len(dst) >= want || nd == d.Node || pl.nodeAvail[nd] == 0 {
				continue
			}
			if e.hasOver[d.Service] && e.over.Over(d.Service, nd) != overPass {
				continue
			}
			if s := e.serverIn(pl, d.Service, nd, loc, &req); s >= 0 && !slices.Contains(dst, s) {
				dst = append(dst, s)
			}
		}
	}
	regionNodes(false)
	// Other regions: the nearest node of each.
	regionDone := func(r int32) bool {
		for _, s := range dst {
			if e.snap.Servers[s].Region == r {
				return true
			}
		}
		return r == d.Region
	}
	tryRegion := func(r int32) {
		if len(dst) >= want || regionDone(r) || pl.regionAvail[r] == 0 {
			return
		}
		best, bestD := int32(-1), math.Inf(1)
		for _, nd := range e.snap.Regions[r].Nodes {
			if pl.nodeAvail[nd] > 0 {
				if dd := dist(loc, e.snap.Nodes[nd].Loc); dd < bestD {
					best, bestD = nd, dd
				}
			}
		}
		if best >= 0 {
			if s := e.serverIn(pl, d.Service, best, loc, &req); s >= 0 {
				dst = append(dst, s)
			}
		}
	}
	if d.ClientRegion >= 0 {
		tryRegion(d.ClientRegion)
		for _, r := range e.snap.Regions[d.ClientRegion].Fallback {
			tryRegion(r)
		}
		for _, r := range e.regionsByRegion[d.ClientRegion] {
			tryRegion(r)
		}
	}
	regionNodes(true)
	return dst
}

// clientPlace is where the engine placed d's client, and its region's
// nodes in preference order (nil: by distance from the place).
func (e *Engine) clientPlace(d *Decision, client netip.Addr) (topology.Location, []int32) {
	switch {
	case d.Zone >= 0:
		return e.snap.Zones[d.Zone].Loc, e.nodesByZone[d.Zone]
	case d.Result == ResultGeo:
		l, _, _ := e.geoLocate(client)
		return l, nil
	case d.ClientRegion >= 0:
		return e.snap.Regions[d.ClientRegion].Loc, e.nodesByRegion[d.ClientRegion]
	}
	return topology.Location{}, nil
}

// serverIn is the server node nd's policy would give req, without
// counting it.
func (e *Engine) serverIn(pl *pool, svc, nd int32, loc topology.Location, req *Request) int32 {
	if sel := e.selection[svc]; sel != topology.SelectNearest && pl.balance != nil {
		var key uint64
		if sel == topology.SelectCHash {
			key = e.contentHash(svc, req.Path, req.Query)
		}
		if s := pl.balance.Explain(sel, nd, key, addrHash(req.Client)).Pick; s >= 0 && pl.avail[s] {
			return s
		}
	}
	return e.pickInNode(pl, nd, loc, req.Client)
}
