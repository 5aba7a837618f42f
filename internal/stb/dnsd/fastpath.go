package dnsd

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/miekg/dns"
)

// The DNS wire format (RFC 1035 §4.1, RFC 6891 §6.1.2), as far as the fast
// path reads and writes it.
const (
	headerLen  = 12
	flagQR     = 1 << 15
	opcodeBits = 0xf << 11
	flagAA     = 1 << 10
	flagRD     = 1 << 8
	flagCD     = 1 << 4
	ednsDO     = 1 << 15 // in the flags of the OPT TTL (RFC 3225)
	optFixed   = 11      // an OPT without options: root, type, class, TTL, RDLENGTH
	ecsFixed   = 8       // an ECS option without address: code, length, family, source, scope
	rrFixed    = 10      // type, class, TTL, RDLENGTH
	maxName    = 255     // octets of a name in wire form
)

// fastZone is what the fast path needs of one apex; built with the index.
type fastZone struct {
	z    *zone
	host string // the apex without the root dot, as the access log writes it
	wire []byte // the apex in wire form (lowercase)
	soa  []byte // the zone's SOA record for NODATA, uncompressed, owner the apex
	// bypass is the service's bypass CNAME in wire form; nil: none.
	bypass []byte
}

// fastZones indexes the apexes the fast path answers, by wire name. Only
// names made of bytes miekg never escapes in text form (lowercase letters,
// digits, '-' and '_') are taken, so that comparing wire names compares what
// the handler compares; a zone whose name or SOA cannot be packed is left to
// the full path.
func (s *Server) fastZones(ix *index) map[string]*fastZone {
	fast := make(map[string]*fastZone, len(ix.zones))
	for apex, z := range ix.zones {
		if !plainName(apex) || z.answers > 1 {
			continue // several records: the full path builds them
		}
		wire := make([]byte, maxName+1)
		n, err := dns.PackDomainName(apex, wire, 0, nil, false)
		if err != nil {
			continue
		}
		// Packed by miekg from the same record the handler builds, so the
		// two paths cannot disagree on its bytes.
		soa := make([]byte, 3*(maxName+1)+rrFixed+20)
		m, err := dns.PackRR(s.soa(apex, z, ix.snap), soa, 0, nil, false)
		if err != nil {
			continue
		}
		fz := &fastZone{z: z, host: strings.TrimSuffix(apex, "."), wire: wire[:n:n], soa: soa[:m:m]}
		if z.bypass != "" {
			b := make([]byte, maxName+1)
			k, err := dns.PackDomainName(z.bypass, b, 0, nil, false)
			if err != nil {
				continue
			}
			fz.bypass = b[:k:k]
		}
		fast[string(wire[:n])] = fz
	}
	return fast
}

