// Package chaos is the lab's robustness run: a fault schedule drawn from a
// seed (math/rand/v2, so a seed replays the same run), an STB load with
// zapping storms that records every request, and the invariants checked
// from what the STBs saw and what the store holds. It knows nothing of
// namespaces: the lab (internal/testbed/lab, chaos*.go) carries the faults
// out and hands the records here.
package chaos

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The fault kinds. A scheduler or center fault's For is how long the
// process stays dead (or frozen) before the run restarts (or continues) it.
const (
	KillScheduler   Kind = "kill-scheduler"   // kill -9, restart after For
	FreezeScheduler Kind = "freeze-scheduler" // SIGSTOP, SIGCONT after For
	TermScheduler   Kind = "term-scheduler"   // SIGTERM (graceful), restart For after it exited
	KillCenter      Kind = "kill-center"
	FreezeCenter    Kind = "freeze-center"
	TermCenter      Kind = "term-center"
	KillEtcdMember  Kind = "kill-etcd-member" // kill -9 a member (Target "leader": the leader at the time), restart after For
	QuorumLoss      Kind = "quorum-loss"      // kill -9 two members, restart both after For
	KillEdge        Kind = "kill-edge"        // kill -9 a live edge, restart after For
	CutLink         Kind = "cut-link"         // the city router's link to the core down, up after For
	Apply           Kind = "apply"            // a topology apply (a server's weight changed)
	Drain           Kind = "drain"            // schedctl drain server, undrain after For
)

// Kinds is every kind, in the order a plan draws the mandatory ones from.
var Kinds = []Kind{KillScheduler, FreezeScheduler, TermScheduler, KillCenter, FreezeCenter, TermCenter,
	KillEtcdMember, QuorumLoss, KillEdge, CutLink, Apply, Drain}

// Edge is one live media edge a fault can kill or drain.
type Edge struct {
	City    int    // index into Targets.Cities
	Daemon  string // the lab's process name
	Server  string // the topology's server name
	Address string // host:port, as in the redirects
}

// Targets are what a plan can hit.
type Targets struct {
	Cities []string
	// Schedulers by city: the primary's instance id first, then the
	// standby's if the city has one.
	Schedulers  [][]string
	Center      string // the central scheduler's instance id
	EtcdMembers int    // 3 or 5: member k is "etcd<k>"
	Edges       []Edge // live edges
	Servers     []string
}

// Fault is one fault of a schedule.
type Fault struct {
	N      int
	Kind   Kind
	Target string // instance id, "etcd2", "leader", "etcd1+etcd3", edge daemon, city, server
	City   int    // the city it concerns, -1 for none
	At     time.Duration
	For    time.Duration // 0 for an apply
	// Weight: the apply's new weight for Target (a server).
	Weight int
	holds  []string
	until  time.Duration // holds its resources until then (For and the settling after it)
}

func (f Fault) String() string {
	s := fmt.Sprintf("#%-2d +%5.1fs  %-16s %-16s", f.N, f.At.Seconds(), f.Kind, f.Target)
	switch {
	case f.Kind == Apply:
		s += fmt.Sprintf(" weight %d", f.Weight)
	case f.For > 0:
		s += fmt.Sprintf(" for %.1fs", f.For.Seconds())
	}
	return s
}

// Schedule is a run's plan: the faults in order of their start and the
// zapping storms' offsets.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Faults   []Fault
	Storms   []time.Duration
}

// Timing of a plan.
const (
	Warmup = 5 * time.Second  // no fault before: the load's first answers
	Settle = 15 * time.Second // no fault after Duration-Settle: every restart is back by the end
)

// settle is how long after a fault's For its resources stay held: the
// restarted process announcing again, the members electing a leader.
func settle(k Kind) time.Duration {
	switch k {
	case KillScheduler, FreezeScheduler, TermScheduler, KillCenter, FreezeCenter, TermCenter:
		return 8 * time.Second
	case KillEtcdMember, QuorumLoss:
		return 8 * time.Second
	case Apply:
		return 3 * time.Second
	default:
		return 5 * time.Second
	}
}

