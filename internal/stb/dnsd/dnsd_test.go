package dnsd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// testTopology: two regions. The default region (north, the first) has two
// nodes; zone north-a sits at north-1, north-b at north-2, and north-c, a
// network nested in north-b's 100.66.0.0/16, at north-1. South has a v4
// node (zone south-a) and a v6-only node (zone south-v6).
const testTopology = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: north, location: {lat: 32.0, lon: 117.0}}
  - {name: south, location: {lat: 30.0, lon: 117.0}, fallback: [north]}
nodes:
  - name: north-1
    region: north
    location: {lat: 32.05, lon: 117.0}
    servers: [{name: north-1-a, address: "10.1.1.10:8080"}]
  - name: north-2
    region: north
    location: {lat: 32.4, lon: 117.0}
    servers: [{name: north-2-a, address: "10.1.2.10:8080"}]
  - name: south-1
    region: south
    location: {lat: 30.0, lon: 117.0}
    servers: [{name: south-1-a, address: "10.2.1.10:8080"}]
  - name: south-6
    region: south
    location: {lat: 29.6, lon: 117.0}
    servers: [{name: south-6-a, address: "[2001:db8:2::10]:8080"}]
zones:
  - {name: north-a, region: north, networks: [100.64.0.0/24, "2001:db8:100::/48"], location: {lat: 32.05, lon: 117.0}}
  - {name: north-b, region: north, networks: [100.64.1.0/24, 100.66.0.0/16], location: {lat: 32.4, lon: 117.0}}
  - {name: south-a, region: south, networks: [100.65.0.0/24], location: {lat: 30.0, lon: 117.0}}
  - {name: south-v6, region: south, networks: [100.65.6.0/24, "2001:db8:200::/48"], location: {lat: 29.6, lon: 117.0}}
  - {name: north-c, region: north, networks: [100.66.128.0/24], location: {lat: 32.05, lon: 117.0}}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [2000]
