package lab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/chaos"
	"github.com/anysched/anysched/internal/testbed/lab"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// The operator's worst minute, as offsets from the start of the load.
const (
	strandedFreezeAt  = 8 * time.Second // the primary is frozen...
	strandedFreezeFor = 8 * time.Second // ...well past the BGP hold time (3 s)
	// The resumed primary wins the route back in about 7 s (its BGP
	// session re-established), then plans with etcd for about 4 s.
	strandedQuorumAt  = 27 * time.Second
	strandedQuorumFor = 40 * time.Second // two of the three members dead
	strandedRun       = 85 * time.Second // the quorum's return, and the idle standby seen
)

// Bounds the test holds the product to.
const (
	// strandedSafeWithin: the primary plans in safe mode this soon after
	// the quorum went (the claims read times out in a quarter period; the
	// next solve is at most a period away), with a margin.
	strandedSafeWithin = 8 * time.Second
	// strandedIdleWithin: after etcd is back the center shows the standby's
	// plan idle this soon (leader election, the schedulers' registry).
	strandedIdleWithin = 15 * time.Second
	// The shares of the primary's answers sent to the fallback and at the
	// lowest rung. A primary left with its claims (the reserve) sends most
	// of the city there (60% FALLBACK, most at the lowest rung). Planning on
	// the whole city, and with the sessions that zapped away during a solve
	// given back in its plan, none (0.0% in two runs; 8-10% in bursts when
	// each safe-mode solve's quarter-period claims read left the new plan
	// holding every switched-away session).
	strandedMaxFallback   = 0.02
	strandedMaxLowestRung = 0.02
	// strandedMinMeasured: the quorum-loss window holds at least this many
	// of the primary's answers, or the shares say nothing.
	strandedMinMeasured = 50
)

