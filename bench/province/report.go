package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"
)

const (
	docBegin = "<!-- province:begin -->"
	docEnd   = "<!-- province:end -->"
	// designViewers is the design's prime-time province (docs/capacity.md).
	designViewers = 3_000_000
)

// window is the steady part of the run: from the first sample after every
// session has made its first request (one refresh interval) to the end.
func (r *Results) window() (from, to float64) {
	to = r.Settings.Duration.Seconds() + r.Settings.Sample.Seconds()
	from = r.Settings.Refresh.Seconds() + r.Settings.Sample.Seconds()
	if from >= to-r.Settings.Sample.Seconds() { // a run shorter than its ramp: all of it
		from = r.Settings.Sample.Seconds()
	}
	return from, to
}

// steady are the samples of the steady window (never the first, which
// only sets the counters' starting points).
func (r *Results) steady() []Sample {
	from, to := r.window()
	var out []Sample
	for i, s := range r.Samples {
		if i > 0 && s.T >= from-1 && s.T <= to+1 {
			out = append(out, s)
		}
	}
	return out
}

// inStorm says whether a sample's interval (T-sample, T] overlaps a storm.
func (r *Results) inStorm(t float64) bool {
	w, d := r.Settings.StormWindow.Seconds(), r.Settings.Sample.Seconds()
	for _, s := range r.Storms {
		if s < t && s+w > t-d {
			return true
		}
	}
	return false
}

// DaemonSummary is one daemon over the steady window.
type DaemonSummary struct {
	Name             string
	N                int
	CPUMean, CPUMax  float64 // % of one core
	RSSEnd, RSSMax   float64 // MiB
	RSSStart         float64
	CPUStorm, CPUOff float64 // mean in the intervals with a storm, and without
}

func (r *Results) daemons() []DaemonSummary {
	st := r.steady()
	byName := map[string]*DaemonSummary{}
	var order []string
	type acc struct{ storm, off, ns, no float64 }
	accs := map[string]*acc{}
	for _, s := range r.Samples[:min(1, len(r.Samples))] {
		for _, p := range s.Procs {
			byName[p.Name] = &DaemonSummary{Name: p.Name, N: p.N, RSSStart: p.RSS}
			order = append(order, p.Name)
		}
	}
	for _, s := range st {
		storm := r.inStorm(s.T)
		for _, p := range s.Procs {
			d := byName[p.Name]
			if d == nil {
				d = &DaemonSummary{Name: p.Name}
				byName[p.Name] = d
				order = append(order, p.Name)
			}
			a := accs[p.Name]
			if a == nil {
				a = &acc{}
				accs[p.Name] = a
			}
			d.N = max(d.N, p.N)
			d.CPUMean += p.CPU / float64(len(st))
			d.CPUMax = max(d.CPUMax, p.CPU)
			d.RSSMax = max(d.RSSMax, p.RSS)
			d.RSSEnd = p.RSS
			if storm {
				a.storm += p.CPU
				a.ns++
			} else {
				a.off += p.CPU
				a.no++
			}
		}
	}
	out := make([]DaemonSummary, 0, len(order))
	for _, n := range order {
		d := byName[n]
		if a := accs[n]; a != nil {
			if a.ns > 0 {
				d.CPUStorm = a.storm / a.ns
			}
			if a.no > 0 {
				d.CPUOff = a.off / a.no
			}
		}
		out = append(out, *d)
	}
	slices.SortStableFunc(out, func(a, b DaemonSummary) int { return procRank(a.Name) - procRank(b.Name) })
	return out
}

// PlannerSummary is one scheduler's planner over the steady window.
type PlannerSummary struct {
	Instance, City                string
	Target                        int // the city's sessions (the primary's row)
	Sessions, Planned, Fallback   float64
	Solves                        float64
	SolveMean                     float64 // s
	SolveP50, SolveP99, SolveMax  float64 // upper bounds of the histogram buckets, s
	GapMean, GapMax               float64
	Timeouts                      float64
	AtDesired                     float64
	Requests                      float64 // answered in the window
	EtcdWriteBytes                float64 // per second; -1: not exported
	HeapEnd, Samples, UpSamples   float64
	SessionsEnd, PlannedEnd, Idle float64
	StarvedMean, FallbackEndShare float64
	solveSum, gapN, desiredN      float64
	hist                          []float64
}

