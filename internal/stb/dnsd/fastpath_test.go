package dnsd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// diffTopology is testTopology with a second service of two hostnames, so
// that the fast path is tried on more than one zone.
var diffTopology = strings.Replace(testTopology, "    bitrates_kbps: [2000]\n", `    bitrates_kbps: [2000]
  - name: vod
    hostnames: [vod.iptv.example, v-2b.example.net]
    url_template: "http://{server}/vod/{channel}.m3u8"
    bitrates_kbps: [1000]
`, 1)

// pair is two servers over two engines of one snapshot, fed the same
// queries in the same order: what the engines keep between decisions (a
// balance policy's rotation) stays equal, so both paths can be compared
// even where deciding changes that state.
type pair struct {
	fast, full *Server
	snap       *topology.Snapshot
}

func newPair(t testing.TB, doc string, c Config, rec func() *accesslog.Recorder) *pair {
	t.Helper()
	return newPairWith(t, doc, c, rec, steer.Options{})
}

// newPairWith is newPair with engines built with o.
func newPairWith(t testing.TB, doc string, c Config, rec func() *accesslog.Recorder, o steer.Options) *pair {
	t.Helper()
	if c.TrustedResolvers == nil {
		c.TrustedResolvers = testResolvers
	}
	snap := compile(t, []byte(doc))
	var ra, rb *accesslog.Recorder
	if rec != nil {
		ra, rb = rec(), rec()
	}
	return &pair{
		fast: New(c, engineFunc(steer.New(snap, o)), ra, nil),
		full: New(c, engineFunc(steer.New(snap, o)), rb, nil),
		snap: snap,
	}
}

// fullReply is what the full path sends for datagram b from src: the
// reader's miekg emulation, the handler, and miekg's packing.
func fullReply(s *Server, b []byte, src netip.Addr) []byte {
	p := &packet{from: netip.AddrPortFrom(src, 40000), out: make([]byte, 0, int(s.cfg.MaxUDPSize)+1)}
	w := &udpWriter{local: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}, p: p}
	s.serveFull(b, w)
	return p.out
}

// compare runs b from src through the fast path of p.fast and the full
// path of p.full. It reports whether the fast path answered, and fails the
// test unless both replies are byte for byte the same. There is no
// legitimate difference: the fast path declines every query whose reply it
// cannot reproduce exactly.
func (p *pair) compare(t testing.TB, b []byte, src netip.Addr) bool {
	t.Helper()
	fast, ok := p.fast.serveFast(b, src, make([]byte, 0, 64))
	if !ok {
		fullReply(p.fast, b, src) // keeps the engines in step
	}
	full := fullReply(p.full, b, src)
	if !ok {
		return false
	}
	if !bytes.Equal(fast, full) {
		t.Fatalf("query %q from %s:\nfast %q\nfull %q\n%s", b, src, fast, full, unpackDiff(fast, full))
	}
	return true
}

func unpackDiff(fast, full []byte) string {
	var f, g dns.Msg
	ef, eg := f.Unpack(fast), g.Unpack(full)
	return fmt.Sprintf("fast (%v):\n%v\nfull (%v):\n%v", ef, &f, eg, &g)
}

// dcase is a generated query.
type dcase struct {
	name string
	wire []byte
	src  netip.Addr
	fast bool // the fast path must answer it
}

// sources: a client in every coverage zone (and in none), trusted and not.
var diffSources = []string{
	"100.64.0.7",      // north-a, trusted resolver
	"127.0.0.1",       // no zone, trusted resolver
	"100.64.1.7",      // north-b
	"100.65.0.7",      // south-a
	"100.65.6.7",      // south-v6 (v6-only node: A is NODATA)
	"100.66.128.7",    // north-c, nested in north-b
	"100.66.7.7",      // north-b's /16
	"192.0.2.1",       // no zone
	"2001:db8:100::5", // north-a, v6
	"2001:db8:200::5", // south-v6, v6
	"2001:db8:ffff::1",
}

// diffSubnets: an ECS subnet in every zone network, wide and narrow, of
// both families, and the special cases.
var diffSubnets = []string{
	"100.64.0.0/24", "100.64.1.0/24", "100.65.0.0/24", "100.65.6.0/24", "100.66.0.0/16", "100.66.128.0/24",
	"100.66.7.0/24", "100.0.0.0/8", "192.0.2.0/24", "100.64.0.7/32", "0.0.0.0/0",
	"2001:db8:100::/48", "2001:db8:200::/56", "2001:db8::/32", "::/0", "2001:db8:100::5/128",
	"2001:db8:200::/40", "2001:db8:200:ff00::/56", "2001:db8:200:ff00::/64",
}

