package balance

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// NearestOptions configure the nearest policy's in-node choice.
type NearestOptions struct {
	// SlowStart scales a returning server's weight. Note that a weight
	// change moves the STBs whose scores it flips, so ramps here cost
	// stickiness; the default table leaves it off.
	SlowStart SlowStart `yaml:"-" json:"-"`
	// Panic is the healthy fraction under which health is ignored (0: never).
	Panic float64 `yaml:"-" json:"-"`
	// Now is the build time slow start is evaluated at; zero: time.Now().
	Now time.Time `yaml:"-" json:"-"`
}

// Nearest is the in-node choice of the nearest policy (node ranking picks
// the nearest node; this picks inside it): weighted rendezvous hashing of
// the client, score -weight / ln(u) with u uniform from the client's hash
// and the server's identity. One STB keeps its server while the node's set
// is stable, servers share STBs in proportion to their weights, and a server
// leaving moves only its own STBs. It is the policy steer used before
// balance existed, with the server's name instead of its index as identity.
//
// It keeps no per-pick state at all. Servers are grouped by weight: within
// a group the largest u wins without a logarithm, so a node of equal
// weights costs one hash per server and no ln.
type Nearest struct {
	servers  []Server // sorted by effective weight, descending
	ids      []uint64
	groups   []nearestGroup
	panicked bool
	eff      []float64
}

type nearestGroup struct {
	end    int // servers[prev end : end]
	weight float64
}

// NewNearest builds the policy over the eligible servers.
func NewNearest(servers []Server, loads []Load, o NearestOptions) (*Nearest, error) {
	return prefixed(newNearest(servers, loads, o))
}

func newNearest(servers []Server, loads []Load, o NearestOptions) (*Nearest, error) {
	if err := checkInput(servers, loads); err != nil {
		return nil, err
	}
	pos, panicked := eligible(servers, loads, o.Panic)
	if len(pos) > posMask {
		return nil, fmt.Errorf("nearest: %d servers in one node, at most %d", len(pos), posMask)
	}
	now := orNow(o.Now)
	type entry struct {
		s   Server
		eff float64
	}
	es := make([]entry, len(pos))
	for j, i := range pos {
		es[j] = entry{servers[i], servers[i].Weight * o.SlowStart.Factor(loadAt(loads, i).Since, now)}
	}
	slices.SortStableFunc(es, func(a, b entry) int {
		switch {
		case a.eff > b.eff:
			return -1
		case a.eff < b.eff:
			return 1
		}
		return 0
	})
	n := &Nearest{panicked: panicked}
	for j, e := range es {
		n.servers = append(n.servers, e.s)
		n.ids = append(n.ids, serverID(&e.s))
		n.eff = append(n.eff, e.eff)
		if j == 0 || e.eff != es[j-1].eff {
			n.groups = append(n.groups, nearestGroup{weight: e.eff})
		}
		n.groups[len(n.groups)-1].end = j + 1
	}
	return n, nil
}

// Name implements Policy.
func (n *Nearest) Name() string { return "nearest" }

// hrwHash is the rendezvous draw of (client, server): wyhash's mum, one
// 64x64->128-bit multiply folded, on inputs that are already well-mixed
// hashes. It costs about half of mix, and a node of 64 servers spends most
// of a pick here.
func hrwHash(client, server uint64) uint64 {
	hi, lo := bits.Mul64(client^0xa0761d6478bd642f, server^0xe7037ed1a0b428db)
	return hi ^ lo
}

// hrwU is the uniform draw as a float in (0, 1), from its top 53 bits: it
// orders as the integer draws do, which is all the within-group maximum
// needs.
func hrwU(x uint64) float64 { return (float64(x>>11) + 0.5) / (1 << 53) }

// Pick implements Policy; it uses only clientHash.
func (n *Nearest) Pick(_, clientHash uint64) int32 {
	if len(n.servers) == 0 {
		return -1
	}
	best, bestScore := 0, math.Inf(-1)
	start := 0
	for _, g := range n.groups {
		// The position rides in the low 16 bits of each draw, so the
		// group's maximum is a branch-free max (CMOV) rather than a
		// compare-and-branch that mispredicts about ln(n) times per pick.
		gk := uint64(0)
		for j := start; j < g.end; j++ {
			gk = max(gk, hrwHash(clientHash, n.ids[j])&^posMask|uint64(j))
		}
		gb := int(gk & posMask)
		if len(n.groups) == 1 {
			return n.servers[gb].Index
		}
		if sc := -g.weight / math.Log(hrwU(gk)); sc > bestScore {
			best, bestScore = gb, sc
		}
		start = g.end
	}
	return n.servers[best].Index
}

// posMask holds a server's position in the low bits of its draw; a node has
// fewer than 65,536 servers (NewNearest enforces it).
const posMask = 1<<16 - 1

// Explain implements Policy: every server's rendezvous score for this client.
func (n *Nearest) Explain(_, clientHash uint64) Explanation {
	x := Explanation{Policy: n.Name(), Pick: n.Pick(0, clientHash), Panic: n.panicked,
		Notes: []string{"weighted rendezvous hashing of the client: score = -weight / ln(u(client, server)); the highest wins"}}
	if n.panicked {
		x.Notes = append(x.Notes, "fewer healthy servers than the panic threshold: health ignored")
	}
	for j, s := range n.servers {
		c := Candidate{Server: s.Index, Name: s.Name, Weight: s.Weight, Effective: n.eff[j],
			Score: -n.eff[j] / math.Log(hrwU(hrwHash(clientHash, n.ids[j])&^posMask|uint64(j)))}
		if s.Index == x.Pick {
			c.Chosen, c.Note = true, "highest score"
		}
		x.Candidates = append(x.Candidates, c)
	}
	slices.SortStableFunc(x.Candidates, func(a, b Candidate) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(x.Candidates) > 1 {
		x.Candidates[0].Note = fmt.Sprintf("highest score (next %.4g)", x.Candidates[1].Score)
	}
	return x
}
