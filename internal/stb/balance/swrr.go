package balance

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// SWRROptions configure smooth weighted round robin.
type SWRROptions struct {
	// MaxFails is nginx's max_fails: each failure lowers a server's
	// effective weight by weight/MaxFails. 0 means 1 (nginx's default).
	MaxFails int `yaml:"max_fails" json:"max_fails"`
	// SlowStart ramps servers whose Load.Since is recent.
	SlowStart SlowStart `yaml:"-" json:"-"` // Config.SlowStart in a Table
	// Panic is the healthy fraction under which health is ignored (0: never).
	Panic float64 `yaml:"-" json:"-"`
	// Now is the build time slow start is evaluated at; zero: time.Now().
	Now time.Time `yaml:"-" json:"-"`
}

// SWRR is nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer): every pick adds each server's effective
// weight to its current weight, takes the server with the largest current
// weight, and subtracts the total from it. For weights 5,1,1 that yields
// a a b a c a a: the heavy server's turns are spread out rather than
// bunched, which matters for a cache node taking bursts of channel changes.
//
// Like nginx, effective weights drop on failure (Fail, or Load.Failures at
// build) and creep back by one unit per pick; the target each creeps back to
// is the configured weight after adaptation and slow start.
//
// The algorithm is inherently sequential, so the per-pick state sits behind
// one mutex per node. The critical section is one pass over the node's
// servers (tens of nanoseconds for a few dozen servers), so even a node
// picked by every core at once serialises for a fraction of a request's
// cost; see the package documentation for the measurements.
type SWRR struct {
	servers   []Server // eligible servers, in the caller's order
	base      []float64
	panicked  bool
	rampUntil time.Time
	maxFails  float64

	mu    sync.Mutex
	peers []swrrPeer // guarded by mu; parallel to servers
}

// swrrPeer keeps one server's state together, for one cache line per pass.
type swrrPeer struct {
	current   float64
	effective float64
	weight    float64 // target: configured x slow start; immutable after build
}

// NewSWRR builds the policy over servers (weights already adapted, if the
// caller adapts them) with their health figures (nil: all healthy).
func NewSWRR(servers []Server, loads []Load, o SWRROptions) (*SWRR, error) {
	return prefixed(newSWRR(servers, loads, o))
}

func newSWRR(servers []Server, loads []Load, o SWRROptions) (*SWRR, error) {
	if err := checkInput(servers, loads); err != nil {
		return nil, err
	}
	if o.MaxFails < 0 {
		return nil, fmt.Errorf("swrr max_fails %d is negative", o.MaxFails)
	}
	if o.MaxFails == 0 {
		o.MaxFails = 1
	}
	now := orNow(o.Now)
	pos, panicked := eligible(servers, loads, o.Panic)
	s := &SWRR{panicked: panicked, maxFails: float64(o.MaxFails)}
	s.servers = make([]Server, len(pos))
	s.base = make([]float64, len(pos))
	s.peers = make([]swrrPeer, len(pos))
	var ramp rampTracker
	for j, i := range pos {
		l := loadAt(loads, i)
		s.servers[j] = servers[i]
		s.base[j] = servers[i].Weight
		w := servers[i].Weight * ramp.note(o.SlowStart, l.Since, now)
		eff := max(0, w-float64(l.Failures)*s.penalty(w))
		s.peers[j] = swrrPeer{weight: w, effective: eff}
	}
	s.rampUntil = ramp.until
	return s, nil
}

// Name implements Policy.
func (s *SWRR) Name() string { return "swrr" }

// RampingUntil is when the last slow-starting server reaches full weight
// (zero: none ramping): rebuild until then for the ramp to advance.
func (s *SWRR) RampingUntil() time.Time { return s.rampUntil }

// Pick implements Policy; it ignores both hashes.
func (s *SWRR) Pick(_, _ uint64) int32 {
	s.mu.Lock()
	best := s.next(true)
	s.mu.Unlock()
	if best < 0 {
		return -1
	}
	return s.servers[best].Index
}

