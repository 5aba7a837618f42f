package chaos

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/store"
)

// The bounds the invariants allow.
const (
	// Watchdog is how long a frozen scheduler keeps its BGP session: the
	// lab's watchdog interval (the units' WatchdogSec), after which it is
	// killed and the session closes with it. (Without the watchdog it was
	// the routers' hold time, 3 s in the lab.)
	Watchdog = 800 * time.Millisecond
	// RouteDetection is what a route change takes beyond that: the
	// router's best-path run and the STB's connection racing it.
	RouteDetection = time.Second
	// EdgeDetection bounds how long after an edge died or was drained a
	// scheduler may still send an STB to it: the embedded checker's
	// interval (1 s) times fall (2) plus its timeout, the QoE plan's
	// period (2 s), and a margin.
	EdgeDetection = 6 * time.Second
)

// Done is what the run did for one fault: when it struck, when the
// process exited (kill, term), when it was undone (restarted, continued,
// link up, undrained), and what went wrong doing it.
type Done struct {
	Fault
	Begin, Exited, End time.Time
	Detail             string // the leader killed, the apply's revision, ...
	Err                string
}

// Sample is one scheduler's snapshot revision, read from its admin
// listener during the run.
type Sample struct {
	Instance string
	At       time.Time
	Revision int64
}

// ClaimChange is one change of a scheduler's capacity claims in the
// store: Claims nil when the key was deleted (or its lease expired).
type ClaimChange struct {
	Revision int64
	Key      string
	Claims   *store.Claims
}

// Capacity is a server's capacity in the claims' units.
type Capacity struct{ Kbps, Compute float64 }

// Invariant is one check's outcome.
type Invariant struct {
	Name     string
	Checked  int      // what it looked at (requests, samples, revisions...)
	Bad      int      // how many broke it
	Examples []string // the first counterexamples
	Notes    []string
}

// Pass reports whether nothing broke the invariant.
func (v Invariant) Pass() bool { return v.Bad == 0 }

func (v *Invariant) fail(format string, args ...any) {
	v.Bad++
	if len(v.Examples) < 8 {
		v.Examples = append(v.Examples, fmt.Sprintf(format, args...))
	}
}

// Expect is an invariant over a list of things checked, bad ones listed.
func Expect(name string, checked int, bad []string) Invariant {
	v := Invariant{Name: name, Checked: checked}
	for _, b := range bad {
		v.fail("%s", b)
	}
	return v
}

// Window is what one routing fault (a kill or freeze of the scheduler its
// city's STBs are routed to) cost them.
type Window struct {
	Fault    int
	City     string
	Failed   int           // requests that failed after their retry, excused
	Last     time.Duration // the last excused failure's end, after the fault struck
	Takeover time.Duration // the first 302 by another scheduler, after the fault struck
}

// Routed reports whether the fault took away the scheduler routing brings
// city c's STBs to (primary is that scheduler while nothing else is down).
func (d Done) routed(primary string) bool {
	return (d.Kind == KillScheduler || d.Kind == FreezeScheduler) && d.Target == primary && !d.Begin.IsZero()
}

// CheckAnswers: every request got a 302 after at most one retry, except
// the ones that started inside a routing fault's window: from a try's
// length before it struck to Watchdog+RouteDetection after. It returns the
// windows measured per routing fault.
func CheckAnswers(reqs []Request, done []Done, cities, primaries []string, timeout time.Duration) (Invariant, []Window) {
	v := Invariant{Name: "every STB request got a 302 after at most one retry (outside routing-fault windows)", Checked: len(reqs)}
	var ws []Window
	idx := map[int]int{}
	for _, d := range done {
		if d.City >= 0 && d.routed(primaries[d.City]) {
			idx[d.N] = len(ws)
			ws = append(ws, Window{Fault: d.N, City: cities[d.City], Takeover: -1})
		}
	}
	excused := 0
	for _, r := range reqs {
		var by *Done
		for k := range done {
			d := &done[k]
			if d.City == r.City && d.routed(primaries[r.City]) && !r.Start.Before(d.Begin.Add(-2*timeout)) && !r.Start.After(d.Begin.Add(Watchdog+RouteDetection)) {
				by = d
				break
			}
		}
		if by != nil {
			w := &ws[idx[by.N]]
			if r.OK() && r.Instance != primaries[r.City] && r.End.After(by.Begin) && (w.Takeover < 0 || r.End.Sub(by.Begin) < w.Takeover) {
				w.Takeover = r.End.Sub(by.Begin)
			}
			if !r.OK() {
				excused++
				w.Failed++
				w.Last = max(w.Last, r.End.Sub(by.Begin))
			}
			continue
		}
		if !r.OK() {
			v.fail("%s STB %d at %s: %d tries, first %q, last %q", cities[r.City], r.STB, r.Start.Format("15:04:05.000"), r.Tries, r.FirstErr, r.Err)
		}
	}
	v.Notes = append(v.Notes, fmt.Sprintf("%d failed inside routing-fault windows (bound %s watchdog + %s detection)", excused, Watchdog, RouteDetection))
	return v, ws
}

