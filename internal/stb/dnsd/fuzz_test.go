package dnsd

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/miekg/dns"
)

var updateCorpus = flag.Bool("update", false, "rewrite the seed corpus in testdata/fuzz/FuzzDNS")

// FuzzDNS feeds arbitrary messages to the handler, CoreDNS's harness shape:
// what does not unpack, or does not hold exactly one question, is skipped
// (the miekg server never hands those to a handler as queries worth
// resolving); the rest must not panic and any reply must pack.
//
// Seeds: testdata/fuzz/FuzzDNS (regenerate with go test -run TestFuzzCorpus -update).
//
//	go test ./internal/stb/dnsd -run '^$' -fuzz FuzzDNS -fuzztime 60s
func FuzzDNS(f *testing.F) {
	// The single-family province and a dual-stack one with an IPv6
	// address down (what the ID picks).
	servers := []*Server{newTestServer(f, Config{InstanceID: "fuzz"}, steer.Options{}), newDualServer(f, Config{InstanceID: "fuzz"}, true, nil)}
	remotes := []net.Addr{udpFrom("100.64.0.7"), udpFrom("2001:db8:200::1"), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil || len(req.Question) != 1 {
			return
		}
		w := &writer{remote: remotes[int(req.Id)%len(remotes)]}
		servers[int(req.Id>>8)%len(servers)].ServeDNS(w, req)
		if w.msg == nil {
			if !req.Response {
				t.Fatalf("no reply to a query:\n%v", req)
			}
			return
		}
		wire, err := w.msg.Pack()
		if err != nil {
			t.Fatalf("reply does not pack: %v\nquery:\n%v\nreply:\n%v", err, req, w.msg)
		}
		if _, udp := w.remote.(*net.UDPAddr); udp && len(wire) > udpLimit(req, DefaultMaxUDPSize) {
			t.Fatalf("UDP reply of %d bytes exceeds the limit %d", len(wire), udpLimit(req, DefaultMaxUDPSize))
		}
	})
}

// FuzzECSScope checks the ECS scope against the zone table by brute force:
// the scope is no shorter than the source prefix, no zone network more
// specific than the scope lies inside the scope prefix (so every address in
// it matches the same network as the client), and one bit less would break
// that (the scope is no longer than it must be) unless it is the source.
//
//	go test ./internal/stb/dnsd -run '^$' -fuzz FuzzECSScope -fuzztime 60s
func FuzzECSScope(f *testing.F) {
	s := newTestServer(f, Config{}, steer.Options{})
	eng := s.engine()
	ix := s.indexFor(eng.Snapshot())
	var nets []netip.Prefix
	for _, z := range eng.Snapshot().Zones {
		nets = append(nets, z.Networks...)
	}
	for _, seed := range []struct {
		addr   string
		source uint8
	}{{"100.0.0.0", 8}, {"100.64.0.0", 16}, {"100.66.0.0", 16}, {"100.66.128.0", 17}, {"192.0.2.0", 24}, {"2001:db8::", 32}, {"2001:db8:200::", 56}, {"2001:db8:100::", 40}, {"2001:db8:100::5", 128}, {"0.0.0.0", 1}} {
		a := netip.MustParseAddr(seed.addr)
		f.Add(a.AsSlice(), seed.source)
	}
	// violates reports whether a zone network more specific than bits lies
	// inside client/bits.
	violates := func(client netip.Addr, bits int) bool {
		p := netip.PrefixFrom(client, bits).Masked()
		for _, n := range nets {
			if n.Bits() > bits && p.Overlaps(n) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, raw []byte, source uint8) {
		client, ok := netip.AddrFromSlice(raw)
		if !ok || source == 0 || int(source) > client.BitLen() {
			return
		}
		client = netip.PrefixFrom(client, int(source)).Masked().Addr()
		scope := int(ix.ecsScope(client, source))
		switch {
		case scope < int(source) || scope > client.BitLen():
			t.Fatalf("%s/%d: scope %d out of [source, %d]", client, source, scope, client.BitLen())
		case violates(client, scope):
			t.Fatalf("%s/%d: scope %d holds a more specific zone network", client, source, scope)
		case scope > int(source) && !violates(client, scope-1):
			t.Fatalf("%s/%d: scope %d is longer than needed", client, source, scope)
		}
	})
}

// TestFuzzCorpus writes the seed corpus with -update; without, it checks the
// committed seeds are still what it would write.
func TestFuzzCorpus(t *testing.T) {
	const apex = "live.iptv.example."
	seeds := map[string]*dns.Msg{
		"a":        query(apex, dns.TypeA),
		"aaaa":     query(apex, dns.TypeAAAA, withEDNS),
		"soa":      query(apex, dns.TypeSOA),
		"ns":       query(apex, dns.TypeNS, withNSID),
		"any-0x20": query("LiVe.IpTv.ExAmPlE.", dns.TypeANY),
		"ecs-v4":   query(apex, dns.TypeA, ecs("100.65.0.0/24")),
		"ecs-v6":   query(apex, dns.TypeAAAA, ecs("2001:db8:200::/56")),
		// IPv6 client subnets: for an A, wider than the zone networks, a
		// host, and for the name server's AAAA.
		"ecs-v6-a":    query(apex, dns.TypeA, ecs("2001:db8:100::/48")),
		"ecs-v6-wide": query(apex, dns.TypeAAAA, ecs("2001:db8:100::/40")),
		"ecs-v6-host": query(apex, dns.TypeAAAA, withDO, ecs("2001:db8:100::5/128")),
		"ns1-aaaa":    query("ns1.live.iptv.example.", dns.TypeAAAA, ecs("2001:db8:200::/56")),
		"ecs-bad":     query(apex, dns.TypeA, ecsRaw(1, 22, 100, 65, 3)),
		"ecs-wide":    query(apex, dns.TypeA, ecs("100.0.0.0/8")),
		"nxdomain":    query("x.live.iptv.example.", dns.TypeTXT),
		"refused":     query("www.example.com.", dns.TypeA),
		"ns1":         query("ns1.live.iptv.example.", dns.TypeA),
		"chaos":       query("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }),
		"notify":      query(apex, dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }),
		"badvers":     query(apex, dns.TypeA, func(m *dns.Msg) { edns0(m).SetVersion(1) }),
		"response":    query(apex, dns.TypeA, func(m *dns.Msg) { m.Response = true }),
		"two-quests":  query(apex, dns.TypeA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDNS")
	write := func(name string, wire []byte) {
		t.Helper()
		path := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", wire)
		if *updateCorpus {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale or missing (%v); run go test -run TestFuzzCorpus -update", path, err)
		}
	}
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, m := range seeds {
		m.Id = 0x2a00 // fixed, so the files are stable; Id%3 picks the fuzz client, Id>>8%2 the province
		wire, err := m.Pack()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		write(name, wire)
	}
	write("garbage", []byte("\x2a\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x04live\xc0\x0c\xff\xff\x00\x01\x00\x00\x29"))
}
