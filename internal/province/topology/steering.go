package topology

import (
	"math"
	"strconv"
	"strings"
)

// Steering turns on HLS Content Steering (and DASH-IF's) for a service:
// the scheduler answers the players' steering manifest requests with a
// pathway priority taken from the decision a new request would get, so
// that playing sessions follow drains, overflow and the QoE plan, moving
// onto each server at a bounded rate.
//
//	steering: {ttl_seconds: 10, moves_per_second: 5, move_burst: 10}
type Steering struct {
	// TTLSeconds is the manifest's TTL: how often a settled player asks
	// again, and so how long a drain takes to reach it. Default 10.
	TTLSeconds int `yaml:"ttl_seconds,omitempty" json:"ttl_seconds,omitempty"`
	// RetrySeconds is the TTL of an answer that deferred a move (the
	// target server at its move limit): the player asks again this soon.
	// Default 2; at most TTLSeconds.
	RetrySeconds int `yaml:"retry_seconds,omitempty" json:"retry_seconds,omitempty"`
	// MovesPerSecond is how many playing sessions one scheduler instance
	// moves onto one server per second; default 5.
	MovesPerSecond float64 `yaml:"moves_per_second,omitempty" json:"moves_per_second,omitempty"`
	// MoveBurst is how many of them may move at once: at most MoveBurst
	// moves onto a server in any MoveBurst / MovesPerSecond seconds.
	// Default MovesPerSecond rounded up: at most MovesPerSecond moves in
	// any second.
	MoveBurst int `yaml:"move_burst,omitempty" json:"move_burst,omitempty"`
	// Pathways is how many pathways a manifest lists, the chosen one
	// first (the rest are where a player goes by itself when its pathway
	// fails); default 3.
	Pathways int `yaml:"pathways,omitempty" json:"pathways,omitempty"`
}

// Steering defaults and bounds.
const (
	DefaultSteeringTTL      = 10
	DefaultSteeringRetry    = 2
	DefaultSteeringMoves    = 5.0
	DefaultSteeringPathways = 3
	MaxSteeringTTL          = 3600
	MaxSteeringPathways     = 8
	maxSteeringMoves        = 10000 // a target server's window holds MoveBurst times
)

// SteeringView is a service's steering with its defaults applied.
type SteeringView struct {
	TTL            int // seconds
	Retry          int // seconds
	MovesPerSecond float64
	MoveBurst      int
	Pathways       int
}

func (c *compiler) steering(p string, st *Steering) *SteeringView {
	v := &SteeringView{TTL: st.TTLSeconds, Retry: st.RetrySeconds, MovesPerSecond: st.MovesPerSecond, MoveBurst: st.MoveBurst, Pathways: st.Pathways}
	if v.TTL == 0 {
		v.TTL = DefaultSteeringTTL
	}
	if v.TTL < 1 || v.TTL > MaxSteeringTTL {
		c.add(p+".ttl_seconds", "%d is out of range [1, %d]", st.TTLSeconds, MaxSteeringTTL)
	}
	if v.Retry == 0 {
		v.Retry = min(DefaultSteeringRetry, v.TTL)
	}
	if v.Retry < 1 || v.Retry > v.TTL {
		c.add(p+".retry_seconds", "%d is out of range [1, ttl_seconds %d]", st.RetrySeconds, v.TTL)
	}
	if v.MovesPerSecond == 0 {
		v.MovesPerSecond = DefaultSteeringMoves
	}
	if math.IsNaN(v.MovesPerSecond) || v.MovesPerSecond <= 0 || v.MovesPerSecond > maxSteeringMoves {
		c.add(p+".moves_per_second", "%v is out of range (0, %d]", st.MovesPerSecond, maxSteeringMoves)
	}
	if v.MoveBurst == 0 {
		v.MoveBurst = max(1, int(math.Ceil(min(v.MovesPerSecond, maxSteeringMoves))))
	}
	if v.MoveBurst < 1 || v.MoveBurst > maxSteeringMoves {
		c.add(p+".move_burst", "%d is out of range [1, %d]", st.MoveBurst, maxSteeringMoves)
	}
	if v.Pathways == 0 {
		v.Pathways = DefaultSteeringPathways
	}
	if v.Pathways < 1 || v.Pathways > MaxSteeringPathways {
		c.add(p+".pathways", "%d is out of range [1, %d]", st.Pathways, MaxSteeringPathways)
	}
	return v
}

// String is the block on one line as written, as diffs show it: the
// fields set, "on (defaults)" for none, "(none)" when off.
func (st *Steering) String() string {
	if st == nil {
		return "(none)"
	}
	var parts []string
	add := func(k string, v int) {
		if v != 0 {
			parts = append(parts, k+"="+strconv.Itoa(v))
		}
	}
	add("ttl_seconds", st.TTLSeconds)
	add("retry_seconds", st.RetrySeconds)
	if st.MovesPerSecond != 0 {
		parts = append(parts, "moves_per_second="+strconv.FormatFloat(st.MovesPerSecond, 'f', -1, 64))
	}
	add("move_burst", st.MoveBurst)
	add("pathways", st.Pathways)
	if len(parts) == 0 {
		return "on (defaults)"
	}
	return strings.Join(parts, " ")
}