// EdgeWindow is how long after an edge died or was drained STBs were still
// sent to it.
type EdgeWindow struct {
	Fault   int
	Address string
	Sent    int           // redirects to it after it went
	Last    time.Duration // the last one's start, after it went; -1 for none
}

// CheckEdges: no STB was sent to an edge that had been dead or drained for
// longer than EdgeDetection, until it came back.
func CheckEdges(reqs []Request, done []Done, edges []Edge, cities []string) (Invariant, []EdgeWindow) {
	v := Invariant{Name: fmt.Sprintf("no STB sent to an edge dead or drained for more than %s", EdgeDetection)}
	addr := map[string]string{} // daemon or server -> address
	for _, e := range edges {
		addr[e.Daemon], addr[e.Server] = e.Address, e.Address
	}
	var ws []EdgeWindow
	for _, d := range done {
		if (d.Kind != KillEdge && d.Kind != Drain) || d.Begin.IsZero() {
			continue
		}
		a := addr[d.Target]
		end := d.End
		if end.IsZero() {
			end = time.Now()
		}
		w := EdgeWindow{Fault: d.N, Address: a, Last: -1}
		for _, r := range reqs {
			if !r.OK() || redirectHost(r.Location) != a || r.Start.Before(d.Begin) || !r.Start.Before(end) {
				continue
			}
			w.Sent++
			w.Last = max(w.Last, r.Start.Sub(d.Begin))
			if r.Start.After(d.Begin.Add(EdgeDetection)) {
				v.fail("fault #%d %s %s: %s STB %d sent to %s at +%.1fs after it went (answered by %s)", d.N, d.Kind, d.Target, cities[r.City], r.STB, a, r.Start.Sub(d.Begin).Seconds(), r.Instance)
			}
		}
		ws = append(ws, w)
	}
	for _, r := range reqs {
		if r.OK() {
			v.Checked++
		}
	}
	return v, ws
}

func redirectHost(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return ""
	}
	return u.Host
}

// CheckRevisions: every revision a scheduler was seen answering from is
// one a topology apply made.
func CheckRevisions(samples []Sample, applied map[int64]bool) Invariant {
	v := Invariant{Name: "no scheduler answered from a topology revision never applied", Checked: len(samples)}
	seen := map[int64]int{}
	for _, s := range samples {
		if s.Revision == 0 {
			continue // no snapshot yet (just restarted)
		}
		seen[s.Revision]++
		if !applied[s.Revision] {
			v.fail("%s at %s: revision %d", s.Instance, s.At.Format("15:04:05.000"), s.Revision)
		}
	}
	revs := slices.Sorted(maps.Keys(seen))
	v.Notes = append(v.Notes, fmt.Sprintf("revisions seen %v; applied %v", revs, slices.Sorted(maps.Keys(applied))))
	return v
}