// TestPrivilegedStrandedCapacity plays an operator's worst minute for a
// city's QoE capacity on the real daemons: hefei's primary is frozen and
// its standby takes the STBs (and the capacity); the primary resumes, wins
// the route back and makes one plan with etcd; then etcd loses quorum for
// 40 s. Ranked first, the primary must plan on the whole city in safe mode:
// its STBs stay in the city at good bitrates instead of going to the
// fallback at the lowest rung. When etcd is back the standby's plan is idle.
func TestPrivilegedStrandedCapacity(t *testing.T) {
	const prefix = "asc"
	cities := lab.AllCities()[:2]
	l := provinceWith(t, prefix, lab.Options{Cities: cities, Standby: map[int]bool{0: true}, EtcdMembers: 3, Edges: true, QoE: true})
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	const city = 0
	primary, standby := lab.PrimaryID(cities[city]), lab.StandbyID(cities[city])
	t.Cleanup(func() {
		if t.Failed() { // provinceWith shows the primary's; the standby's too
			t.Logf("--- %s log (tail):\n%s", standby, tail(l.Log(standby), 3000))
		}
	})
	sched := chaos.Schedule{Seed: 1, Duration: strandedRun, Faults: []chaos.Fault{
		{N: 1, Kind: chaos.FreezeScheduler, Target: primary, City: city, At: strandedFreezeAt, For: strandedFreezeFor},
		{N: 2, Kind: chaos.QuorumLoss, Target: "etcd1+etcd2", City: -1, At: strandedQuorumAt, For: strandedQuorumFor},
	}}

	// What the plans said while the run went on: each city scheduler's own
	// (/debug/alloc answers without etcd) and the center's registry
	// (schedctl status, which needs etcd).
	var plans planRecorder
	sctx, stopSampling := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	for _, inst := range []string{primary, standby} {
		bg.Add(1)
		go func() { defer bg.Done(); plans.sampleAlloc(sctx, l, inst) }()
	}
	bg.Add(1)
	go func() { defer bg.Done(); plans.sampleRegistry(sctx, l) }()

	var progress bytes.Buffer
	rep, err := l.RunChaos(context.Background(), lab.ChaosConfig{Seed: 1, Duration: strandedRun, Out: &progress, NoPlayers: true, Schedule: &sched})
	stopSampling()
	bg.Wait()
	t.Logf("\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("%s", out.String())
	for _, d := range rep.Done {
		if d.Err != "" || d.End.IsZero() {
			t.Fatalf("fault #%d %s %s was not carried out: %q", d.N, d.Kind, d.Target, d.Err)
		}
	}
	for _, v := range rep.Invariants {
		if !v.Pass() {
			t.Errorf("FAIL %s: %d bad, e.g. %v", v.Name, v.Bad, v.Examples)
		}
	}
	freeze, quorum := rep.Done[0], rep.Done[1]
	at := func(x time.Time) string { return fmt.Sprintf("+%.1fs", x.Sub(rep.Start).Seconds()) }

	// The primary answers hefei's STBs again before the quorum goes, and
	// plans once with etcd.
	var back time.Time
	for _, r := range rep.Requests {
		if r.City == city && r.OK() && r.Instance == primary && !r.Start.Before(freeze.End) && (back.IsZero() || r.Start.Before(back)) {
			back = r.Start
		}
	}
	if back.IsZero() || !back.Before(quorum.Begin) {
		t.Fatalf("the primary, resumed at %s, did not answer hefei's STBs again before the quorum loss at %s (first answer: %s)", at(freeze.End), at(quorum.Begin), at(back))
	}
	withEtcd := plans.allocPlans(primary, back, quorum.Begin)
	t.Logf("primary resumed %s, answers hefei again %s; %d plan(s) with etcd before the quorum loss %s: %s",
		at(freeze.End), at(back), len(withEtcd), at(quorum.Begin), describePlans(withEtcd, at))

	// The primary's first plan in safe mode after the quorum went.
	var onset time.Time
	for _, p := range plans.allocPlans(primary, quorum.Begin, quorum.End) {
		if p.SafeMode {
			onset = madeAt(p)
			break
		}
	}
	if onset.IsZero() {
		t.Fatalf("the primary made no plan in safe mode during the quorum loss %s..%s: %s", at(quorum.Begin), at(quorum.End),
			describePlans(plans.allocPlans(primary, quorum.Begin, quorum.End), at))
	}
	if d := onset.Sub(quorum.Begin); d > strandedSafeWithin {
		t.Errorf("the primary planned in safe mode %s after the quorum went (bound %s)", d.Round(100*time.Millisecond), strandedSafeWithin)
	}

	// Every plan it made from then until etcd was back: safe mode, the
	// whole city, nobody starved.
	outage := plans.allocPlans(primary, onset, quorum.End)
	for _, p := range outage {
		if !p.SafeMode || p.Idle || p.Starved > 0 || p.HeldKbps < p.CapacityKbps-1 {
			t.Errorf("the primary's plan made %s during the quorum loss is not a safe-mode plan on the whole city without starved sessions: safe mode %t, idle %t, %d planned, %d fallback, %d starved, holds %.0f of %.0f kbps",
				at(madeAt(p)), p.SafeMode, p.Idle, p.PlannedN, p.Fallback, p.Starved, p.HeldKbps, p.CapacityKbps)
		}
	}
	if len(outage) < 5 {
		t.Errorf("only %d of the primary's plans seen during the quorum loss (one every 2 s expected)", len(outage))
	}

	// hefei's STBs during the quorum loss, from the primary's first safe
	// plan on: all answered, in the city, not at the lowest rung.
	from := maxTime(onset, back)
	measured := tally(rep.Requests, city, from, quorum.End, primary)
	everyone := tally(rep.Requests, city, from, quorum.End, "")
	if everyone.failed > 0 {
		t.Errorf("%d of hefei's %d requests during the quorum loss failed (every one should get its 302)", everyone.failed, everyone.n)
	}
	if measured.ok < strandedMinMeasured {
		t.Fatalf("the primary answered only %d of hefei's requests during the quorum loss (%s..%s), at least %d needed to measure: %s",
			measured.ok, at(from), at(quorum.End), strandedMinMeasured, everyone.instances())
	}
	if s := measured.fallbackShare(); s >= strandedMaxFallback {
		t.Errorf("during the quorum loss the primary sent %.1f%% of hefei's STBs to the fallback (bound %.0f%%): it does not plan on the whole city", 100*s, 100*strandedMaxFallback)
	}
	if s := measured.lowestShare(); s >= strandedMaxLowestRung {
		t.Errorf("during the quorum loss the primary sent %.1f%% of hefei's STBs at the lowest rung, %d kbps (bound %.0f%%)", 100*s, topogen.Bitrates[0], 100*strandedMaxLowestRung)
	}

	// After the quorum came back: the center shows the standby idle.
	idle, regErr := plans.registryIdle(standby, quorum.End)
	switch {
	case idle.IsZero():
		t.Errorf("the center's status never showed %s's plan idle after etcd came back at %s (last: %s)", standby, at(quorum.End), regErr)
	case idle.Sub(quorum.End) > strandedIdleWithin:
		t.Errorf("the center's status showed %s's plan idle %s after etcd came back (bound %s)", standby, idle.Sub(quorum.End).Round(100*time.Millisecond), strandedIdleWithin)
	}
	normal, _ := plans.registryNormal(primary, quorum.End)

	// The report.
	var b strings.Builder
	fmt.Fprintf(&b, "stranded capacity: hefei's STBs by phase (answers by any scheduler; FALLBACK and lowest-rung shares of the 302s)\n")
	fmt.Fprintf(&b, "  %-28s %-15s %5s %6s %8s %7s  %-40s %s\n", "phase", "window", "reqs", "failed", "FALLBACK", "lowest", "answered by", "rungs kbps:n")
	row := func(name string, from, to time.Time, inst string) {
		s := tally(rep.Requests, city, from, to, inst)
		fmt.Fprintf(&b, "  %-28s %-15s %5d %6d %7.1f%% %6.1f%%  %-40s %s\n", name, at(from)+".."+at(to), s.n, s.failed, 100*s.fallbackShare(), 100*s.lowestShare(), s.instances(), s.rungHistogram())
	}
	end := rep.Start.Add(strandedRun)
	row("before freeze", rep.Start, freeze.Begin, "")
	row("primary frozen", freeze.Begin, freeze.End, "")
	row("primary back, etcd up", freeze.End, quorum.Begin, "")
	row("quorum lost", quorum.Begin, quorum.End, "")
	row("  measured (primary, safe)", from, quorum.End, primary)
	row("after (etcd back)", quorum.End, end, "")
	fmt.Fprintf(&b, "  hefei FALLBACK/302s per 5 s: %s\n", fallbackTimeline(rep.Requests, city, rep.Start, end, 5*time.Second))
	fmt.Fprintf(&b, "  primary: first safe-mode plan %s (%s after the quorum went), %d safe plans during the outage: %s\n",
		at(onset), onset.Sub(quorum.Begin).Round(100*time.Millisecond), len(outage), describePlans(summarize(outage), at))
	fmt.Fprintf(&b, "  after etcd: %s idle in the center's status %s, %s planning with etcd again %s\n", standby, orNever(idle, at), primary, orNever(normal, at))
	t.Logf("%s", b.String())
}

// planRecorder keeps the plans two city schedulers reported during a run.
type planRecorder struct {
	mu       sync.Mutex
	alloc    map[string][]allocator.Status // by instance, in the order read
	registry []registrySample
}

// registrySample is one read of the center's status.
type registrySample struct {
	at    time.Time
	plans map[string]registryPlan // by instance
	err   string
}

type registryPlan struct {
	plan    *pb.QoEPlan
	updated time.Time
}

// samplePace is how often the recorder reads: faster than the plans' period
// (2 s).
const samplePace = 500 * time.Millisecond

// sampleAlloc reads inst's current plan from its admin listener until ctx
// ends.
func (r *planRecorder) sampleAlloc(ctx context.Context, l *lab.Lab, inst string) {
	for ctx.Err() == nil {
		if body, err := l.AdminGet(ctx, inst, "/debug/alloc"); err == nil {
			var st allocator.Status
			if json.Unmarshal([]byte(body), &st) == nil && st.Planned {
				r.mu.Lock()
				if r.alloc == nil {
					r.alloc = map[string][]allocator.Status{}
				}
				r.alloc[inst] = append(r.alloc[inst], st)
				r.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(samplePace): // the sampling pace
		}
	}
}

// sampleRegistry reads the center's status (schedctl status -o json) until
// ctx ends; without etcd it fails, and says why.
func (r *planRecorder) sampleRegistry(ctx context.Context, l *lab.Lab) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second) // no quorum: the call hangs
		asked := time.Now()
		out, err := l.Schedctl(cctx, "status", "-o", "json")
		cancel()
		s := registrySample{at: asked, plans: map[string]registryPlan{}}
		var resp pb.StatusResponse
		if err == nil {
			err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal([]byte(out), &resp)
		}
		if err != nil {
			s.err = err.Error()
		}
		for _, in := range resp.GetInstances() {
			s.plans[in.GetId()] = registryPlan{plan: in.GetQoe(), updated: in.GetUpdatedAt().AsTime()}
		}
		r.mu.Lock()
		r.registry = append(r.registry, s)
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(samplePace): // the sampling pace
		}
	}
}

