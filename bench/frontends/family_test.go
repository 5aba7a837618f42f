package main

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/miekg/dns"
)

func TestFamilies(t *testing.T) {
	for flag, want := range map[string][]family{"ipv4": {ipv4}, "ipv6": {ipv6}, "both": {ipv4, ipv6}} {
		got, err := families(flag)
		if err != nil || len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
			t.Errorf("-family %s: %v, %v; want %v", flag, got, err, want)
		}
	}
	if _, err := families("inet6"); err == nil {
		t.Error("-family inet6 accepted")
	}
	for _, tc := range []struct {
		f                            family
		listen, url, rr, nginx, bare string
		trusted                      string
		loop, notLoop                string
		wantQtype                    uint16
	}{
		{ipv4, "127.0.0.1:0", "127.0.0.1", "A", "http://10.1.1.1$request_uri", "http://10.0.0.1:8080/live/cctv1/6000/index.m3u8",
			"127.0.0.0/8", "127.0.0.1", "::1", dns.TypeA},
		{ipv6, "[::1]:0", "[::1]", "AAAA", "http://[fd99::1]$request_uri", "http://[fd99::1]:8080/live/cctv1/6000/index.m3u8",
			"::1/128", "::1", "127.0.0.1", dns.TypeAAAA},
	} {
		f := tc.f
		if f.listen() != tc.listen || f.urlHost() != tc.url || f.rrType() != tc.rr || f.qtype() != tc.wantQtype ||
			f.nginxLocation() != tc.nginx || f.bareLocation() != tc.bare || f.trusted().String() != tc.trusted {
			t.Errorf("%s: listen %s, url %s, rr %s, nginx %s, bare %s, trusted %s", f.label(),
				f.listen(), f.urlHost(), f.rrType(), f.nginxLocation(), f.bareLocation(), f.trusted())
		}
		if !f.of(netip.MustParseAddr(tc.loop)) || f.of(netip.MustParseAddr(tc.notLoop)) {
			t.Errorf("%s: family of %s / %s wrong", f.label(), tc.loop, tc.notLoop)
		}
		var g family
		if err := g.Set(f.name()); err != nil || g != f || g.String() != f.name() {
			t.Errorf("Set(%s): %v, %v", f.name(), g, err)
		}
	}
	if err := new(family).Set("inet6"); err == nil {
		t.Error("-family inet6 accepted by a child")
	}
	if !ipv4.of(netip.MustParseAddr("::ffff:10.1.1.1")) {
		t.Error("an IPv4-mapped address is not IPv4")
	}
}

// TestQueryMsgIPv6: the IPv6 run asks AAAA, and its ECS option carries an
// IPv6 client subnet, as dnsperf -E gets it (RFC 7871: family 2, the
// prefix's whole bytes).
func TestQueryMsgIPv6(t *testing.T) {
	q, err := queryMsg(ipv6, "fd00:0:1:ab00::/56")
	if err != nil {
		t.Fatal(err)
	}
	if q.Question[0].Qtype != dns.TypeAAAA {
		t.Errorf("qtype %s", dns.TypeToString[q.Question[0].Qtype])
	}
	if got, want := ecsHex(q), "00023800fd0000000001ab"; got != want {
		t.Errorf("ECS option %s, want %s", got, want)
	}
	q, err = queryMsg(ipv4, "100.64.24.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ecsHex(q), "00011800644018"; got != want || q.Question[0].Qtype != dns.TypeA {
		t.Errorf("IPv4 ECS option %s (qtype %d), want %s and A", got, q.Question[0].Qtype, want)
	}
	// Host bits are masked off, as a resolver sends them.
	q, _ = queryMsg(ipv6, "fd00:0:1:abcd::1/56")
	if got, want := ecsHex(q), "00023800fd0000000001ab"; got != want {
		t.Errorf("unmasked prefix: ECS option %s, want %s", got, want)
	}
	if _, err := queryMsg(ipv6, "fd00::1"); err == nil {
		t.Error("an address accepted as an ECS prefix")
	}
	l := dnsLoad{tool: "dnsperf", threads: 1, clients: 32, outstanding: 100, ecs: "fd00:0:1:ab00::/56", q: q, fam: ipv6}
	if d := l.describe(8 * time.Second); !strings.Contains(d, "-E 8:00023800fd0000000001ab") {
		t.Errorf("describe: %s", d)
	}
}

