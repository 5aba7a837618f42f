package balance

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Server is one candidate server of a node, as the policies see it.
type Server struct {
	// Index is the caller's handle for the server (steer: its snapshot
	// index); Pick returns it.
	Index int32
	// Name is the server's stable identity. Hash-based policies (chash ring
	// points, rendezvous scores) hash the name rather than the index, so that
	// adding a server elsewhere in the topology, which shifts indices, moves
	// no keys. Empty: the index is the identity.
	Name string
	// Weight is the configured relative weight within the node; 0 excludes
	// the server (drained). It is a float because adaptive weights and slow
	// start make fractional weights; the topology's integer weights convert
	// exactly.
	Weight float64
}

// Load is what health reports about one server: the figures the adaptive
// weights, p2c and slow start read. A nil []Load means "no figures": every
// server healthy, idle and long in service.
type Load struct {
	CPU           float64       // utilisation, 0..1
	BandwidthMbps float64       // egress now
	CapacityMbps  float64       // egress capacity; 0: unknown (the bandwidth dimension is ignored)
	Connections   int           // open client connections
	RTT           time.Duration // checker -> server round trip; 0: not measured
	Loss          float64       // probe loss, 0..1
	Healthy       bool
	// Since is when the server came back into service, for slow start; zero
	// means long ago (no ramp).
	Since time.Time
	// Failures is the count of recent failed probes or requests health
	// reports while the server is still in service; swrr lowers the server's
	// effective weight by Failures * weight / MaxFails, as nginx does per
	// failure, and recovers it pick by pick.
	Failures int
}

// Policy chooses one server of a node. Implementations are built by their
// constructors off the hot path; their configuration is immutable and
// whatever they mutate per pick (swrr's current weights, chash's recent
// loads, p2c's local pick counts) is concurrency-safe, so any number of
// goroutines may call Pick at once. Pick does not allocate.
type Policy interface {
	// Pick returns the chosen server's Index, or -1 when the node has no
	// eligible server. keyHash is the content key's hash (ContentHash or
	// HashKey; chash uses it), clientHash a well-mixed hash of the client
	// address (nearest uses it); policies ignore what they do not need.
	Pick(keyHash, clientHash uint64) int32
	// Explain says what Pick would choose now for these hashes, with every
	// candidate and its score, without changing any per-pick state (an
	// operator's explain must not steer traffic). It allocates.
	Explain(keyHash, clientHash uint64) Explanation
	// Name is the selection's name: swrr, chash, p2c or nearest.
	Name() string
}

// Failer is implemented by policies whose weights react to individual
// failures between rebuilds (swrr).
type Failer interface {
	Fail(server int32)
}

// Explanation is a policy's account of one pick, for operators.
type Explanation struct {
	Policy     string      `json:"policy"`
	Pick       int32       `json:"pick"` // server Index, -1 for none
	Panic      bool        `json:"panic,omitempty"`
	Notes      []string    `json:"notes,omitempty"`
	Candidates []Candidate `json:"candidates"`
}

// Candidate is one server a policy considered. Score's meaning depends on the
// policy and is spelled out in Note.
type Candidate struct {
	Server    int32   `json:"server"` // Index
	Name      string  `json:"name,omitempty"`
	Weight    float64 `json:"weight"`    // configured
	Effective float64 `json:"effective"` // after slow start, adaptation and failures
	Score     float64 `json:"score"`
	Chosen    bool    `json:"chosen,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// errLoads reports a loads slice that does not match the servers.
var errLoads = errors.New("loads must be nil or as long as servers")

// prefixed gives a constructor's error the package prefix, for callers
// outside the package; BuildTable prefixes them with the node instead.
func prefixed[P any](p P, err error) (P, error) {
	if err != nil {
		var zero P
		return zero, fmt.Errorf("balance: %w", err)
	}
	return p, nil
}

func checkInput(servers []Server, loads []Load) error {
	if loads != nil && len(loads) != len(servers) {
		return fmt.Errorf("%w (%d servers, %d loads)", errLoads, len(servers), len(loads))
	}
	for i := range servers {
		if !(servers[i].Weight >= 0) { // also rejects NaN
			return fmt.Errorf("server %d (%s): weight %v is negative", servers[i].Index, servers[i].Name, servers[i].Weight)
		}
	}
	return nil
}

// eligible returns the positions of the servers a policy may use: the
// healthy ones with a positive weight, or, when fewer than panic (a fraction)
// of the weighted servers are healthy, all of them: a node that has lost
// most of its servers more likely has a sick checker than sick servers, and
// ignoring health beats black-holing the node (Envoy's panic mode).
func eligible(servers []Server, loads []Load, panic float64) (pos []int, panicked bool) {
	weighted, healthy := 0, 0
	for i := range servers {
		if servers[i].Weight <= 0 {
			continue
		}
		weighted++
		if loads == nil || loads[i].Healthy {
			healthy++
			pos = append(pos, i)
		}
	}
	if weighted > 0 && panic > 0 && float64(healthy) < panic*float64(weighted) {
		pos = pos[:0]
		for i := range servers {
			if servers[i].Weight > 0 {
				pos = append(pos, i)
			}
		}
		return pos, true
	}
	return pos, false
}

func loadAt(loads []Load, i int) Load {
	if loads == nil {
		return Load{Healthy: true}
	}
	return loads[i]
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// paddedCounter is an atomic counter alone on its cache line(s), so that the
// counters of different servers, incremented by different cores, do not
// invalidate each other (false sharing). 128 bytes covers adjacent-line
// prefetching on x86.
type paddedCounter struct {
	n atomic.Int64
	_ [120]byte
}
