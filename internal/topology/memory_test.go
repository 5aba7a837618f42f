package topology_test

import (
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/topology/topogen"
)

// Documents of about 2 MB and 10 MB in the operators' style (flow leaves),
// the sizes a dry-run apply was measured with.
var (
	doc2MB = sync.OnceValue(func() []byte {
		return genYAML(topogen.LargeOptions{Regions: 16, Nodes: 200, Servers: 5_000, Zones: 400, Networks: 50_000, FallbackPerRegion: 2})
	})
	doc10MB = sync.OnceValue(func() []byte {
		return genYAML(topogen.LargeOptions{Regions: 16, Nodes: 480, Servers: 24_000, Zones: 960, Networks: 240_000, FallbackPerRegion: 2})
	})
)

func genYAML(o topogen.LargeOptions) []byte {
	y, err := topogen.YAML(topogen.Large(nil, o))
	if err != nil {
		panic(err)
	}
	return y
}

// heapUse is what parsing one document costs: bytes allocated in all, and the
// most heap (live objects and garbage not yet collected) held at any moment
// above what was live before, which is what the process's RSS follows.
type heapUse struct {
	Allocated, Peak uint64
	Took            time.Duration
}

func measure(f func()) heapUse {
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
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(200 * time.Microsecond):
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
	return heapUse{Allocated: sample[1].Value.Uint64() - alloc0, Peak: peak - min(peak, base), Took: took}
}

func parseOrFail(tb testing.TB, doc []byte) {
	tb.Helper()
	t, err := topology.Decode(doc)
	if err == nil {
		err = topology.Validate(t)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// TestParseMemoryBounded: a 2 MB dry-run apply used to take the center from 47 MB to 361 MB. Decoding and validating must not
// allocate more than 40x the document (it was 45x; yaml.v3's node tree
// alone is ~14x, ~190 bytes a node) and a document with more nodes than
// MaxYAMLNodes is refused before any tree is built.
func TestParseMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("generates 12 MB of YAML")
	}
	for _, c := range []struct {
		name string
		doc  []byte
	}{{"2MB", doc2MB()}, {"10MB", doc10MB()}} {
		t.Run(c.name, func(t *testing.T) {
			u := measure(func() { parseOrFail(t, c.doc) })
			size := uint64(len(c.doc))
			t.Logf("document %.1f MB: allocated %.1f MB (%.1fx), peak heap %.1f MB (%.1fx), %v",
				mb(size), mb(u.Allocated), float64(u.Allocated)/float64(size), mb(u.Peak), float64(u.Peak)/float64(size), u.Took.Round(time.Millisecond))
			if u.Allocated > 40*size {
				t.Errorf("allocated %.1f MB, more than 40x the %.1f MB document", mb(u.Allocated), mb(size))
			}
		})
	}
	t.Run("node limit", func(t *testing.T) {
		// ~16 MB of one-character networks: ~8 million nodes, ~1.5 GB of tree.
		doc := []byte("zones: [{name: z, region: r, networks: [" + strings.Repeat("a,", 8<<20) + "a]}]\n")
		var err error
		u := measure(func() { _, err = topology.Decode(doc) })
		if err == nil || !strings.Contains(err.Error(), "more than the limit of 2000000") {
			t.Fatalf("err = %v", err)
		}
		if u.Peak > 4*uint64(len(doc)) {
			t.Errorf("refusing took %.1f MB of heap", mb(u.Peak))
		}
	})
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// BenchmarkParse2MB decodes and validates the 2 MB document.
func BenchmarkParse2MB(b *testing.B) {
	doc := doc2MB()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		parseOrFail(b, doc)
	}
}