func (r *Results) planners() []PlannerSummary {
	st := r.steady()
	idx := map[string]int{}
	var out []PlannerSummary
	target := map[string]int{}
	for _, c := range r.Settings.Cities {
		target[lab.PrimaryID(c.City)] = c.Sessions
	}
	for _, s := range st {
		for _, p := range s.Planners {
			i, ok := idx[p.Instance]
			if !ok {
				i = len(out)
				idx[p.Instance] = i
				out = append(out, PlannerSummary{Instance: p.Instance, City: p.City, Target: target[p.Instance], EtcdWriteBytes: -1, hist: make([]float64, len(SolveBuckets))})
			}
			ps := &out[i]
			ps.Samples++
			if !p.Up {
				continue
			}
			ps.UpSamples++
			ps.Sessions += p.Sessions
			ps.Planned += p.Planned
			ps.Fallback += p.Fallback
			ps.StarvedMean += p.Starved
			ps.Solves += p.Solves
			ps.solveSum += p.SolveSum
			ps.Timeouts += p.Timeouts
			ps.Requests += p.Requests
			ps.Idle += p.Idle
			if p.Solves > 0 || p.Planned > 0 {
				ps.GapMean += p.Gap
				ps.GapMax = max(ps.GapMax, p.Gap)
				ps.gapN++
				ps.AtDesired += p.AtDesired
				ps.desiredN++
			}
			for k := range min(len(p.SolveHist), len(ps.hist)) {
				ps.hist[k] += p.SolveHist[k]
			}
			if p.EtcdWriteBytes >= 0 {
				ps.EtcdWriteBytes = max(ps.EtcdWriteBytes, 0) + p.EtcdWriteBytes
			}
			ps.HeapEnd, ps.SessionsEnd, ps.PlannedEnd = p.Heap, p.Sessions, p.Planned
		}
	}
	from, to := r.window()
	span := to - from + r.Settings.Sample.Seconds()
	for i := range out {
		ps := &out[i]
		if n := ps.UpSamples; n > 0 {
			ps.Sessions /= n
			ps.Planned /= n
			ps.Fallback /= n
			ps.StarvedMean /= n
			ps.Idle /= n
		}
		if ps.gapN > 0 {
			ps.GapMean /= ps.gapN
			ps.AtDesired /= ps.desiredN
		}
		if ps.Solves > 0 {
			ps.SolveMean = ps.solveSum / ps.Solves
			ps.SolveP50 = histBound(ps.hist, ps.Solves, 0.5)
			ps.SolveP99 = histBound(ps.hist, ps.Solves, 0.99)
			ps.SolveMax = histBound(ps.hist, ps.Solves, 1)
		}
		if ps.EtcdWriteBytes >= 0 && span > 0 {
			ps.EtcdWriteBytes /= span
		}
	}
	slices.SortStableFunc(out, func(a, b PlannerSummary) int { return procRank(a.Instance) - procRank(b.Instance) })
	return out
}

// histBound is the upper bound of the solve-time bucket holding quantile q
// (cumulative counts per SolveBuckets; above the last: +Inf).
func histBound(cum []float64, n, q float64) float64 {
	want := math.Ceil(q * n)
	for k, c := range cum {
		if c >= want {
			return SolveBuckets[k]
		}
	}
	return math.Inf(1)
}

// EtcdSummary is the cluster over the run.
type EtcdSummary struct {
	Members                        int
	PutsMean, PutsMax              float64 // per second (the leader's count: every member applies every put)
	TxnsMean, DeletesMean          float64
	ProposalsMean                  float64
	RecvMean, RecvMax              float64 // bytes/s, summed over the members
	SentMean                       float64
	DBStart, DBEnd, DBMax          float64 // bytes, the largest member
	InUseStart, InUseEnd, InUseMax float64
	RevStart, RevEnd               float64
	RevPerS, RevPerSSteady         float64
	KeysStart, KeysEnd             float64
	CompactedStart, CompactedEnd   float64
	T0, T1                         float64
	Leaders                        []string
	AllUp                          bool
	PutsStorm, PutsOff             float64
}

