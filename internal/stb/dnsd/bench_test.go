package dnsd

import (
	"io"
	"net/netip"
	"testing"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// benchQueries are the queries both benchmarks answer.
// The dual ones ask the dual-stack province (dualTopology), A and AAAA
// side by side (IPv4 and IPv6 client subnets): the IPv4 one of each pair
// is the IPv6 one's baseline in the same run.
func benchQueries() []struct {
	name      string
	log, dual bool
	req       *dns.Msg
} {
	return []struct {
		name      string
		log, dual bool
		req       *dns.Msg
	}{
		{"A", false, false, query("live.iptv.example.", dns.TypeA)},
		{"A+EDNS", false, false, query("live.iptv.example.", dns.TypeA, withEDNS)},
		{"A+ECS", false, false, query("live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24"))},
		{"A+ECS/8", false, false, query("live.iptv.example.", dns.TypeA, ecs("100.0.0.0/8"))},
		{"AAAA-NODATA", false, false, query("live.iptv.example.", dns.TypeAAAA, withEDNS)},
		{"A+accesslog", true, false, query("live.iptv.example.", dns.TypeA)},
		{"dual/A", false, true, query("live.iptv.example.", dns.TypeA)},
		{"dual/AAAA", false, true, query("live.iptv.example.", dns.TypeAAAA)},
		{"dual/A+ECS", false, true, query("live.iptv.example.", dns.TypeA, ecs("100.64.0.0/24"))},
		{"dual/AAAA+ECS6", false, true, query("live.iptv.example.", dns.TypeAAAA, ecs("2001:db8:100::/56"))},
		{"dual/A+accesslog", true, true, query("live.iptv.example.", dns.TypeA)},
		{"dual/AAAA+accesslog", true, true, query("live.iptv.example.", dns.TypeAAAA)},
	}
}

// BenchmarkServeDNS: one query for the apex from a coverage-zone client
// through the handler (decision, reply, truncation check; unpacking the
// query and packing the reply are miekg's and not included), without and
// with the access log.
func BenchmarkServeDNS(b *testing.B) {
	eng := steer.New(compile(b, []byte(testTopology)), steer.Options{})
	dual := steer.New(compile(b, []byte(dualTopology)), steer.Options{})
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{})
	go rec.Run(b.Context())
	for _, bc := range benchQueries() {
		b.Run(bc.name, func(b *testing.B) {
			var r *accesslog.Recorder
			if bc.log {
				r = rec
			}
			e := eng
			if bc.dual {
				e = dual
			}
			s := New(Config{TrustedResolvers: testResolvers}, engineFunc(e), r, nil)
			wire, _ := bc.req.Pack()
			req := new(dns.Msg)
			if err := req.Unpack(wire); err != nil {
				b.Fatal(err)
			}
			w := &writer{remote: udpFrom("100.64.0.7")}
			b.ReportAllocs()
			for b.Loop() {
				s.ServeDNS(w, req)
			}
			if w.msg == nil || w.msg.Rcode != dns.RcodeSuccess {
				b.Fatalf("reply %v", w.msg)
			}
		})
	}
}

// BenchmarkFastPath: the same queries from the same client on the fast
// path, from the datagram to the reply's bytes (parsing, decision, reply,
// access log): no allocation.
func BenchmarkFastPath(b *testing.B) {
	eng := steer.New(compile(b, []byte(testTopology)), steer.Options{})
	dual := steer.New(compile(b, []byte(dualTopology)), steer.Options{})
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{})
	go rec.Run(b.Context())
	src := netip.MustParseAddr("100.64.0.7")
	for _, bc := range benchQueries() {
		b.Run(bc.name, func(b *testing.B) {
			var r *accesslog.Recorder
			if bc.log {
				r = rec
			}
			e := eng
			if bc.dual {
				e = dual
			}
			s := New(Config{TrustedResolvers: testResolvers}, engineFunc(e), r, nil)
			wire, _ := bc.req.Pack()
			out := make([]byte, 0, DefaultMaxUDPSize+1)
			var ok bool
			b.ReportAllocs()
			for b.Loop() {
				out, ok = s.serveFast(wire, src, out)
			}
			if !ok || len(out) < headerLen {
				b.Fatal("not answered on the fast path")
			}
		})
	}
}