// span is the range a kind's For is drawn from.
func span(k Kind) (lo, hi time.Duration) {
	switch k {
	case KillScheduler, KillCenter, KillEtcdMember:
		return 2 * time.Second, 5 * time.Second
	case FreezeScheduler, FreezeCenter:
		return 4 * time.Second, 7 * time.Second // past the BGP hold time (3 s)
	case TermScheduler, TermCenter:
		return 2 * time.Second, 4 * time.Second
	case QuorumLoss:
		return 3 * time.Second, 5 * time.Second
	case KillEdge, Drain:
		return 5 * time.Second, 8 * time.Second
	case CutLink:
		return 4 * time.Second, 7 * time.Second
	}
	return 0, 0
}

// Plan draws a schedule from seed: one fault of every kind the targets
// allow (one center fault, its kind drawn), then more until the run is
// full, each placed where none of the resources it holds is held by
// another fault (no two faults on the same target overlap; a city never
// loses its scheduler and the center at once, nor its scheduler and its
// link or an edge; an apply or drain that meets the center or the quorum
// away retries until they are back). The same seed, duration and
// targets give the same schedule.
func Plan(seed uint64, d time.Duration, t Targets) (Schedule, error) {
	if d < Warmup+Settle+10*time.Second {
		return Schedule{}, fmt.Errorf("chaos: a run of %s is too short; at least %s", d, Warmup+Settle+10*time.Second)
	}
	if len(t.Cities) == 0 || len(t.Schedulers) != len(t.Cities) {
		return Schedule{}, fmt.Errorf("chaos: targets need cities and their schedulers")
	}
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	s := Schedule{Seed: seed, Duration: d}
	// The center's fault holds every city's route and the quorum loss the
	// store: they go first, while there is room for them; the rest in a
	// drawn order.
	mandatory := []Kind{KillScheduler, FreezeScheduler, TermScheduler, KillEtcdMember, KillEdge, CutLink, Apply, Drain}
	rng.Shuffle(len(mandatory), func(i, j int) { mandatory[i], mandatory[j] = mandatory[j], mandatory[i] })
	mandatory = append([]Kind{[]Kind{KillCenter, FreezeCenter, TermCenter}[rng.IntN(3)], QuorumLoss}, mandatory...)
	extra := []Kind{KillScheduler, FreezeScheduler, TermScheduler, KillEdge, CutLink, Apply, Drain, KillEtcdMember}
	want := len(mandatory) + int((d-Warmup-Settle)/(10*time.Second))
	leaderKilled := false
	for _, k := range mandatory {
		for range 20 {
			if f, ok := draw(rng, k, t, &leaderKilled); ok && place(rng, &f, s.Faults, d) {
				s.Faults = append(s.Faults, f)
				break
			}
		}
	}
	for attempt := 0; len(s.Faults) < want && attempt < 300; attempt++ {
		if f, ok := draw(rng, extra[rng.IntN(len(extra))], t, &leaderKilled); ok && place(rng, &f, s.Faults, d) {
			s.Faults = append(s.Faults, f)
		}
	}
	slices.SortStableFunc(s.Faults, func(a, b Fault) int { return int(a.At - b.At) })
	for i := range s.Faults {
		s.Faults[i].N = i + 1
	}
	// A zapping storm every 8 to 15 s.
	for at := Warmup + time.Duration(rng.Int64N(int64(5*time.Second))); at < d-3*time.Second; at += 8*time.Second + time.Duration(rng.Int64N(int64(7*time.Second))) {
		s.Storms = append(s.Storms, at)
	}
	return s, nil
}