// cluster reduces a sample's members: the leader's counters (any member's
// if none says it leads), the sums of the per-member traffic.
func cluster(s Sample) (lead EtcdSample, recv, sent, db, inUse float64, up int) {
	for _, e := range s.Etcd {
		if !e.Up {
			continue
		}
		up++
		if e.Leader || lead.Member == "" {
			lead = e
		}
		recv += e.RecvBytes
		sent += e.SentBytes
		db = max(db, e.DBSize)
		inUse = max(inUse, e.DBInUse)
	}
	return lead, recv, sent, db, inUse, up
}

func (r *Results) etcd() EtcdSummary {
	var es EtcdSummary
	if len(r.Samples) == 0 {
		return es
	}
	es.Members = r.Settings.EtcdMembers
	es.AllUp = true
	first := r.Samples[0]
	l0, _, _, db0, iu0, _ := cluster(first)
	es.DBStart, es.InUseStart, es.RevStart, es.KeysStart, es.CompactedStart, es.T0 = db0, iu0, l0.Revision, l0.Keys, l0.Compacted, first.T
	d := r.Settings.Sample.Seconds()
	st := r.steady()
	var ns, no float64
	for _, s := range r.Samples[1:] {
		lead, recv, sent, db, inUse, up := cluster(s)
		if up < es.Members {
			es.AllUp = false
		}
		if lead.Leader && (len(es.Leaders) == 0 || es.Leaders[len(es.Leaders)-1] != lead.Member) {
			es.Leaders = append(es.Leaders, lead.Member)
		}
		es.DBEnd, es.InUseEnd, es.RevEnd, es.KeysEnd, es.CompactedEnd, es.T1 = db, inUse, lead.Revision, lead.Keys, lead.Compacted, s.T
		es.DBMax = max(es.DBMax, db)
		es.InUseMax = max(es.InUseMax, inUse)
		es.PutsMax = max(es.PutsMax, lead.Puts/d)
		es.RecvMax = max(es.RecvMax, recv/d)
		_ = sent
	}
	for _, s := range st {
		lead, recv, sent, _, _, _ := cluster(s)
		n := float64(len(st))
		es.PutsMean += lead.Puts / d / n
		es.TxnsMean += lead.Txns / d / n
		es.DeletesMean += lead.Deletes / d / n
		es.ProposalsMean += lead.Proposals / d / n
		es.RecvMean += recv / d / n
		es.SentMean += sent / d / n
		if r.inStorm(s.T) {
			es.PutsStorm += lead.Puts / d
			ns++
		} else {
			es.PutsOff += lead.Puts / d
			no++
		}
	}
	if ns > 0 {
		es.PutsStorm /= ns
	}
	if no > 0 {
		es.PutsOff /= no
	}
	if es.T1 > es.T0 {
		es.RevPerS = (es.RevEnd - es.RevStart) / (es.T1 - es.T0)
	}
	if len(st) > 1 {
		a, _, _, _, _, _ := cluster(st[0])
		b, _, _, _, _, _ := cluster(st[len(st)-1])
		if st[len(st)-1].T > st[0].T {
			es.RevPerSSteady = (b.Revision - a.Revision) / (st[len(st)-1].T - st[0].T)
		}
	}
	return es
}

// LoadSummary is what the STBs did.
type LoadSummary struct {
	Requests, Failures, Skipped, Zaps, Storm int
	Own, Standby, Center, Other              int
	RateOff, RateStorm, RatePeak             float64 // requests/s in intervals without a storm, with one, and the busiest
	P50Off, P99Off, P50Storm, P99Storm       float64 // ms, bucket bounds
	P50, P99                                 float64
}

