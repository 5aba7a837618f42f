package health_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
)

// steadyProber answers like a healthy province at steady state: every probe
// succeeds, RTT and load jitter by a few percent. It stands in for 10,000
// real servers, which one test machine cannot host; what is measured is the
// report rule and the publisher against a real etcd.
type steadyProber struct{ probes atomic.Int64 }

func (p *steadyProber) Probe(_ context.Context, t health.Target) health.Result {
	p.probes.Add(1)
	j := 1 + (rand.Float64()-0.5)*0.1 // +-5%
	return health.Result{OK: true, RTT: time.Duration(float64(2*time.Millisecond) * j), HasLoad: true,
		Load: avail.Load{CPU: 0.4 * j, BandwidthMbps: 5000 * j, Connections: int(2000 * j)}}
}

// BenchmarkPublishSteadyState: etcd writes per second for a province of
// 10,000 servers probed every second by one checker at steady state, against
// the baseline of writing every probe (10,000/s). Run with -benchtime 1x.
// The refresh is 30 s here, as it was, so that a minute covers one: what
// is measured is the report rule; with the default 5 minutes the refresh
// writes a tenth of this (bench/etcdload measures the province's checkers).
func BenchmarkPublishSteadyState(b *testing.B) {
	for b.Loop() {
		e := etcdtest.Start(b)
		reg := prometheus.NewRegistry()
		pub := &health.Publisher{Client: e.Client(), Prefix: "/anysched/", Info: avail.CheckerInfo{ID: "c1", Region: "hefei"}, TTL: 3 * time.Second, Logger: quiet}
		pub.Register(reg)
		prober := &steadyProber{}
		c, err := health.NewChecker(health.CheckerOptions{ID: "c1", Interval: time.Second, RefreshInterval: 30 * time.Second, OnReport: pub.Publish}, prober, quiet)
		if err != nil {
			b.Fatal(err)
		}
		targets := make([]health.Target, 10_000)
		for i := range targets {
			targets[i] = health.Target{Server: fmt.Sprintf("s%05d", i), Address: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 8080)}
		}
		c.SetTargets(targets)
		ctx, cancel := context.WithCancel(context.Background())
		go c.Run(ctx)
		go pub.Run(ctx)
		// First verdicts: one write per server, within the first interval
		// (and the publisher's flush).
		wait.For(b, "every server's first verdict written", time.Minute, func() bool {
			return metricValue(b, reg, "anysched_health_publish_writes_total") >= float64(len(targets))
		})
		writes0, probes0 := metricValue(b, reg, "anysched_health_publish_writes_total"), prober.probes.Load()
		// What is measured: the write rate over a fixed stretch of real
		// time, covering one 30 s refresh of every server.
		const window = 60 * time.Second
		time.Sleep(window)
		writes, probes := metricValue(b, reg, "anysched_health_publish_writes_total")-writes0, prober.probes.Load()-probes0
		cancel()
		b.ReportMetric(writes/window.Seconds(), "writes/s")
		b.ReportMetric(float64(probes)/window.Seconds(), "probes/s")
		b.ReportMetric(writes/float64(probes), "writes/probe")
	}
}

func metricValue(b *testing.B, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	b.Fatalf("metric %s not found", name)
	return 0
}
