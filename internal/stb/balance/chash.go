package balance

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// CHashOptions configure consistent hashing with bounded loads.
type CHashOptions struct {
	// VirtualNodes is the number of ring points of a server of mean weight
	// (others get proportionally more or fewer, at least one). More points
	// even out the servers' arcs (a server's share varies by about
	// 1/sqrt(VirtualNodes)) at the cost of build time and memory. 0 means 160
	// (ketama's figure: about 8% spread).
	VirtualNodes int `yaml:"virtual_nodes" json:"virtual_nodes"`
	// Epsilon bounds loads: no server takes more than (1+Epsilon) x its
	// weight share of the node's recent requests once it holds more than
	// MinLoad of them; a hot key is replicated over as many of its ring
	// servers as keep it under that (see chash_bounded.go). 0 disables the
	// bound and the replication (pure consistent hashing: a key always goes
	// to its ring owner).
	Epsilon float64 `yaml:"epsilon" json:"epsilon"`
	// HalfLife is how fast recent requests fade: every server's load and
	// every key's demand is its requests, each counting 1 and halving every
	// HalfLife (about rate x HalfLife / ln 2 in steady traffic). 0 means 60s.
	HalfLife time.Duration `yaml:"half_life" json:"half_life"`
	// MinLoad is the floor of the bound, in recent requests for a server of
	// mean weight (proportionally more or less for others): a server below
	// it is never full, and a key below it is never replicated, so on a
	// quiet node every request for one channel goes to one server. 0 means
	// 1,000.
	MinLoad float64 `yaml:"min_load" json:"min_load"`
	// Window is no longer used (loads fade by HalfLife, in time, instead of
	// by a count of assignments); it is still accepted so that stored
	// documents keep parsing.
	Window int `yaml:"window" json:"window"`
	// SlowStart ramps a returning server's share of the bound and its floor
	// (not its ring points, so no key moves while it ramps; its overflow
	// spills to the key's next servers). Only meaningful with Epsilon > 0.
	SlowStart SlowStart `yaml:"-" json:"-"` // Config.SlowStart in a Table
	// Panic is the healthy fraction under which health is ignored (0: never).
	Panic float64 `yaml:"-" json:"-"`
	// Now is the build time slow start is evaluated at and the decay clock
	// starts from; zero: time.Now().
	Now time.Time `yaml:"-" json:"-"`
}

// Defaults of CHashOptions.
const (
	defaultVirtualNodes = 160
	defaultHalfLife     = 60 * time.Second
	defaultMinLoad      = 1000
)

// CHash is a consistent-hash ring of the content key with virtual nodes and
// optional bounded loads. The ring is immutable; the bounded-load state
// (recent requests per server and per key, chash_decay.go) is atomic
// counter words, so concurrent picks never take a lock.
type CHash struct {
	servers []Server
	points  []uint64 // ring positions, ascending
	owner   []int32  // owner[k]: position in servers of points[k]
	// bucket[b] is the first k with points[k]>>shift >= b: a radix index that
	// narrows the ring search to a handful of points.
	bucket []uint32
	shift  uint
	// grid[g] is the owner of ring position g<<gridShift: the ring read at
	// a coarser resolution, one small array lookup instead of a search,
	// for a hot key's further servers (chash_bounded.go).
	grid      []uint16
	gridShift uint
	vnodes    int
	eps       float64
	panicked  bool
	rampUntil time.Time
	effective []float64

	// Bounded loads (eps > 0), chash_bounded.go.
	floor    []float64 // per server: MinLoad x effective weight / mean weight
	share    []float64 // per server: (1+eps) x effective weight share
	minLoad  float64
	perCopy  float64 // a replica's budget per request of the total
	beyond   float64 // the fraction of its bound a server fills with keys it is not first or second for
	halfLife time.Duration
	// totalMask+1 (>= servers) is how rarely a saturated key's picks re-add the total.
	totalMask uint64
	clock     *coarseClock
	keys      *keyDemand    // shared with the node's previous and next builds
	loads     []paddedWord  // recent requests per server; shared while the servers stay
	total     atomic.Uint64 // float64 bits: the servers' loads added up at the last tick
}