// allocPlans are inst's distinct plans made in [from, to), in order.
func (r *planRecorder) allocPlans(inst string, from, to time.Time) []allocator.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []allocator.Status
	seen := map[uint64]bool{}
	for _, st := range r.alloc[inst] {
		m := madeAt(st)
		if seen[st.Generation] || m.Before(from) || !m.Before(to) {
			continue
		}
		seen[st.Generation] = true
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b allocator.Status) int { return madeAt(a).Compare(madeAt(b)) })
	return out
}

// registryIdle is when the center's status first showed inst's plan idle,
// registered after since; zero if never, with what it showed last.
func (r *planRecorder) registryIdle(inst string, since time.Time) (time.Time, string) {
	return r.registryFirst(inst, since, func(p *pb.QoEPlan) bool { return p.GetIdle() })
}

// registryNormal is when the center's status first showed inst planning
// with etcd (not in safe mode, nobody starved), registered after since.
func (r *planRecorder) registryNormal(inst string, since time.Time) (time.Time, string) {
	return r.registryFirst(inst, since, func(p *pb.QoEPlan) bool { return !p.GetSafeMode() && !p.GetIdle() && p.GetStarved() == 0 })
}

func (r *planRecorder) registryFirst(inst string, since time.Time, ok func(*pb.QoEPlan) bool) (time.Time, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := "no status read after it"
	for _, s := range r.registry {
		if s.at.Before(since) {
			continue
		}
		p, found := s.plans[inst]
		switch {
		case s.err != "":
			last = s.err
		case !found || p.plan == nil:
			last = inst + " has no QoE plan in the status"
		case !p.updated.After(since):
			last = fmt.Sprintf("%s registered last at %s, before", inst, p.updated.Format("15:04:05.000"))
		case ok(p.plan):
			return s.at, ""
		default:
			last = fmt.Sprintf("%s: %v", inst, p.plan)
		}
	}
	return time.Time{}, last
}