`

const testRevision = 42

func compile(t testing.TB, doc []byte) *topology.Snapshot {
	t.Helper()
	return fixture.CompileYAML(t, string(doc), testRevision)
}

func engineFunc(e *steer.Engine) EngineFunc { return func() *steer.Engine { return e } }

// testResolvers are the trusted resolvers of the test servers: loopback
// (TestServe's packet source) and north-a's first /24 (the handler tests'
// usual source). 100.65.0.7 and IPv6 sources are untrusted.
var testResolvers = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/24")}

func newTestServer(t testing.TB, c Config, o steer.Options) *Server {
	t.Helper()
	if c.TrustedResolvers == nil {
		c.TrustedResolvers = testResolvers
	}
	eng := steer.New(compile(t, []byte(testTopology)), o)
	return New(c, engineFunc(eng), nil, nil)
}

// writer is a fake dns.ResponseWriter that keeps the reply.
type writer struct {
	remote net.Addr
	msg    *dns.Msg
}

func (w *writer) LocalAddr() net.Addr         { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *writer) RemoteAddr() net.Addr        { return w.remote }
func (w *writer) WriteMsg(m *dns.Msg) error   { w.msg = m; return nil }
func (w *writer) Write(b []byte) (int, error) { return len(b), nil }
func (w *writer) Close() error                { return nil }
func (w *writer) TsigStatus() error           { return nil }
func (w *writer) TsigTimersOnly(bool)         {}
func (w *writer) Hijack()                     {}

func udpFrom(ip string) net.Addr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 40000))
}

// serve runs req through the handler as if it came off the wire from remote.
func serve(t *testing.T, s *Server, req *dns.Msg, remote net.Addr) *dns.Msg {
	t.Helper()
	if wire, err := req.Pack(); err == nil { // see exactly what a server would parse
		req = new(dns.Msg)
		if err := req.Unpack(wire); err != nil {
			t.Fatalf("unpack own query: %v", err)
		}
	}
	w := &writer{remote: remote}
	s.ServeDNS(w, req)
	if w.msg == nil {
		return nil
	}
	if _, err := w.msg.Pack(); err != nil {
		t.Fatalf("reply does not pack: %v\n%v", err, w.msg)
	}
	if w.msg.Id != req.Id || !w.msg.Response {
		t.Fatalf("reply id %d response %v, want id %d response true", w.msg.Id, w.msg.Response, req.Id)
	}
	return w.msg
}

type qopt func(*dns.Msg)

func query(name string, qtype uint16, opts ...qopt) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	for _, o := range opts {
		o(m)
	}
	return m
}

func edns0(m *dns.Msg) *dns.OPT {
	if opt := m.IsEdns0(); opt != nil {
		return opt
	}
	m.SetEdns0(1232, false)
	return m.IsEdns0()
}

// ecs adds an ECS option for cidr as written (host bits kept, to test rejection).
func ecs(cidr string) qopt {
	return func(m *dns.Msg) {
		p := netip.MustParsePrefix(cidr)
		o := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
		if p.Addr().Is6() {
			o.Family = 2
		}
		opt := edns0(m)
		opt.Option = append(opt.Option, o)
	}
}

// ecsRaw adds an ECS option with the given wire fields, which miekg's
// EDNS0_SUBNET would clean up (it masks the address when packing).
func ecsRaw(family uint16, source uint8, addr ...byte) qopt {
	return func(m *dns.Msg) {
		data := append([]byte{byte(family >> 8), byte(family), source, 0}, addr...)
		opt := edns0(m)
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: data})
	}
}

func withEDNS(m *dns.Msg) { edns0(m) }

// withDO asks for DNSSEC records (dig +dnssec).
func withDO(m *dns.Msg) { edns0(m).SetDo() }

// withOption adds an EDNS option of any code.
func withOption(code uint16, data ...byte) qopt {
	return func(m *dns.Msg) {
		opt := edns0(m)
		opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: code, Data: data})
	}
}

func withNSID(m *dns.Msg) {
	opt := edns0(m)
	opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
}

// rrs renders a section one record a line, OPT left out.
func rrs(section []dns.RR) []string {
	var out []string
	for _, rr := range section {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, strings.Join(strings.Fields(rr.String()), " "))
		}
	}
	return out
}

// replyECS renders the reply's ECS option as address/source/scope, "" if none.
func replyECS(m *dns.Msg) string {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				return e.String()
			}
		}
	}
	return ""
}

const (
	soaApex = "live.iptv.example. 30 IN SOA ns1.live.iptv.example. hostmaster.live.iptv.example. 42 3600 600 86400 30"
	north1  = "live.iptv.example. 30 IN A 10.1.1.10"
	north2  = "live.iptv.example. 30 IN A 10.1.2.10"
	south1  = "live.iptv.example. 30 IN A 10.2.1.10"
	south6  = "live.iptv.example. 30 IN AAAA 2001:db8:2::10"
)

type tcase struct {
	name   string
	req    *dns.Msg
	remote string // client address; default 127.0.0.1 (no zone: default region north)
	rcode  int
	aa     bool
	answer []string
	ns     []string
	extra  []string
	ecs    string // the reply's ECS option, address/source/scope
	noOPT  bool   // the reply must carry no OPT
	do     bool   // the reply's OPT has DO set (it must iff the query's had)
	// handlerOnly: a message miekg cannot pack, so only the handler sees it
	handlerOnly bool
}

func (tc tcase) check(t *testing.T, r *dns.Msg) {
	t.Helper()
	if r == nil {
		t.Fatal("no reply")
	}
	if r.Rcode != tc.rcode {
		t.Errorf("rcode %s, want %s\n%v", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode], r)
	}
	if r.Authoritative != tc.aa {
		t.Errorf("AA %v, want %v", r.Authoritative, tc.aa)
	}
	if got := rrs(r.Answer); !slices.Equal(got, tc.answer) {
		t.Errorf("answer:\n got %q\nwant %q", got, tc.answer)
	}
	if got := rrs(r.Ns); !slices.Equal(got, tc.ns) {
		t.Errorf("authority:\n got %q\nwant %q", got, tc.ns)
	}
	if got := rrs(r.Extra); !slices.Equal(got, tc.extra) {
		t.Errorf("additional:\n got %q\nwant %q", got, tc.extra)
	}
	if got := replyECS(r); got != tc.ecs {
		t.Errorf("ECS %q, want %q", got, tc.ecs)
	}
	if tc.req.IsEdns0() != nil && r.IsEdns0() == nil {
		t.Error("EDNS query answered without OPT")
	}
	if tc.noOPT && r.IsEdns0() != nil {
		t.Error("reply has OPT, want none")
	}
	if opt := r.IsEdns0(); opt != nil {
		if opt.UDPSize() != DefaultMaxUDPSize {
			t.Errorf("OPT advertises %d, want %d", opt.UDPSize(), DefaultMaxUDPSize)
		}
		if opt.Do() != tc.do {
			t.Errorf("reply DO %v, want %v", opt.Do(), tc.do)
		}
		if z := opt.Hdr.Ttl & 0x7fff; z != 0 {
			t.Errorf("reply OPT has unknown flags %#x set", z)
		}
		if opt.Version() != 0 {
			t.Errorf("reply EDNS version %d", opt.Version())
		}
	}
	if len(tc.req.Question) == 1 && (len(r.Question) != 1 || r.Question[0] != tc.req.Question[0]) {
		t.Errorf("question %v, want it echoed as asked: %v", r.Question, tc.req.Question[0])
	}
}

func handlerCases() []tcase {
	const apex = "live.iptv.example."
	two := query(apex, dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "other.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	zero := query(apex, dns.TypeA)
	zero.Question = nil
	notify := query(apex, dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	status := query(apex, dns.TypeA, withEDNS)
	status.Opcode = dns.OpcodeStatus
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	badvers := query(apex, dns.TypeA)
	edns0(badvers).SetVersion(1)
	opcode15 := query(apex, dns.TypeA, withEDNS)
	opcode15.Opcode = 15
	badversDO := query(apex, dns.TypeA, withDO)
	edns0(badversDO).SetVersion(1)
	zflags := query(apex, dns.TypeA, func(m *dns.Msg) { edns0(m).Hdr.Ttl |= 0x4000 })
	twoOPT := query(apex, dns.TypeA, withEDNS)
	twoOPT.Extra = append(twoOPT.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Class: 512}})

	return []tcase{
		// The apex from zone clients: the nearest server of the client's region.
		{name: "A zone north-a", req: query(apex, dns.TypeA), remote: "100.64.0.7", aa: true, answer: []string{north1}},
		{name: "A zone north-b", req: query(apex, dns.TypeA), remote: "100.64.1.7", aa: true, answer: []string{north2}},
		{name: "A zone south-a", req: query(apex, dns.TypeA), remote: "100.65.0.7", aa: true, answer: []string{south1}},
		{name: "A no zone: default region", req: query(apex, dns.TypeA), aa: true, answer: []string{north1}},
		{name: "A from v6 zone client", req: query(apex, dns.TypeA), remote: "2001:db8:100::5", aa: true, answer: []string{north1}},
		{name: "A chosen server is v6: NODATA", req: query(apex, dns.TypeA), remote: "2001:db8:200::5", aa: true, ns: []string{soaApex}},
		{name: "AAAA chosen server is v6", req: query(apex, dns.TypeAAAA), remote: "100.65.6.9", aa: true, answer: []string{south6}},
		{name: "AAAA no v6 server: NODATA+SOA", req: query(apex, dns.TypeAAAA), remote: "100.64.0.7", aa: true, ns: []string{soaApex}},
		{name: "ANY minimal", req: query(apex, dns.TypeANY), remote: "100.65.0.7", aa: true, answer: []string{south1}},
		{name: "case-insensitive, echoed", req: query("LiVe.IpTv.ExAmPlE.", dns.TypeA), remote: "100.64.0.7", aa: true,
			answer: []string{"LiVe.IpTv.ExAmPlE. 30 IN A 10.1.1.10"}},

		// Zone data.
		{name: "SOA at apex", req: query(apex, dns.TypeSOA), aa: true, answer: []string{soaApex}},
		{name: "NS at apex with glue", req: query(apex, dns.TypeNS), aa: true,
			answer: []string{"live.iptv.example. 30 IN NS ns1.live.iptv.example."},
			extra:  []string{"ns1.live.iptv.example. 30 IN A 198.18.0.1"}},
		{name: "name server address", req: query("NS1.live.iptv.example.", dns.TypeA), aa: true,
			answer: []string{"NS1.live.iptv.example. 30 IN A 198.18.0.1"}},
		{name: "name server AAAA: NODATA", req: query("ns1.live.iptv.example.", dns.TypeAAAA), aa: true, ns: []string{soaApex}},
		{name: "TXT at apex: NODATA", req: query(apex, dns.TypeTXT), aa: true, ns: []string{soaApex}},
		{name: "AXFR refused", req: query(apex, dns.TypeAXFR), rcode: dns.RcodeRefused},
		{name: "below apex: NXDOMAIN", req: query("x.live.iptv.example.", dns.TypeA), rcode: dns.RcodeNameError, aa: true, ns: []string{soaApex}},
		{name: "deep below apex: NXDOMAIN", req: query("a.b.LIVE.iptv.example.", dns.TypeAAAA), rcode: dns.RcodeNameError, aa: true, ns: []string{soaApex}},
		{name: "parent: REFUSED", req: query("iptv.example.", dns.TypeA), rcode: dns.RcodeRefused},
		{name: "outside: REFUSED", req: query("www.example.com.", dns.TypeA), rcode: dns.RcodeRefused},
		{name: "suffix lookalike: REFUSED", req: query("xlive.iptv.example.", dns.TypeA), rcode: dns.RcodeRefused},
		{name: "root: REFUSED", req: query(".", dns.TypeNS), rcode: dns.RcodeRefused},

		// Malformed and unsupported.
		{name: "two questions: FORMERR", req: two, rcode: dns.RcodeFormatError},
		{name: "zero questions: FORMERR", req: zero, rcode: dns.RcodeFormatError},
		{name: "NOTIFY: NOTIMP", req: notify, rcode: dns.RcodeNotImplemented, noOPT: true},
		{name: "STATUS with EDNS: NOTIMP", req: status, rcode: dns.RcodeNotImplemented},
		{name: "class CH: REFUSED", req: chaos, rcode: dns.RcodeRefused},
		{name: "EDNS version 1: BADVERS", req: badvers, rcode: dns.RcodeBadVers},
		{name: "two OPT: FORMERR", req: twoOPT, rcode: dns.RcodeFormatError},
		{name: "unknown opcode: NOTIMP", req: opcode15, rcode: dns.RcodeNotImplemented},

		// EDNS (RFC 6891): plain queries get no OPT, unknown options and
		// flags are ignored, and the DO bit is copied (RFC 3225 §3).
		{name: "plain: no OPT", req: query(apex, dns.TypeA), remote: "100.64.0.7", aa: true, answer: []string{north1}, noOPT: true},
		{name: "EDNS0", req: query(apex, dns.TypeA, withEDNS), remote: "100.64.0.7", aa: true, answer: []string{north1}},
		{name: "unknown type: NODATA", req: query(apex, 65280, withEDNS), aa: true, ns: []string{soaApex}},
		{name: "unknown option ignored", req: query(apex, dns.TypeA, withOption(65001, 1, 2, 3)), remote: "100.64.0.7", aa: true, answer: []string{north1}},
		{name: "unknown EDNS flags ignored", req: zflags, remote: "100.64.0.7", aa: true, answer: []string{north1}},
		{name: "option list", req: query(apex, dns.TypeA, withOption(dns.EDNS0COOKIE, 1, 2, 3, 4, 5, 6, 7, 8), withOption(65001), ecs("100.65.0.0/24"), withOption(dns.EDNS0PADDING, 0, 0, 0)),
			remote: "100.64.0.7", aa: true, answer: []string{south1}, ecs: "100.65.0.0/24/24"},
		{name: "DO copied", req: query(apex, dns.TypeA, withDO), remote: "100.64.0.7", aa: true, answer: []string{north1}, do: true},
		{name: "DO copied with ECS", req: query(apex, dns.TypeA, withDO, ecs("100.65.0.0/24")), remote: "100.64.0.7", aa: true,
			answer: []string{south1}, ecs: "100.65.0.0/24/24", do: true},
		{name: "DO copied on NODATA", req: query(apex, dns.TypeAAAA, withDO), remote: "100.64.0.7", aa: true, ns: []string{soaApex}, do: true},
		{name: "DO copied on NXDOMAIN", req: query("x."+apex, dns.TypeA, withDO), rcode: dns.RcodeNameError, aa: true, ns: []string{soaApex}, do: true},
		{name: "DO copied on SOA", req: query(apex, dns.TypeSOA, withDO), aa: true, answer: []string{soaApex}, do: true},
		{name: "DO copied on BADVERS", req: badversDO, rcode: dns.RcodeBadVers, do: true},
		{name: "DO copied on FORMERR", req: query(apex, dns.TypeA, withDO, ecsRaw(1, 22, 100, 65, 3)), rcode: dns.RcodeFormatError, do: true},

		// EDNS Client Subnet: the subnet locates the client, not the packet source.
		{name: "ECS other region", req: query(apex, dns.TypeA, ecs("100.65.0.0/24")), remote: "100.64.0.7", aa: true,
			answer: []string{south1}, ecs: "100.65.0.0/24/24"},
		{name: "ECS v6-only node: A NODATA", req: query(apex, dns.TypeA, ecs("100.65.6.0/24")), aa: true,
			ns: []string{soaApex}, ecs: "100.65.6.0/24/24"},
		{name: "ECS v6 subnet", req: query(apex, dns.TypeAAAA, ecs("2001:db8:200::/56")), aa: true,
			answer: []string{south6}, ecs: "[2001:db8:200::]/56/56"},
		{name: "ECS scope: zone network longer than source", req: query(apex, dns.TypeA, ecs("100.64.0.0/16")), aa: true,
			answer: []string{north1}, ecs: "100.64.0.0/16/24"},
		{name: "ECS scope: zone network shorter than source", req: query(apex, dns.TypeA, ecs("100.66.7.0/24")), aa: true,
			answer: []string{north2}, ecs: "100.66.7.0/24/24"},
		{name: "ECS no zone: default region", req: query(apex, dns.TypeA, ecs("192.0.2.0/24")), aa: true,
			answer: []string{north1}, ecs: "192.0.2.0/24/24"},
		{name: "ECS /0: packet source", req: query(apex, dns.TypeA, ecs("0.0.0.0/0")), remote: "100.65.0.7", aa: true,
			answer: []string{south1}, ecs: "0.0.0.0/0/0"},
		{name: "ECS on SOA: scope 0", req: query(apex, dns.TypeSOA, ecs("100.65.0.0/24")), aa: true,
			answer: []string{soaApex}, ecs: "100.65.0.0/24/0"},
		{name: "ECS on NXDOMAIN: scope 0", req: query("x.live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24")), rcode: dns.RcodeNameError, aa: true,
			ns: []string{soaApex}, ecs: "100.65.0.0/24/0"},
		// Scope: never wider than the part of the source prefix that shares
		// the answer. 100.0.0.0 is in no zone, but 100.0.0.0/8 holds every
		// zone: only 100.0.0.0/10 gets the default region's answer.
		{name: "ECS /8 over every zone: scope narrowed", req: query(apex, dns.TypeA, ecs("100.0.0.0/8")), aa: true,
			answer: []string{north1}, ecs: "100.0.0.0/8/10"},
		{name: "ECS v6 /32 over zones: scope narrowed", req: query(apex, dns.TypeAAAA, ecs("2001:db8::/32")), aa: true,
			ns: []string{soaApex}, ecs: "[2001:db8::]/32/40"},
		// 100.66.0.0/16 is north-b's, except north-c's 100.66.128.0/24.
		{name: "ECS zone network holding another zone's", req: query(apex, dns.TypeA, ecs("100.66.0.0/16")), aa: true,
			answer: []string{north2}, ecs: "100.66.0.0/16/17"},
		{name: "ECS nested zone", req: query(apex, dns.TypeA, ecs("100.66.128.0/24")), aa: true,
			answer: []string{north1}, ecs: "100.66.128.0/24/24"},
		// Untrusted sources: the option is echoed with scope 0 and the
		// packet source decides.
		{name: "ECS from untrusted source: ignored", req: query(apex, dns.TypeA, ecs("100.64.1.0/24")), remote: "100.65.0.7", aa: true,
			answer: []string{south1}, ecs: "100.64.1.0/24/0"},
		{name: "ECS /8 from untrusted source: scope 0", req: query(apex, dns.TypeA, ecs("100.0.0.0/8")), remote: "100.65.0.7", aa: true,
			answer: []string{south1}, ecs: "100.0.0.0/8/0"},
		{name: "ECS from untrusted v6 source: ignored", req: query(apex, dns.TypeAAAA, ecs("100.65.6.0/24")), remote: "2001:db8:100::5", aa: true,
			ns: []string{soaApex}, ecs: "100.65.6.0/24/0"},
		{name: "ECS bits beyond prefix: FORMERR", req: query(apex, dns.TypeA, ecsRaw(1, 22, 100, 65, 3)), rcode: dns.RcodeFormatError},
		{name: "ECS extra address octet: FORMERR", req: query(apex, dns.TypeA, ecsRaw(1, 24, 100, 65, 0, 1)), rcode: dns.RcodeFormatError},
		{name: "ECS v6 bits beyond prefix: FORMERR", req: query(apex, dns.TypeA, ecsRaw(2, 44, 0x20, 0x01, 0x0d, 0xb8, 0x02, 0x0f)), rcode: dns.RcodeFormatError},
		{name: "ECS raw but valid", req: query(apex, dns.TypeA, ecsRaw(1, 24, 100, 65, 0)), aa: true, answer: []string{south1}, ecs: "100.65.0.0/24/24"},
		{name: "ECS twice: FORMERR", req: query(apex, dns.TypeA, ecs("100.65.0.0/24"), ecs("100.64.0.0/24")), rcode: dns.RcodeFormatError},
		// miekg's parser rejects these two itself (header-only FORMERR on
		// the wire, TestServeRaw); the handler checks them too, for
		// messages built in code.
		{name: "ECS prefix too long: FORMERR", handlerOnly: true, req: query(apex, dns.TypeA, func(m *dns.Msg) {
			opt := edns0(m)
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 33, Address: net.IPv4(100, 65, 0, 0)})
		}), rcode: dns.RcodeFormatError},
		{name: "ECS family 3: FORMERR", handlerOnly: true, req: query(apex, dns.TypeA, func(m *dns.Msg) {
			opt := edns0(m)
			opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 3, SourceNetmask: 8, Address: net.IPv4(100, 65, 0, 0)})
		}), rcode: dns.RcodeFormatError},
	}
}

func TestHandler(t *testing.T) {
	s := newTestServer(t, Config{}, steer.Options{})
	for _, tc := range handlerCases() {
		t.Run(tc.name, func(t *testing.T) {
			remote := cmpOr(tc.remote, "127.0.0.1")
			tc.check(t, serve(t, s, tc.req, udpFrom(remote)))
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func TestDropsResponses(t *testing.T) {
	s := newTestServer(t, Config{}, steer.Options{})
	m := query("live.iptv.example.", dns.TypeA)
	m.Response = true
	if r := serve(t, s, m, udpFrom("127.0.0.1")); r != nil {
		t.Fatalf("answered a response: %v", r)
	}
}

func TestServfail(t *testing.T) {
	none := newTestServer(t, Config{}, steer.Options{Available: func(int32) bool { return false }})
	nilEngine := New(Config{}, func() *steer.Engine { return nil }, nil, nil)
	nilFunc := New(Config{}, nil, nil, nil)
	for name, s := range map[string]*Server{"no server available": none, "engine nil": nilEngine, "EngineFunc nil": nilFunc} {
		t.Run(name, func(t *testing.T) {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeANY} {
				r := serve(t, s, query("live.iptv.example.", qt, withEDNS), udpFrom("100.64.0.7"))
				tcase{req: query("live.iptv.example.", qt, withEDNS), rcode: dns.RcodeServerFailure}.check(t, r)
			}
		})
	}
	// Zone data does not need a server.
	r := serve(t, none, query("live.iptv.example.", dns.TypeSOA), udpFrom("100.64.0.7"))
	tcase{req: query("live.iptv.example.", dns.TypeSOA), aa: true, answer: []string{soaApex}}.check(t, r)
}

func TestFallbackRegion(t *testing.T) {
	// South's servers are down: its clients fall back to north.
	s := newTestServer(t, Config{}, steer.Options{Available: func(i int32) bool { return i < 2 }})
	r := serve(t, s, query("live.iptv.example.", dns.TypeA), udpFrom("100.65.0.7"))
	if got := rrs(r.Answer); len(got) != 1 || !strings.HasPrefix(got[0], "live.iptv.example. 30 IN A 10.1.") {
		t.Fatalf("answer %q, want a north server", got)
	}
}

func TestConfig(t *testing.T) {
	s := newTestServer(t, Config{TTL: 5 * time.Second, NSName: "NS.AnySched.example", Hostmaster: "dns.admin@anysched.example", InstanceID: "sched-1"}, steer.Options{})
	const soa = `live.iptv.example. 5 IN SOA ns.anysched.example. dns\.admin.anysched.example. 42 3600 600 86400 5`
	for _, tc := range []tcase{
		{name: "TTL", req: query("live.iptv.example.", dns.TypeA), remote: "100.64.0.7", aa: true, answer: []string{"live.iptv.example. 5 IN A 10.1.1.10"}},
		{name: "SOA", req: query("live.iptv.example.", dns.TypeSOA), aa: true, answer: []string{soa}},
		{name: "NS out of zone: no glue", req: query("live.iptv.example.", dns.TypeNS), aa: true, answer: []string{"live.iptv.example. 5 IN NS ns.anysched.example."}},
		{name: "ns1 is just a name now", req: query("ns1.live.iptv.example.", dns.TypeA), rcode: dns.RcodeNameError, aa: true, ns: []string{soa}},
		{name: "negative TTL", req: query("live.iptv.example.", dns.TypeMX), aa: true, ns: []string{soa}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, serve(t, s, tc.req, udpFrom(cmpOr(tc.remote, "127.0.0.1"))))
		})
	}
	t.Run("NSID", func(t *testing.T) {
		r := serve(t, s, query("live.iptv.example.", dns.TypeA, withNSID), udpFrom("127.0.0.1"))
		var got string
		for _, o := range r.IsEdns0().Option {
			if n, ok := o.(*dns.EDNS0_NSID); ok {
				got = n.String()
			}
		}
		if want := "73636865642d31"; got != want { // hex of sched-1
			t.Fatalf("NSID %q, want %q", got, want)
		}
	})
}

func TestUDPLimit(t *testing.T) {
	for _, tc := range []struct {
		edns uint16 // 0: no OPT
		ours uint16
		want int
	}{
		{0, 1232, 512},
		{400, 1232, 512},
		{1000, 1232, 1000},
		{4096, 1232, 1232},
		{4096, 4096, 4096},
	} {
		m := query("live.iptv.example.", dns.TypeA)
		if tc.edns > 0 {
			m.SetEdns0(tc.edns, false)
		}
		if got := udpLimit(m, tc.ours); got != tc.want {
			t.Errorf("udpLimit(edns %d, ours %d) = %d, want %d", tc.edns, tc.ours, got, tc.want)
		}
	}
}

// bigReply is a synthetic reply far larger than any UDP limit.
func bigReply(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	for i := range 200 {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
			A:   net.IPv4(10, 0, byte(i>>8), byte(i)),
		})
	}
	if req.IsEdns0() != nil {
		m.SetEdns0(DefaultMaxUDPSize, false)
	}
	return m
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *dns.Msg
		tcp  bool
		max  int
	}{
		{"UDP without EDNS", query("live.iptv.example.", dns.TypeA), false, 512},
		{"UDP with EDNS 4096, ours 1232", query("live.iptv.example.", dns.TypeA, func(m *dns.Msg) { m.SetEdns0(4096, false) }), false, 1232},
		{"TCP: never truncated", query("live.iptv.example.", dns.TypeA, withEDNS), true, dns.MaxMsgSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := bigReply(tc.req)
			truncate(m, tc.req, DefaultMaxUDPSize, tc.tcp)
			wire, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if len(wire) > tc.max {
				t.Fatalf("reply is %d bytes, limit %d", len(wire), tc.max)
			}
			if tc.tcp {
				if m.Truncated || len(m.Answer) != 200 {
					t.Fatalf("TCP reply truncated: TC %v, %d answers", m.Truncated, len(m.Answer))
				}
				return
			}
			if !m.Truncated || len(m.Answer) == 0 || len(m.Answer) == 200 {
				t.Fatalf("TC %v with %d answers, want TC and some answers dropped", m.Truncated, len(m.Answer))
			}
			if len(m.Question) != 1 {
				t.Fatal("question dropped")
			}
			if (tc.req.IsEdns0() != nil) != (m.IsEdns0() != nil) {
				t.Fatal("OPT lost by truncation")
			}
		})
	}
}

// listen opens UDP and TCP on the same loopback port, as dig +tcp expects.
func listen(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	return listenOn(t, "127.0.0.1:0")
}

// listenOn is listen at addr ("[::1]:0": IPv6 loopback).
func listenOn(t *testing.T, addr string) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal("no free port for both UDP and TCP")
	return nil, nil
}

// start serves s on loopback until the test ends and returns its address.
func start(t *testing.T, s *Server) string {
	t.Helper()
	return startOn(t, s, "127.0.0.1:0")
}

// startOn is start at addr.
func startOn(t *testing.T, s *Server, addr string) string {
	t.Helper()
	pc, ln := listenOn(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, pc, ln) }()
	// Serving on both sockets before the first query: a query is then
	// answered at the first attempt, or the test fails.
	wait.For(t, "the server listening", wait.DefaultTimeout, s.Listening)
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return pc.LocalAddr().String()
}

func exchange(t *testing.T, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s exchange: %v", network, err)
	}
	return r
}

func TestServe(t *testing.T) {
	addr := start(t, newTestServer(t, Config{}, steer.Options{}))
	for _, network := range []string{"udp", "tcp"} {
		for _, tc := range handlerCases() {
			if tc.remote != "" {
				continue // the packet source is 127.0.0.1 here
			}
			if tc.handlerOnly {
				continue
			}
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				tc.check(t, exchange(t, network, addr, tc.req.Copy()))
			})
		}
	}
}

// TestServeRaw sends what a dns.Client cannot: malformed packets.
func TestServeRaw(t *testing.T) {
	addr := start(t, newTestServer(t, Config{}, steer.Options{}))
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// send returns the reply, or nil when none came within the wait: long
	// for an expected answer, short where silence is what is tested (a
	// reply later than that would go unnoticed, never fail the test).
	const answerWait, silenceWait = 5 * time.Second, 300 * time.Millisecond
	send := func(t *testing.T, wire []byte, within time.Duration) *dns.Msg {
		t.Helper()
		if _, err := conn.Write(wire); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(within))
		buf := make([]byte, 65535)
		n, err := conn.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil
			}
			t.Fatal(err)
		}
		r := new(dns.Msg)
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatalf("unpack reply: %v", err)
		}
		return r
	}
	pack := func(m *dns.Msg) []byte {
		wire, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return wire
	}
	// The server answers (start waited for it to listen): silence below is
	// the server's choice.
	if r := send(t, pack(query("live.iptv.example.", dns.TypeA)), answerWait); r == nil {
		t.Fatal("server does not answer")
	}

	t.Run("ECS prefix 33: FORMERR", func(t *testing.T) {
		wire := pack(query("live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24")))
		i := bytes.Index(wire, []byte{0, 8, 0, 7, 0, 1, 24, 0}) // code 8, length 7, family 1, /24, scope 0
		if i < 0 {
			t.Fatal("ECS option not found in the packet")
		}
		wire[i+6] = 33
		r := send(t, wire, answerWait)
		if r == nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("got %v, want FORMERR", r)
		}
	})
	t.Run("garbage after header: FORMERR", func(t *testing.T) {
		wire := pack(query("live.iptv.example.", dns.TypeA))
		r := send(t, append(wire[:14], 0xff, 0xff, 0xff), answerWait)
		if r == nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("got %v, want FORMERR", r)
		}
	})
	t.Run("response: dropped", func(t *testing.T) {
		m := query("live.iptv.example.", dns.TypeA)
		m.Response = true
		if r := send(t, pack(m), silenceWait); r != nil {
			t.Fatalf("answered a response: %v", r)
		}
	})
	t.Run("shorter than a header: dropped", func(t *testing.T) {
		if r := send(t, []byte{1, 2, 3}, silenceWait); r != nil {
			t.Fatalf("answered garbage: %v", r)
		}
	})
}

func TestRun(t *testing.T) {
	s := newTestServer(t, Config{Listen: "127.0.0.1:0"}, steer.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	wait.For(t, "Run listening", wait.DefaultTimeout, s.Listening)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	bad := New(Config{Listen: "256.0.0.1:53"}, nil, nil, nil)
	if err := bad.Run(t.Context()); err == nil {
		t.Fatal("Run on a bad address succeeded")
	}
}

func TestAccessLog(t *testing.T) {
	var buf syncbuf.Buffer
	rec := accesslog.New(prometheus.NewRegistry(), &buf, accesslog.Options{})
	eng := steer.New(compile(t, []byte(testTopology)), steer.Options{})
	s := New(Config{TrustedResolvers: testResolvers}, engineFunc(eng), rec, nil)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { rec.Run(ctx); close(ran) }()

	serve(t, s, query("Live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24")), udpFrom("100.64.0.7"))
	serve(t, s, query("x.live.iptv.example.", dns.TypeTXT), udpFrom("100.64.0.7"))
	serve(t, s, query("live.iptv.example.", 65280), udpFrom("100.64.0.7"))
	cancel()
	<-ran

	type line struct {
		Proto, Client, Host, Path, Result, Zone, Region, Server, Target string
		Status                                                          int
		Latency                                                         int64
	}
	var got []line
	for l := range strings.Lines(buf.String()) {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	want := []line{
		{Proto: "dns", Client: "100.65.0.0", Host: "Live.iptv.example", Path: "A", Result: "CZ", Zone: "south-a", Region: "south", Server: "south-1-a", Target: "10.2.1.10", Status: dns.RcodeSuccess},
		{Proto: "dns", Client: "100.64.0.7", Host: "x.live.iptv.example", Path: "TXT", Result: "MISS", Status: dns.RcodeNameError},
		{Proto: "dns", Client: "100.64.0.7", Host: "live.iptv.example", Path: "TYPE65280", Result: "NONE", Status: dns.RcodeSuccess},
	}
	if len(got) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i].Latency <= 0 {
			t.Errorf("line %d: latency %d", i, got[i].Latency)
		}
		got[i].Latency = 0
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestExampleTopology answers from the sample province.
func TestExampleTopology(t *testing.T) {
	doc, err := os.ReadFile("../../../deploy/examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	snap := compile(t, doc)
	eng := steer.New(snap, steer.Options{})
	s := New(Config{TrustedResolvers: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}}, engineFunc(eng), nil, nil)
	for _, tc := range []struct {
		remote, ecs string
		client      string
		prefix      string // the region's server network
	}{
		{remote: "100.64.3.7", client: "100.64.3.7", prefix: "10.1.0.0/16"},                         // hefei-z2
		{remote: "100.64.3.7", ecs: "100.68.1.0/24", client: "100.68.1.0", prefix: "10.2.0.0/16"},   // wuhu-z1
		{remote: "192.0.2.1", ecs: "100.124.4.0/24", client: "100.124.4.0", prefix: "10.16.0.0/16"}, // bozhou-z2
		{remote: "192.0.2.1", client: "192.0.2.1", prefix: "10.1.0.0/16"},                           // no zone: hefei, the first region
	} {
		t.Run(tc.remote+"/"+tc.ecs, func(t *testing.T) {
			var opts []qopt
			if tc.ecs != "" {
				opts = append(opts, ecs(tc.ecs))
			}
			r := serve(t, s, query("live.iptv.example.", dns.TypeA, opts...), udpFrom(tc.remote))
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("reply %v", r)
			}
			got, _ := netip.AddrFromSlice(r.Answer[0].(*dns.A).A.To4())
			d := eng.Decide(steer.Request{Client: netip.MustParseAddr(tc.client), Host: "live.iptv.example"})
			if want := snap.Servers[d.Server].Addr.Addr(); got != want {
				t.Errorf("answer %s, engine chose %s", got, want)
			}
			if !netip.MustParsePrefix(tc.prefix).Contains(got) {
				t.Errorf("answer %s outside the region's %s", got, tc.prefix)
			}
			if tc.ecs != "" {
				if want := tc.ecs + "/24"; replyECS(r) != want {
					t.Errorf("ECS %q, want %q", replyECS(r), want)
				}
			}
		})
	}
	r := serve(t, s, query("live.iptv.example.", dns.TypeSOA), udpFrom("127.0.0.1"))
	if soa, ok := r.Answer[0].(*dns.SOA); !ok || soa.Serial != testRevision {
		t.Fatalf("SOA %v, want serial %d", r.Answer, testRevision)
	}
}

// TestSnapshotSwap: zones follow the engine's snapshot without a restart.
func TestSnapshotSwap(t *testing.T) {
	var cur atomic.Pointer[steer.Engine]
	cur.Store(steer.New(compile(t, []byte(testTopology)), steer.Options{}))
	s := New(Config{}, cur.Load, nil, nil)
	ask := func(name string) *dns.Msg { return serve(t, s, query(name, dns.TypeSOA), udpFrom("127.0.0.1")) }
	if r := ask("live.iptv.example."); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("before: %v", r)
	}
	snap := fixture.CompileYAML(t, strings.Replace(testTopology, "[live.iptv.example]", "[tv.iptv.example]", 1), testRevision+1)
	cur.Store(steer.New(snap, steer.Options{}))
	if r := ask("live.iptv.example."); r.Rcode != dns.RcodeRefused {
		t.Fatalf("old name after the swap: %v", r)
	}
	r := ask("tv.iptv.example.")
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("new name after the swap: %v", r)
	}
	if soa, ok := r.Answer[0].(*dns.SOA); !ok || soa.Serial != testRevision+1 {
		t.Fatalf("SOA after the swap: %v, want serial %d", r.Answer[0], testRevision+1)
	}
}
