package steer_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// A dual-stack city: the near node has a dual-stack and an IPv4-only
// server, the far node an IPv6-only one. The same service three times:
// other (the default), skip, and skip balanced by swrr.
const familyDoc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26, service_ip6: "2001:db8:ff::1", center_prefix6: "2001:db8:ff::/48"}
regions:
  - {name: a, location: {lat: 31.0, lon: 117.0}}
nodes:
  - name: a-near
    region: a
    location: {lat: 31.0, lon: 117.0}
    servers:
      - {name: dual, address: "10.0.1.1:8080", address6: "[2001:db8:1::1]:8080"}
      - {name: v4only, address: "10.0.1.2:8080"}
  - name: a-far
    region: a
    location: {lat: 31.0, lon: 117.5}
    servers:
      - {name: v6only, address: "[2001:db8:2::1]:8080"}
zones:
  - {name: a-z, region: a, networks: [100.64.1.0/24, "2001:db8:100::/48"]}
services:
  - name: other
    hostnames: [other.example]
    url_template: "http://{server}/live/{channel}?h={host}&p={port}"
    bitrates_kbps: [2000]
  - name: skip
    hostnames: [skip.example]
    url_template: "http://{server}/live/{channel}"
    bitrates_kbps: [2000]
    family_fallback: skip
  - name: skipswrr
    hostnames: [swrr.example]
    url_template: "http://{server}/live/{channel}"
    bitrates_kbps: [2000]
    selection: swrr
    family_fallback: skip
