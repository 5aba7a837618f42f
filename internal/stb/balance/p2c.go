package balance

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// P2COptions configure power of two choices.
type P2COptions struct {
	// CPUWeight, BandwidthWeight and ConnWeight weigh the score's
	// dimensions: CPU utilisation, egress bandwidth over capacity, and
	// connections over ConnRef. All 0 means 1, 1, 1.
	CPUWeight       float64 `yaml:"cpu_weight" json:"cpu_weight"`
	BandwidthWeight float64 `yaml:"bandwidth_weight" json:"bandwidth_weight"`
	ConnWeight      float64 `yaml:"conn_weight" json:"conn_weight"`
	// ConnRef is the connection count that scores 1; 0 means the node's
	// largest reported count (at least 100), so the dimension is relative.
	ConnRef float64 `yaml:"conn_ref" json:"conn_ref"`
	// PickMbps is the bandwidth one pick is assumed to add until health
	// reports the real figure; 0 means 4 (an HD IPTV stream).
	PickMbps float64 `yaml:"pick_mbps" json:"pick_mbps"`
	// SlowStart scales a returning server's weight, which divides its score.
	SlowStart SlowStart `yaml:"-" json:"-"` // Config.SlowStart in a Table
	// Panic is the healthy fraction under which health is ignored (0: never).
	Panic float64 `yaml:"-" json:"-"`
	// Now is the build time slow start is evaluated at; zero: time.Now().
	Now time.Time `yaml:"-" json:"-"`
	// Rand returns uniform random 64-bit values; nil means math/rand/v2's
	// Uint64 (the runtime's per-thread ChaCha8: no lock, no shared state).
	// Tests set a seeded source.
	Rand func() uint64 `yaml:"-" json:"-"`
}

// P2C is power of two choices (Mitzenmacher): sample two distinct servers at
// random and take the one with the lower load score. Against stale load
// figures (health reports once a second) always taking the single least
// loaded server herds every request onto it until the next report; two
// random choices keep the herd bounded while still cutting the maximum load
// exponentially compared with one random choice.
//
// A server's score is
//
//	(wCPU x CPU + wBW x (Mbps + picks x PickMbps) / capacity + wConn x (conns + picks) / ConnRef) / (weight / mean weight)
//
// where picks counts this table's own picks of the server since it was
// built: the local estimate of load health has not yet seen. The counters
// are per-server atomics on their own cache lines; the randomness is the
// runtime's per-thread generator, so picks share nothing but those counters.
type P2C struct {
	servers []Server
	peers   []p2cPeer
	// Unequal weights sample in proportion to weight (Walker's alias
	// method: O(1) per draw), so a double-weight server is drawn twice as
	// often as well as scored half as loaded; with uniform draws it could
	// never take more than its draw frequency, 2/n of the picks.
	uniform   bool
	aliasProb []float64
	alias     []int32
	picks     []paddedCounter
	rnd       func() uint64
	panicked  bool
	rampUntil time.Time
}

type p2cPeer struct {
	base    float64 // static score from health figures, before weight
	perPick float64 // score added by each local pick, before weight
	invW    float64 // mean weight / effective weight
	eff     float64
}

// NewP2C builds the policy over the eligible servers.
func NewP2C(servers []Server, loads []Load, o P2COptions) (*P2C, error) {
	return prefixed(newP2C(servers, loads, o))
}

func newP2C(servers []Server, loads []Load, o P2COptions) (*P2C, error) {
	if err := checkInput(servers, loads); err != nil {
		return nil, err
	}
	if o.CPUWeight < 0 || o.BandwidthWeight < 0 || o.ConnWeight < 0 || o.ConnRef < 0 || o.PickMbps < 0 {
		return nil, fmt.Errorf("p2c options: negative value")
	}
	if o.CPUWeight == 0 && o.BandwidthWeight == 0 && o.ConnWeight == 0 {
		o.CPUWeight, o.BandwidthWeight, o.ConnWeight = 1, 1, 1
	}
	if o.PickMbps == 0 {
		o.PickMbps = 4
	}
	pos, panicked := eligible(servers, loads, o.Panic)
	p := &P2C{panicked: panicked, rnd: o.Rand}
	if p.rnd == nil {
		p.rnd = rand.Uint64
	}
	if o.ConnRef == 0 {
		o.ConnRef = 100
		for _, i := range pos {
			o.ConnRef = max(o.ConnRef, float64(loadAt(loads, i).Connections))
		}
	}
	now := orNow(o.Now)
	var ramp rampTracker
	p.servers = make([]Server, len(pos))
	p.peers = make([]p2cPeer, len(pos))
	p.picks = make([]paddedCounter, len(pos))
	sumEff := 0.0
	for j, i := range pos {
		l := loadAt(loads, i)
		p.servers[j] = servers[i]
		pr := &p.peers[j]
		pr.eff = servers[i].Weight * ramp.note(o.SlowStart, l.Since, now)
		sumEff += pr.eff
		pr.base = o.CPUWeight*max(l.CPU, 0) + o.ConnWeight*float64(max(l.Connections, 0))/o.ConnRef
		pr.perPick = o.ConnWeight / o.ConnRef
		if l.CapacityMbps > 0 {
			pr.base += o.BandwidthWeight * max(l.BandwidthMbps, 0) / l.CapacityMbps
			pr.perPick += o.BandwidthWeight * o.PickMbps / l.CapacityMbps
		}
	}
	p.rampUntil = ramp.until
	p.uniform = true
	for j := range p.peers {
		p.peers[j].invW = sumEff / float64(len(pos)) / p.peers[j].eff
		if p.peers[j].eff != p.peers[0].eff {
			p.uniform = false
		}
	}
	if !p.uniform {
		p.buildAlias()
	}
	return p, nil
}