func (r *Results) load() LoadSummary {
	var ls LoadSummary
	d := r.Settings.Sample.Seconds()
	var off, storm, all Bucket
	var noff, nstorm float64
	from, _ := r.window()
	for k, b := range r.Load {
		ls.Requests += b.Requests
		ls.Failures += b.Failures
		ls.Skipped += b.Skipped
		ls.Zaps += b.Zaps
		ls.Storm += b.Storm
		ls.Own += b.Own
		ls.Standby += b.Standby
		ls.Center += b.Center
		ls.Other += b.Other
		all.add(b)
		ls.RatePeak = max(ls.RatePeak, float64(b.Requests)/d)
		t := float64(k+1) * d // the bucket (t-d, t] as a sample's interval
		if t < from {
			continue // the ramp: first requests
		}
		if r.inStorm(t) {
			storm.add(b)
			nstorm++
		} else {
			off.add(b)
			noff++
		}
	}
	if noff > 0 {
		ls.RateOff = float64(off.Requests) / d / noff
	}
	if nstorm > 0 {
		ls.RateStorm = float64(storm.Requests) / d / nstorm
	}
	ls.P50Off, ls.P99Off = histQuantile(off.Hist, 0.5), histQuantile(off.Hist, 0.99)
	ls.P50Storm, ls.P99Storm = histQuantile(storm.Hist, 0.5), histQuantile(storm.Hist, 0.99)
	ls.P50, ls.P99 = histQuantile(all.Hist, 0.5), histQuantile(all.Hist, 0.99)
	return ls
}

// machineBusy is the whole machine's mean and highest busy share over the
// steady window (% of all cores).
func (r *Results) machineBusy() (mean, peak float64) {
	st := r.steady()
	for _, s := range st {
		mean += s.MachineBusy / float64(len(st))
		peak = max(peak, s.MachineBusy)
	}
	return mean, peak
}

// labShare says where the lab's CPU went, by kind of process (means over
// the steady window, % of one core).
func labShare(r *Results) string {
	var sched, etcd, helpers, load, driver, all float64
	for _, d := range r.daemons() {
		all += d.CPUMean
		switch {
		case d.Name == lab.CenterID || isPrimary(d.Name) || isStandby(d.Name):
			sched += d.CPUMean
		case strings.HasPrefix(d.Name, "etcd"):
			etcd += d.CPUMean
		case d.Name == groupLoad:
			load += d.CPUMean
		case d.Name == groupDriver:
			driver += d.CPUMean
		default:
			helpers += d.CPUMean
		}
	}
	return fmt.Sprintf("The lab's processes used %.0f%% of a core in all: the %d schedulers %.0f%%, the etcd members %.0f%%, the\n"+
		"load generators %.0f%%, the bench driver %.0f%%, the edges and BIRD routers %.0f%%.",
		all, 1+len(allCities)+len(r.Settings.Standby), sched, etcd, load, driver, helpers)
}

// isStandby says whether a daemon is a city's standby scheduler.
func isStandby(name string) bool {
	for _, c := range allCities {
		if name == lab.StandbyID(c) {
			return true
		}
	}
	return false
}

// outside is the CPU the machine spent beyond the lab's processes (and
// this one), mean over the steady window, % of one core.
func (r *Results) outside() float64 {
	st := r.steady()
	var v float64
	for _, s := range st {
		var lab float64
		for _, p := range s.Procs {
			lab += p.CPU
		}
		v += max(0, s.MachineBusy*float64(r.cores())-lab) / float64(len(st))
	}
	return v
}