func madeAt(st allocator.Status) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, st.MadeAt)
	return t
}

// summarize keeps the plans where what the test looks at changed.
func summarize(ps []allocator.Status) []allocator.Status {
	var out []allocator.Status
	key := func(p allocator.Status) string {
		return fmt.Sprint(p.SafeMode, p.Idle, p.Starved > 0, p.Fallback > 0, int(p.HeldKbps))
	}
	for i, p := range ps {
		if i == 0 || key(p) != key(ps[i-1]) || i == len(ps)-1 {
			out = append(out, p)
		}
	}
	return out
}

func describePlans(ps []allocator.Status, at func(time.Time) string) string {
	if len(ps) == 0 {
		return "none"
	}
	var parts []string
	for _, p := range ps {
		mode := "etcd"
		if p.SafeMode {
			mode = "safe"
		}
		if p.Idle {
			mode += ",idle"
		}
		var headroom int64
		for _, sv := range p.Servers {
			headroom += sv.LeftBandwidth
		}
		parts = append(parts, fmt.Sprintf("%s %s %d planned/%d fallback/%d starved, at desired %d, holds %.0f/%.0f kbps, headroom %d kbps",
			at(madeAt(p)), mode, p.PlannedN, p.Fallback, p.Starved, p.AtDesired, p.HeldKbps, p.CapacityKbps, headroom))
	}
	return strings.Join(parts, "; ")
}

