package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
)

// results is one run's measurements.
type results struct {
	cfg     config
	cities  []city
	writers []*writer
	samples []dbSample
	missed  int                                 // samples etcd did not answer in time
	totals  []map[string]etcdclient.WriteTotals // by writer, at each sample
	began   time.Time
	wall    time.Duration
	cpus    int
}

// window is the steady part of the run: from the first sample at or after
// the warm-up to the last.
func (r *results) window() (from, to int) {
	to = len(r.samples) - 1
	for from = 0; from < to && r.samples[from].At < r.cfg.Warmup; from++ {
	}
	return from, to
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// rate formats n per simulated second over d.
func rate(n uint64, d time.Duration) string {
	v := float64(n) / d.Seconds()
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func kbps(n uint64, d time.Duration) string {
	v := float64(n) / d.Seconds() / 1e3
	if v < 10 {
		return fmt.Sprintf("%.2f kB/s", v)
	}
	return fmt.Sprintf("%.1f kB/s", v)
}

func (r *results) markdown() string {
	var b strings.Builder
	c := r.cfg
	from, to := r.window()
	span := r.samples[to].At - r.samples[from].At
	if span <= 0 {
		span = time.Nanosecond
	}
	fmt.Fprintf(&b, "Run: %s (%d CPUs), %s; %s simulated in %s of wall time (speed %g); rates over the %s after the first %s.\n\n",
		cpuModel(), r.cpus, r.began.UTC().Format("2006-01-02"), r.samples[len(r.samples)-1].At.Round(time.Second), r.wall.Round(time.Second), c.Speed,
		span.Round(time.Second), r.samples[from].At.Round(time.Second))
	viewers := 0
	largest := r.cities[0]
	for _, ct := range r.cities {
		viewers += ct.viewers
		if ct.viewers > largest.viewers {
			largest = ct
		}
	}
	fmt.Fprintf(&b, "```sh\ngo run ./bench/etcdload %s\n```\n\n", strings.Join(r.flags(), " "))
	fmt.Fprintf(&b, "Province: %d cities, %d viewers (the largest, %s, %d), %d servers, %d checkers (%d a city); plan state: %s format, every %s; claims every %s; instance records every %s (a city's moving figures alone every %s); verdicts: probes every %s, refresh %s; churn: a channel change every %s, a stay of %s, a request every %s, %.0f%% moved a publication; etcd %s.\n\n",
		len(r.cities), viewers, largest.name, largest.viewers, c.Servers, c.Checkers, c.Checkers/len(r.cities), c.StateFormat, c.StateInterval, c.Period, c.Registration, c.RegistrationRefresh,
		c.ProbeInterval, orDefault(c.HealthRefresh), c.Churn.ZapEvery, c.Churn.WatchFor, c.Churn.RequestEvery, 100*c.Churn.MoveShare, r.compaction())
	b.WriteString("| writer | into etcd | requests/s | keys/s | revisions/s | bytes a key | late ticks | errors |\n|---|---|---|---|---|---|---|---|\n")
	var all etcdclient.WriteTotals
	for _, w := range r.writers {
		d := diff(r.totals[to][w.name], r.totals[from][w.name])
		all = add(all, d)
		perKey := "-"
		if d.Keys > 0 {
			perKey = fmt.Sprintf("%d", d.Bytes/d.Keys)
		}
		errs := fmt.Sprint(w.errs.Load())
		if f, ok := w.first.Load().(string); ok {
			errs += " (" + f + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d | %s |\n", w.name, kbps(d.Bytes, span), rate(d.Writes, span), rate(d.Keys, span), rate(d.Revisions, span), perKey, w.late.n.Load(), errs)
	}
	revs := uint64(r.samples[to].Revision - r.samples[from].Revision)
	fmt.Fprintf(&b, "| all | %s | %s | %s | %s (etcd: %s) | | | |\n\n", kbps(all.Bytes, span), rate(all.Writes, span), rate(all.Keys, span), rate(all.Revisions, span), rate(revs, span))
	b.WriteString("| simulated time | revision | compacted to | db size | db in use |\n|---|---|---|---|---|\n")
	for _, s := range r.samples {
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s |\n", s.At.Round(time.Second), s.Revision, s.Compacted, mb(s.DBSize), mb(s.DBInUse))
	}
	// Flat or not: the spread of the database after the warm-up, in one line.
	lo, hi := r.samples[from], r.samples[from]
	loUse, hiUse := lo.DBInUse, lo.DBInUse
	for _, s := range r.samples[from : to+1] {
		if s.DBSize < lo.DBSize {
			lo = s
		}
		if s.DBSize > hi.DBSize {
			hi = s
		}
		loUse, hiUse = min(loUse, s.DBInUse), max(hiUse, s.DBInUse)
	}
	fmt.Fprintf(&b, "\nFrom %s to %s: db size %s-%s (at most %.1f%% of the quota), in use %s-%s",
		r.samples[from].At.Round(time.Second), r.samples[to].At.Round(time.Second), mb(lo.DBSize), mb(hi.DBSize), 100*float64(hi.DBSize)/float64(c.Quota), mb(loUse), mb(hiUse))
	if r.missed > 0 {
		fmt.Fprintf(&b, "; %d samples missed (etcd's status did not answer within 10s)", r.missed)
	}
	b.WriteString(".\n")
	for _, w := range r.writers {
		if t := w.times[largest.name]; len(t) > 0 {
			slices.Sort(t)
			fmt.Fprintf(&b, "\nA publication of %s's plan (%d sessions) took %s (median of %d; longest %s) of wall time, encoding and writing; %d of them reached the allocator's etcd timeout (%s) and failed.\n",
				largest.name, largest.viewers, t[len(t)/2].Round(time.Millisecond), len(t), t[len(t)-1].Round(time.Millisecond),
				len(t)-sort.Search(len(t), func(i int) bool { return t[i] >= min(r.cfg.Period/4, 2*time.Second) }), min(r.cfg.Period/4, 2*time.Second))
		}
	}
	return b.String()
}

// compaction says how the run's etcd compacts.
func (r *results) compaction() string {
	c := r.cfg
	own := fmt.Sprintf("compacts itself to %d revisions, quota %s", c.KeepRevisions, mb(c.Quota))
	if !c.Housekeeping {
		return own
	}
	h := etcdhousekeep.DefaultConfig()
	return fmt.Sprintf("%s; the center's housekeeping compacts every %s to at most %s of history, defragments at %.0f%% of the quota free", own, h.CompactInterval, h.MaxHistory, 100*h.DefragFreeRatio)
}

func orDefault(d time.Duration) string {
	if d == 0 {
		return "the default"
	}
	return d.String()
}

// flags are the run's settings that differ from the defaults.
func (r *results) flags() []string {
	def, _, _, _ := parse(nil, nil)
	c := r.cfg
	var out []string
	add := func(name string, v, d any) {
		if fmt.Sprint(v) != fmt.Sprint(d) {
			out = append(out, fmt.Sprintf("-%s %v", name, v))
		}
	}
	add("sessions", c.Sessions, def.Sessions)
	add("servers", c.Servers, def.Servers)
	add("checkers", c.Checkers, def.Checkers)
	add("duration", c.Duration, def.Duration)
	add("warmup", c.Warmup, def.Warmup)
	add("sample", c.Sample, def.Sample)
	add("speed", c.Speed, def.Speed)
	add("housekeeping", c.Housekeeping, def.Housekeeping)
	add("keep-revisions", c.KeepRevisions, def.KeepRevisions)
	add("quota", c.Quota, def.Quota)
	add("health-refresh", c.HealthRefresh, def.HealthRefresh)
	add("state-interval", c.StateInterval, def.StateInterval)
	add("state-format", c.StateFormat, def.StateFormat)
	add("registration-refresh", c.RegistrationRefresh, def.RegistrationRefresh)
	add("writers", strings.Join(c.Writers, ","), strings.Join(def.Writers, ","))
	add("state-cities", strings.Join(c.StateCities, ","), "")
	add("seed", c.Seed, def.Seed)
	return out
}

func diff(a, b etcdclient.WriteTotals) etcdclient.WriteTotals {
	return etcdclient.WriteTotals{Bytes: a.Bytes - b.Bytes, Writes: a.Writes - b.Writes, Keys: a.Keys - b.Keys, Revisions: a.Revisions - b.Revisions}
}

func add(a, b etcdclient.WriteTotals) etcdclient.WriteTotals {
	return etcdclient.WriteTotals{Bytes: a.Bytes + b.Bytes, Writes: a.Writes + b.Writes, Keys: a.Keys + b.Keys, Revisions: a.Revisions + b.Revisions}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// writeDoc replaces what lies between the label's markers in path with
// text (the markers must be there: the section around them is written by
// hand).
func writeDoc(path, label, text string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := []byte("<!-- etcdload-"+label+":begin -->\n"), []byte("<!-- etcdload-"+label+":end -->")
	i, j := bytes.Index(old, begin), bytes.Index(old, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s markers", path, strings.TrimSpace(string(begin)), end)
	}
	out := append(append(append([]byte{}, old[:i+len(begin)]...), text...), old[j:]...)
	return os.WriteFile(path, out, 0o644)
}
