// Package pathway answers HLS Content Steering (and DASH-IF content
// steering) manifest requests: the pathway priority of a playing session,
// taken from the decision a new request from the same client for the same
// channel would get, so that drains, overflow and QoE re-plans move
// sessions that are already playing, at most at a configured rate onto
// each server.
//
// Pathways are servers, named by server name. The multivariant playlist
// every edge serves is the same static file, so its variants (no
// PATHWAY-ID) form the base pathway "." wherever the redirect sent the
// player; the first manifest pins "." to the server the decision names
// (RELOAD-URI carries it in ParamBase), and every other server is a
// PATHWAY-CLONE of "." with its host as URI-REPLACEMENT HOST.
package pathway

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/prometheus/client_golang/prometheus"
)

// Prefix starts the path of a steering manifest: Prefix followed by the
// playback path the player loaded (/.well-known/anysched-steering/live/
// cctv1/index.m3u8), so the manifest is decided for the same channel and
// content key as the redirect.
const Prefix = "/.well-known/anysched-steering"

// Query parameters of a manifest request. The _HLS_ and _DASH_ ones are
// the players' (the pathway they are on, their throughput estimate);
// ParamBase is ours, carried by RELOAD-URI: the server the base pathway
// "." stands for.
const (
	ParamHLSPathway     = "_HLS_pathway"
	ParamHLSThroughput  = "_HLS_throughput"
	ParamDASHPathway    = "_DASH_pathway"
	ParamDASHThroughput = "_DASH_throughput"
	ParamBase           = "_anysched_base"
)

// BasePathway is the pathway of variants without a PATHWAY-ID.
const BasePathway = "."

// maxPathway bounds a pathway name (server names are at most 128).
const maxPathway = 128

// Query is what a manifest request says besides its path.
type Query struct {
	Pathway    string // the player's pathway; "" when it sent none
	Base       string // ParamBase: the server "." is; "" before the first answer
	DASH       bool   // asked with DASH's parameters: answer DASH's keys
	Throughput int64  // the player's estimate, bits/s; 0: not sent
}

// ParseQuery reads the steering parameters of a raw query. A malformed
// one is refused with the reason (a 400): a pathway or base that is not a
// pathway name, a throughput that is not a number, a parameter twice.
func ParseQuery(raw string) (Query, string) {
	var q Query
	var seen uint8
	for raw != "" {
		var kv string
		kv, raw = nextPair(raw)
		k, v, _ := strings.Cut(kv, "=")
		var bit uint8
		switch k {
		case ParamHLSPathway, ParamDASHPathway:
			bit = 1
			if !validPathway(v) {
				return q, k + " is not a pathway name"
			}
			q.Pathway, q.DASH = v, k == ParamDASHPathway
		case ParamHLSThroughput, ParamDASHThroughput:
			bit = 2
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return q, k + " is not a number of bits per second"
			}
			q.Throughput = n
		case ParamBase:
			bit = 4
			if v == BasePathway || !validPathway(v) {
				return q, k + " is not a server name"
			}
			q.Base = v
		default:
			continue
		}
		if seen&bit != 0 {
			return q, k + " given twice"
		}
		seen |= bit
	}
	return q, ""
}

// nextPair splits a raw query's first name=value pair off the rest.
func nextPair(raw string) (kv, rest string) {
	kv, rest, _ = strings.Cut(raw, "&")
	return kv, rest
}

// validPathway: "." or PATHWAY-ID's characters (letters, digits, '.',
// '-', '_'), as server names are.
func validPathway(v string) bool {
	if v == "" || len(v) > maxPathway {
		return false
	}
	for i := 0; i < len(v); i++ {
		b := v[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '.' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}

// Outcome is what a manifest decided.
type Outcome uint8

// Outcomes of a manifest.
const (
	// Pinned: the first manifest of a session; "." becomes the decision's
	// server, where the redirect sent the player moments before.
	Pinned Outcome = iota
	// Stay: the player is where the decision would send it.
	Stay
	// Moved: to the decision's server, within its move limit.
	Moved
	// Forced: moved whatever the limit, because the player's server is down
	// (failed health checks, ejected) or gone from the topology.
	Forced
	// Deferred: the decision's server is at its move limit; the player stays
	// (a drained server still serves) and asks again after the retry TTL.
	Deferred
	// Unsteerable: the decision names no server a pathway can reach (a
	// blackout, a bypass, nothing available): the player stays.
	Unsteerable
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"pinned", "stay", "moved", "forced", "deferred", "unsteerable"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Result is a manifest's decision, for the access log and explain.
type Result struct {
	Outcome Outcome
	From    int32 // the player's server; -1 when unknown
	To      int32 // the first pathway's server; -1 when none
}

// Steering answers manifests and holds the move windows. Safe for
// concurrent use.
type Steering struct {
	mu      sync.Mutex
	windows map[string]*window // by target server name

	manifests [numOutcomes]prometheus.Counter
	bad       prometheus.Counter
}

// New makes a Steering whose metrics are registered on reg (nil: none).
func New(reg prometheus.Registerer) *Steering {
	s := &Steering{windows: map[string]*window{}}
	mv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "anysched_steering_manifests_total",
		Help: "Content steering manifests answered, by outcome: pinned (first of a session), stay, moved (within the move limit), forced (the player's server is down), deferred (the target server was at its move limit), unsteerable (no server to steer to).",
	}, []string{"outcome"})
	for o := range numOutcomes {
		s.manifests[o] = mv.WithLabelValues(o.String())
	}
	s.bad = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "anysched_steering_bad_requests_total",
		Help: "Content steering manifest requests refused as malformed (bad _HLS_pathway, throughput or path).",
	})
	if reg != nil {
		reg.MustRegister(mv, s.bad)
	}
	return s
}