// cores is the number of cores the machine line names (2 if it says none).
func (r *Results) cores() int {
	var n int
	for _, f := range strings.Split(r.Machine, ",") {
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d cores", &n); err == nil {
			return n
		}
	}
	return 2
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func kb(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func ms(s float64) string {
	return fmt.Sprintf("%.0f ms", s*1000)
}

// bound writes a histogram bucket's upper bound: "≤ 500 ms", or "> 5 s"
// beyond the last.
func bound(s float64) string {
	if math.IsInf(s, 1) {
		return "> " + fmt.Sprint(SolveBuckets[len(SolveBuckets)-1]) + " s"
	}
	return "≤ " + ms(s)
}

func msf(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// daemonTable is the per-daemon table.
func daemonTable(r *Results) string {
	var b strings.Builder
	b.WriteString("| daemon | processes | CPU, mean | CPU, storm intervals / others | CPU, highest interval | RSS at start | RSS at end | RSS, highest |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, d := range r.daemons() {
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %.1f%% / %.1f%% | %.1f%% | %.0f MiB | %.0f MiB | %.0f MiB |\n",
			d.Name, d.N, d.CPUMean, d.CPUStorm, d.CPUOff, d.CPUMax, d.RSSStart, d.RSSEnd, d.RSSMax)
	}
	return b.String()
}

// plannerTable is the per-city table.
func plannerTable(r *Results) string {
	loads := map[string]CityLoad{}
	for _, c := range r.PerCity {
		loads[c.City] = c
	}
	var b strings.Builder
	b.WriteString("| scheduler | sessions offered | in its table (mean) | planned (mean) | to the fallback (mean) | solves | solve mean | p50 / p99 / max (bucket bounds) | gap mean / max | uncertified plans | at desired bitrate | STB requests sent | failed | answered by |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.planners() {
		offered, sent, failed, by := "-", "-", "-", "-"
		if l, ok := loads[p.City]; ok && p.Instance == lab.PrimaryID(p.City) {
			offered = thousands(p.Target)
			sent, failed = thousands(l.Requests), thousands(l.Failures)
			by = answeredBy(l.Bucket)
		}
		if p.Instance == lab.CenterID {
			offered = "(fallen cities only)"
		}
		solve, bounds, gap, desired := "-", "-", "-", "-"
		if p.Solves > 0 {
			solve = ms(p.SolveMean)
			bounds = fmt.Sprintf("%s / %s / %s", bound(p.SolveP50), bound(p.SolveP99), bound(p.SolveMax))
			gap = fmt.Sprintf("%.4f / %.4f", p.GapMean, p.GapMax)
			desired = fmt.Sprintf("%.1f%%", 100*p.AtDesired)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %.0f | %s | %s | %s | %s |\n",
			p.Instance, offered, thousands(int(math.Round(p.Sessions))), thousands(int(math.Round(p.Planned))), thousands(int(math.Round(p.Fallback))),
			p.Solves, solve, bounds, gap, p.Timeouts, desired, sent, failed, by)
	}
	return b.String()
}

// answeredBy says who answered a city's STBs.
func answeredBy(l Bucket) string {
	n := l.Own + l.Standby + l.Center + l.Other
	if n == 0 {
		return "-"
	}
	parts := []string{fmt.Sprintf("own %.1f%%", 100*float64(l.Own)/float64(n))}
	for _, x := range []struct {
		name string
		v    int
	}{{"standby", l.Standby}, {"center", l.Center}, {"other", l.Other}} {
		if x.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", x.name, 100*float64(x.v)/float64(n)))
		}
	}
	return strings.Join(parts, ", ")
}