// TestPickClientsIPv6: over a dual-stack province the IPv6 run's STBs are
// hosts of the zones' IPv6 networks, located in their zones; the IPv4
// run's stay IPv4.
func TestPickClientsIPv6(t *testing.T) {
	tp := fixture.Shaped(t, fixture.Small, fixture.Cities(4)...)
	fixture.DualStack(tp)
	snap := fixture.Compile(t, tp)
	for _, f := range []family{ipv4, ipv6} {
		clients, zones, err := pickClients(snap, f, 3, 12)
		if err != nil {
			t.Fatal(err)
		}
		if len(clients) != 12 || zones != 3 {
			t.Fatalf("%s: %d clients in %d zones", f.label(), len(clients), zones)
		}
		seen := map[netip.Addr]bool{}
		for _, c := range clients {
			zi, ok := snap.ZoneOf(c)
			if !f.of(c) || !ok || snap.Zones[zi].Region < 0 {
				t.Errorf("%s: client %s (zone %d, %v)", f.label(), c, zi, ok)
			}
			if f.v6 && !fixture.Zone6(int(zi)).Contains(c) {
				t.Errorf("client %s is not in zone %d's IPv6 network %s", c, zi, fixture.Zone6(int(zi)))
			}
			seen[c] = true
		}
		if len(seen) != len(clients) {
			t.Errorf("%s: %d distinct clients of %d", f.label(), len(seen), len(clients))
		}
		again, _, _ := pickClients(snap, f, 3, 12)
		if again[5] != clients[5] {
			t.Errorf("%s: not deterministic", f.label())
		}
	}
	// A single-stack province has no IPv6 zone.
	single := fixture.Compile(t, fixture.Shaped(t, fixture.Small, fixture.Cities(3)...))
	if _, _, err := pickClients(single, ipv6, 3, 12); err == nil {
		t.Error("IPv6 clients picked from an IPv4-only province")
	}
}

func TestRandomHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []string{"fd00:0:1::/48", "2001:db8::/127", "2001:db8::1/128", "100.64.0.0/27", "10.0.0.0/30"} {
		p := netip.MustParsePrefix(s)
		for range 200 {
			a := randomHost(p, rng)
			if !p.Contains(a) && p.Bits() < p.Addr().BitLen() {
				t.Fatalf("%s: %s outside", s, a)
			}
			if p.Bits() < p.Addr().BitLen()-1 && a == p.Masked().Addr() {
				t.Fatalf("%s: the network address %s", s, a)
			}
		}
	}
}

func TestEdgeSet(t *testing.T) {
	e4 := edgeSet{fam: ipv4, addrs: map[netip.Addr]bool{netip.MustParseAddr("10.1.1.13"): true}}
	e6 := edgeSet{fam: ipv6, addrs: map[netip.Addr]bool{netip.MustParseAddr("fd99::d"): true}}
	for _, tc := range []struct {
		e    edgeSet
		host string
		ok   bool
	}{
		{e4, "10.1.1.13:8080", true},
		{e4, "10.1.1.13", true},
		{e4, "10.1.1.14:8080", false},
		{e4, "[fd99::d]:8080", false},
		{e6, "[fd99::d]:8080", true},
		{e6, "[fd99::d]", true},
		{e6, "fd99::d", false}, // not bracketed: no URL host
		{e6, "[fd99::e]:8080", false},
		{e6, "10.1.1.13:8080", false},
		{e6, "edge.example:8080", false},
	} {
		if err := tc.e.check(tc.host); (err == nil) != tc.ok {
			t.Errorf("%s %s: %v, want ok %v", tc.e.fam.label(), tc.host, err, tc.ok)
		}
	}
}

// TestServerAddrs: the IPv6 run's edge set is the dual-stack province's
// address6 of every server, the IPv4 one its addresses.
func TestServerAddrs(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the province-scale topology")
	}
	v4, v6 := serverAddrs(ipv4), serverAddrs(ipv6)
	if len(v4) != 10_000 || len(v6) != 10_000 {
		t.Fatalf("%d IPv4 and %d IPv6 edge addresses, want 10000 each", len(v4), len(v6))
	}
	for a := range v6 {
		if !a.Is6() || a.Is4In6() {
			t.Fatalf("IPv6 edge %s", a)
		}
	}
}

