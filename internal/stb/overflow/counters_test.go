package overflow_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/overflow"
	"github.com/prometheus/client_golang/prometheus"
)

func TestCounters(t *testing.T) {
	c := overflow.NewCounters(3, 4)
	adds := []struct{ svc, node, n int32 }{{0, 0, 1}, {2, 3, 5}, {1, 2, 2}, {0, 0, 2}}
	for _, a := range adds {
		for range a.n {
			c.Add(a.svc, a.node)
		}
	}
	for svc := range int32(3) {
		for node := range int32(4) {
			var want uint64
			for _, a := range adds {
				if a.svc == svc && a.node == node {
					want += uint64(a.n)
				}
			}
			if got := c.Load(svc, node); got != want {
				t.Errorf("Load(%d, %d) = %d, want %d", svc, node, got, want)
			}
		}
	}
}

// TestAddDuringEvaluate runs the hot path against evaluations and state
// reads, for the race detector; the total must come out exact.
func TestAddDuringEvaluate(t *testing.T) {
	snap := snapWith(t, "{rps_per_server: 1e9, bandwidth_share: 0.5}")
	id := lookup(t, snap)
	counters := overflow.NewCounters(len(snap.Services), len(snap.Nodes))
	c := overflow.New(prometheus.NewRegistry(), nil)
	const workers, perWorker = 4, 20_000
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				counters.Add(id.live, id.hefei1)
				_ = c.State().Over(id.live, id.hefei1)
			}
		})
	}
	evals := make(chan int)
	go func() {
		n := 0
		now := time.Unix(0, 0)
		bw := make([]float64, len(snap.Servers))
		for !stop.Load() {
			now = now.Add(time.Second)
			bw[id.hefei1a], bw[id.hefei1b] = float64(n%2)*10000, float64(n%2)*10000 // over and back in turn
			c.Evaluate(overflow.Inputs{Snap: snap, BandwidthMbps: bw, Counters: counters, Now: now})
			n++
		}
		evals <- n
	}()
	wg.Wait()
	stop.Store(true)
	if n := <-evals; n == 0 {
		t.Error("no evaluation ran")
	}
	if got := counters.Load(id.live, id.hefei1); got != workers*perWorker {
		t.Errorf("counted %d, want %d", got, workers*perWorker)
	}
}

func BenchmarkAdd(b *testing.B) {
	c := overflow.NewCounters(8, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Add(int32(i&7), int32(i&255))
	}
}

// BenchmarkAddParallel is every core sending to the same hot node.
func BenchmarkAddParallel(b *testing.B) {
	c := overflow.NewCounters(8, 256)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Add(3, 17)
		}
	})
}

// BenchmarkAddParallelSpread is each core sending to its own node, next to
// the others' (what the cache-line padding is for).
func BenchmarkAddParallelSpread(b *testing.B) {
	c := overflow.NewCounters(8, 256)
	var next atomic.Int32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		node := next.Add(1) % 256
		for pb.Next() {
			c.Add(3, node)
		}
	})
}

func BenchmarkAddNil(b *testing.B) {
	var c *overflow.Counters
	b.ReportAllocs()
	for b.Loop() {
		c.Add(3, 17)
	}
}
