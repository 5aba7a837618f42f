// Package heapuse measures what one operation costs in heap: bytes
// allocated in all, and the most heap held at any moment above what was
// live before (live objects and garbage not yet collected), which is what
// a process's RSS follows.
package heapuse

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Use is the cost of one call of Measure's function.
type Use struct {
	Allocated, Peak uint64
	Took            time.Duration
}

// Ratio is x as a multiple of size.
func Ratio(x uint64, size int) float64 { return float64(x) / float64(size) }

// MB is b in MiB.
func MB(b uint64) float64 { return float64(b) / (1 << 20) }

// MeasureLive is Measure with the collector run whenever the heap grows by
// a tenth: its peak is close to what f holds at once, whatever else the
// process holds (under the default GOGC, garbage may grow up to the size
// of the live heap before a collection, which would measure the process,
// not f).
func MeasureLive(f func()) Use {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	return Measure(f)
}

// Measure runs f after a collection and samples the heap every 200 µs
// while it runs. Other goroutines' allocations count too: measure where
// little else runs.
func Measure(f func()) Use {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	base, alloc0 := sample[0].Value.Uint64(), sample[1].Value.Uint64()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	f()
	took := time.Since(start)
	close(done)
	wg.Wait()
	metrics.Read(sample)
	peak = max(peak, sample[0].Value.Uint64())
	return Use{Allocated: sample[1].Value.Uint64() - alloc0, Peak: peak - min(peak, base), Took: took}
}
