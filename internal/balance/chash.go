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
	// weight share of the recent assignments; a key whose server is full
	// walks on clockwise to the next server with room (Mirrokni, Thorup and
	// Zadimoghaddam, "Consistent Hashing with Bounded Loads", 2017). Hot
	// channels thus spill onto ring neighbours instead of melting one
	// cache. 0 disables the bound (pure consistent hashing).
	Epsilon float64 `yaml:"epsilon" json:"epsilon"`
	// Window sets how recent "recent" is: when the counted assignments
	// reach 2 x Window every counter is halved, so the loads the bound
	// compares are an exponentially fading history of about Window
	// assignments. 0 means max(4096, 16 x servers).
	Window int `yaml:"window" json:"window"`
	// SlowStart ramps a returning server's share of the bound (not its ring
	// points, so no key moves while it ramps; its overflow spills to ring
	// neighbours). Only meaningful with Epsilon > 0.
	SlowStart SlowStart `yaml:"-" json:"-"` // Config.SlowStart in a Table
	// Panic is the healthy fraction under which health is ignored (0: never).
	Panic float64 `yaml:"-" json:"-"`
	// Now is the build time slow start is evaluated at; zero: time.Now().
	Now time.Time `yaml:"-" json:"-"`
}

// CHash is a consistent-hash ring of the content key with virtual nodes and
// optional bounded loads. The ring is immutable; the recent-load counters
// are atomics, one per server on its own cache line, so concurrent picks
// never take a lock: a pick reads the total, then claims a slot on its
// server with a compare-and-swap that fails only if another pick raced it
// to the same server's last slot.
type CHash struct {
	servers []Server
	share   []float64 // (1+eps) x effective weight share, per server: the bound's multiplier
	points  []uint64  // ring positions, ascending
	owner   []int32   // owner[k]: position in servers of points[k]
	// bucket[b] is the first k with points[k]>>shift >= b: a radix index that
	// narrows the ring search to a handful of points.
	bucket    []uint32
	shift     uint
	vnodes    int
	eps       float64
	window    int64
	panicked  bool
	rampUntil time.Time
	effective []float64

	total    paddedCounter
	loads    []paddedCounter // recent assignments per server
	decaying atomic.Bool
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
	if o.VirtualNodes < 0 || o.Epsilon < 0 || o.Window < 0 || math.IsNaN(o.Epsilon) {
		return nil, fmt.Errorf("chash options %+v: negative value", o)
	}
	if o.VirtualNodes == 0 {
		o.VirtualNodes = 160
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
	c.window = int64(o.Window)
	if c.window == 0 {
		c.window = int64(max(4096, 16*len(pos)))
	}
	c.loads = make([]paddedCounter, len(pos))

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
	c.share = make([]float64, len(pos))
	for j := range pos {
		c.share[j] = (1 + c.eps) * c.effective[j] / sumEff
	}

	c.vnodes = o.VirtualNodes
	if prev != nil && prev.vnodes == c.vnodes && prev.sameRing(c.servers) {
		// Health changed but not the ring: share the immutable ring.
		c.points, c.owner, c.bucket, c.shift = prev.points, prev.owner, prev.bucket, prev.shift
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

// Pick implements Policy; it uses only keyHash.
func (c *CHash) Pick(keyHash, _ uint64) int32 {
	if len(c.points) == 0 {
		return -1
	}
	k := c.search(mix(keyHash))
	if c.eps == 0 {
		return c.servers[c.owner[k]].Index
	}
	// A server with load v may take the key while v < (1+eps) x (T+1) x
	// its share, T the recent total: for whole v that is exactly v+1 <=
	// ceil(bound), i.e. no server ever exceeds its rounded-up bound. The
	// shares sum to 1+eps > 1, so some server always has room and the walk
	// ends; its expected length is O(1/eps^2) points.
	limit := float64(c.total.n.Load() + 1)
	for range len(c.points) {
		j := c.owner[k]
		bound := limit * c.share[j]
		ctr := &c.loads[j].n
		for {
			v := ctr.Load()
			if float64(v) >= bound {
				break
			}
			if ctr.CompareAndSwap(v, v+1) {
				c.assigned()
				return c.servers[j].Index
			}
		}
		if k++; k == len(c.points) {
			k = 0
		}
	}
	// Unreachable unless concurrent picks raced every server full between
	// reading the total and claiming; the key's owner is the fair answer.
	j := c.owner[c.search(mix(keyHash))]
	c.loads[j].n.Add(1)
	c.assigned()
	return c.servers[j].Index
}

// assigned counts one assignment in the total and fades the history when
// the total reaches twice the window: one picker (whoever wins the flag)
// halves every counter, rounding up so that a counter within its bound stays
// within it (ceil(ceil(x)/2) = ceil(x/2)).
func (c *CHash) assigned() {
	if c.total.n.Add(1) < 2*c.window || !c.decaying.CompareAndSwap(false, true) {
		return
	}
	var removed int64
	for j := range c.loads {
		ctr := &c.loads[j].n
		for {
			v := ctr.Load()
			if ctr.CompareAndSwap(v, (v+1)/2) {
				removed += v - (v+1)/2
				break
			}
		}
	}
	c.total.n.Add(-removed)
	c.decaying.Store(false)
}

// Loads returns the recent-assignment counters by server position and
// their total, for tests, metrics and explain.
func (c *CHash) Loads() (perServer []int64, total int64) {
	perServer = make([]int64, len(c.loads))
	for j := range c.loads {
		perServer[j] = c.loads[j].n.Load()
	}
	return perServer, c.total.n.Load()
}

// Servers returns the eligible servers in position order (the order of
// Loads).
func (c *CHash) Servers() []Server { return slices.Clone(c.servers) }

// Inherit carries prev's recent loads over for the servers both hold, so the
// bound's history survives the rebuilds that follow every health change.
// Call it before c is published.
func (c *CHash) Inherit(prev *CHash) {
	if prev == nil || c.eps == 0 {
		return
	}
	at := make(map[string]int, len(prev.servers))
	for j := range prev.servers {
		at[identity(&prev.servers[j])] = j
	}
	var total int64
	for j := range c.servers {
		if k, ok := at[identity(&c.servers[j])]; ok {
			v := prev.loads[k].n.Load()
			c.loads[j].n.Store(v)
			total += v
		}
	}
	c.total.n.Store(total)
}

// Explain implements Policy: the key's ring position, the owner, and every
// server the bounded walk looked at with its load and bound.
func (c *CHash) Explain(keyHash, _ uint64) Explanation {
	x := Explanation{Policy: c.Name(), Pick: -1, Panic: c.panicked}
	if len(c.points) == 0 {
		x.Notes = append(x.Notes, "no eligible server")
		return x
	}
	h := mix(keyHash)
	k := c.search(h)
	x.Notes = append(x.Notes, fmt.Sprintf("key hash %016x at ring point %d of %d", h, k, len(c.points)))
	if c.panicked {
		x.Notes = append(x.Notes, "fewer healthy servers than the panic threshold: health ignored")
	}
	if c.eps == 0 {
		j := c.owner[k]
		x.Pick = c.servers[j].Index
		x.Notes = append(x.Notes, "unbounded: the ring owner takes the key")
		x.Candidates = append(x.Candidates, Candidate{Server: x.Pick, Name: c.servers[j].Name, Weight: c.servers[j].Weight,
			Effective: c.effective[j], Chosen: true, Note: "ring owner"})
		return x
	}
	x.Notes = append(x.Notes, fmt.Sprintf("bounded loads, epsilon %.3g: score = recent assignments / bound", c.eps))
	limit := float64(c.total.n.Load() + 1)
	seen := make(map[int32]bool)
	for range len(c.points) {
		j := c.owner[k]
		if !seen[j] {
			seen[j] = true
			v, bound := c.loads[j].n.Load(), limit*c.share[j]
			cd := Candidate{Server: c.servers[j].Index, Name: c.servers[j].Name, Weight: c.servers[j].Weight,
				Effective: c.effective[j], Score: float64(v) / bound}
			if len(x.Candidates) == 0 {
				cd.Note = "ring owner"
			}
			if float64(v) >= bound {
				cd.Note = joinNote(cd.Note, fmt.Sprintf("full: %d recent >= bound %.1f, walk on", v, bound))
				x.Candidates = append(x.Candidates, cd)
			} else {
				cd.Chosen = true
				cd.Note = joinNote(cd.Note, fmt.Sprintf("has room: %d recent < bound %.1f", v, bound))
				x.Candidates = append(x.Candidates, cd)
				x.Pick = cd.Server
				return x
			}
		}
		if k++; k == len(c.points) {
			k = 0
		}
	}
	return x
}
