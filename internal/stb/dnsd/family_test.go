package dnsd

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// dualTopology: a dual-stack province. north-1-a is dual-stack, north-2-a
// (farther) IPv6-only, south-1-a IPv4-only. Zone south-b is a /56 nested
// in south-a's IPv6 /48. live falls back to the other family,
// skip.iptv.example skips, multi.iptv.example answers three records.
const dualTopology = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26, service_ip6: "2001:db8:ff::1", center_prefix6: "2001:db8:ff::/48"}
regions:
  - {name: north, location: {lat: 32.0, lon: 117.0}}
  - {name: south, location: {lat: 30.0, lon: 117.0}, fallback: [north]}
nodes:
  - name: north-1
    region: north
    location: {lat: 32.05, lon: 117.0}
    servers: [{name: north-1-a, address: "10.1.1.10:8080", address6: "[2001:db8:1::10]:8080"}]
  - name: north-2
    region: north
    location: {lat: 32.4, lon: 117.0}
    servers: [{name: north-2-a, address: "[2001:db8:1::20]:8080"}]
  - name: south-1
    region: south
    location: {lat: 30.0, lon: 117.0}
    servers: [{name: south-1-a, address: "10.2.1.10:8080"}]
zones:
  - {name: north-a, region: north, networks: [100.64.0.0/24, "2001:db8:100::/48"], location: {lat: 32.05, lon: 117.0}}
  - {name: south-a, region: south, networks: [100.65.0.0/24, "2001:db8:200::/48"], location: {lat: 30.0, lon: 117.0}}
  - {name: south-b, region: south, networks: ["2001:db8:200:ff00::/56"], location: {lat: 30.1, lon: 117.0}}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [2000]
  - name: skip
    hostnames: [skip.iptv.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [2000]
    family_fallback: skip
  - name: multi
    hostnames: [multi.iptv.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [2000]
    answers: 3
`

// dualOptions: north-1-a's IPv6 address down (v6Down), or every address up.
func dualOptions(v6Down bool) steer.Options {
	if !v6Down {
		return steer.Options{}
	}
	return steer.Options{FamilyUp: func(s int32, v6 bool) bool { return !(s == 0 && v6) }}
}

func newDualServer(t testing.TB, c Config, v6Down bool, rec *accesslog.Recorder) *Server {
	t.Helper()
	if c.TrustedResolvers == nil {
		c.TrustedResolvers = testResolvers
	}
	return New(c, engineFunc(steer.New(compile(t, []byte(dualTopology)), dualOptions(v6Down))), rec, nil)
}

// TestDualStackHandler: A answers an edge's IPv4 address and AAAA its IPv6
// one, the record type deciding whatever the transport or the ECS family;
// ECS for IPv6 locates the client, its scope never wider than the zone
// network the answer depends on; answers: N lists N of the family asked;
// the name server has both service addresses.
func TestDualStackHandler(t *testing.T) {
	const (
		apex   = "live.iptv.example."
		skip   = "skip.iptv.example."
		multi  = "multi.iptv.example."
		soa    = "live.iptv.example. 30 IN SOA ns1.live.iptv.example. hostmaster.live.iptv.example. 42 3600 600 86400 30"
		n1A    = "live.iptv.example. 30 IN A 10.1.1.10"
		n1AAAA = "live.iptv.example. 30 IN AAAA 2001:db8:1::10"
	)
	for _, tc := range []struct {
		v6Down bool
		tcase
	}{
		{tcase: tcase{name: "A from an IPv6 source", req: query(apex, dns.TypeA), remote: "2001:db8:100::5", aa: true, answer: []string{n1A}}},
		{tcase: tcase{name: "AAAA from an IPv4 source", req: query(apex, dns.TypeAAAA), remote: "100.64.0.7", aa: true, answer: []string{n1AAAA}}},
		{tcase: tcase{name: "AAAA, IPv6 ECS", req: query(apex, dns.TypeAAAA, ecs("2001:db8:100::/56")), aa: true,
			answer: []string{n1AAAA}, ecs: "[2001:db8:100::]/56/56"}},
		{tcase: tcase{name: "A, IPv6 ECS", req: query(apex, dns.TypeA, ecs("2001:db8:100::/56")), aa: true,
			answer: []string{n1A}, ecs: "[2001:db8:100::]/56/56"}},
		// south has IPv4 only: other says NODATA (the STB asks A too and
		// reaches the same server by IPv4), skip sends it north by IPv6.
		{tcase: tcase{name: "AAAA, IPv4-only city, other: NODATA", req: query(apex, dns.TypeAAAA, ecs("2001:db8:200::/56")), aa: true,
			ns: []string{soa}, ecs: "[2001:db8:200::]/56/56"}},
		{tcase: tcase{name: "AAAA, IPv4-only city, skip", req: query(skip, dns.TypeAAAA, ecs("2001:db8:200::/56")), aa: true,
			answer: []string{"skip.iptv.example. 30 IN AAAA 2001:db8:1::10"}, ecs: "[2001:db8:200::]/56/56"}},
		{tcase: tcase{name: "A, IPv4-only city, skip", req: query(skip, dns.TypeA, ecs("2001:db8:200::/56")), aa: true,
			answer: []string{"skip.iptv.example. 30 IN A 10.2.1.10"}, ecs: "[2001:db8:200::]/56/56"}},
		// Scopes: a /40 holds south-a's /48 and south-b's nested /56: the
		// answer holds for the first 49 bits only, never for a prefix
		// wider than the /48 it was looked up in.
		{tcase: tcase{name: "IPv6 ECS wider than the zone network", req: query(apex, dns.TypeA, ecs("2001:db8:200::/40")), aa: true,
			answer: []string{"live.iptv.example. 30 IN A 10.2.1.10"}, ecs: "[2001:db8:200::]/40/49"}},
		{tcase: tcase{name: "IPv6 ECS, the zone network holding another's", req: query(apex, dns.TypeA, ecs("2001:db8:200::/48")), aa: true,
			answer: []string{"live.iptv.example. 30 IN A 10.2.1.10"}, ecs: "[2001:db8:200::]/48/49"}},
		{tcase: tcase{name: "IPv6 ECS, the nested zone", req: query(apex, dns.TypeA, ecs("2001:db8:200:ff00::/56")), aa: true,
			answer: []string{"live.iptv.example. 30 IN A 10.2.1.10"}, ecs: "[2001:db8:200:ff00::]/56/56"}},
		{tcase: tcase{name: "IPv6 ECS /128", req: query(apex, dns.TypeAAAA, ecs("2001:db8:100::5/128")), aa: true,
			answer: []string{n1AAAA}, ecs: "[2001:db8:100::5]/128/128"}},
		// answers: 3, per family: the IPv4-only and IPv6-only servers
		// each appear only in their own family's answer.
		{tcase: tcase{name: "answers: 3, A", req: query(multi, dns.TypeA), remote: "100.64.0.7", aa: true,
			answer: []string{"multi.iptv.example. 30 IN A 10.1.1.10", "multi.iptv.example. 30 IN A 10.2.1.10"}}},
		{tcase: tcase{name: "answers: 3, AAAA", req: query(multi, dns.TypeAAAA), remote: "100.64.0.7", aa: true,
			answer: []string{"multi.iptv.example. 30 IN AAAA 2001:db8:1::10", "multi.iptv.example. 30 IN AAAA 2001:db8:1::20"}}},
		// The name server: both service addresses.
		{tcase: tcase{name: "NS glue, both families", req: query(apex, dns.TypeNS), aa: true,
			answer: []string{"live.iptv.example. 30 IN NS ns1.live.iptv.example."},
			extra:  []string{"ns1.live.iptv.example. 30 IN A 198.18.0.1", "ns1.live.iptv.example. 30 IN AAAA 2001:db8:ff::1"}}},
		{tcase: tcase{name: "name server A", req: query("ns1.live.iptv.example.", dns.TypeA), aa: true,
			answer: []string{"ns1.live.iptv.example. 30 IN A 198.18.0.1"}}},
		{tcase: tcase{name: "name server AAAA", req: query("ns1.live.iptv.example.", dns.TypeAAAA), aa: true,
			answer: []string{"ns1.live.iptv.example. 30 IN AAAA 2001:db8:ff::1"}}},
		// north-1-a's IPv6 address down, its IPv4 up.
		{v6Down: true, tcase: tcase{name: "IPv6 down, AAAA, other: NODATA", req: query(apex, dns.TypeAAAA), remote: "100.64.0.7", aa: true, ns: []string{soa}}},
		{v6Down: true, tcase: tcase{name: "IPv6 down, A unchanged", req: query(apex, dns.TypeA), remote: "2001:db8:100::5", aa: true, answer: []string{n1A}}},
		{v6Down: true, tcase: tcase{name: "IPv6 down, AAAA, skip: the next node", req: query(skip, dns.TypeAAAA), remote: "100.64.0.7", aa: true,
			answer: []string{"skip.iptv.example. 30 IN AAAA 2001:db8:1::20"}}},
		{v6Down: true, tcase: tcase{name: "IPv6 down, answers: 3, AAAA", req: query(multi, dns.TypeAAAA), remote: "100.64.0.7", aa: true, ns: []string{
			"multi.iptv.example. 30 IN SOA ns1.multi.iptv.example. hostmaster.multi.iptv.example. 42 3600 600 86400 30"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newDualServer(t, Config{}, tc.v6Down, nil)
			tc.check(t, serve(t, s, tc.req, udpFrom(cmpOr(tc.remote, "127.0.0.1"))))
		})
	}
}

// TestDualStackLog: the access log says the family asked and the family
// of the address given, on both paths alike.
func TestDualStackLog(t *testing.T) {
	var buf syncbuf.Buffer
	rec := accesslog.New(prometheus.NewRegistry(), &buf, accesslog.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = rec.Run(ctx); close(done) }()
	s := newDualServer(t, Config{}, false, rec)
	for _, qt := range []uint16{dns.TypeAAAA, dns.TypeA} {
		m := query("live.iptv.example.", qt, ecs("2001:db8:100::/56"))
		serve(t, s, m, udpFrom("127.0.0.1")) // the full path
		wire, _ := m.Pack()
		if _, ok := s.serveFast(wire, netip.MustParseAddr("127.0.0.1"), nil); !ok {
			t.Fatalf("%s: not on the fast path", dns.TypeToString[qt])
		}
	}
	serve(t, s, query("live.iptv.example.", dns.TypeAAAA, ecs("2001:db8:200::/56")), udpFrom("127.0.0.1"))
	cancel()
	<-done
	lines := logLines(t, &buf)
	want := []string{
		`"target":"2001:db8:1::10","target_family":"ipv6"`, `"target":"2001:db8:1::10","target_family":"ipv6"`,
		`"target":"10.1.1.10","target_family":"ipv4"`, `"target":"10.1.1.10","target_family":"ipv4"`,
		`"target":""`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		fam := `"family":"ipv6"`
		if i == 2 || i == 3 {
			fam = `"family":"ipv4"`
		}
		if !strings.Contains(l, want[i]) || !strings.Contains(l, fam) || (i == 4) != !strings.Contains(l, "target_family") {
			t.Errorf("line %d %s: want %s and %s", i, l, want[i], fam)
		}
	}
}

// TestDualStackDig asks the real dig over IPv6 loopback: AAAA and A with
// an IPv6 client subnet.
func TestDualStackDig(t *testing.T) {
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Skip("dig not installed (apt-get install dnsutils)")
	}
	s := newDualServer(t, Config{TrustedResolvers: []netip.Prefix{netip.MustParsePrefix("::1/128")}}, false, nil)
	host, port, _ := net.SplitHostPort(startOn(t, s, "[::1]:0"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"AAAA", []string{"live.iptv.example", "AAAA", "+short"}, "2001:db8:1::10"},
		{"AAAA ECS north", []string{"live.iptv.example", "AAAA", "+short", "+subnet=2001:db8:100::/56"}, "2001:db8:1::10"},
		{"A ECS south", []string{"live.iptv.example", "A", "+short", "+subnet=2001:db8:200::/56"}, "10.2.1.10"},
		{"AAAA ECS south, skip", []string{"skip.iptv.example", "AAAA", "+short", "+subnet=2001:db8:200::/56"}, "2001:db8:1::10"},
		{"ECS scope", []string{"live.iptv.example", "A", "+subnet=2001:db8:200::/40"}, "; CLIENT-SUBNET: 2001:db8:200::/40/49"},
		{"TCP", []string{"live.iptv.example", "AAAA", "+short", "+tcp", "+subnet=2001:db8:100::/56"}, "2001:db8:1::10"},
		{"name server", []string{"ns1.live.iptv.example", "AAAA", "+short"}, "2001:db8:ff::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			args := append([]string{"-6", "@" + host, "-p", port, "+time=2", "+tries=2"}, tc.args...)
			out, err := exec.CommandContext(ctx, dig, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("dig %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !containsLine(string(out), tc.want) {
				t.Fatalf("dig %s: want a line with %q in:\n%s", strings.Join(args, " "), tc.want, out)
			}
		})
	}
}
