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
func benchQueries() []struct {
	name string
	log  bool
	req  *dns.Msg
} {
	return []struct {
		name string
		log  bool
		req  *dns.Msg
	}{
		{"A", false, query("live.iptv.example.", dns.TypeA)},
		{"A+EDNS", false, query("live.iptv.example.", dns.TypeA, withEDNS)},
		{"A+ECS", false, query("live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24"))},
		{"A+ECS/8", false, query("live.iptv.example.", dns.TypeA, ecs("100.0.0.0/8"))},
		{"AAAA-NODATA", false, query("live.iptv.example.", dns.TypeAAAA, withEDNS)},
		{"A+accesslog", true, query("live.iptv.example.", dns.TypeA)},
	}
}

// BenchmarkServeDNS: one query for the apex from a coverage-zone client
// through the handler (decision, reply, truncation check; unpacking the
// query and packing the reply are miekg's and not included), without and
// with the access log.
func BenchmarkServeDNS(b *testing.B) {
	eng := steer.New(compile(b, []byte(testTopology)), steer.Options{})
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{})
	go rec.Run(b.Context())
	for _, bc := range benchQueries() {
		b.Run(bc.name, func(b *testing.B) {
			var r *accesslog.Recorder
			if bc.log {
				r = rec
			}
			s := New(Config{TrustedResolvers: testResolvers}, engineFunc(eng), r, nil)
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
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{})
	go rec.Run(b.Context())
	src := netip.MustParseAddr("100.64.0.7")
	for _, bc := range benchQueries() {
		b.Run(bc.name, func(b *testing.B) {
			var r *accesslog.Recorder
			if bc.log {
				r = rec
			}
			s := New(Config{TrustedResolvers: testResolvers}, engineFunc(eng), r, nil)
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