// buildAlias builds Walker's alias table over the effective weights (Vose's
// stable variant).
func (p *P2C) buildAlias() {
	n := len(p.peers)
	sum := 0.0
	for j := range p.peers {
		sum += p.peers[j].eff
	}
	p.aliasProb = make([]float64, n)
	p.alias = make([]int32, n)
	scaled := make([]float64, n)
	var small, large []int
	for j := range p.peers {
		scaled[j] = p.peers[j].eff * float64(n) / sum
		if scaled[j] < 1 {
			small = append(small, j)
		} else {
			large = append(large, j)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		p.aliasProb[s], p.alias[s] = scaled[s], int32(l)
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	for _, j := range large {
		p.aliasProb[j], p.alias[j] = 1, int32(j)
	}
	for _, j := range small { // rounding leftovers
		p.aliasProb[j], p.alias[j] = 1, int32(j)
	}
}

// draw samples one position in proportion to effective weight from a
// random word: the high 32 bits choose a column, the low 32 bits the coin.
func (p *P2C) draw(r uint64) int {
	j := int(((r >> 32) * uint64(len(p.peers))) >> 32)
	if float64(uint32(r))*(1.0/(1<<32)) < p.aliasProb[j] {
		return j
	}
	return int(p.alias[j])
}

// Name implements Policy.
func (p *P2C) Name() string { return "p2c" }

// RampingUntil is when the last slow-starting server reaches full weight.
func (p *P2C) RampingUntil() time.Time { return p.rampUntil }

// score is server j's load score now (lower is better).
func (p *P2C) score(j int) float64 {
	pr := &p.peers[j]
	return (pr.base + pr.perPick*float64(p.picks[j].n.Load())) * pr.invW
}

// choices draws two distinct positions. Equal weights: from one random
// word, the high and low halves each pick by multiply-shift (Lemire), the
// second from n-1 slots with the first skipped.
func (p *P2C) choices() (a, b int) {
	n := uint64(len(p.servers))
	if !p.uniform {
		// Weighted: redraw the second while it repeats the first; a few
		// tries suffice unless one server holds nearly all the weight, and
		// then any distinct second is as good a challenger as another.
		a = p.draw(p.rnd())
		for range 4 {
			if b = p.draw(p.rnd()); b != a {
				return a, b
			}
		}
		b = int((uint64(uint32(p.rnd())) * (n - 1)) >> 32)
		if b >= a {
			b++
		}
		return a, b
	}
	r := p.rnd()
	a = int(((r >> 32) * n) >> 32)
	b = int(((r & 0xffffffff) * (n - 1)) >> 32)
	if b >= a {
		b++
	}
	return a, b
}

// Pick implements Policy; it ignores both hashes.
func (p *P2C) Pick(_, _ uint64) int32 {
	switch len(p.servers) {
	case 0:
		return -1
	case 1:
		p.picks[0].n.Add(1)
		return p.servers[0].Index
	}
	a, b := p.choices()
	if p.score(b) < p.score(a) {
		a = b
	}
	p.picks[a].n.Add(1)
	return p.servers[a].Index
}

// Explain implements Policy: two fresh random choices, their scores, and
// every other server's score for comparison. It does not count a pick.
func (p *P2C) Explain(_, _ uint64) Explanation {
	x := Explanation{Policy: p.Name(), Pick: -1, Panic: p.panicked,
		Notes: []string{"power of two choices: the lower load score of two random servers; score = (cpu + bandwidth/capacity + connections/ref) / relative weight"}}
	if p.panicked {
		x.Notes = append(x.Notes, "fewer healthy servers than the panic threshold: health ignored")
	}
	if len(p.servers) == 0 {
		return x
	}
	a, b := 0, 0
	if len(p.servers) > 1 {
		a, b = p.choices()
		if p.score(b) < p.score(a) {
			a, b = b, a
		}
	}
	x.Pick = p.servers[a].Index
	for j := range p.servers {
		c := Candidate{Server: p.servers[j].Index, Name: p.servers[j].Name, Weight: p.servers[j].Weight,
			Effective: p.peers[j].eff, Score: p.score(j)}
		switch {
		case j == a:
			c.Chosen, c.Note = true, "sampled: lower score"
		case j == b:
			c.Note = "sampled: higher score"
		default:
			c.Note = "not sampled"
		}
		x.Candidates = append(x.Candidates, c)
	}
	return x
}
