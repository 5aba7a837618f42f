package balance

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/stb/geo"
)

// Point is a WGS84 location in degrees. topology.Location converts to it
// directly: balance.Point(loc).
type Point struct{ Lat, Lon float64 }

// RankBy says how RankNodes orders nodes.
type RankBy uint8

// Node orderings.
const (
	// RankDistance: great-circle distance from the client's location.
	RankDistance RankBy = iota
	// RankRTTLoss: the Go edge load-balancing write-up's network distance,
	// RTTWeight x rtt/RTTRef + LossWeight x -ln(1-loss), with the RTT and
	// loss the checkers measured; a node without measurements gets an RTT
	// estimated from its distance and no loss.
	RankRTTLoss
)

var rankByNames = [...]string{"distance", "rtt_loss"}

func (r RankBy) String() string {
	if int(r) < len(rankByNames) {
		return rankByNames[r]
	}
	return fmt.Sprintf("RankBy(%d)", r)
}

// MarshalText implements encoding.TextMarshaler.
func (r RankBy) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler ("distance" or "rtt_loss").
func (r *RankBy) UnmarshalText(b []byte) error {
	for i, n := range rankByNames {
		if string(b) == n {
			*r = RankBy(i)
			return nil
		}
	}
	return fmt.Errorf("unknown node ranking %q (want distance or rtt_loss)", b)
}

// RankOptions configure node ranking.
type RankOptions struct {
	By RankBy `yaml:"by" json:"by"`
	// RTTRef normalises RTT; 0 means 20ms (a far node within a province).
	RTTRef time.Duration `yaml:"rtt_ref" json:"rtt_ref"`
	// RTTWeight and LossWeight weigh the two terms; both 0 means 1 and 50.
	// The Go edge load-balancing write-up weighs them 0.7 : 0.3, which makes 10% loss cost about as
	// much as a tenth of the reference RTT; but TCP throughput falls as
	// 1/(RTT x sqrt(loss)) (Mathis et al.), so for video loss is the worse
	// harm: with the defaults 1% loss costs as much as 10ms more RTT, 5% as
	// much as 51ms.
	RTTWeight  float64 `yaml:"rtt_weight" json:"rtt_weight"`
	LossWeight float64 `yaml:"loss_weight" json:"loss_weight"`
	// RTTPerKm estimates the RTT of an unmeasured node from its distance;
	// 0 means 10us per km (light in fibre covers 200 km per ms one way, and
	// real routes run about twice the great circle).
	RTTPerKm time.Duration `yaml:"rtt_per_km" json:"rtt_per_km"`
	// Panic skips a node whose healthy fraction is below it (0: never).
	Panic float64 `yaml:"panic_threshold" json:"panic_threshold"`
	// MaxUtilisation skips a node whose load reaches this fraction of its
	// capacity; 0 means 1 (skip only when full).
	MaxUtilisation float64 `yaml:"max_utilisation" json:"max_utilisation"`
}

// NodeState is what ranking knows about one node.
type NodeState struct {
	Index   int32
	Loc     Point
	Servers int // servers with a positive weight
	Healthy int // of those, healthy
	// LoadMbps and CapacityMbps are the node's egress now and its capacity
	// (0: unknown, never over capacity).
	LoadMbps, CapacityMbps float64
	// RTT and Loss are the checkers' measurements; Measured says they exist.
	RTT      time.Duration
	Loss     float64
	Measured bool
}

// Skip says why ranking passed over a node.
type Skip uint8

// Skip reasons.
const (
	SkipNone         Skip = iota
	SkipNoServer          // no healthy server at all
	SkipPanic             // healthy fraction below the panic threshold
	SkipOverCapacity      // load at or above MaxUtilisation of capacity
)

var skipNames = [...]string{"", "no healthy server", "below the panic threshold", "over capacity"}

func (s Skip) String() string {
	if int(s) < len(skipNames) {
		return skipNames[s]
	}
	return fmt.Sprintf("Skip(%d)", s)
}

// RankedNode is one node in ranking order.
type RankedNode struct {
	Index     int32   `json:"node"`
	DistanceM float64 `json:"distance_m"`
	// Score orders the nodes, lower first: kilometres for RankDistance, the
	// RTT + loss distance for RankRTTLoss.
	Score    float64       `json:"score"`
	RTT      time.Duration `json:"rtt"` // measured or estimated
	Measured bool          `json:"measured,omitempty"`
	Skip     Skip          `json:"skip,omitempty"`
}

// RankNodes orders nodes for a client at from: the usable nodes by score,
// lower first, then the skipped ones (no healthy server, below the panic
// threshold, over capacity), also by score, each marked with its reason. The
// caller walks the list and takes the first node whose Skip is SkipNone; when
// every node is skipped, the first skipped one is the least bad place to
// send the STB (and its node policy, in panic mode, ignores health).
//
// Ranking runs off the hot path (per zone, on every table build); it
// allocates the result.
func RankNodes(nodes []NodeState, from Point, o RankOptions) []RankedNode {
	o = o.withDefaults()
	out := make([]RankedNode, len(nodes))
	for i, n := range nodes {
		d := geo.DistanceM(from.Lat, from.Lon, n.Loc.Lat, n.Loc.Lon)
		r := RankedNode{Index: n.Index, DistanceM: d, Measured: n.Measured}
		r.RTT = time.Duration(d / 1000 * float64(o.RTTPerKm))
		loss := 0.0
		if n.Measured {
			r.RTT, loss = n.RTT, n.Loss
		}
		switch o.By {
		case RankRTTLoss:
			r.Score = RTTLossDistance(r.RTT, loss, o)
		default:
			r.Score = d / 1000
		}
		switch {
		case n.Healthy <= 0:
			r.Skip = SkipNoServer
		case o.Panic > 0 && float64(n.Healthy) < o.Panic*float64(n.Servers):
			r.Skip = SkipPanic
		case n.CapacityMbps > 0 && n.LoadMbps >= o.MaxUtilisation*n.CapacityMbps:
			r.Skip = SkipOverCapacity
		}
		out[i] = r
	}
	slices.SortStableFunc(out, func(a, b RankedNode) int {
		if (a.Skip == SkipNone) != (b.Skip == SkipNone) {
			if a.Skip == SkipNone {
				return -1
			}
			return 1
		}
		switch {
		case a.Score < b.Score:
			return -1
		case a.Score > b.Score:
			return 1
		}
		return 0
	})
	return out
}

// RTTLossDistance is the network distance of the Go edge load-balancing write-up:
// RTTWeight x rtt/RTTRef + LossWeight x -ln(1-loss). The logarithm makes
// loss cost little while rare and without bound as it nears 1: a path that
// drops everything is infinitely far.
func RTTLossDistance(rtt time.Duration, loss float64, o RankOptions) float64 {
	o = o.withDefaults()
	loss = min(max(loss, 0), 1)
	return o.RTTWeight*float64(rtt)/float64(o.RTTRef) - o.LossWeight*math.Log1p(-loss)
}

func (o RankOptions) withDefaults() RankOptions {
	if o.RTTRef <= 0 {
		o.RTTRef = 20 * time.Millisecond
	}
	if o.RTTWeight == 0 && o.LossWeight == 0 {
		o.RTTWeight, o.LossWeight = 1, 50
	}
	if o.RTTPerKm <= 0 {
		o.RTTPerKm = 10 * time.Microsecond
	}
	if o.MaxUtilisation <= 0 {
		o.MaxUtilisation = 1
	}
	return o
}
