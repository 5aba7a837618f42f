package dnsd

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/anysched/anysched/internal/steer"
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
//	go test ./internal/dnsd -run '^$' -fuzz FuzzDNS -fuzztime 60s
func FuzzDNS(f *testing.F) {
	s := newTestServer(f, Config{InstanceID: "fuzz"}, steer.Options{})
	remotes := []net.Addr{udpFrom("100.64.0.7"), udpFrom("2001:db8:200::1"), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000}}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(dns.Msg)
		if err := req.Unpack(data); err != nil || len(req.Question) != 1 {
			return
		}
		w := &writer{remote: remotes[int(req.Id)%len(remotes)]}
		s.ServeDNS(w, req)
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

// TestFuzzCorpus writes the seed corpus with -update; without, it checks the
// committed seeds are still what it would write.
func TestFuzzCorpus(t *testing.T) {
	const apex = "live.iptv.example."
	seeds := map[string]*dns.Msg{
		"a":          query(apex, dns.TypeA),
		"aaaa":       query(apex, dns.TypeAAAA, withEDNS),
		"soa":        query(apex, dns.TypeSOA),
		"ns":         query(apex, dns.TypeNS, withNSID),
		"any-0x20":   query("LiVe.IpTv.ExAmPlE.", dns.TypeANY),
		"ecs-v4":     query(apex, dns.TypeA, ecs("100.65.0.0/24")),
		"ecs-v6":     query(apex, dns.TypeAAAA, ecs("2001:db8:200::/56")),
		"ecs-bad":    query(apex, dns.TypeA, ecsRaw(1, 22, 100, 65, 3)),
		"nxdomain":   query("x.live.iptv.example.", dns.TypeTXT),
		"refused":    query("www.example.com.", dns.TypeA),
		"ns1":        query("ns1.live.iptv.example.", dns.TypeA),
		"chaos":      query("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }),
		"notify":     query(apex, dns.TypeSOA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }),
		"badvers":    query(apex, dns.TypeA, func(m *dns.Msg) { edns0(m).SetVersion(1) }),
		"response":   query(apex, dns.TypeA, func(m *dns.Msg) { m.Response = true }),
		"two-quests": query(apex, dns.TypeA, func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }),
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
		m.Id = 0x2a00 // fixed, so the files are stable; Id%3 picks the fuzz client
		wire, err := m.Pack()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		write(name, wire)
	}
	write("garbage", []byte("\x2a\x00\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x04live\xc0\x0c\xff\xff\x00\x01\x00\x00\x29"))
}
