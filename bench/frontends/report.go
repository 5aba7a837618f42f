package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profileRun is a CPU profile of the anysched process under one load.
type profileRun struct {
	load, unit string
	rps        float64 // the profiled run's throughput (not counted)
	prof       *profileTop
}

// familyRun is what one address family's run measured: its scenarios
// and rows, each ratio against a baseline of the same run.
type familyRun struct {
	fam       family
	topo      string // the snapshot anysched served
	scenarios []*scenario
	rows      []row
	profiles  []profileRun
}

// heading names the run in the report.
func (fr *familyRun) heading() string {
	return fmt.Sprintf("%s: every server on %s, %s queries", fr.fam.label(), fr.fam.urlHost(), fr.fam.rrType())
}

// report is everything printed and documented.
type report struct {
	env      *environment
	opts     opts
	runs     []*familyRun // in the order they ran
	profiles []profileRun
	elapsed  time.Duration
	loadEnd  string
	args     []string // the command's arguments, as the document shows them
}

func sampling(n uint64) string {
	if n <= 1 {
		return "every decision logged, the daemon's default"
	}
	return fmt.Sprintf("one decision in %d logged", n)
}

func (r *report) accessLog() string {
	dest := "JSON lines appended to a file, as nginx's logged runs write theirs"
	if r.opts.accessLog == "discard" {
		dest = "JSON lines to io.Discard"
	}
	return sampling(r.opts.sampleEvery) + ", " + dest
}

// verdict is the row's target column.
func (w row) verdict() string {
	ratio, ok := w.ratio()
	switch {
	case w.target == 0:
		return "reference"
	case !ok:
		return "not measured"
	case w.shared:
		est, ok := w.cpuScaling()
		if !ok {
			return "not measurable here (the load generator shares both cores)"
		}
		v := fmt.Sprintf("met (>= %.2f)", w.target)
		if est < w.target {
			v = fmt.Sprintf("MISSED (< %.2f)", w.target)
		}
		return fmt.Sprintf("not measurable here (the load generator shares both cores); from CPU per request: %.2f, %s", est, v)
	case ratio >= w.target:
		return fmt.Sprintf("met (>= %.2f)", w.target)
	}
	return fmt.Sprintf("MISSED (< %.2f)", w.target)
}

func (w row) ratioString() string {
	if r, ok := w.ratio(); ok {
		return fmt.Sprintf("%.3f", r)
	}
	return "-"
}

func (w row) aName() string {
	if w.what != "" {
		return w.what
	}
	return "anysched"
}

// value is a side's best throughput, or why it has none.
func value(s *side) string {
	if s.measured() {
		return fmt.Sprintf("%.0f", s.top().rps)
	}
	switch {
	case s.missing == "":
		return "not measured"
	case strings.HasPrefix(s.missing, "not "):
		return s.missing
	}
	return "not measured: " + s.missing
}

func latency(s *side) string {
	if !s.measured() {
		return "-"
	}
	r := s.top()
	if r.p999 > 0 {
		return fmtDur(r.p50) + " / " + fmtDur(r.p99) + " / " + fmtDur(r.p999)
	}
	if r.p50 > 0 {
		return fmtDur(r.p50) + " / " + fmtDur(r.p99)
	}
	return "avg " + fmtDur(r.avg)
}

// minCPU is the lowest server CPU time per request over the runs.
func minCPU(rs []runResult) time.Duration {
	var m time.Duration
	for _, r := range rs {
		if r.cpu > 0 && (m == 0 || r.cpu < m) {
			m = r.cpu
		}
	}
	return m
}

func cpuCell(a, b *side) string {
	x, y := minCPU(a.runs), minCPU(b.runs)
	if x <= 0 || y <= 0 || !a.measured() || !b.measured() {
		return "-"
	}
	return fmt.Sprintf("%s / %s (x%.2f)", fmtCPU(x), fmtCPU(y), float64(x)/float64(y))
}

// busy is the server core's busy share in the side's best run, and the
// server's own share; "-" when nothing was pinned.
func busy(s *side) string {
	if !s.measured() {
		return "-"
	}
	r := s.top()
	if r.busy == [2]float64{} {
		return "-"
	}
	return fmt.Sprintf("%.0f%% (%.0f%%)", 100*r.busy[0], 100*r.own)
}

