package dnsd

import (
	"encoding/binary"
	"math/bits"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/gaissmai/bart"
	"github.com/miekg/dns"
)

// SOA timers. Nothing transfers these zones (AXFR is refused), so refresh,
// retry and expire are conventional values that only show up in dig output;
// the negative-caching TTL (MINIMUM) is Config.TTL, like positive answers, so
// a name that starts existing with a new snapshot is seen as soon as an
// address change would be.
const (
	soaRefresh = 3600
	soaRetry   = 600
	soaExpire  = 86400
)

// ServeDNS answers one query. Responses (QR set) are dropped; UDP replies
// are truncated to what the client can receive, TCP replies never are.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	start := time.Now()
	if req.Response {
		return
	}
	s.fullQueries.Inc()
	remote := w.RemoteAddr()
	m, o := s.answer(req, addrOf(remote))
	_, tcp := remote.(*net.TCPAddr)
	truncate(m, req, s.cfg.MaxUDPSize, tcp)
	latency := time.Since(start)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("write reply", "client", remote, "err", err)
	}
	s.record(start, latency, req, m, &o)
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// truncate fits a UDP reply m to what the client of req can receive,
// dropping records and setting TC so that it retries over TCP (RFC 7766). TCP
// replies are left whole: the two-byte length allows 64 KiB.
func truncate(m, req *dns.Msg, ours uint16, tcp bool) {
	if !tcp {
		m.Truncate(udpLimit(req, ours))
	}
}

// udpLimit is the largest UDP reply for req: 512 without EDNS (RFC 1035),
// else the client's advertised size (at least 512, RFC 6891) capped by ours.
func udpLimit(req *dns.Msg, ours uint16) int {
	size := uint16(dns.MinMsgSize)
	if opt := req.IsEdns0(); opt != nil {
		size = max(opt.UDPSize(), dns.MinMsgSize)
	}
	return int(min(size, ours))
}

// outcome is what the access log needs besides the reply.
type outcome struct {
	client  netip.Addr // who the answer was for: ECS address or packet source
	result  steer.Result
	snap    *topology.Snapshot
	d       steer.Decision
	decided bool
	target  string // the address given out
	// family is the record type's (A: IPv4, AAAA: IPv6), given the family
	// of the edge address given, for the access log.
	family, given steer.Family
}

// qFamily is the address family a question asks for: the record type's,
// whatever the transport or the ECS option's family.
func qFamily(qtype uint16) steer.Family {
	switch qtype {
	case dns.TypeA:
		return steer.FamilyV4
	case dns.TypeAAAA:
		return steer.FamilyV6
	}
	return steer.FamilyAny
}

// answer builds the reply to req from a client at src.
func (s *Server) answer(req *dns.Msg, src netip.Addr) (*dns.Msg, outcome) {
	m := new(dns.Msg)
	m.Id, m.Response, m.Opcode, m.Compress = req.Id, true, req.Opcode, true
	m.RecursionDesired, m.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	if len(req.Question) == 1 {
		m.Question = req.Question[:1:1] // as asked: 0x20 resolvers check the case
	}
	o := outcome{client: src}
	e := parseEDNS(req)
	if e.client.IsValid() && !s.trustedResolver(src) {
		// Anyone can put any subnet in a query: only the operator's
		// resolvers may choose where their clients are. The option is still
		// echoed, with scope 0: this answer does not depend on it.
		e.client = netip.Addr{}
	}
	if e.client.IsValid() {
		o.client = e.client
	}
	var scope uint8
	m.Rcode, scope = s.resolve(m, req, &e, &o)
	if e.opt != nil {
		m.Extra = append(m.Extra, s.opt(&e, scope))
	}
	return m, o
}

