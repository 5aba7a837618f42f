package app

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/outlier"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkObserve: what passive ejection adds to one redirect (client and
// content hashes, the clock, the detector's slot swap and count) on the
// province-scale snapshot. Target: < 100 ns, 0 allocations.
func BenchmarkObserve(b *testing.B) {
	s := fixture.ScaleSnapshot(b)
	cfg := outlier.DefaultConfig()
	cfg.Enabled = true
	d, err := outlier.New(cfg, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	nodes, names := make([]int32, len(s.Servers)), make([]string, len(s.Servers))
	for i, sv := range s.Servers {
		nodes[i], names[i] = sv.Node, sv.Name
	}
	d.SetServers(nodes, names)
	p := &policy{eject: d}
	eng := steer.New(s, steer.Options{})
	req := steer.Request{Client: netip.MustParseAddr("100.64.1.9"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8"}
	dec := eng.Decide(req)
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p.Observe(eng, dec, req, at)
	}
}