// draw picks a fault of kind k's target and length.
func draw(rng *rand.Rand, k Kind, t Targets, leaderKilled *bool) (Fault, bool) {
	f := Fault{Kind: k, City: -1}
	lo, hi := span(k)
	if hi > lo {
		f.For = lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	f.For = f.For.Round(100 * time.Millisecond)
	allRoutes := func() []string {
		var r []string
		for _, c := range t.Cities {
			r = append(r, "route:"+c)
		}
		return r
	}
	switch k {
	case KillScheduler, FreezeScheduler, TermScheduler:
		c := rng.IntN(len(t.Cities))
		ids := t.Schedulers[c]
		f.City, f.Target = c, ids[rng.IntN(len(ids))]
		f.holds = []string{"route:" + t.Cities[c]}
	case KillCenter, FreezeCenter, TermCenter:
		f.Target = t.Center
		f.holds = append(allRoutes(), "center")
	case KillEtcdMember:
		if t.EtcdMembers < 3 {
			return f, false
		}
		if !*leaderKilled || rng.IntN(2) == 0 {
			f.Target, *leaderKilled = "leader", true
		} else {
			f.Target = fmt.Sprintf("etcd%d", 1+rng.IntN(t.EtcdMembers))
		}
		f.holds = []string{"etcd"}
	case QuorumLoss:
		if t.EtcdMembers < 3 {
			return f, false
		}
		p := rng.Perm(t.EtcdMembers)[:t.EtcdMembers/2+1]
		slices.Sort(p)
		f.Target = fmt.Sprintf("etcd%d+etcd%d", p[0]+1, p[1]+1)
		if len(p) > 2 {
			f.Target += fmt.Sprintf("+etcd%d", p[2]+1)
		}
		f.holds = []string{"etcd"}
	case KillEdge, Drain:
		if len(t.Edges) == 0 {
			return f, false
		}
		e := t.Edges[rng.IntN(len(t.Edges))]
		f.City = e.City
		city := t.Cities[e.City]
		if k == KillEdge {
			f.Target = e.Daemon
			// The city's scheduler embeds the checker that sees the edge die.
			f.holds = []string{"edges:" + city, "route:" + city}
		} else {
			// schedctl retries while the center or the quorum is away.
			f.Target = e.Server
			f.holds = []string{"edges:" + city}
		}
	case CutLink:
		c := rng.IntN(len(t.Cities))
		f.City, f.Target = c, t.Cities[c]
		f.holds = []string{"route:" + t.Cities[c]}
	case Apply:
		if len(t.Servers) == 0 {
			return f, false
		}
		f.Target = t.Servers[rng.IntN(len(t.Servers))]
		f.Weight = 50 + 10*rng.IntN(10)
		f.holds = []string{"apply"}
	default:
		return f, false
	}
	return f, true
}

// place draws f's start where none of its resources is held, within the
// run's fault window.
func place(rng *rand.Rand, f *Fault, placed []Fault, d time.Duration) bool {
	last := d - Settle - f.For - settle(f.Kind)
	if last <= Warmup {
		return false
	}
	for range 30 {
		at := (Warmup + time.Duration(rng.Int64N(int64(last-Warmup)))).Round(100 * time.Millisecond)
		until := at + f.For + settle(f.Kind)
		if !clashes(f.holds, at, until, placed) {
			f.At, f.until = at, until
			return true
		}
	}
	return false
}

func clashes(holds []string, from, until time.Duration, placed []Fault) bool {
	for _, p := range placed {
		if from >= p.until || p.At >= until {
			continue
		}
		for _, h := range holds {
			if slices.Contains(p.holds, h) {
				return true
			}
		}
	}
	return false
}

// Write prints the schedule: the seed, the faults and the storms.
func (s Schedule) Write(w io.Writer) {
	fmt.Fprintf(w, "chaos schedule: seed %d, %s, %d faults, %d zapping storms\n", s.Seed, s.Duration, len(s.Faults), len(s.Storms))
	for _, f := range s.Faults {
		fmt.Fprintf(w, "  %s\n", f)
	}
	var st []string
	for _, at := range s.Storms {
		st = append(st, fmt.Sprintf("+%.1fs", at.Seconds()))
	}
	fmt.Fprintf(w, "  storms at %s\n", strings.Join(st, " "))
}

// KindsIn lists the kinds a schedule holds, in Kinds order.
func (s Schedule) KindsIn() []Kind {
	var out []Kind
	for _, k := range Kinds {
		if slices.ContainsFunc(s.Faults, func(f Fault) bool { return f.Kind == k }) {
			out = append(out, k)
		}
	}
	return out
}