// resolve fills m's sections and returns its rcode and, for answers that
// depend on the client's location, the ECS scope.
func (s *Server) resolve(m, req *dns.Msg, e *edns, o *outcome) (rcode int, scope uint8) {
	switch {
	case req.Opcode != dns.OpcodeQuery:
		return dns.RcodeNotImplemented, 0
	case e.rcode != dns.RcodeSuccess:
		return e.rcode, 0
	case len(req.Question) != 1:
		return dns.RcodeFormatError, 0
	}
	q := req.Question[0]
	if q.Qclass != dns.ClassINET {
		return dns.RcodeRefused, 0
	}
	var eng *steer.Engine
	if s.engine != nil {
		eng = s.engine()
	}
	if eng == nil {
		return dns.RcodeServerFailure, 0 // no snapshot yet: let the resolver try another scheduler
	}
	ix := s.indexFor(eng.Snapshot())
	o.snap = ix.snap
	name := strings.ToLower(q.Name) // does not allocate when already lowercase
	z, ok := ix.find(name)
	if !ok {
		o.result = steer.ResultMiss
		return dns.RcodeRefused, 0
	}
	m.Authoritative = true
	switch {
	case name == z.apex:
		return s.apex(m, q, z, eng, ix, e, o)
	case z.nsInZone && name == z.ns:
		// The name server is the scheduler: at each service address of
		// the family asked (both in a dual-stack province).
		for i, ip := range ix.serviceIPs {
			if rr := s.addrRR(q.Name, ip, q.Qtype); rr != nil {
				m.Answer = append(m.Answer, rr)
				if o.target == "" {
					o.target = ix.serviceIPText[i]
				}
			}
		}
		if len(m.Answer) == 0 {
			m.Ns = append(m.Ns, s.soa(z.apex, z, ix.snap))
		}
		return dns.RcodeSuccess, 0
	}
	o.result = steer.ResultMiss
	m.Ns = append(m.Ns, s.soa(z.apex, z, ix.snap))
	return dns.RcodeNameError, 0
}

// apex answers a question for a zone apex, the service hostname itself.
func (s *Server) apex(m *dns.Msg, q dns.Question, z *zone, eng *steer.Engine, ix *index, e *edns, o *outcome) (int, uint8) {
	snap := ix.snap
	switch q.Qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeANY:
	case dns.TypeSOA:
		m.Answer = append(m.Answer, s.soa(q.Name, z, snap))
		return dns.RcodeSuccess, 0
	case dns.TypeNS:
		m.Answer = append(m.Answer, &dns.NS{Hdr: s.hdr(q.Name, dns.TypeNS), Ns: z.ns})
		if z.nsInZone { // glue: every service address
			for _, ip := range ix.serviceIPs {
				if rr := s.addrRR(z.ns, ip, dns.TypeANY); rr != nil {
					m.Extra = append(m.Extra, rr)
				}
			}
		}
		return dns.RcodeSuccess, 0
	case dns.TypeAXFR, dns.TypeIXFR:
		m.Authoritative = false
		return dns.RcodeRefused, 0
	default:
		m.Ns = append(m.Ns, s.soa(z.apex, z, snap))
		return dns.RcodeSuccess, 0
	}
	o.family = qFamily(q.Qtype)
	req := steer.Request{Client: o.client, Host: z.apex, Family: o.family}
	o.d = eng.Decide(req)
	o.decided, o.result = true, o.d.Result
	if o.d.Result.Redirected() {
		return s.redirect(m, q, z, eng, ix, e, o)
	}
	if o.d.Server < 0 {
		m.Authoritative = false
		return dns.RcodeServerFailure, 0
	}
	var scope uint8
	if e.client.IsValid() {
		scope = ix.ecsScope(e.client, e.ecs.SourceNetmask)
	}
	ap, _, given, _ := eng.Addr(&o.d)
	if rr := s.addrRR(q.Name, ap.Addr().Unmap(), q.Qtype); rr != nil {
		m.Answer = append(m.Answer, rr)
		o.target, o.given = ix.target(o.d.Server, given), given
		// Further servers in preference order (services[].answers), of
		// the family asked (an alternate without one up is left out);
		// truncation drops the last first.
		for _, si := range eng.Alternates(&o.d, req, z.answers, nil) {
			if ap, _, f, _ := eng.ServerAddr(si, o.family); f == o.family || o.family == steer.FamilyAny {
				if rr := s.addrRR(q.Name, ap.Addr().Unmap(), q.Qtype); rr != nil {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
	} else {
		// The chosen server has no address of the family asked up
		// (family_fallback other): say so (NODATA), and the STB, asking
		// for both, reaches it by the other, rather than hand out a
		// server the engine did not pick.
		m.Ns = append(m.Ns, s.soa(z.apex, z, snap))
	}
	return dns.RcodeSuccess, scope
}

// redirect answers a BLACKOUT with the slate's address of the family
// asked (NODATA without one) and a BYPASS with the bypass CNAME.
func (s *Server) redirect(m *dns.Msg, q dns.Question, z *zone, eng *steer.Engine, ix *index, e *edns, o *outcome) (int, uint8) {
	var scope uint8
	if e.client.IsValid() {
		scope = ix.ecsScope(e.client, e.ecs.SourceNetmask)
	}
	if o.d.Result == steer.ResultBypass {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: s.hdr(q.Name, dns.TypeCNAME), Target: z.bypass})
		o.target = z.bypass[:len(z.bypass)-1]
		return dns.RcodeSuccess, scope
	}
	if sl := eng.Rule(&o.d).Slate; sl != nil {
		for _, a := range [...]struct {
			ip   netip.Addr
			text string
		}{{sl.A, sl.AText}, {sl.AAAA, sl.AAAAText}} {
			if rr := s.addrRR(q.Name, a.ip, q.Qtype); a.ip.IsValid() && rr != nil {
				m.Answer = append(m.Answer, rr)
				if o.target == "" {
					o.target = a.text
				}
			}
		}
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, s.soa(z.apex, z, ix.snap))
	}
	return dns.RcodeSuccess, scope
}