func plainName(name string) bool {
	for i := range len(name) {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// hostAsked is the access log's host for a question of this zone asked as
// qname: the prepared string when asked in lowercase, else the name with the
// case it was asked in (one allocation: 0x20-randomising resolvers).
func (fz *fastZone) hostAsked(qname []byte) string {
	if string(qname) == string(fz.wire) {
		return fz.host
	}
	var b strings.Builder
	b.Grow(len(qname))
	for off := 0; qname[off] != 0; off += 1 + int(qname[off]) {
		if off > 0 {
			b.WriteByte('.')
		}
		b.Write(qname[off+1 : off+1+int(qname[off])])
	}
	return b.String()
}

// fastQuery is a query of the fast path, parsed in place.
type fastQuery struct {
	flags  uint16
	qname  []byte // the question's name in wire form, as asked
	qtype  uint16
	edns   bool
	size   uint16 // UDP payload size the client advertises
	do     bool
	ecs    bool
	family uint16
	source uint8
	// addr holds the ECS address octets as miekg unpacks them: the first 4
	// (family 1) or 16 (family 2), zero-filled.
	addr [16]byte
}

// ecsAddr is the ECS address as the handler's ecsClient sees it.
func (q *fastQuery) ecsAddr() net.IP {
	switch q.family {
	case 1:
		return q.addr[:net.IPv4len]
	case 2:
		return q.addr[:]
	}
	return nil
}

// parseFast parses b if it is a query of the fast path: opcode QUERY with QR
// clear, one question of class IN and type A or AAAA with an uncompressed
// name, empty answer and authority sections, and at most an OPT record of
// version 0 whose options are ECS, COOKIE and PADDING, ending the message.
// Anything else, and anything miekg would fail to unpack, is false and left
// to the full path, which answers it (or rejects it) as it always has.
func parseFast(b []byte, q *fastQuery) bool {
	if len(b) < headerLen {
		return false
	}
	q.flags = binary.BigEndian.Uint16(b[2:])
	if q.flags&(flagQR|opcodeBits) != 0 || binary.BigEndian.Uint16(b[4:]) != 1 ||
		binary.BigEndian.Uint16(b[6:]) != 0 || binary.BigEndian.Uint16(b[8:]) != 0 {
		return false
	}
	ar := binary.BigEndian.Uint16(b[10:])
	if ar > 1 {
		return false
	}
	off := headerLen
	for {
		if off >= len(b) {
			return false
		}
		l := int(b[off])
		if l == 0 {
			off++
			break
		}
		if l > 63 { // a compression pointer or an extended label type
			return false
		}
		off += 1 + l
	}
	if off-headerLen > maxName || off+4 > len(b) {
		return false
	}
	q.qname = b[headerLen:off]
	q.qtype = binary.BigEndian.Uint16(b[off:])
	if q.qtype != dns.TypeA && q.qtype != dns.TypeAAAA || binary.BigEndian.Uint16(b[off+2:]) != dns.ClassINET {
		return false
	}
	off += 4
	q.edns, q.do, q.ecs = false, false, false
	if ar == 0 {
		return off == len(b)
	}
	return parseOPT(b[off:], q)
}

// parseOPT parses the query's OPT record, the rest of the message.
func parseOPT(b []byte, q *fastQuery) bool {
	if len(b) < optFixed || b[0] != 0 || binary.BigEndian.Uint16(b[1:]) != dns.TypeOPT {
		return false
	}
	q.edns = true
	q.size = binary.BigEndian.Uint16(b[3:])
	// b[5], the extended rcode, means nothing in a query.
	if b[6] != 0 { // version: BADVERS
		return false
	}
	q.do = binary.BigEndian.Uint16(b[7:])&ednsDO != 0 // other flags are ignored (RFC 6891 §6.1.4)
	if int(binary.BigEndian.Uint16(b[9:])) != len(b)-optFixed {
		return false
	}
	for o := b[optFixed:]; len(o) > 0; {
		if len(o) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(o), int(binary.BigEndian.Uint16(o[2:]))
		if len(o) < 4+n {
			return false
		}
		data := o[4 : 4+n]
		o = o[4+n:]
		switch code {
		case dns.EDNS0SUBNET:
			if q.ecs || !parseECS(data, q) {
				return false // twice: FORMERR
			}
		case dns.EDNS0COOKIE, dns.EDNS0PADDING:
			// The handler ignores both (no server cookies; padding only
			// matters to encrypted transports), and miekg unpacks them
			// whatever they hold: resolvers that send cookies (BIND does)
			// stay on the fast path.
		default:
			return false
		}
	}
	return true
}

// parseECS reads an ECS option as miekg's EDNS0_SUBNET.unpack does; what
// that rejects (and ecsClient then) the full path answers with FORMERR.
func parseECS(data []byte, q *fastQuery) bool {
	if len(data) < 4 {
		return false
	}
	q.family, q.source = binary.BigEndian.Uint16(data), data[2]
	scope := data[3]
	q.addr = [16]byte{}
	switch q.family {
	case 0:
		if q.source != 0 {
			return false
		}
	case 1:
		if q.source > 32 || scope > 32 {
			return false
		}
		copy(q.addr[:net.IPv4len], data[4:])
	case 2:
		if q.source > 128 || scope > 128 {
			return false
		}
		copy(q.addr[:], data[4:])
	default:
		return false
	}
	q.ecs = true
	return true
}

// serveFast answers the UDP query b from src on the fast path, appending the
// reply to out[:0], and logs it as the handler would. false: b is not for the
// fast path, nothing was decided or logged, and the full path must answer.
func (s *Server) serveFast(b []byte, src netip.Addr, out []byte) ([]byte, bool) {
	var start time.Time
	if s.rec != nil {
		start = time.Now()
	}
	var q fastQuery
	if !parseFast(b, &q) {
		return out, false
	}
	var a fastLog
	reply, ok := s.fastAnswer(&q, b, src, out, &a)
	if !ok {
		return out, false
	}
	if s.rec != nil {
		s.rec.Record(entry(start, time.Since(start), a.zone.hostAsked(q.qname), qtypeString(q.qtype), a.rcode, &a.o))
	}
	return reply, true
}

// fastLog is what the access log needs of a fast answer.
type fastLog struct {
	o     outcome
	zone  *fastZone
	rcode int
}

// fastAnswer builds the reply to the parsed query q (message b) from src,
// byte for byte what the handler's reply packs to over UDP (uncompressed,
// as miekg packs a reply that fits), with the same decision: the same
// engine call with the same client. It declines, before deciding, whatever
// the handler would answer otherwise: no snapshot, a name that is not an
// apex, an invalid ECS option, or a reply that might not fit the client's
// UDP size.
func (s *Server) fastAnswer(q *fastQuery, b []byte, src netip.Addr, out []byte, a *fastLog) ([]byte, bool) {
	if s.engine == nil {
		return out, false
	}
	eng := s.engine()
	if eng == nil {
		return out, false
	}
	ix := s.indexFor(eng.Snapshot())
	var key [maxName]byte
	k := key[:len(q.qname)]
	for i, c := range q.qname {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
	}
	fz := ix.fast[string(k)]
	if fz == nil {
		return out, false
	}
	var client netip.Addr
	ecsLen := 0
	if q.ecs {
		var valid bool
		if client, valid = ecsClient(q.family, q.source, q.ecsAddr()); !valid {
			return out, false
		}
		ecsLen = ecsFixed + (int(q.source)+7)/8
	}
	// The reply's size is known up to its record: check the larger before
	// deciding, so that a reply the full path would truncate is never
	// decided twice.
	limit, optLen := dns.MinMsgSize, 0
	if q.edns {
		limit, optLen = max(int(q.size), dns.MinMsgSize), optFixed+ecsLen
	}
	limit = min(limit, int(s.cfg.MaxUDPSize))
	record := max(len(q.qname)+rrFixed+max(net.IPv6len, len(fz.bypass)), len(fz.soa))
	if headerLen+len(q.qname)+4+record+optLen > limit {
		return out, false
	}

	// As answer and apex decide.
	a.zone, a.rcode = fz, dns.RcodeSuccess
	a.o = outcome{client: src, snap: ix.snap}
	if client.IsValid() && !s.trustedResolver(src) {
		client = netip.Addr{} // echoed with scope 0, see answer
	}
	if client.IsValid() {
		a.o.client = client
	}
	a.o.family = qFamily(q.qtype)
	a.o.d = eng.Decide(steer.Request{Client: a.o.client, Host: fz.z.apex, Family: a.o.family})
	a.o.decided, a.o.result = true, a.o.d.Result
	flags := flagQR | q.flags&(flagRD|flagCD)
	var scope uint8
	var addr netip.Addr
	var cname []byte // a BYPASS: the answer is this CNAME
	if a.o.d.Server < 0 && !a.o.d.Result.Redirected() {
		a.rcode = dns.RcodeServerFailure
	} else {
		flags |= flagAA
		if client.IsValid() {
			scope = ix.ecsScope(client, q.source)
		}
		switch a.o.d.Result {
		case steer.ResultBypass:
			cname, a.o.target = fz.bypass, fz.z.bypass[:len(fz.z.bypass)-1]
		case steer.ResultBlackout:
			// The slate's address of the family asked; none: NODATA.
			if sl := eng.Rule(&a.o.d).Slate; sl != nil && q.qtype == dns.TypeA {
				addr, a.o.target = sl.A, sl.AText
			} else if sl != nil {
				addr, a.o.target = sl.AAAA, sl.AAAAText
			}
		default:
			var ap netip.AddrPort
			ap, _, a.o.given, _ = eng.Addr(&a.o.d)
			addr = ap.Addr().Unmap()
		}
	}
	answer := a.rcode == dns.RcodeSuccess &&
		(addr.Is4() && q.qtype == dns.TypeA || addr.Is6() && q.qtype == dns.TypeAAAA || cname != nil)
	var an, ns, ar byte
	switch {
	case answer:
		an = 1
		if a.o.d.Server >= 0 {
			a.o.target = ix.target(a.o.d.Server, a.o.given)
		}
	case a.rcode == dns.RcodeSuccess:
		a.o.given = steer.FamilyAny // NODATA: nothing given
		ns = 1                      // NODATA: the chosen server has the other family
	}
	if q.edns {
		ar = 1
	}
	flags |= uint16(a.rcode)

	out = append(out[:0], b[0], b[1], byte(flags>>8), byte(flags), 0, 1, 0, an, 0, ns, 0, ar)
	out = append(out, q.qname...)
	out = append(out, byte(q.qtype>>8), byte(q.qtype), 0, dns.ClassINET)
	switch {
	case answer && cname != nil:
		out = append(out, q.qname...)
		out = append(out, 0, byte(dns.TypeCNAME), 0, dns.ClassINET)
		out = binary.BigEndian.AppendUint32(out, s.ttl)
		out = append(out, byte(len(cname)>>8), byte(len(cname)))
		out = append(out, cname...)
	case answer:
		out = append(out, q.qname...) // the question as asked: 0x20 resolvers check the case
		out = append(out, byte(q.qtype>>8), byte(q.qtype), 0, dns.ClassINET)
		out = binary.BigEndian.AppendUint32(out, s.ttl)
		if addr.Is4() {
			a4 := addr.As4()
			out = append(out, 0, net.IPv4len)
			out = append(out, a4[:]...)
		} else {
			a16 := addr.As16()
			out = append(out, 0, net.IPv6len)
			out = append(out, a16[:]...)
		}
	case ns == 1:
		out = append(out, fz.soa...)
	}
	if q.edns {
		var do byte
		if q.do {
			do = ednsDO >> 8
		}
		out = append(out, 0, 0, byte(dns.TypeOPT), byte(s.cfg.MaxUDPSize>>8), byte(s.cfg.MaxUDPSize), 0, 0, do, 0, 0, byte(ecsLen))
		if q.ecs {
			// RFC 7871 §7.2.1: family, source prefix and address as
			// received (ecsClient checked the address has no bits beyond
			// the prefix), in the octets the prefix needs, as miekg packs it.
			out = append(out, 0, dns.EDNS0SUBNET, 0, byte(ecsLen-4), byte(q.family>>8), byte(q.family), q.source, scope)
			out = append(out, q.addr[:ecsLen-ecsFixed]...)
		}
	}
	return out, true
}