// roundRatios are a/b per round (each round ran both, close together).
func (w row) roundRatios() string {
	var s []string
	for i := range min(len(w.a.runs), len(w.b.runs)) {
		if r, ok := w.runRatio(w.a.runs[i], w.b.runs[i]); ok {
			s = append(s, fmt.Sprintf("%.3f", r))
		}
	}
	return strings.Join(s, ", ")
}

// runsList is the throughput of each run, and under a fixed rate its p99.
func runsList(rs []runResult) string {
	var s []string
	for _, r := range rs {
		if r.p999 > 0 {
			s = append(s, fmt.Sprintf("%.0f (p99 %s)", r.rps, fmtDur(r.p99)))
			continue
		}
		s = append(s, fmt.Sprintf("%.0f", r.rps))
	}
	return strings.Join(s, ", ")
}

// logPerRequest is the access-log bytes per request of the side's best
// run, "" when it logs nothing to a file.
func logPerRequest(s *side) string {
	r := s.top()
	if r.logBytes <= 0 || r.total <= 0 {
		return ""
	}
	return fmt.Sprintf("%d B", r.logBytes/r.total)
}

// sideNotes are what the report says about a scenario beyond its rows.
func sideNotes(sc *scenario) []string {
	notes := append([]string(nil), sc.notes...)
	var logs []string
	for _, s := range sc.sides {
		if l := logPerRequest(s); l != "" {
			logs = append(logs, s.name+" "+l)
		}
		if t := s.top().tls; t != "" {
			notes = append(notes, s.name+" (its log): "+t)
		}
		if s.dropped > 0 {
			notes = append(notes, fmt.Sprintf("%s dropped %.0f access-log lines (queue full) during the measured runs", s.name, s.dropped))
		}
		for _, r := range s.runs {
			if p := problems(r); p != "" {
				notes = append(notes, s.name+": "+strings.TrimSpace(p))
				break
			}
		}
	}
	if len(logs) > 0 {
		notes = append(notes, "access log written per request: "+strings.Join(logs, ", "))
	}
	return notes
}

// noise is a warning when other processes ran on the server's core
// during some runs ("" when they took at most a tenth of it).
func (r *report) noise() string {
	var worst float64
	for _, sc := range r.scenarios() {
		for _, s := range sc.sides {
			for _, run := range s.runs {
				worst = max(worst, run.others)
			}
		}
	}
	if worst <= 0.1 {
		return ""
	}
	return fmt.Sprintf("other processes took up to %.0f%% of the server's core during some runs: the machine was not quiet, and these figures are not reliable", 100*worst)
}

func (r *report) rowsOf(sc *scenario) []row {
	var out []row
	for _, fr := range r.runs {
		for _, w := range fr.rows {
			if w.sc == sc {
				out = append(out, w)
			}
		}
	}
	return out
}

// scenarios are every run's, in order.
func (r *report) scenarios() []*scenario {
	var out []*scenario
	for _, fr := range r.runs {
		out = append(out, fr.scenarios...)
	}
	return out
}

// topo is the snapshot of the first run (the IPv6 run's is the same
// province made dual-stack).
func (r *report) topo() string {
	if len(r.runs) == 0 {
		return "?"
	}
	return r.runs[0].topo
}

// rowKey is what a row compares, whatever the family: the DNS scenarios
// of an IPv6 run ask AAAA where an IPv4 run's ask A.
func rowKey(w row) string {
	return strings.Replace(w.sc.title, "DNS AAAA", "DNS A", 1) + "\x00" + w.what + "\x00" + w.peer
}

// besideRow is one comparison as both families' runs made it.
type besideRow struct {
	load, peer string
	v4, v6     row
}

// beside pairs the rows of the IPv4 and the IPv6 run that compare the
// same load against the same peer; nil unless both families ran.
func (r *report) beside() []besideRow {
	var v4, v6 *familyRun
	for _, fr := range r.runs {
		if fr.fam.v6 {
			v6 = fr
		} else {
			v4 = fr
		}
	}
	if v4 == nil || v6 == nil {
		return nil
	}
	byKey := map[string]row{}
	for _, w := range v6.rows {
		byKey[rowKey(w)] = w
	}
	var out []besideRow
	for _, w := range v4.rows {
		w6, ok := byKey[rowKey(w)]
		if !ok {
			continue
		}
		load := strings.Replace(w.sc.title, "DNS A,", "DNS A / AAAA,", 1)
		if w.what != "" {
			load += ": " + w.what
		}
		out = append(out, besideRow{load: load, peer: w.peer, v4: w, v6: w6})
	}
	return out
}