// genCases generates queries for every hostname of snap: asked as written
// and 0x20-cased, A and AAAA, with and without EDNS (sizes, DO), with ECS
// from every subnet, with cookies and padding, from every source; plus
// near misses the fast path must leave to the full one.
func genCases(snap *topology.Snapshot, rng *rand.Rand) []dcase {
	var hosts []string
	for _, svc := range snap.Services {
		hosts = append(hosts, svc.Hostnames...)
	}
	var out []dcase
	add := func(name string, m *dns.Msg, src string, fast bool) {
		m.Id = uint16(rng.Uint32())
		wire, err := m.Pack()
		if err != nil {
			panic(err)
		}
		out = append(out, dcase{name: name, wire: wire, src: netip.MustParseAddr(src), fast: fast})
	}
	for _, h := range hosts {
		apex := h + "."
		for _, qname := range []string{apex, strings.ToUpper(apex), randomCase(apex, rng)} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				for _, src := range diffSources {
					add("plain", query(qname, qt), src, true)
					add("RD+CD", query(qname, qt, func(m *dns.Msg) { m.RecursionDesired, m.CheckingDisabled = true, true }), src, true)
					add("EDNS", query(qname, qt, withEDNS), src, true)
					add("EDNS DO", query(qname, qt, func(m *dns.Msg) { m.SetEdns0(4096, true) }), src, true)
					add("EDNS 100", query(qname, qt, func(m *dns.Msg) { m.SetEdns0(100, false) }), src, true)
					add("cookie+padding", query(qname, qt, withEDNS, func(m *dns.Msg) {
						opt := m.IsEdns0()
						opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"},
							&dns.EDNS0_PADDING{Padding: make([]byte, 17)})
					}), src, true)
					for _, sn := range diffSubnets {
						add("ECS "+sn, query(qname, qt, ecs(netip.MustParsePrefix(sn).Masked().String())), src, true)
					}
					add("ECS family 0", query(qname, qt, ecsRaw(0, 0)), src, true)
					add("ECS 4 octets for /24", query(qname, qt, ecsRaw(1, 24, 100, 65, 0, 0)), src, true)
					add("ECS v4 short", query(qname, qt, ecsRaw(1, 24, 100, 65)), src, true)
					add("ECS scope set in query", query(qname, qt, withEDNS, func(m *dns.Msg) {
						opt := m.IsEdns0()
						opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 24, 7, 100, 65, 0}})
					}), src, true)
					// Near misses: each is the full path's.
					add("NSID", query(qname, qt, withNSID), src, false)
					add("unknown option", query(qname, qt, withEDNS, func(m *dns.Msg) {
						opt := m.IsEdns0()
						opt.Option = append(opt.Option, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2}})
					}), src, false)
					add("BADVERS", query(qname, qt, func(m *dns.Msg) { edns0(m).SetVersion(1) }), src, false)
					add("ECS bits beyond prefix", query(qname, qt, ecsRaw(1, 22, 100, 65, 3)), src, false)
					add("ECS twice", query(qname, qt, ecs("100.65.0.0/24"), ecs("100.64.0.0/24")), src, false)
				}
			}
			for _, qt := range []uint16{dns.TypeANY, dns.TypeSOA, dns.TypeNS, dns.TypeTXT, dns.TypeAXFR} {
				add(dns.TypeToString[qt], query(qname, qt, withEDNS), "100.64.0.7", false)
			}
			add("below apex", query("x."+qname, dns.TypeA), "100.64.0.7", false)
			add("name server", query("ns1."+qname, dns.TypeA), "100.64.0.7", false)
			add("class CH", query(qname, dns.TypeA, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), "100.64.0.7", false)
			add("NOTIFY", query(qname, dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), "100.64.0.7", false)
			add("response", query(qname, dns.TypeA, func(m *dns.Msg) { m.Response = true }), "100.64.0.7", false)
		}
	}
	add("outside", query("www.example.com.", dns.TypeA), "100.64.0.7", false)
	return out
}