// Refused counts a manifest request refused before an answer was made.
func (s *Steering) Refused() { s.bad.Inc() }

// Answer appends to dst the manifest for a player that asked with q,
// given d, the decision (Peek, then the allocator's) for its playback
// path and query. now is the request's time (the move limit's clock).
// It counts a move only when it moves a player; it does no I/O.
func (s *Steering) Answer(dst []byte, eng *steer.Engine, d *steer.Decision, req steer.Request, q Query, now time.Time) ([]byte, Result) {
	snap := eng.Snapshot()
	st := snap.Services[d.Service].Steering
	res := Result{From: -1, To: -1}
	// The server the player is on, and the one "." stands for.
	base := int32(-1)
	if q.Base != "" {
		if i, ok := snap.Server(q.Base); ok {
			base = i
		}
	}
	to := int32(-1)
	if d.Result.Served() && d.Server >= 0 {
		to = d.Server
	}
	pinning := q.Base == "" && (q.Pathway == "" || q.Pathway == BasePathway)
	switch {
	case pinning:
		base, res.From = to, to
	case q.Pathway == "" || q.Pathway == BasePathway:
		res.From = base
	default:
		if i, ok := snap.Server(q.Pathway); ok {
			res.From = i
		}
	}
	from := res.From
	var list [topology.MaxSteeringPathways]int32
	n := 0
	add := func(sv int32) {
		if n < st.Pathways && sv >= 0 {
			for _, x := range list[:n] {
				if x == sv {
					return
				}
			}
			list[n] = sv
			n++
		}
	}
	ttl := st.TTL
	switch {
	case to < 0:
		res.Outcome = Unsteerable
		add(from)
	case pinning:
		res.Outcome = Pinned
		add(to)
	case from == to || settled(eng, d, from):
		res.Outcome = Stay
		add(from)
	case from < 0 || eng.Down(from) || !inTopologyPool(eng, d.Service, from):
		res.Outcome = Forced
		add(to)
	case s.take(snap.Servers[to].Name, st, now):
		res.Outcome = Moved
		add(to)
	default:
		res.Outcome = Deferred
		ttl = st.Retry
		add(from)
		add(to)
	}
	if n > 0 {
		res.To = list[0]
	}
	// The rest: where the player goes by itself if its pathway fails, in
	// the order a new STB's alternates would be tried; a drained server
	// the player is leaving last, since it still serves.
	if to >= 0 {
		add(to)
		var alt [topology.MaxSteeringPathways]int32
		for _, a := range eng.Alternates(d, req, st.Pathways, alt[:0]) {
			add(a)
		}
	}
	if from >= 0 && !eng.Down(from) {
		add(from)
	}
	s.manifests[res.Outcome].Inc()
	return appendManifest(dst, eng, d, req, q, list[:n], base, ttl), res
}

// settled: the player's server serves it as well as the decision's in
// the policy's eyes. swrr and p2c pick among a node's servers by turn or
// load, so another answer inside the same node is no reason to move.
func settled(eng *steer.Engine, d *steer.Decision, from int32) bool {
	if from < 0 || !eng.AvailableFor(d.Service, from) {
		return false
	}
	snap := eng.Snapshot()
	switch snap.Services[d.Service].Selection {
	case topology.SelectSWRR, topology.SelectP2C:
		return snap.Servers[from].Node == d.Node
	}
	return false
}

// inTopologyPool: the server is still one the service may use at all
// (drained or not). One taken out of the pool serves nothing of it.
func inTopologyPool(eng *steer.Engine, svc, server int32) bool {
	snap := eng.Snapshot()
	p := snap.Services[svc].Pool
	if p < 0 {
		return true
	}
	return snap.Pools[p].Has(server)
}

// window is one target server's recent moves: the times of the last
// MoveBurst of them, oldest at next. A move is let through when the
// oldest of them is a window (MoveBurst / MovesPerSecond) old: so any
// window of that length holds at most MoveBurst moves, MovesPerSecond a
// second over the long run, and a round of players asking together (they
// started together, they share a TTL) moves up to MoveBurst of them at
// once. A token bucket would allow MoveBurst more on top of the rate in
// any window.
type window struct {
	moves []int64 // unix nanoseconds; 0: free
	next  int
}

// take records a move onto server at now if its window lets one through.
func (s *Steering) take(server string, st *topology.SteeringView, now time.Time) bool {
	span := int64(float64(st.MoveBurst) / st.MovesPerSecond * 1e9) // ns
	at := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.windows[server]
	if b == nil || len(b.moves) != st.MoveBurst { // new, or the burst was changed
		if b == nil && len(s.windows) >= maxWindows { // servers come and go; forget idle history
			clear(s.windows)
		}
		b = &window{moves: make([]int64, st.MoveBurst)}
		s.windows[server] = b
	}
	if old := b.moves[b.next]; old != 0 && at-old < span {
		return false
	}
	// Concurrent answers take the lock in any order: record no time
	// before the last, so the ring stays sorted and next the oldest.
	last := b.next - 1
	if last < 0 {
		last = len(b.moves) - 1
	}
	b.moves[b.next] = max(at, b.moves[last])
	if b.next++; b.next == len(b.moves) {
		b.next = 0
	}
	return true
}

// maxWindows bounds the windows kept (names come from snapshots only, but
// servers are renamed and removed over months).
const maxWindows = 1 << 16