func (s *Server) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: s.ttl}
}

// addrRR is the A or AAAA record of ip if it answers qtype, else nil.
func (s *Server) addrRR(name string, ip netip.Addr, qtype uint16) dns.RR {
	switch {
	case ip.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
		return &dns.A{Hdr: s.hdr(name, dns.TypeA), A: ip.AsSlice()}
	case ip.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
		return &dns.AAAA{Hdr: s.hdr(name, dns.TypeAAAA), AAAA: ip.AsSlice()}
	}
	return nil
}

func (s *Server) soa(owner string, z *zone, snap *topology.Snapshot) dns.RR {
	return &dns.SOA{
		Hdr: s.hdr(owner, dns.TypeSOA), Ns: z.ns, Mbox: z.mbox,
		Serial:  uint32(snap.Revision),
		Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: s.ttl,
	}
}

// opt is the reply's OPT record.
func (s *Server) opt(e *edns, scope uint8) *dns.OPT {
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(s.cfg.MaxUDPSize)
	if e.opt.Do() {
		opt.SetDo() // RFC 3225 §3: the DO bit of the query is copied to the response
	}
	if e.ecs != nil && e.rcode == dns.RcodeSuccess {
		// RFC 7871 §7.2.1: family, source prefix and address as received.
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: e.ecs.Family, SourceNetmask: e.ecs.SourceNetmask,
			SourceScope: scope, Address: e.ecs.Address,
		})
	}
	if e.nsid && s.nsid != "" {
		opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: s.nsid})
	}
	return opt
}

// record sends one answered query to the access log.
func (s *Server) record(start time.Time, latency time.Duration, req, m *dns.Msg, o *outcome) {
	if s.rec == nil {
		return
	}
	var host, qtype string
	if len(req.Question) == 1 {
		q := req.Question[0]
		// Without the root dot, so DNS and HTTP lines for a hostname group together.
		host = strings.TrimSuffix(q.Name, ".")
		qtype = qtypeString(q.Qtype)
	}
	s.rec.Record(entry(start, latency, host, qtype, m.Rcode, o))
}

// entry is the access-log entry of one query; both paths log through it, so
// that their lines cannot drift apart.
func entry(start time.Time, latency time.Duration, host, qtype string, rcode int, o *outcome) accesslog.Entry {
	e := accesslog.Entry{
		Time: start, Proto: "dns", Client: o.client, Result: o.result,
		Target: o.target, Status: rcode, Latency: latency, Host: host, Path: qtype,
		Family: o.family, TargetFamily: o.given,
	}
	if o.decided {
		if r := o.snap.Rule(o.d.Service, o.d.Rule); r != nil {
			e.Rule = r.Label
		}
		if d := &o.d; d.Zone >= 0 {
			e.Zone = o.snap.Zones[d.Zone].Name
		}
		if d := &o.d; d.ClientRegion >= 0 {
			e.ClientRegion = o.snap.Regions[d.ClientRegion].Name
		}
		if d := &o.d; d.Server >= 0 {
			e.Region = o.snap.Regions[d.Region].Name
			e.Server = o.snap.Servers[d.Server].Name
		}
	}
	return e
}

func qtypeString(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return dns.Type(t).String() // TYPE65280
}