// randomCase upper-cases about half the letters (0x20 randomisation).
func randomCase(s string, rng *rand.Rand) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' && rng.IntN(2) == 0 {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// readCorpus returns the FuzzDNS seeds.
func readCorpus(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzDNS")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_, lit, ok := strings.Cut(strings.TrimSpace(string(raw)), "\n[]byte(")
		if !ok || !strings.HasSuffix(lit, ")") {
			t.Fatalf("%s: not a fuzz seed", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = []byte(s)
	}
	return out
}

// TestFastPathDifferential feeds the same datagrams to the fast path and
// to the full path (miekg unpack, handler, miekg pack) and requires the
// same bytes back, and the same access-log line, wherever the fast path
// answers; the generated common-path queries must all be answered by it.
func TestFastPathDifferential(t *testing.T) {
	var bufs []*syncbuf.Buffer
	var recs []*accesslog.Recorder
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan struct{}, 8)
	newRec := func() *accesslog.Recorder {
		b := &syncbuf.Buffer{}
		r := accesslog.New(prometheus.NewRegistry(), b, accesslog.Options{Queue: 1 << 20, MaxErrorsPerSecond: 1 << 30})
		go func() { r.Run(ctx); ran <- struct{}{} }()
		bufs, recs = append(bufs, b), append(recs, r)
		return r
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, top := range []struct {
		name, doc string
		o         steer.Options
	}{
		{"test", diffTopology, steer.Options{}}, {"example", exampleTopology(t), steer.Options{}},
		// Without answers: 3, which the full path alone answers.
		{"dual-stack", strings.Replace(dualTopology, "    answers: 3\n", "", 1), dualOptions(false)},
		{"dual-stack, an IPv6 address down", strings.Replace(dualTopology, "    answers: 3\n", "", 1), dualOptions(true)},
	} {
		t.Run(top.name, func(t *testing.T) {
			p := newPairWith(t, top.doc, Config{}, newRec, top.o)
			cases := genCases(p.snap, rng)
			if top.name == "example" {
				cases = append(cases, exampleCases(p.snap, rng)...)
			}
			answered := 0
			for _, c := range cases {
				if got := p.compare(t, c.wire, c.src); got != c.fast {
					t.Fatalf("%s from %s: fast path answered %v, want %v\n%q", c.name, c.src, got, c.fast, c.wire)
				} else if got {
					answered++
				}
			}
			for _, wire := range readCorpus(t) {
				for _, src := range diffSources {
					p.compare(t, wire, netip.MustParseAddr(src))
				}
			}
			t.Logf("%d generated queries, %d answered on the fast path", len(cases), answered)
		})
	}
	cancel()
	for range recs {
		<-ran
	}
	// Each pair logged the same lines in the same order, but for time and
	// latency.
	for i := 0; i+1 < len(bufs); i += 2 {
		fast, full := logLines(t, bufs[i]), logLines(t, bufs[i+1])
		if len(fast) != len(full) || len(fast) == 0 {
			t.Fatalf("access log: %d lines on the fast side, %d on the full side", len(fast), len(full))
		}
		for j := range fast {
			if fast[j] != full[j] {
				t.Fatalf("access log line %d:\nfast %s\nfull %s", j, fast[j], full[j])
			}
		}
	}
}

// logLines returns the access-log lines without their time and latency.
func logLines(t *testing.T, b *syncbuf.Buffer) []string {
	t.Helper()
	var out []string
	for l := range strings.Lines(b.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatal(err)
		}
		if _, ok := v["latency"]; !ok {
			t.Fatalf("no latency in %s", l)
		}
		delete(v, "ts")
		delete(v, "latency")
		j, _ := json.Marshal(v)
		out = append(out, string(j))
	}
	return out
}

func exampleTopology(t testing.TB) string {
	doc, err := os.ReadFile("../../../deploy/examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// exampleCases asks from, and with ECS for, every zone network of the
// sample province.
func exampleCases(snap *topology.Snapshot, rng *rand.Rand) []dcase {
	var out []dcase
	host := snap.Services[0].Hostnames[0] + "."
	for _, z := range snap.Zones {
		for _, n := range z.Networks {
			src := n.Addr().Next()
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				for _, m := range []*dns.Msg{query(host, qt), query(randomCase(host, rng), qt, withEDNS), query(host, qt, ecs(n.String()))} {
					m.Id = uint16(rng.Uint32())
					wire, _ := m.Pack()
					out = append(out, dcase{name: z.Name, wire: wire, src: src, fast: true})
					// Trusted ECS from loopback, untrusted from a zone.
					out = append(out, dcase{name: z.Name + " via resolver", wire: wire, src: netip.MustParseAddr("127.0.0.1"), fast: true})
				}
			}
		}
	}
	return out
}

// FuzzFastPath: whatever the fast path answers, the full path answers the
// same, byte for byte (see TestFastPathDifferential).
//
//	go test ./internal/stb/dnsd -run '^$' -fuzz FuzzFastPath -fuzztime 60s
func FuzzFastPath(f *testing.F) {
	p := newPair(f, diffTopology, Config{InstanceID: "fuzz"}, nil)
	for _, wire := range readCorpus(f) {
		f.Add(wire)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := genCases(p.snap, rng)
	for i := 0; i < len(cases); i += 37 { // a spread of the generated ones
		f.Add(cases[i].wire)
	}
	srcs := make([]netip.Addr, len(diffSources))
	for i, s := range diffSources {
		srcs[i] = netip.MustParseAddr(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src := srcs[0]
		if len(data) >= 2 {
			src = srcs[int(data[1])%len(srcs)]
		}
		p.compare(t, data, src)
	})
}