`

// familyClients are n addresses of the zone in family f.
func familyClients(f steer.Family, n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		if f == steer.FamilyV6 {
			out[i] = netip.MustParseAddr(fmt.Sprintf("2001:db8:100:%x::1", i))
		} else {
			out[i] = netip.AddrFrom4([4]byte{100, 64, 1, byte(i)})
		}
	}
	return out
}

// familyAvail is every server available, with the named servers' address
// of family v6 down.
func familyAvail(s *topology.Snapshot, v6 bool, names ...string) *avail.Availability {
	n := len(s.Servers)
	av := &avail.Availability{Available: make([]bool, n), Why: make([]string, n), Figures: make([]avail.Figures, n), FamilyDown: &[2][]bool{make([]bool, n), make([]bool, n)}}
	for i := range av.Available {
		av.Available[i] = true
	}
	f := 0
	if v6 {
		f = 1
	}
	for _, name := range names {
		for i := range s.Servers {
			if s.Servers[i].Name == name {
				av.FamilyDown[f][i] = true
			}
		}
	}
	return av
}

func buildFamily(t *testing.T, av *avail.Availability) *steer.Engine {
	t.Helper()
	e, err := steer.Build(fixture.CompileYAML(t, familyDoc, 1), steer.Inputs{Avail: av, Balance: balance.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// given decides one request and returns the server's name, the address
// the client is given and its family.
func given(e *steer.Engine, host string, client netip.Addr, f steer.Family) (string, string, steer.Family) {
	d := e.Decide(steer.Request{Client: client, Host: host, Path: "/cctv1", Family: f})
	if d.Server < 0 {
		return d.Result.String(), "", steer.FamilyAny
	}
	_, addr, gf, _ := e.Addr(&d)
	return e.Snapshot().Servers[d.Server].Name, addr, gf
}

// TestFamilyFallbackOther: under other, an IPv6 client gets the server an
// IPv4 client at its place would (the decision does not look at families)
// and its IPv6 address when it has one, else its IPv4 one.
func TestFamilyFallbackOther(t *testing.T) {
	e := buildFamily(t, nil)
	seen := map[string]bool{}
	for _, c := range familyClients(steer.FamilyV6, 64) {
		name, addr, gf := given(e, "other.example", c, steer.FamilyV6)
		want := map[string]string{"dual": "[2001:db8:1::1]:8080", "v4only": "10.0.1.2:8080"}[name]
		if addr != want {
			t.Fatalf("%s: %s gave %s (%s), want %q", c, name, addr, gf, want)
		}
		if wf := steer.FamilyOf(netip.MustParseAddrPort(want).Addr()); gf != wf {
			t.Errorf("%s: given family %s, want %s", c, gf, wf)
		}
		if any, _, _ := given(e, "other.example", c, steer.FamilyAny); any != name {
			t.Errorf("%s: %s as IPv6, %s without a family: other must not change the decision", c, name, any)
		}
		seen[name] = true
	}
	if !seen["dual"] || !seen["v4only"] {
		t.Errorf("64 IPv6 clients reached only %v: both near servers should share them", seen)
	}
	// The URL carries the IPv6 address bracketed, in {server} and {host}.
	for _, c := range familyClients(steer.FamilyV6, 64) {
		d := e.Decide(steer.Request{Client: c, Host: "other.example", Path: "/cctv1", Family: steer.FamilyV6})
		if e.Snapshot().Servers[d.Server].Name != "dual" {
			continue
		}
		got := string(e.AppendLocation(nil, &d, "/cctv1", ""))
		if want := "http://[2001:db8:1::1]:8080/live/cctv1?h=[2001:db8:1::1]&p=8080"; got != want {
			t.Errorf("location %q, want %q", got, want)
		}
		if n := e.Names(&d); n.Address != "[2001:db8:1::1]:8080" {
			t.Errorf("Names().Address = %q", n.Address)
		}
		break
	}
}

// TestFamilyFallbackSkip: under skip, a client is only given servers with
// an address of its family up, nearest first; nearest, swrr and the
// fallback walk alike.
func TestFamilyFallbackSkip(t *testing.T) {
	e := buildFamily(t, nil)
	// swrr balances each family's servers in tables of their own, lent to
	// the next build like the others.
	if b := e.Balance(); b == nil || b.Family["/ipv4"] == nil || b.Family["/ipv6"] == nil {
		t.Fatalf("no per-family swrr tables: %+v", b)
	}
	for _, host := range []string{"skip.example", "swrr.example"} {
		for _, c := range familyClients(steer.FamilyV6, 32) {
			if name, addr, gf := given(e, host, c, steer.FamilyV6); name != "dual" || addr != "[2001:db8:1::1]:8080" || gf != steer.FamilyV6 {
				t.Errorf("%s %s: %s %s %s, want the near node's only IPv6 server", host, c, name, addr, gf)
			}
		}
		seen := map[string]int{}
		for _, c := range familyClients(steer.FamilyV4, 64) {
			name, _, gf := given(e, host, c, steer.FamilyV4)
			if name == "v6only" || gf != steer.FamilyV4 {
				t.Errorf("%s %s: IPv4 client given %s (%s)", host, c, name, gf)
			}
			seen[name]++
		}
		if seen["dual"] == 0 || seen["v4only"] == 0 {
			t.Errorf("%s: IPv4 clients reached %v: both near servers have IPv4", host, seen)
		}
	}
	// The dual-stack server's IPv6 address down: IPv6 clients go to the
	// far node under skip, and keep the near one (by IPv4) under other.
	e = buildFamily(t, familyAvail(fixture.CompileYAML(t, familyDoc, 1), true, "dual"))
	for _, c := range familyClients(steer.FamilyV6, 32) {
		if name, addr, _ := given(e, "skip.example", c, steer.FamilyV6); name != "v6only" || addr != "[2001:db8:2::1]:8080" {
			t.Errorf("skip %s: %s %s, want v6only", c, name, addr)
		}
		if name, _, _ := given(e, "swrr.example", c, steer.FamilyV6); name != "v6only" {
			t.Errorf("swrr skip %s: %s, want v6only", c, name)
		}
		if name, addr, gf := given(e, "other.example", c, steer.FamilyV6); name == "dual" && (addr != "10.0.1.1:8080" || gf != steer.FamilyV4) {
			t.Errorf("other %s: dual with its IPv6 down gave %s (%s), want its IPv4 address", c, addr, gf)
		} else if name == "v6only" {
			t.Errorf("other %s: went to the far node", c)
		}
	}
	// IPv4 down on the dual-stack server and the IPv4-only one down
	// whole: IPv4 skip clients have nothing (ERROR), other clients get
	// the dual-stack server by IPv6.
	av := familyAvail(fixture.CompileYAML(t, familyDoc, 1), false, "dual")
	av.Available[1] = false // v4only
	e = buildFamily(t, av)
	for _, c := range familyClients(steer.FamilyV4, 8) {
		if name, _, _ := given(e, "skip.example", c, steer.FamilyV4); name != "ERROR" {
			t.Errorf("skip %s: %s, want ERROR", c, name)
		}
		if name, addr, gf := given(e, "other.example", c, steer.FamilyV4); name != "dual" || addr != "[2001:db8:1::1]:8080" || gf != steer.FamilyV6 {
			t.Errorf("other %s: %s %s %s, want dual by IPv6", c, name, addr, gf)
		}
	}
}

// TestFamilyEveryAddressDown: a server with every address down is
// unavailable to every family and every policy.
func TestFamilyEveryAddressDown(t *testing.T) {
	s := fixture.CompileYAML(t, familyDoc, 1)
	av := familyAvail(s, true, "dual")
	av.FamilyDown[0][0] = true // dual's IPv4 too
	e := buildFamily(t, av)
	if e.Available(0) {
		t.Fatal("a server with both addresses down is available")
	}
	for _, f := range []steer.Family{steer.FamilyAny, steer.FamilyV4, steer.FamilyV6} {
		for _, c := range familyClients(f, 16) {
			if name, _, _ := given(e, "other.example", c, f); name == "dual" {
				t.Errorf("%s %s: given dual", f, c)
			}
		}
	}
}

// TestFamilyDecideDoesNotAllocate: the family-restricted pools cost no
// allocation on the hot path.
func TestFamilyDecideDoesNotAllocate(t *testing.T) {
	e := buildFamily(t, familyAvail(fixture.CompileYAML(t, familyDoc, 1), true, "dual"))
	buf := make([]byte, 0, 256)
	for _, host := range []string{"other.example", "skip.example", "swrr.example"} {
		for _, f := range []steer.Family{steer.FamilyV4, steer.FamilyV6} {
			r := steer.Request{Client: familyClients(f, 1)[0], Host: host, Path: "/cctv1", Family: f}
			if n := testing.AllocsPerRun(100, func() {
				d := e.Decide(r)
				buf = e.AppendLocation(buf[:0], &d, "/cctv1", "")
			}); n > 0 {
				t.Errorf("%s %s: %v allocations per decision", host, f, n)
			}
		}
	}
}

// TestFamilyExplain: explain names the family asked and the address given.
func TestFamilyExplain(t *testing.T) {
	e := buildFamily(t, familyAvail(fixture.CompileYAML(t, familyDoc, 1), true, "dual"))
	x := e.Explain(steer.Request{Client: netip.MustParseAddr("2001:db8:100::7"), Host: "skip.example", Path: "/cctv1", Family: steer.FamilyV6})
	if x.Family != "ipv6" || x.GivenFamily != "ipv6" || x.Address != "[2001:db8:2::1]:8080" {
		t.Errorf("explain: family %q given %q address %q", x.Family, x.GivenFamily, x.Address)
	}
	why := map[string]string{}
	for _, c := range x.Candidates {
		why[c.Server] = c.Why
	}
	if why["dual"] != "no ipv6 address up (family_fallback skip)" {
		t.Errorf("dual: why %q", why["dual"])
	}
}