// paddedWord is an atomic counter word alone on its cache line(s), so that
// the counters of different servers, written by different cores, do not
// invalidate each other (false sharing). 128 bytes covers adjacent-line
// prefetching on x86.
type paddedWord struct {
	w atomic.Uint64
	_ [120]byte
}

// NewCHash builds the ring over the eligible servers.
func NewCHash(servers []Server, loads []Load, o CHashOptions) (*CHash, error) {
	return prefixed(newCHash(servers, loads, o, nil))
}

// newCHash is NewCHash reusing prev's ring when the eligible servers and
// their weights are unchanged: a Table rebuilds on every health report, and
// loads alone never move a ring point.
func newCHash(servers []Server, loads []Load, o CHashOptions, prev *CHash) (*CHash, error) {
	if err := checkInput(servers, loads); err != nil {
		return nil, err
	}
	if o.VirtualNodes < 0 || o.Epsilon < 0 || o.Window < 0 || o.HalfLife < 0 || o.MinLoad < 0 ||
		math.IsNaN(o.Epsilon) || math.IsInf(o.Epsilon, 0) || math.IsNaN(o.MinLoad) || math.IsInf(o.MinLoad, 0) {
		return nil, fmt.Errorf("chash options %+v: negative or not finite", o)
	}
	if o.VirtualNodes == 0 {
		o.VirtualNodes = defaultVirtualNodes
	}
	if o.HalfLife == 0 {
		o.HalfLife = defaultHalfLife
	}
	if o.MinLoad == 0 {
		o.MinLoad = defaultMinLoad
	}
	pos, panicked := eligible(servers, loads, o.Panic)
	if len(pos) > 1<<ownerBits {
		return nil, fmt.Errorf("chash: %d servers in one node, at most %d", len(pos), 1<<ownerBits)
	}
	c := &CHash{eps: o.Epsilon, panicked: panicked}
	c.servers = make([]Server, len(pos))
	for j, i := range pos {
		c.servers[j] = servers[i]
	}

	// Capacity shares, after slow start.
	now := orNow(o.Now)
	var ramp rampTracker
	c.effective = make([]float64, len(pos))
	sumEff, sumW := 0.0, 0.0
	for j, i := range pos {
		c.effective[j] = servers[i].Weight * ramp.note(o.SlowStart, loadAt(loads, i).Since, now)
		sumEff += c.effective[j]
		sumW += servers[i].Weight
	}
	c.rampUntil = ramp.until
	if c.eps > 0 && len(pos) > 0 {
		c.initBounded(o, now, sumEff, sumW)
	}

	c.vnodes = o.VirtualNodes
	if prev != nil && prev.vnodes == c.vnodes && prev.sameRing(c.servers) {
		// Health changed but not the ring: share the immutable ring.
		c.points, c.owner, c.bucket, c.shift = prev.points, prev.owner, prev.bucket, prev.shift
		c.grid, c.gridShift = prev.grid, prev.gridShift
		return c, nil
	}
	c.buildRing(o.VirtualNodes, sumW)
	return c, nil
}

// ownerBits is how many low bits of a ring key carry the owner's position
// while sorting; NewCHash limits a node to 2^ownerBits servers.
const ownerBits = 16