// index is the zone table of one snapshot. It is rebuilt when the snapshot
// changes (not when only availability does), so that a query finds its zone
// and its log target without allocating.
type index struct {
	snap     *topology.Snapshot
	zones    map[string]*zone // by apex, lowercase with the root dot
	networks bart.Lite        // every coverage-zone network, for ECS scopes
	targets  [2][]string      // by family (IPv4, IPv6) and server: its IP as given out
	// serviceIPs are the province's service addresses (IPv4 first),
	// serviceIPText as the access log writes them.
	serviceIPs    []netip.Addr
	serviceIPText []string
	// fast: the apexes the fast path answers, by lowercase wire name.
	fast map[string]*fastZone
}

type zone struct {
	apex     string // service hostname, lowercase FQDN
	ns       string // the zone's name server
	mbox     string // SOA RNAME
	nsInZone bool   // ns is below the apex, so we must give its address
	answers  int    // records per answer (the service's answers)
	bypass   string // the service's bypass CNAME, an FQDN; "": none
}

func (s *Server) indexFor(snap *topology.Snapshot) *index {
	if ix := s.index.Load(); ix != nil && ix.snap == snap {
		return ix
	}
	// Two queries racing here build the same thing; the last store wins.
	ix := &index{snap: snap, zones: map[string]*zone{}, targets: [2][]string{make([]string, len(snap.Servers)), make([]string, len(snap.Servers))}}
	for _, svc := range snap.Services {
		for _, h := range svc.Hostnames {
			z := &zone{apex: h + ".", ns: s.cfg.NSName, mbox: s.cfg.Hostmaster, answers: svc.Answers}
			if b := svc.Bypass; b != nil && b.CNAME != "" {
				z.bypass = b.CNAME + "."
			}
			if z.ns == "" {
				z.ns = "ns1." + z.apex
			}
			if z.mbox == "" {
				z.mbox = "hostmaster." + z.apex
			}
			z.nsInZone = z.ns != z.apex && dns.IsSubDomain(z.apex, z.ns)
			ix.zones[z.apex] = z
		}
	}
	for i := range snap.Servers {
		for f, v6 := range [2]bool{false, true} {
			if ap, _, ok := snap.Servers[i].AddrFor(v6); ok {
				ix.targets[f][i] = ap.Addr().Unmap().String()
			}
		}
	}
	for _, z := range snap.Zones {
		for _, p := range z.Networks {
			ix.networks.Insert(p)
		}
	}
	// Rights rules by network make answers differ inside a zone: the ECS
	// scope must not cover more than the rule's network.
	for i := range snap.Services {
		for _, p := range snap.Services[i].Rights.Networks() {
			ix.networks.Insert(p)
		}
	}
	for _, p := range snap.Anycast() {
		if p.ServiceIP.IsValid() {
			ix.serviceIPs = append(ix.serviceIPs, p.ServiceIP.Unmap())
			ix.serviceIPText = append(ix.serviceIPText, p.ServiceIP.Unmap().String())
		}
	}
	ix.fast = s.fastZones(ix)
	s.index.Store(ix)
	return ix
}

// target is server's address of family f as the access log writes it.
func (ix *index) target(server int32, f steer.Family) string {
	if f == steer.FamilyV6 {
		return ix.targets[1][server]
	}
	return ix.targets[0][server]
}

// find returns the zone of a lowercase name: its longest suffix that is an apex.
func (ix *index) find(name string) (*zone, bool) {
	for off := 0; ; {
		if z, ok := ix.zones[name[off:]]; ok {
			return z, true
		}
		next, end := dns.NextLabel(name, off)
		if end {
			return nil, false
		}
		off = next
	}
}

// edns is what a request's OPT record asks of us.
type edns struct {
	opt    *dns.OPT // nil: no EDNS, and no OPT in the reply
	rcode  int      // FORMERR or BADVERS when the OPT is unacceptable
	ecs    *dns.EDNS0_SUBNET
	client netip.Addr // the ECS address; invalid without ECS or with source prefix 0
	nsid   bool
}

