package accesslog

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// maxSeries bounds the series cache. Regions come from the topology and
// protos and results are fixed: 2 protos x 5 results x 18 x 18 regions
// (16 cities, the center, none) is about 3,200 keys at worst, and real
// traffic uses far fewer. Past the bound a decision still counts, through
// the label lookup the cache saves.
const maxSeries = 4096

// seriesKey is what selects a decision's metric series and tally, as the
// front ends give it (empty regions not yet mapped to "none").
type seriesKey struct {
	proto, region, client string
	result                steer.Result
}

// maxKey bounds the cache key built on the stack; longer names (no real
// topology has them) skip the cache.
const maxKey = 128

// appendKey encodes k as one string key: each name prefixed by its length,
// then the result (a byte). Hashing one short string is a third of the cost
// of a struct of three; ok is false when k does not fit maxKey.
func appendKey(b []byte, k *seriesKey) (_ []byte, ok bool) {
	if len(k.proto)+len(k.region)+len(k.client)+4 > maxKey {
		return b, false
	}
	b = append(b, byte(len(k.proto)))
	b = append(b, k.proto...)
	b = append(b, byte(len(k.region)))
	b = append(b, k.region...)
	b = append(b, byte(len(k.client)))
	b = append(b, k.client...)
	return append(b, byte(k.result)), true
}

// series is what Record updates for one seriesKey.
type series struct {
	requests prometheus.Counter
	latency  prometheus.Observer
	tally    *tally
}

// seriesCache maps a seriesKey to its series without a lock on the hot
// path: readers look in an immutable map; a miss takes mu and looks in (or
// adds to) dirty, which holds every cached series, and once the misses since
// the last copy reach the size of the read map, dirty is copied to become
// the new read map. Copies thus cost O(1) per miss, and stop once every key
// a topology produces has been seen.
type seriesCache struct {
	read   atomic.Pointer[map[string]*series]
	mu     sync.Mutex
	dirty  map[string]*series
	misses int
	build  func(seriesKey) *series
}

func (c *seriesCache) get(k seriesKey) *series {
	var buf [maxKey]byte
	key, ok := appendKey(buf[:0], &k)
	if !ok {
		return c.build(k)
	}
	if m := c.read.Load(); m != nil {
		if s, ok := (*m)[string(key)]; ok { // no allocation: the compiler looks up the bytes
			return s
		}
	}
	return c.miss(string(key), k)
}

func (c *seriesCache) miss(key string, k seriesKey) *series {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.dirty[key]
	if !ok {
		s = c.build(k)
		if len(c.dirty) >= maxSeries {
			return s
		}
		if c.dirty == nil {
			c.dirty = make(map[string]*series)
		}
		c.dirty[key] = s
	}
	c.misses++
	var read map[string]*series
	if m := c.read.Load(); m != nil {
		read = *m
	}
	if c.misses >= len(read) {
		m := maps.Clone(c.dirty)
		c.read.Store(&m)
		c.misses = 0
	}
	return s
}

// buildSeries resolves k's labels once.
func (r *Recorder) buildSeries(k seriesKey) *series {
	return &series{
		requests: r.requests.WithLabelValues(k.proto, orNone(k.region), k.result.String()),
		latency:  r.latency.WithLabelValues(k.proto),
		tally:    r.tallies.get(orNone(k.client)),
	}
}

func orNone(region string) string {
	if region == "" {
		return "none"
	}
	return region
}