// buildRing places round(V x w / mean w) points per server (at least one).
// Each point is sorted as one uint64, ring position in the high 48 bits and
// owner position in the low 16, which lets the sort run on plain integers
// (much faster than sorting pairs with a comparator). 48 bits of
// position is ample: 10^6 points in 2^48 slots. Two points that share all 48
// bits are ordered by the owner's identity rank, so every scheduler builds
// the same ring whatever order the servers come in.
func (c *CHash) buildRing(vnodes int, sumW float64) {
	n := len(c.servers)
	if n == 0 {
		return
	}
	// rank[j]: the position of server j when servers are sorted by
	// identity; it is what the low bits carry, so ties are order-free.
	ids := make([]uint64, n)
	byID := make([]int32, n)
	for j := range c.servers {
		ids[j] = serverID(&c.servers[j])
		byID[j] = int32(j)
	}
	slices.SortFunc(byID, func(a, b int32) int { return cmp.Compare(ids[a], ids[b]) })
	meanW := sumW / float64(n)
	total := 0
	counts := make([]int, n)
	for j := range c.servers {
		counts[j] = max(1, int(math.Round(float64(vnodes)*c.servers[j].Weight/meanW)))
		total += counts[j]
	}
	keys := make([]uint64, 0, total)
	for rank, j := range byID {
		for r := range counts[j] {
			keys = append(keys, mix(ids[j]+uint64(r+1)*golden)&^(1<<ownerBits-1)|uint64(rank))
		}
	}
	radixSort(keys)
	c.points = make([]uint64, len(keys))
	c.owner = make([]int32, len(keys))
	for k, key := range keys {
		c.points[k], c.owner[k] = key&^(1<<ownerBits-1), byID[key&(1<<ownerBits-1)]
	}
	c.index()
}

// sameRing reports whether c's ring is the one servers would build: the
// same identities with the same weights in the same order.
func (c *CHash) sameRing(servers []Server) bool {
	if len(c.servers) != len(servers) || len(c.points) == 0 {
		return false
	}
	for j := range servers {
		if c.servers[j].Name != servers[j].Name || c.servers[j].Weight != servers[j].Weight ||
			(servers[j].Name == "" && c.servers[j].Index != servers[j].Index) {
			return false
		}
	}
	return true
}

// index builds the radix bucket index: about two points per bucket.
func (c *CHash) index() {
	n := len(c.points)
	if n == 0 {
		return
	}
	logB := max(1, bits.Len(uint(n))-1) // buckets = 2^logB, about n/2..n
	c.shift = uint(64 - logB)
	nb := 1 << logB
	c.bucket = make([]uint32, nb+1)
	k := 0
	for b := 0; b <= nb; b++ {
		for k < n && c.points[k]>>c.shift < uint64(b) {
			k++
		}
		c.bucket[b] = uint32(k)
	}
	// The grid: about as many cells as points, at most 2^16 (128 KiB).
	logG := min(16, bits.Len(uint(n-1)))
	c.gridShift = uint(64 - logG)
	c.grid = make([]uint16, 1<<logG)
	k = 0
	for g := range c.grid {
		for k < n && c.points[k] < uint64(g)<<c.gridShift {
			k++
		}
		c.grid[g] = uint16(c.owner[k%n])
	}
}

// Name implements Policy.
func (c *CHash) Name() string { return "chash" }

// RampingUntil is when the last slow-starting server reaches full share.
func (c *CHash) RampingUntil() time.Time { return c.rampUntil }

// search returns the ring position of h: the first point at or after it,
// wrapping to 0.
func (c *CHash) search(h uint64) int {
	b := h >> c.shift
	lo, hi := int(c.bucket[b]), int(c.bucket[b+1])
	for lo < hi && c.points[lo] < h {
		lo++
	}
	if lo == len(c.points) {
		return 0
	}
	return lo
}

// Owner is the key's server on the ring, ignoring loads: where the key goes
// while its server has room. -1 for an empty ring.
func (c *CHash) Owner(keyHash uint64) int32 {
	if len(c.points) == 0 {
		return -1
	}
	return c.servers[c.owner[c.search(mix(keyHash))]].Index
}

// Pick implements Policy. Without a bound the key's ring owner takes it;
// with one, chash_bounded.go decides (keyHash chooses the servers,
// clientHash only varies which of a hot key's replicas is tried first).
func (c *CHash) Pick(keyHash, clientHash uint64) int32 {
	if len(c.points) == 0 {
		return -1
	}
	h := mix(keyHash)
	k := c.search(h)
	if c.eps == 0 {
		return c.servers[c.owner[k]].Index
	}
	return c.servers[c.pickBounded(keyHash, h, k, clientHash)].Index
}

// Servers returns the eligible servers in position order (the order of
// Loads).
func (c *CHash) Servers() []Server { return slices.Clone(c.servers) }