// parseEDNS validates the request's OPT (RFC 6891) and ECS option (RFC 7871).
func parseEDNS(req *dns.Msg) (e edns) {
	for _, rr := range req.Extra {
		if opt, ok := rr.(*dns.OPT); ok {
			if e.opt != nil {
				e.rcode = dns.RcodeFormatError // RFC 6891 §6.1.1: more than one OPT
				return e
			}
			e.opt = opt
		}
	}
	if e.opt == nil {
		return e
	}
	if e.opt.Version() != 0 {
		e.rcode = dns.RcodeBadVers
		return e
	}
	for _, o := range e.opt.Option {
		switch o := o.(type) {
		case *dns.EDNS0_SUBNET:
			client, ok := ecsClient(o.Family, o.SourceNetmask, o.Address)
			if !ok || e.ecs != nil {
				e.rcode, e.ecs, e.client = dns.RcodeFormatError, nil, netip.Addr{}
				return e
			}
			e.ecs, e.client = o, client
		case *dns.EDNS0_NSID:
			e.nsid = true
		}
	}
	return e
}

// ecsClient validates an ECS option (family, source prefix, address as
// unpacked: 4 or 16 octets) and returns the address it locates the client at
// (invalid for source prefix 0, which asks us not to use it). Both paths use
// it, the fast one on the address octets of the wire.
// RFC 7871 §6 makes these FORMERR: an unknown family, a source prefix longer
// than the family, and address bits set beyond the prefix. A non-zero scope
// in a query is ignored (the RFC says only that it MUST be 0). The miekg
// parser rejects bad families and prefixes itself (a header-only FORMERR)
// and silently drops or zero-fills ADDRESS octets beyond or short of the
// prefix, so those two cases cannot be told apart here and are accepted.
func ecsClient(family uint16, source uint8, addr net.IP) (netip.Addr, bool) {
	var a netip.Addr
	switch family {
	case 0: // dig +subnet=0: family 0 is accepted with prefix 0 only
		return netip.Addr{}, source == 0
	case 1:
		ip4 := addr.To4()
		if ip4 == nil || source > 32 {
			return netip.Addr{}, false
		}
		a = netip.AddrFrom4([4]byte(ip4))
	case 2:
		if len(addr) != net.IPv6len || source > 128 {
			return netip.Addr{}, false
		}
		a = netip.AddrFrom16([16]byte(addr))
	default:
		return netip.Addr{}, false
	}
	if p, err := a.Prefix(int(source)); err != nil || p.Addr() != a {
		return netip.Addr{}, false
	}
	if source == 0 {
		return netip.Addr{}, true
	}
	return a, true
}

// ecsScope is the SCOPE PREFIX-LENGTH of an answer computed for the ECS
// subnet client/source: the shortest prefix of client, no shorter than
// source, all of whose addresses match the same coverage-zone network as
// client (or, for a client in no zone, none). So the scope is at least the
// length of the zone network that matched, and a source prefix wider than
// that network, or one holding more specific networks of other zones
// (+subnet=100.0.0.0/8 over a province of /16s), gets a scope narrowed to
// the part that shares the answer rather than one that spans every city.
//
// It is deliberately never shorter than source, even where a zone network
// is wider: steer spreads a node's clients over its servers by hashing the
// client address, so an answer is exact only for the subnet it was computed
// for, and a zone-wide scope would let a resolver send a whole zone to one
// server. A scope longer than source is allowed by RFC 7871 §7.2.1 (the
// source prefix was not specific enough); a resolver caches such an answer
// for its source prefix only and SHOULD ask with the longer prefix next time.
func (ix *index) ecsScope(client netip.Addr, source uint8) uint8 {
	p, err := client.Prefix(int(source))
	if err != nil {
		return source
	}
	scope := int(source)
	for n := range ix.networks.Subnets(p) {
		if n.Contains(client) {
			scope = max(scope, n.Bits()) // the match, or a wider network under it
		} else {
			scope = max(scope, commonBits(client, n.Addr())+1) // the first bit that leaves n out
		}
	}
	return uint8(scope)
}

// commonBits is the length of the common prefix of two addresses of one
// family.
func commonBits(a, b netip.Addr) int {
	a16, b16 := a.As16(), b.As16()
	n := bits.LeadingZeros64(binary.BigEndian.Uint64(a16[:8]) ^ binary.BigEndian.Uint64(b16[:8]))
	if n == 64 {
		n += bits.LeadingZeros64(binary.BigEndian.Uint64(a16[8:]) ^ binary.BigEndian.Uint64(b16[8:]))
	}
	if a.Is4() {
		n -= 96 // As16 maps IPv4 into ::ffff:0:0/96
	}
	return min(n, a.BitLen())
}
