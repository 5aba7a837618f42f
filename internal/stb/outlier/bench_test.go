package outlier

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// benchDetector is a detector over 256 servers in 32 nodes.
func benchDetector(b *testing.B) *Detector {
	d, err := New(Config{Enabled: true}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	nodes := make([]int32, 256)
	names := make([]string, 256)
	for i := range nodes {
		nodes[i] = int32(i / 8)
		names[i] = string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	d.SetServers(nodes, names)
	return d
}

// BenchmarkObserve: one answered request, at 10,000 requests a second of
// simulated time, from 100,000 clients over 500 channels (so that a few
// pairs repeat within the window and the failure path runs too).
func BenchmarkObserve(b *testing.B) {
	d := benchDetector(b)
	now := t0.UnixNano()
	b.ReportAllocs()
	var x uint64 = 1
	for i := 0; b.Loop(); i++ {
		x = x*6364136223846793005 + 1442695040888963407
		d.Observe(x>>47%100_000, x>>20%500, int32(x>>8%256), now+int64(i)*int64(100*time.Microsecond))
	}
}

// BenchmarkObserveParallel is BenchmarkObserve from every P at once, on
// one detector, each goroutine with its own clients.
func BenchmarkObserveParallel(b *testing.B) {
	d := benchDetector(b)
	base := t0.UnixNano()
	var gid atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		g := gid.Add(1)
		x := g * 0x9E3779B97F4A7C15
		var i int64
		for pb.Next() {
			i++
			x = x*6364136223846793005 + 1442695040888963407
			d.Observe(g<<32|x>>47%100_000, x>>20%500, int32(x>>8%256), base+i*int64(100*time.Microsecond))
		}
	})
}

// BenchmarkEvaluate: one evaluation of 10,000 servers, a few failing.
func BenchmarkEvaluate(b *testing.B) {
	d, err := New(Config{Enabled: true}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	nodes := make([]int32, n)
	names := make([]string, n)
	for i := range nodes {
		nodes[i] = int32(i / 10)
		names[i] = "s" + string(rune(i))
	}
	d.SetServers(nodes, names)
	now := t0
	var x uint64 = 1
	for i := range 200_000 {
		x = x*6364136223846793005 + 1442695040888963407
		d.Observe(x>>40, x>>20%500, int32(x>>8%n), now.Add(time.Duration(i)*50*time.Microsecond).UnixNano())
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		d.Evaluate(now)
	}
}