// CheckClaims replays the claims' changes in revision order and checks,
// at every revision, that no server's claims add up to more than its
// capacity: the claims of the instances of a region that take STBs with
// the best rank among them, and the idle instances' reserves. An instance
// ranked after one that takes STBs yields (store.Claims.Yielding, with
// fresh): its claims are left out while it does, and a commit of claims
// that should have yielded to a peer it had read is a failure. Old claims
// of an instance ranked before one taking STBs are left out too
// (store.Claims.Outdated: it is frozen or gone).
func CheckClaims(changes []ClaimChange, capacity map[string]Capacity, fresh time.Duration) Invariant {
	v := Invariant{Name: "capacity claims never exceeded a server's capacity at any revision"}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Revision < changes[j].Revision })
	cur := map[string]store.Claims{}
	region := func(key string) string {
		k := key[:strings.LastIndexByte(key, '/')]
		return k[strings.LastIndexByte(k, '/')+1:]
	}
	yielding := func(key string, c store.Claims) (string, bool) {
		for k, o := range cur {
			if k != key && region(k) == region(key) && c.Yielding(o, fresh) {
				return k, true
			}
		}
		return "", false
	}
	outdated := func(key string, c store.Claims) bool {
		for k, o := range cur {
			if k != key && region(k) == region(key) && c.Outdated(o, fresh) {
				return true
			}
		}
		return false
	}
	excluded := 0
	for i := 0; i < len(changes); {
		rev := changes[i].Revision
		for ; i < len(changes) && changes[i].Revision == rev; i++ {
			c := changes[i]
			if c.Claims == nil {
				delete(cur, c.Key)
				continue
			}
			// The commit read every peer's claims: one it yields to must
			// have made it idle.
			if k, ok := yielding(c.Key, *c.Claims); ok {
				v.fail("revision %d: %s committed claims while %s, ranked before it, takes STBs", rev, c.Key, k)
			}
			cur[c.Key] = *c.Claims
		}
		v.Checked++
		sum := map[string]Capacity{}
		for key, cl := range cur {
			if _, ok := yielding(key, cl); ok || outdated(key, cl) {
				excluded++
				continue
			}
			for srv, c := range cl.Servers {
				s := sum[srv]
				s.Kbps += c.BandwidthKbps
				s.Compute += c.Compute
				sum[srv] = s
			}
		}
		for _, srv := range slices.Sorted(maps.Keys(sum)) {
			s, limit := sum[srv], capacity[srv]
			const eps = 1e-6
			if s.Kbps > limit.Kbps*(1+eps)+eps || s.Compute > limit.Compute*(1+eps)+eps {
				v.fail("revision %d: %s claimed %.0f kbps / %.2f compute of %.0f / %.2f (%s)", rev, srv, s.Kbps, s.Compute, limit.Kbps, limit.Compute, claimants(cur, srv))
			}
		}
	}
	v.Notes = append(v.Notes, fmt.Sprintf("%d claim changes replayed; a yielding instance's or old claims left out at %d (instance, revision) pairs", len(changes), excluded))
	return v
}

func claimants(cur map[string]store.Claims, srv string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if c, ok := cur[k].Servers[srv]; ok {
			out = append(out, fmt.Sprintf("%s %.0f", k[strings.LastIndexByte(k, '/')+1:], c.BandwidthKbps))
		}
	}
	return strings.Join(out, ", ")
}

// Report is a whole run's outcome.
type Report struct {
	Schedule   Schedule
	Start      time.Time
	Cities     []string
	Done       []Done
	Windows    []Window
	Edges      []EdgeWindow
	Invariants []Invariant
	Requests   []Request
	// Players: what the real players saw, one line each (empty: none ran).
	Players []string
}

// Pass reports whether every invariant held.
func (r *Report) Pass() bool {
	for _, v := range r.Invariants {
		if !v.Pass() {
			return false
		}
	}
	return len(r.Invariants) > 0
}

func (r *Report) rel(t time.Time) string {
	if t.IsZero() {
		return "    -  "
	}
	return fmt.Sprintf("+%5.1fs", t.Sub(r.Start).Seconds())
}

// Write prints the report: the faults as they happened, the windows, the
// invariants with their counterexamples and the STBs' totals.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "\nchaos run: seed %d, %s\n", r.Schedule.Seed, r.Schedule.Duration)
	fmt.Fprintln(w, "faults (struck, exited, undone):")
	for _, d := range r.Done {
		line := fmt.Sprintf("  %s  struck %s exited %s undone %s", d.Fault, r.rel(d.Begin), r.rel(d.Exited), r.rel(d.End))
		if d.Detail != "" {
			line += "  " + d.Detail
		}
		if d.Err != "" {
			line += "  ERROR: " + d.Err
		}
		fmt.Fprintln(w, line)
	}
	if len(r.Windows) > 0 {
		fmt.Fprintf(w, "routing-fault windows (bound: watchdog %s + detection %s):\n", Watchdog, RouteDetection)
		for _, x := range r.Windows {
			take := "none seen"
			if x.Takeover >= 0 {
				take = fmt.Sprintf("%.2fs", x.Takeover.Seconds())
			}
			fmt.Fprintf(w, "  #%-2d %-10s %d failed after retry, last failure ended +%.2fs, first answer by another scheduler after %s\n", x.Fault, x.City, x.Failed, x.Last.Seconds(), take)
		}
	}
	if len(r.Edges) > 0 {
		fmt.Fprintf(w, "edge windows (bound %s):\n", EdgeDetection)
		for _, x := range r.Edges {
			last := "none after it went"
			if x.Last >= 0 {
				last = fmt.Sprintf("last sent +%.2fs after it went", x.Last.Seconds())
			}
			fmt.Fprintf(w, "  #%-2d %-16s %d redirects while gone, %s\n", x.Fault, x.Address, x.Sent, last)
		}
	}
	fmt.Fprintln(w, "invariants:")
	for _, v := range r.Invariants {
		verdict := "PASS"
		if !v.Pass() {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %d checked, %d bad\n", verdict, v.Name, v.Checked, v.Bad)
		for _, n := range v.Notes {
			fmt.Fprintf(w, "        %s\n", n)
		}
		for _, e := range v.Examples {
			fmt.Fprintf(w, "        counterexample: %s\n", e)
		}
	}
	fmt.Fprintln(w, "STBs:")
	type tot struct{ n, storm, ok, retried, failed int }
	per := make([]tot, len(r.Cities))
	by := make([]map[string]int, len(r.Cities))
	for i := range by {
		by[i] = map[string]int{}
	}
	for _, q := range r.Requests {
		t := &per[q.City]
		t.n++
		if q.Storm {
			t.storm++
		}
		if q.Tries > 1 {
			t.retried++
		}
		if q.OK() {
			t.ok++
			by[q.City][q.Instance]++
		} else {
			t.failed++
		}
	}
	var all tot
	for i, c := range r.Cities {
		t := per[i]
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(by[i])) {
			parts = append(parts, fmt.Sprintf("%s=%d", k, by[i][k]))
		}
		fmt.Fprintf(w, "  %-10s %6d requests (%d in storms), %d 302, %d retried, %d failed; answered by %s\n", c, t.n, t.storm, t.ok, t.retried, t.failed, strings.Join(parts, " "))
		all.n, all.storm, all.ok, all.retried, all.failed = all.n+t.n, all.storm+t.storm, all.ok+t.ok, all.retried+t.retried, all.failed+t.failed
	}
	fmt.Fprintf(w, "  total      %6d requests (%d in storms), %d 302, %d retried, %d failed\n", all.n, all.storm, all.ok, all.retried, all.failed)
	if len(r.Players) > 0 {
		fmt.Fprintln(w, "players:")
		for _, p := range r.Players {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "chaos run %s (seed %d)\n", verdict, r.Schedule.Seed)
}