// familyRatio is anysched's IPv6 figure over its IPv4 one (throughput; a
// fixed-rate row's p99 IPv4 over IPv6, at least 1: IPv6's tail no longer).
func (b besideRow) familyRatio() string {
	a4, a6 := b.v4.a, b.v6.a
	if !a4.measured() || !a6.measured() {
		return "-"
	}
	if x, ok := b.v4.runRatio(a6.top(), a4.top()); ok {
		return fmt.Sprintf("%.3f", x)
	}
	return "-"
}

// text is the human-readable summary.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== STB front ends vs peers, per core (%s) ===\n", r.env.date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine:    %s\n", r.env.machine())
	fmt.Fprintf(&b, "placement:  %s\n", r.env.pin.describe())
	fmt.Fprintf(&b, "access log: anysched %s; best of %d alternating runs of %s each\n", r.accessLog(), r.opts.rounds, r.opts.duration)
	if w := r.noise(); w != "" {
		fmt.Fprintf(&b, "WARNING:    %s\n", w)
	}
	for _, fr := range r.runs {
		fmt.Fprintf(&b, "\n--- %s ---\n", fr.heading())
		fmt.Fprintf(&b, "snapshot:   %s\n", fr.topo)
		for _, sc := range fr.scenarios {
			r.scenarioText(&b, sc)
		}
	}
	if bs := r.beside(); len(bs) > 0 {
		b.WriteString("\n--- IPv6 beside IPv4 (each ratio against the baseline of its family's run) ---\n")
		for _, x := range bs {
			fmt.Fprintf(&b, "  %s / %s: IPv4 %s / %s = %s; IPv6 %s / %s = %s; anysched IPv6/IPv4 %s\n", x.load, x.peer,
				value(x.v4.a), value(x.v4.b), x.v4.ratioString(), value(x.v6.a), value(x.v6.b), x.v6.ratioString(), x.familyRatio())
		}
	}
	for _, p := range r.profiles {
		if p.prof == nil {
			continue
		}
		fmt.Fprintf(&b, "\nCPU profile of the anysched process, %s, extra run at %.0f %s (not counted):\n", p.load, p.rps, p.unit)
		fmt.Fprintf(&b, "  -- by flat time --\n%s\n", indent(p.prof.flat, "    "))
		fmt.Fprintf(&b, "  -- by cumulative time --\n%s\n", indent(p.prof.cum, "    "))
		fmt.Fprintf(&b, "  -- where the process's CPU goes (cumulative, %% of all samples) --\n%s\n", indent(p.prof.componentTable(), "    "))
	}
	fmt.Fprintf(&b, "\nload average (1 min): %s at start, %s at end; total time: %s\n", r.env.loadStart, r.loadEnd, r.elapsed.Round(time.Second))
	return b.String()
}