// etcdTable is the cluster's figures.
func etcdTable(r *Results) string {
	e := r.etcd()
	d := e.T1 - e.T0
	var b strings.Builder
	b.WriteString("| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| writes (`etcd_mvcc_put_total`, the leader's; every member applies each) | %.1f/s mean (storm intervals %.1f/s, others %.1f/s), highest interval %.1f/s |\n", e.PutsMean, e.PutsStorm, e.PutsOff, e.PutsMax)
	fmt.Fprintf(&b, "| transactions / deletes (`etcd_mvcc_txn_total`, `etcd_mvcc_delete_total`) | %.1f/s / %.1f/s |\n", e.TxnsMean, e.DeletesMean)
	fmt.Fprintf(&b, "| proposals committed (`etcd_server_proposals_committed_total`) | %.1f/s |\n", e.ProposalsMean)
	fmt.Fprintf(&b, "| client bytes received (`etcd_network_client_grpc_received_bytes_total`, all members) | %s/s mean, highest interval %s/s |\n", kb(e.RecvMean), kb(e.RecvMax))
	fmt.Fprintf(&b, "| client bytes sent (watches, reads) | %s/s |\n", kb(e.SentMean))
	fmt.Fprintf(&b, "| database size (`etcd_mvcc_db_total_size_in_bytes`, largest member) | %s at the load's start, %s at its end (highest %s) |\n", mib(e.DBStart), mib(e.DBEnd), mib(e.DBMax))
	fmt.Fprintf(&b, "| database in use (`..._in_use_in_bytes`) | %s -> %s (highest %s) |\n", mib(e.InUseStart), mib(e.InUseEnd), mib(e.InUseMax))
	fmt.Fprintf(&b, "| revision (`etcd_debugging_mvcc_current_revision`) | %.0f -> %.0f over %.0f s: +%.1f/s (+%.1f/s once every session had arrived) |\n", e.RevStart, e.RevEnd, d, e.RevPerS, e.RevPerSSteady)
	fmt.Fprintf(&b, "| keys (`etcd_debugging_mvcc_keys_total`) | %.0f -> %.0f |\n", e.KeysStart, e.KeysEnd)
	comp := fmt.Sprintf("not during the load (the housekeeper keeps %s of history)", history(r.Settings))
	if e.CompactedEnd > max(e.CompactedStart, 0) {
		before := "none before the load"
		if e.CompactedStart > 0 {
			before = fmt.Sprintf("%.0f at its start", e.CompactedStart)
		}
		comp = fmt.Sprintf("revision %.0f at the load's end (%s): the housekeeper keeps %s of history", e.CompactedEnd, before, history(r.Settings))
	}
	fmt.Fprintf(&b, "| compacted up to (`etcd_debugging_mvcc_compact_revision`) | %s |\n", comp)
	wb := "not exported by this build (`anysched_etcd_client_write_bytes_total`)"
	var sum float64
	any := false
	for _, p := range r.planners() {
		if p.EtcdWriteBytes >= 0 {
			any = true
			sum += p.EtcdWriteBytes
		}
	}
	if any {
		wb = fmt.Sprintf("%s/s, all schedulers", kb(sum))
	}
	fmt.Fprintf(&b, "| the daemons' own count of bytes written | %s |\n", wb)
	if len(r.Keys) > 0 && r.KeysSpan > 0 {
		fmt.Fprintf(&b, "\nWho writes: each key's version at the load's end less at its start, summed by part of the key layout\n"+
			"(`internal/etcd/keyspace`; a leased key deleted and written again counts from its new start), over %.0f s:\n\n", r.KeysSpan)
		b.WriteString("| keys under | keys | puts during the load | puts/s | values at the end (sum / largest) |\n|---|---|---|---|---|\n")
		for _, k := range r.Keys {
			fmt.Fprintf(&b, "| `%s` | %d | %s | %.1f | %s / %s |\n", k.Prefix, k.Keys, thousands(int(k.Puts)), float64(k.Puts)/r.KeysSpan, kb(float64(k.Bytes)), kb(float64(k.MaxVal)))
		}
	}
	return b.String()
}

// summaryTables is what the run prints at its end.
func summaryTables(r *Results) string {
	return "Per daemon:\n\n" + daemonTable(r) + "\nPer city:\n\n" + plannerTable(r) + "\netcd:\n\n" + etcdTable(r)
}

