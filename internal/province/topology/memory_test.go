package topology_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/heapuse"
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

// TestParseMemoryBounded: a 2 MB dry-run apply used to take the center from
// 47 MB to 361 MB. Decoding and validating must hold at most 10x the
// document at once (yaml.v3's node tree alone is ~14x, so large lists are
// decoded an item at a time), and a document with more nodes than
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
			u := heapuse.MeasureLive(func() { parseOrFail(t, c.doc) })
			t.Logf("document %.1f MB: peak heap %.1f MB (%.1fx), allocated %.1f MB (%.1fx), %v",
				heapuse.MB(uint64(len(c.doc))), heapuse.MB(u.Peak), heapuse.Ratio(u.Peak, len(c.doc)),
				heapuse.MB(u.Allocated), heapuse.Ratio(u.Allocated, len(c.doc)), u.Took.Round(time.Millisecond))
			if r := heapuse.Ratio(u.Peak, len(c.doc)); r > 10 {
				t.Errorf("peak heap %.1fx the document, more than 10x", r)
			}
		})
	}
	t.Run("node limit", func(t *testing.T) {
		// ~16 MB of one-character networks: ~8 million nodes, ~1.5 GB of tree.
		doc := []byte("zones: [{name: z, region: r, networks: [" + strings.Repeat("a,", 8<<20) + "a]}]\n")
		var err error
		u := heapuse.Measure(func() { _, err = topology.Decode(doc) })
		if err == nil || !strings.Contains(err.Error(), "more than the limit of 2000000") {
			t.Fatalf("err = %v", err)
		}
		if u.Peak > 4*uint64(len(doc)) {
			t.Errorf("refusing took %.1f MB of heap", heapuse.MB(u.Peak))
		}
	})
}

// BenchmarkParse2MB decodes and validates the 2 MB document.
func BenchmarkParse2MB(b *testing.B) {
	doc := doc2MB()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		parseOrFail(b, doc)
	}
}