// stbTally is what one city's STBs got in a window.
type stbTally struct {
	n, ok, failed, fallback, lowest int
	by                              map[string]int // 302s by the answering instance
	rungs                           map[int]int    // 302s by the bitrate in their redirect; -1: none readable
}

// tally counts city's requests that started in [from, to) and ended before
// to; inst, if set, keeps only the 302s that instance gave (and the
// failures).
func tally(reqs []chaos.Request, city int, from, to time.Time, inst string) stbTally {
	s := stbTally{by: map[string]int{}, rungs: map[int]int{}}
	for _, r := range reqs {
		if r.City != city || r.Start.Before(from) || !r.Start.Before(to) || r.End.After(to) {
			continue
		}
		if !r.OK() {
			s.n++
			s.failed++
			continue
		}
		if inst != "" && r.Instance != inst {
			continue
		}
		s.n++
		s.ok++
		s.by[r.Instance]++
		if r.Result == "FALLBACK" {
			s.fallback++
		}
		k := rungOf(r.Location)
		s.rungs[k]++
		if k == topogen.Bitrates[0] {
			s.lowest++
		}
	}
	return s
}

func (s stbTally) fallbackShare() float64 { return share(s.fallback, s.ok) }
func (s stbTally) lowestShare() float64   { return share(s.lowest, s.ok) }

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

func (s stbTally) instances() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.by)) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, s.by[k]))
	}
	return strings.Join(parts, " ")
}

func (s stbTally) rungHistogram() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.rungs)) {
		name := strconv.Itoa(k)
		if k < 0 {
			name = "?"
		}
		parts = append(parts, fmt.Sprintf("%s:%d", name, s.rungs[k]))
	}
	return strings.Join(parts, " ")
}

// rungOf is the bitrate (kbps) in a live redirect, whose path is
// /live/<channel>/<kbps>/... (topogen.URLTemplate); -1 if none.
func rungOf(location string) int {
	u, err := url.Parse(location)
	if err != nil {
		return -1
	}
	f := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if len(f) < 3 || f[0] != "live" {
		return -1
	}
	k, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return k
}

// fallbackTimeline is city's FALLBACK answers over its 302s, per step from
// start to end.
func fallbackTimeline(reqs []chaos.Request, city int, start, end time.Time, step time.Duration) string {
	var parts []string
	for from := start; from.Before(end); from = from.Add(step) {
		s := tally(reqs, city, from, from.Add(step), "")
		parts = append(parts, fmt.Sprintf("+%.0f:%d/%d", from.Sub(start).Seconds(), s.fallback, s.ok))
	}
	return strings.Join(parts, " ")
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func orNever(x time.Time, at func(time.Time) string) string {
	if x.IsZero() {
		return "never"
	}
	return at(x)
}