// CapacityOf is a topology capacity (Mbps, transcode units) in the
// claims' units.
func CapacityOf(mbps, units float64) Capacity {
	return Capacity{Kbps: mbps * 1000, Compute: units}
}

// FreshnessLag bounds how long after an apply every scheduler that can
// reach etcd answers from its revision (the watch is immediate; the
// snapshot's confirm interval is 2 s).
const FreshnessLag = 10 * time.Second

// CheckFreshness: every scheduler answered from a snapshot at most
// FreshnessLag behind: after each apply's revision R was committed, no
// sample taken more than FreshnessLag later shows an older revision, unless
// that scheduler could not have followed (etcd's quorum lost or a member
// killed, its city's link cut, itself killed, frozen or stopped: from the
// fault to FreshnessLag after it ended). cityOf gives an instance's city
// index (-1: the center). The notes give, per apply, how long the
// schedulers took to show it.
func CheckFreshness(samples []Sample, done []Done, cityOf func(instance string) int) Invariant {
	v := Invariant{Name: "every scheduler answered from a snapshot at most 10s behind the applied topology (outside faults that cut it off)"}
	exempt := func(s Sample) bool {
		for _, f := range done {
			if f.Begin.IsZero() || s.At.Before(f.Begin) {
				continue
			}
			end := f.End
			if end.IsZero() {
				end = f.Begin
			}
			if s.At.After(end.Add(FreshnessLag)) {
				continue
			}
			switch f.Kind {
			case QuorumLoss, KillEtcdMember:
				return true
			case KillScheduler, FreezeScheduler, TermScheduler:
				if f.Target == s.Instance {
					return true
				}
			case CutLink:
				if f.City >= 0 && f.City == cityOf(s.Instance) {
					return true
				}
			}
		}
		return false
	}
	for _, d := range done {
		if d.Kind != Apply || d.Err != "" || d.End.IsZero() {
			continue
		}
		var rev int64
		if _, err := fmt.Sscanf(d.Detail, "applied revision %d", &rev); err != nil || rev == 0 {
			continue
		}
		slowest := time.Duration(-1)
		caught := map[string]time.Time{}
		for _, s := range samples {
			if s.Revision == 0 || s.At.Before(d.End) {
				continue
			}
			v.Checked++
			if s.Revision >= rev {
				if _, ok := caught[s.Instance]; !ok {
					caught[s.Instance] = s.At
					slowest = max(slowest, s.At.Sub(d.End))
				}
				continue
			}
			if s.At.After(d.End.Add(FreshnessLag)) && !exempt(s) {
				v.fail("%s at %s: revision %d, %s after revision %d was applied", s.Instance, s.At.Format("15:04:05.000"), s.Revision, s.At.Sub(d.End).Round(time.Millisecond), rev)
			}
		}
		if slowest >= 0 {
			v.Notes = append(v.Notes, fmt.Sprintf("revision %d: shown by %d schedulers, the last %s after the apply returned", rev, len(caught), slowest.Round(time.Millisecond)))
		}
	}
	return v
}