func (r *report) scenarioText(b *strings.Builder, sc *scenario) {
	fmt.Fprintf(b, "\n%s  [%s]\n", sc.title, sc.tool)
	fmt.Fprintf(b, "  settings: %s\n", sc.settings)
	for _, c := range sc.checks {
		fmt.Fprintf(b, "  check:    %s\n", c)
	}
	for _, s := range sc.sides {
		if !s.measured() {
			fmt.Fprintf(b, "  %-44s %s\n", s.name+":", value(s))
			continue
		}
		fmt.Fprintf(b, "  %-44s %10.0f %s  %-22s CPU %s/req  server core busy %s  (runs: %s)\n",
			s.name+":", s.top().rps, sc.unit, latency(s), fmtCPU(minCPU(s.runs)), busy(s), runsList(s.runs))
	}
	for _, w := range r.rowsOf(sc) {
		fmt.Fprintf(b, "  %s / %s: %s  target %s", w.aName(), w.peer, w.ratioString(), w.verdict())
		if rr := w.roundRatios(); rr != "" {
			fmt.Fprintf(b, "  (per round: %s; CPU/req %s)", rr, cpuCell(w.a, w.b))
		}
		b.WriteString("\n")
	}
	for _, n := range sideNotes(sc) {
		fmt.Fprintf(b, "  note: %s\n", n)
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// markdown is the documented section.
func (r *report) markdown() string {
	var b strings.Builder
	cmd := "go run ./bench/frontends -doc docs/benchmarks.md"
	if len(r.args) > 0 {
		cmd = "go run ./bench/frontends " + strings.Join(r.args, " ")
	}
	fmt.Fprintf(&b, "Measured %s by `%s` (also run by `scripts/bench.sh`), in %s; load average (1 min) %s at the start, %s at the end.\n\n",
		r.env.date.Format("2006-01-02 15:04 UTC"), cmd, r.elapsed.Round(time.Second), r.env.loadStart, r.loadEnd)
	fmt.Fprintf(&b, "Machine: %s. Placement: %s.\n\n", r.env.machine(), r.env.pin.describe())
	if w := r.noise(); w != "" {
		fmt.Fprintf(&b, "**Warning: %s.**\n\n", w)
	}
	var fams, locs []string
	for _, fr := range r.runs {
		fams = append(fams, fr.heading())
		locs = append(locs, "`return 302 "+fr.fam.nginxLocation()+";`")
	}
	fmt.Fprintf(&b, "anysched serves the %s, in its own process; its access log is on (%s). "+
		"nginx runs one worker answering %s, with its access log off, and on (the default combined format, "+
		"to a file); gdnsd runs one UDP thread over a static zone holding the service name's record of the family (A, or AAAA); the bare baselines "+
		"(a net/http handler writing a fixed 302, a miekg/dns handler answering one fixed record) are references, without targets. "+
		"The servers of each load ran %d times in alternation, %s per run; the tables show the best run of each. "+
		"Ratios are anysched over the peer, per core (both pinned to the same single core), except the 2-core and the fixed-rate rows. "+
		"Latencies are p50 / p99 unless said otherwise.\n\n",
		r.topo(), r.accessLog(), strings.Join(locs, " (over IPv6 ")+strings.Repeat(")", len(locs)-1), r.opts.rounds, r.opts.duration)
	if len(r.runs) > 1 {
		fmt.Fprintf(&b, "One run per address family, one after the other, each with its own baselines: %s. "+
			"The IPv6 run serves the same province made dual-stack (`fixture.DualStack`: an `address6` beside every server's address, "+
			"an IPv6 /48 beside each zone's networks); its STB addresses (X-Forwarded-For) and ECS client subnets (/56) are in the zones' IPv6 networks, "+
			"and anysched must answer each with a server's IPv6 address (a bracketed URL, an AAAA record) or the run fails.\n\n",
			strings.Join(fams, "; "))
	}
	if bs := r.beside(); len(bs) > 0 {
		b.WriteString("### IPv6 beside IPv4\n\n")
		b.WriteString("Each ratio is against the peer measured in its own family's run; the last column is anysched's IPv6 figure over its IPv4 one " +
			"(fixed-rate rows: IPv4 p99 over IPv6 p99).\n\n")
		b.WriteString("| load | anysched vs | IPv4: anysched | IPv4: peer | IPv4 ratio | IPv6: anysched | IPv6: peer | IPv6 ratio | anysched IPv6 / IPv4 |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		for _, x := range bs {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(x.load), mdEscape(x.peer),
				mdEscape(value(x.v4.a)), mdEscape(value(x.v4.b)), x.v4.ratioString(),
				mdEscape(value(x.v6.a)), mdEscape(value(x.v6.b)), x.v6.ratioString(), x.familyRatio())
		}
		b.WriteString("\n")
	}
	for _, fr := range r.runs {
		r.familyMarkdown(&b, fr)
	}
	fmt.Fprintf(&b, "Throughputs are requests (or queries) per second. The CPU column is the server's user+system time per answered request, "+
		"of its whole process tree (nginx's master and worker), from /proc, the lowest of the runs. The busy column is the share of the best run "+
		"during which the server's core was busy (/proc/stat, interrupts and any other process included), and in parentheses the share the "+
		"server's own processes used: well under 100%%, the load generator's core was the limit, and CPU per request is the figure to "+
		"compare (a core serves at most 1 s / CPU per request); a gap between the two is time the core spent on something else. The closed-loop rows (wrk, dnsperf without a rate) "+
		"compare latency at the same connection count, where the faster server is also the more loaded one, and dnsperf gives only an average; "+
		"the fixed-rate rows offer every server the same load (h2load --rps, dnsperf -Q) and compare tails: their ratio is the peer's p99 over "+
		"anysched's (at least 1: anysched's tail is no longer), their latency cells are p50 / p99 / p99.9, and the best run is the one with the lowest p99. "+
		"Where the load generator shares the 2-core rows' two cores (a host with fewer than 4), their throughput cannot show scaling, "+
		"and their verdict estimates it as 2 x anysched's CPU per request on 1 core over that on 2 cores, which holds while the cores "+
		"do not wait on each other. "+
		"Load average (1 min) was %s at the start and %s at the end of the run.\n", r.env.loadStart, r.loadEnd)
	for _, p := range r.profiles {
		if p.prof == nil {
			continue
		}
		fmt.Fprintf(&b, "\nCPU profile of the anysched process under the %s load (an extra run at %.0f %s, not counted above), "+
			"top %d by flat and by cumulative time, then the cumulative share of the parts of a request (%% of all samples):\n\n```\n%s\n\n%s\n\n%s\n```\n",
			p.load, p.rps, p.unit, r.opts.topN, p.prof.flat, p.prof.cum, p.prof.componentTable())
	}
	return b.String()
}

// familyMarkdown is one family's table and the settings of its loads.
func (r *report) familyMarkdown(b *strings.Builder, fr *familyRun) {
	fmt.Fprintf(b, "### %s\n\n", fr.heading())
	if fr.topo != r.topo() {
		fmt.Fprintf(b, "anysched serves the %s.\n\n", fr.topo)
	}
	b.WriteString("| load | anysched vs | anysched | peer | ratio | target | anysched latency | peer latency | server CPU per request, anysched / peer | server core busy (by the server), anysched / peer |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range fr.rows {
		load := w.sc.title
		if w.what != "" {
			load += ": " + w.what
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n",
			mdEscape(load), mdEscape(w.peer), mdEscape(value(w.a)), mdEscape(value(w.b)), w.ratioString(), w.verdict(),
			latency(w.a), latency(w.b), cpuCell(w.a, w.b), busy(w.a), busy(w.b))
	}
	b.WriteString("\n")
	for _, sc := range fr.scenarios {
		fmt.Fprintf(b, "- %s (%s): %s.", sc.title, sc.tool, mdEscape(sc.settings))
		for _, c := range sc.checks {
			b.WriteString(" " + capitalize(c) + ".")
		}
		var runs []string
		for _, s := range sc.sides {
			if s.measured() {
				runs = append(runs, s.name+" "+runsList(s.runs))
			}
		}
		if len(runs) > 0 {
			b.WriteString(" Runs: " + strings.Join(runs, "; ") + ".")
		}
		for _, n := range sideNotes(sc) {
			b.WriteString(" " + capitalize(n) + ".")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

const (
	beginMarker = "<!-- frontends:begin -->"
	endMarker   = "<!-- frontends:end -->"
	heading     = "## STB front ends"
)

// rewriteDoc replaces the text between the markers in path with body,
// appending the heading and the markers at the end when they are missing.
// The file is replaced atomically (a concurrent reader sees the old or the
// new document, never half of one).
func rewriteDoc(path, body string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := replaceSection(old, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".benchmarks-*.md")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(doc); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func replaceSection(doc []byte, body string) ([]byte, error) {
	i := bytes.Index(doc, []byte(beginMarker))
	j := bytes.Index(doc, []byte(endMarker))
	switch {
	case i < 0 && j < 0:
		doc = bytes.TrimRight(doc, "\n")
		doc = append(doc, []byte("\n\n"+heading+"\n\n"+beginMarker+"\n"+endMarker+"\n")...)
		i = bytes.Index(doc, []byte(beginMarker))
		j = bytes.Index(doc, []byte(endMarker))
	case i < 0 || j < i:
		return nil, errors.New("the frontends markers are missing or out of order")
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(beginMarker)])
	out.WriteString("\n" + strings.TrimRight(body, "\n") + "\n")
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// componentTable lists the cumulative share of each function of interest.
func (p *profileTop) componentTable() string {
	var b strings.Builder
	for _, c := range p.components {
		fmt.Fprintf(&b, "%6.1f%%  %-8s %s\n", p.share(c.cum), c.cum.Round(10*time.Millisecond), c.what)
	}
	return strings.TrimRight(b.String(), "\n")
}