// section is the markdown written between the markers in docs/benchmarks.md.
func section(r *Results, png string) string {
	s := r.Settings
	var b strings.Builder
	b.WriteString(docBegin + "\n")
	b.WriteString("## The whole province on one machine (`go run ./bench/province`)\n\n")
	b.WriteString("`bench/province` brings the sample province up in the namespace lab (`internal/testbed/lab`, as\n" +
		"`bench/rollout` does) and keeps it at prime time: a 3-member etcd cluster (mutual TLS, an etcd user and\n" +
		"role per daemon), the real `central-scheduler` and the 16 cities' `regional-scheduler`s announcing over\n" +
		"BGP to BIRD routers, each city planning its own viewers by QoE allocation, and synthetic sessions asking\n" +
		"the Anycast address from each city's client namespace. It samples every daemon, planner and etcd member\n" +
		"as the run goes. The run below is the size this machine holds, not the design's province.\n\n")
	b.WriteString("Settings:\n\n")
	fmt.Fprintf(&b, "- Machine: %s; measured %s; load average %s when the run began, %d other engineers' lab\n"+
		"  namespaces on the machine during it", r.Machine, r.When.Format("2006-01-02"), orDash(r.LoadAvg), r.Foreign)
	b.WriteString(".\n")
	share := 100 * float64(s.Sessions) / designViewers
	fmt.Fprintf(&b, "- **Size: %s sessions**, %.1f%% of the design's %s prime-time viewers, split over the cities by\n"+
		"  resident population (`topogen.AnhuiSplit`): %s. **%d live servers** (each city the lab's two edges and\n"+
		"  more probed at the same edges' health URLs, %s), each city's together %.0f%% of its sessions' demand at\n"+
		"  the top rung (%d kbit/s), so the planner must choose bitrates; one VOD edge per city besides.\n",
		thousands(s.Sessions), share, thousands(designViewers), citySplit(s.Cities), s.Servers, serverSplit(s.Cities), 100*s.Capacity, topKbps)
	fmt.Fprintf(&b, "- Schedulers: the center, a primary per city and a standby for %s (%d city schedulers in all); each city\n"+
		"  scheduler embeds a health checker probing its city's servers every %s (%d probes/s in the province).\n",
		orNone(s.Standby), len(allCities)+len(s.Standby), dur(s.CheckInterval), probesPerSecond(s))
	rate := float64(s.Sessions) / s.Refresh.Seconds()
	storm := s.StormShare * float64(s.Sessions) / s.StormWindow.Seconds()
	conn := "a new TCP connection per request"
	if s.KeepAlive {
		conn = "kept-alive connections"
	}
	fmt.Fprintf(&b, "- Sessions: each a viewer (its own token, signed with the lab's key) on a channel (Zipf(1.1) over %d);\n"+
		"  its first request falls at a random moment of the first %s, then it asks again every %s to stay within\n"+
		"  `alloc.session_ttl` %s, %.0f%% of those times on another channel. **Zapping storms**: every %s from +%s,\n"+
		"  %.0f%% of each city's viewers change channel within %s. Offered: %.0f requests/s on average, %.0f/s more\n"+
		"  during a storm; %s, from %d addresses per city; an answer other than a 302 is a failure.\n",
		s.Channels, dur(s.Refresh), dur(s.Refresh), dur(s.SessionTTL), 100*s.Zap, dur(s.StormEvery), dur(s.StormFirst), 100*s.StormShare, dur(s.StormWindow), rate, storm, conn, s.Addrs)
	fmt.Fprintf(&b, "- **Time is not accelerated**: the planners run the production `alloc.period` %s and `alloc.session_ttl` %s,\n"+
		"  the checkers probe every %s, the center's housekeeper keeps %s of etcd's history; every figure is per\n"+
		"  second of real time. What is compressed is the evening: a storm every %s where a real one has a few\n"+
		"  (a programme's end, its breaks), and a run of %s instead of the hours of prime time.\n",
		dur(s.Period), dur(s.SessionTTL), dur(s.CheckInterval), history(s), dur(s.StormEvery), dur(s.Duration))
	how := "netem"
	if r.DelayBy == "tun" {
		how = "the lab's delayed TUN links, carried by the bench driver process (this kernel has no netem)"
	}
	from, to := r.window()
	fmt.Fprintf(&b, "- Network: each city's link to the core delayed by its distance to Hefei, by %s; STBs reach their\n"+
		"  own city's scheduler without crossing it, the schedulers reach etcd across it.\n", how)
	fmt.Fprintf(&b, "- Sampling every %s: CPU (utime+stime from `/proc/<pid>/stat`, %% of one core over the interval) and\n"+
		"  RSS per daemon; each scheduler's `/metrics` (the planner's `anysched_alloc_*`); each etcd member's\n"+
		"  `/metrics`. Means are over the steady window, +%.0f s to +%.0f s: from the first sample after every\n"+
		"  session had arrived to the end. The province came up (lab, topology applied, routes converged) in %.0f s.\n\n",
		dur(s.Sample), from, to-s.Sample.Seconds(), r.LabUp)

	busyMean, busyPeak := r.machineBusy()
	ls := r.load()
	fmt.Fprintf(&b, "**The run**: %s STB requests (%s channel changes, %s of them in storms), %d failed, %d not sent\n"+
		"(the generator's queue full), %d sent more than 1 s late; %.0f requests/s outside storms, %.0f/s in\n"+
		"intervals with one (busiest interval %.0f/s). Round trip p50 / p99: %s / %s outside storms, %s / %s in\n"+
		"them. The whole machine was %.0f%% busy on average (all %d cores), %.0f%% in its busiest interval; of\n"+
		"that, %.0f%% of a core was not the lab's processes' (other engineers' work, and kernel work no process was charged for).\n\n",
		thousands(ls.Requests), thousands(ls.Zaps), thousands(ls.Storm), ls.Failures, ls.Skipped, r.Late,
		ls.RateOff, ls.RateStorm, ls.RatePeak, msf(ls.P50Off), msf(ls.P99Off), msf(ls.P50Storm), msf(ls.P99Storm), busyMean, r.cores(), busyPeak, r.outside())
	fmt.Fprintf(&b, "%s\n\n", labShare(r))
	if len(r.Errors) > 0 {
		fmt.Fprintf(&b, "First failures: %s.\n\n", strings.Join(r.Errors[:min(3, len(r.Errors))], "; "))
	}

	b.WriteString("### Per daemon\n\n")
	b.WriteString("CPU in % of one core (the machine has " + fmt.Sprint(r.cores()) + "), per sampling interval; the helpers' rows sum their\n" +
		"processes (the 17 BIRD routers, the 48 edges, the 16 load generators).\n\n")
	b.WriteString(daemonTable(r))
	b.WriteString("\n### Per city: the planners\n\n")
	b.WriteString("From each scheduler's `/metrics` over the steady window: sessions in its table, planned, and sent to the\n" +
		"region's fallback (`anysched_alloc_sessions`, `_planned_sessions`, `_fallback_sessions`, means of the samples);\n" +
		"solves and their durations (`anysched_alloc_solve_duration_seconds`, a period's sweep to its plan out, the\n" +
		"claims read and committed in etcd included: the mean from its sum and count, the quantiles as the histogram's\n" +
		"bucket bounds); the certified gap (`anysched_alloc_gap_ratio`, over the samples);\n" +
		"`anysched_alloc_uncertified_plans_total`; the share planned at the desired bitrate (`anysched_alloc_at_desired_ratio`).\n\n")
	b.WriteString(plannerTable(r))
	b.WriteString("\n### etcd\n\n")
	b.WriteString(etcdTable(r))
	b.WriteString("\n")
	b.WriteString(host.ImageLink("etcd database size and revision, and each daemon's CPU and RSS over the run", png))
	b.WriteString(docEnd + "\n")
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// citySplit names the largest and smallest cities' shares.
func citySplit(cs []CityPlan) string {
	if len(cs) == 0 {
		return "-"
	}
	sorted := slices.Clone(cs)
	slices.SortStableFunc(sorted, func(a, b CityPlan) int { return b.Sessions - a.Sessions })
	var parts []string
	for _, c := range sorted {
		parts = append(parts, fmt.Sprintf("%s %s", c.City, thousands(c.Sessions)))
	}
	return strings.Join(parts, ", ")
}

// serverSplit says how many servers the cities have and their sizes.
func serverSplit(cs []CityPlan) string {
	if len(cs) == 0 {
		return "-"
	}
	lo, hi := cs[0], cs[0]
	for _, c := range cs {
		if c.Servers < lo.Servers {
			lo = c
		}
		if c.Servers > hi.Servers {
			hi = c
		}
	}
	return fmt.Sprintf("from %d in %s to %d in %s, of %.0f to %.0f Mbit/s each", lo.Servers, lo.City, hi.Servers, hi.City, minMbps(cs), maxMbps(cs))
}

func minMbps(cs []CityPlan) float64 {
	v := math.Inf(1)
	for _, c := range cs {
		v = math.Min(v, c.ServerMbps)
	}
	return v
}

func maxMbps(cs []CityPlan) float64 {
	v := 0.0
	for _, c := range cs {
		v = math.Max(v, c.ServerMbps)
	}
	return v
}

// probesPerSecond: every checker (one per city scheduler) probes its
// city's live servers and its VOD edge every interval.
func probesPerSecond(s Settings) int {
	n := 0
	for _, c := range s.Cities {
		k := c.Servers + lab.VODServers
		n += k
		if slices.Contains(s.Standby, c.City) {
			n += k
		}
	}
	return int(float64(n) / max(s.CheckInterval.Seconds(), 1e-3))
}

// history is how long etcd kept its history in the run.
func history(s Settings) string {
	if s.EtcdHistory <= 0 {
		return "the lab's 1h"
	}
	return dur(s.EtcdHistory)
}

// dur writes a duration as the text reads it: 2m rather than 2m0s.
func dur(d time.Duration) string {
	str := d.String()
	if strings.HasSuffix(str, "m0s") {
		str = strings.TrimSuffix(str, "0s")
	}
	if strings.HasSuffix(str, "h0m") {
		str = strings.TrimSuffix(str, "0m")
	}
	return str
}
