package dnsd

import (
	"io"
	"testing"

	"github.com/anysched/anysched/internal/accesslog"
	"github.com/anysched/anysched/internal/steer"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkServeDNS: one A query for the apex from a coverage-zone client
// through the handler (decision, reply, truncation check; packing is the
// writer's and not included), without and with the access log.
func BenchmarkServeDNS(b *testing.B) {
	eng := steer.New(compile(b, []byte(testTopology)), steer.Options{})
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{})
	go rec.Run(b.Context())
	for _, bc := range []struct {
		name string
		rec  *accesslog.Recorder
		req  *dns.Msg
	}{
		{"A", nil, query("live.iptv.example.", dns.TypeA)},
		{"A+ECS", nil, query("live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24"))},
		{"A+ECS/8", nil, query("live.iptv.example.", dns.TypeA, ecs("100.0.0.0/8"))},
		{"A+accesslog", rec, query("live.iptv.example.", dns.TypeA)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(Config{TrustedResolvers: testResolvers}, engineFunc(eng), bc.rec, nil)
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
			if w.msg == nil || len(w.msg.Answer) != 1 {
				b.Fatalf("reply %v", w.msg)
			}
		})
	}
}