// next runs one round of nginx's loop over the peers; advance false computes
// the choice without changing any state. s.mu must be held.
func (s *SWRR) next(advance bool) int {
	peers := s.peers
	best, bestCur, total := -1, 0.0, 0.0
	for i := range peers {
		p := &peers[i]
		cur := p.current + p.effective
		total += p.effective
		if advance {
			p.current = cur
			if p.effective < p.weight {
				p.effective = min(p.effective+1, p.weight)
			}
		}
		if best < 0 || cur > bestCur {
			best, bestCur = i, cur
		}
	}
	if advance && best >= 0 {
		peers[best].current -= total
	}
	return best
}

// Fail lowers the server's effective weight by weight/MaxFails (not below
// 0), as nginx does when a request to a peer fails. Front ends and health
// consumers call it on the current table between rebuilds.
func (s *SWRR) Fail(server int32) {
	for j := range s.servers {
		if s.servers[j].Index == server {
			s.mu.Lock()
			p := &s.peers[j]
			p.effective = max(0, p.effective-s.penalty(p.weight))
			s.mu.Unlock()
			return
		}
	}
}

// penalty is what one failure takes off a server of weight w: w/MaxFails,
// in whole units when w is whole, as nginx's integer division has it.
func (s *SWRR) penalty(w float64) float64 {
	if w == math.Trunc(w) {
		return math.Trunc(w / s.maxFails)
	}
	return w / s.maxFails
}

// Inherit carries prev's per-pick state (current weights, and effective
// weights lowered by failures) over to s for the servers both hold, matched
// by name (or index when unnamed). Tables are rebuilt on every health
// change, and without this a node picked less often than it is rebuilt
// would start every table at the top of the sequence and only ever send to
// its heaviest server. Call it before s is published.
func (s *SWRR) Inherit(prev *SWRR) {
	if prev == nil {
		return
	}
	at := make(map[string]int, len(prev.servers))
	for j := range prev.servers {
		at[identity(&prev.servers[j])] = j
	}
	prev.mu.Lock()
	defer prev.mu.Unlock()
	for j := range s.servers {
		k, ok := at[identity(&s.servers[j])]
		if !ok {
			continue
		}
		p, q := &s.peers[j], prev.peers[k]
		p.current = q.current
		// Failures lower the effective weight; a rise in the target (end
		// of a penalty, slow-start step) is still recovered pick by pick.
		p.effective = min(p.effective, q.effective+max(0, p.weight-q.weight))
	}
}

// identity is a server's matching key across rebuilds.
func identity(s *Server) string {
	if s.Name != "" {
		return s.Name
	}
	return fmt.Sprintf("#%d", s.Index)
}

// Explain implements Policy: the next server in the sequence, and every
// server's current and effective weight.
func (s *SWRR) Explain(_, _ uint64) Explanation {
	s.mu.Lock()
	best := s.next(false)
	peers := append([]swrrPeer(nil), s.peers...)
	s.mu.Unlock()
	x := Explanation{Policy: s.Name(), Pick: -1, Panic: s.panicked,
		Notes: []string{"smooth weighted round robin: the largest current+effective weight is next; score = current+effective"}}
	if s.panicked {
		x.Notes = append(x.Notes, "fewer healthy servers than the panic threshold: health ignored")
	}
	for j, p := range peers {
		c := Candidate{Server: s.servers[j].Index, Name: s.servers[j].Name, Weight: s.base[j], Effective: p.effective, Score: p.current + p.effective}
		if p.weight < s.base[j] {
			c.Note = fmt.Sprintf("slow start: target %.3g of %.3g", p.weight, s.base[j])
		}
		if p.effective < p.weight {
			c.Note = joinNote(c.Note, "recovering from failures")
		}
		if j == best {
			c.Chosen = true
			x.Pick = s.servers[j].Index
		}
		x.Candidates = append(x.Candidates, c)
	}
	return x
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