// TestBareChildrenIPv6: the bare baselines of the IPv6 run listen on
// [::1] and answer with an IPv6 edge (a bracketed Location, an AAAA).
func TestBareChildrenIPv6(t *testing.T) {
	if !hasIPv6Loopback() {
		t.Skip("no ::1 on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := startChild(ctx, pinning{}, "", "http-bare", "-family", "ipv6")
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	if !strings.HasPrefix(h.ready, "[::1]:") {
		t.Errorf("bare HTTP on %s", h.ready)
	}
	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirect}
	if err := checkFixed(ctx, c, "http://"+h.ready+"/x", "http://[fd99::1]:8080/live/cctv1/6000/index.m3u8"); err != nil {
		t.Error(err)
	}
	d, err := startChild(ctx, pinning{}, "", "dns-bare", "-family", "ipv6")
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	q, _ := queryMsg(ipv6, "")
	checks, err := verifyDNS(ctx, dnsServers{bare: d}, q, edgeSet{fam: ipv6})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(checks[0], "bare fd99::1") {
		t.Errorf("check %q", checks[0])
	}
	// The IPv4 bare DNS server's A is no answer to the IPv6 run.
	d4, err := startChild(ctx, pinning{}, "", "dns-bare")
	if err != nil {
		t.Fatal(err)
	}
	defer d4.stop()
	q4, _ := queryMsg(ipv4, "")
	if _, err := verifyDNS(ctx, dnsServers{bare: d4}, q4, edgeSet{fam: ipv6}); err == nil {
		t.Error("an A record passed the IPv6 check")
	}
}

// fakeRun is a family's run with one HTTP and one DNS comparison.
func fakeRun(f family, httpA, httpB, dnsA, dnsB float64) *familyRun {
	rr := f.rrType()
	h := &scenario{title: "HTTP 302, keep-alive", unit: "req/s", tool: "wrk", settings: "wrk -c32; X-Forwarded-For cycling 256 " + f.label() + " STBs"}
	d := &scenario{title: "DNS " + rr + ", plain queries", unit: "q/s", tool: "dnsperf", settings: rr + " queries from " + f.loopback().String()}
	mk := func(name string, rps float64) *side {
		return &side{name: name, runs: []runResult{{rps: rps * 0.9, p50: time.Millisecond, p99: 2 * time.Millisecond}, {rps: rps, p50: time.Millisecond, p99: 2 * time.Millisecond}}}
	}
	ha, hb, da, db := mk("anysched", httpA), mk("nginx 1.22.1, access log off", httpB), mk("anysched", dnsA), mk("gdnsd 3.8.1", dnsB)
	h.sides, d.sides = []*side{ha, hb}, []*side{da, db}
	return &familyRun{fam: f, topo: "province-scale topology (" + f.label() + ")", scenarios: []*scenario{h, d},
		rows: []row{{sc: h, peer: hb.name, a: ha, b: hb, target: targetHTTP}, {sc: d, peer: db.name, a: da, b: db, target: targetDNS}}}
}

// TestReportFamilies: with both families the section has the IPv6-beside-
// IPv4 table (each ratio against its own run's peer) and a table per
// family; with one, its table alone, as before.
func TestReportFamilies(t *testing.T) {
	env := &environment{cpu: "test CPU", cores: 2, date: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC), loadStart: "0.10"}
	o := opts{rounds: 2, duration: 8 * time.Second, sampleEvery: 1, accessLog: "file", topN: 15}
	r := &report{env: env, opts: o, loadEnd: "0.20", elapsed: 11 * time.Minute,
		runs: []*familyRun{fakeRun(ipv4, 90000, 100000, 120000, 150000), fakeRun(ipv6, 81000, 90000, 110000, 100000)}}
	md := r.markdown()
	for _, want := range []string{
		"### IPv6 beside IPv4",
		"| HTTP 302, keep-alive | nginx 1.22.1, access log off | 90000 | 100000 | 0.900 | 81000 | 90000 | 0.900 | 0.900 |",
		"| DNS A / AAAA, plain queries | gdnsd 3.8.1 | 120000 | 150000 | 0.800 | 110000 | 100000 | 1.100 | 0.917 |",
		"### IPv4: every server on 127.0.0.1, A queries",
		"### IPv6: every server on [::1], AAAA queries",
		"| DNS AAAA, plain queries | gdnsd 3.8.1 | 110000 | 100000 | 1.100 | met (>= 1.00) |",
		"| DNS A, plain queries | gdnsd 3.8.1 | 120000 | 150000 | 0.800 | MISSED (< 1.00) |",
		"`return 302 http://10.1.1.1$request_uri;` (over IPv6 `return 302 http://[fd99::1]$request_uri;`)",
		"anysched serves the province-scale topology (IPv6).",
		"Load average (1 min) was 0.10 at the start and 0.20 at the end of the run.",
		"Measured 2026-12-06 08:00 UTC by `go run ./bench/frontends -doc docs/benchmarks.md` (also run by `scripts/bench.sh`), in 11m0s; load average (1 min) 0.10 at the start, 0.20 at the end.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
	if strings.Index(md, "### IPv4:") > strings.Index(md, "### IPv6:") {
		t.Error("the IPv6 table precedes the IPv4 one")
	}
	txt := r.text()
	for _, want := range []string{"--- IPv6: every server on [::1], AAAA queries ---", "DNS A / AAAA, plain queries / gdnsd 3.8.1: IPv4 120000 / 150000 = 0.800; IPv6 110000 / 100000 = 1.100; anysched IPv6/IPv4 0.917"} {
		if !strings.Contains(txt, want) {
			t.Errorf("no %q in\n%s", want, txt)
		}
	}

	one := &report{env: env, opts: o, loadEnd: "0.20", runs: []*familyRun{fakeRun(ipv4, 90000, 100000, 120000, 150000)},
		args: []string{"-family", "ipv4", "-doc", "docs/benchmarks.md"}}
	md = one.markdown()
	if !strings.Contains(md, "by `go run ./bench/frontends -family ipv4 -doc docs/benchmarks.md`") {
		t.Errorf("the command line is not the one run:\n%s", md)
	}
	if strings.Contains(md, "beside") || strings.Contains(md, "[fd99::1]") || !strings.Contains(md, "### IPv4: every server on 127.0.0.1") ||
		!strings.Contains(md, "| HTTP 302, keep-alive | nginx 1.22.1, access log off | 90000 | 100000 | 0.900 | MISSED (< 1.00) |") {
		t.Errorf("IPv4 alone:\n%s", md)
	}
	// The section replaces the document's.
	doc, err := replaceSection([]byte("# B\n\n"+heading+"\n\n"+beginMarker+"\nold\n"+endMarker+"\n"), r.markdown())
	if err != nil || !strings.Contains(string(doc), "### IPv6 beside IPv4") || strings.Contains(string(doc), "\nold\n") {
		t.Errorf("rewritten document %v:\n%s", err, doc)
	}
}

// TestLuaScriptIPv6: the wrk script cycles IPv6 STB addresses as it does
// IPv4 ones.
func TestLuaScriptIPv6(t *testing.T) {
	s := luaScript("live.iptv.example", []netip.Addr{netip.MustParseAddr("fd00:0:1::5"), netip.MustParseAddr("fd00:0:2::7")})
	if !strings.Contains(s, `"fd00:0:1::5",`) || !strings.Contains(s, `"fd00:0:2::7",`) {
		t.Errorf("script:\n%s", s)
	}
}

// TestNginxIPv6 starts nginx on [::1] and asks each of its ports: a 302
// to the bracketed IPv6 edge, over TLS too.
func TestNginxIPv6(t *testing.T) {
	nginx := lookTool("nginx")
	if nginx == "" {
		t.Skip("nginx is not installed")
	}
	if !hasIPv6Loopback() {
		t.Skip("no ::1 on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	certFile, keyFile, cert, err := writeCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := startNginx(ctx, nginx, ipv6, pinning{}, dir, certFile, keyFile, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.stop()
	l := &lab{fam: ipv6, cert: cert, edges: edgeSet{fam: ipv6}}
	checks, tlsChecks, err := verifyHTTP(ctx, httpSides{nginx: n}, l, nil, "/cctv1/index.m3u8")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(checks, tlsChecks...), "; "); !strings.Contains(got, "nginx (Location http://[fd99::1]/cctv1/index.m3u8)") ||
		!strings.Contains(got, "nginx answered 302 over TLS") {
		t.Errorf("checks: %s", got)
	}
	if u := n.url(n.plain, "http", "/x"); !strings.HasPrefix(u, "http://[::1]:") {
		t.Errorf("nginx URL %s", u)
	}
}
