package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// environment describes the machine and the tools.
type environment struct {
	cpu, kernel, goVersion string
	cores                  int
	wrk                    string
	dnsperf                string // path; "" when not installed
	dnsperfVersion         string
	date                   time.Time
	loadStart              string // /proc/loadavg's 1-minute average when the run began
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func newEnvironment(ctx context.Context, o opts) *environment {
	e := &environment{cpu: "unknown", cores: runtime.NumCPU(), goVersion: runtime.Version(), date: time.Now().UTC(), loadStart: loadAvg()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.kernel = strings.TrimSpace(string(b))
	}
	e.wrk = wrkVersion()
	if o.dnsTool != "internal" {
		if p, err := exec.LookPath("dnsperf"); err == nil {
			e.dnsperf = p
			e.dnsperfVersion = "dnsperf"
			out, _ := exec.CommandContext(ctx, p, "-h").CombinedOutput()
			for _, l := range strings.Split(string(out), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Version "); ok {
					e.dnsperfVersion = "dnsperf " + v
				}
			}
		}
	}
	return e
}

func (e *environment) machine() string {
	s := fmt.Sprintf("%s, %d cores (load generator and server share them), linux %s, %s, %s", e.cpu, e.cores, e.kernel, e.goVersion, e.wrk)
	if e.dnsperfVersion != "" {
		s += ", " + e.dnsperfVersion
	}
	return s
}

// report is everything printed and documented.
type report struct {
	env       *environment
	opts      opts
	topo      string
	http, dns *pairResult
	elapsed   time.Duration
	loadEnd   string
}

func (r *report) pairs() []*pairResult {
	var ps []*pairResult
	for _, p := range []*pairResult{r.http, r.dns} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func sampling(n uint64) string {
	if n <= 1 {
		return "every decision logged, the daemon's default"
	}
	return fmt.Sprintf("one decision in %d logged", n)
}

func verdict(ratio float64) string {
	if ratio >= target {
		return fmt.Sprintf("met (>= %.2f)", target)
	}
	return fmt.Sprintf("MISSED (< %.2f)", target)
}

func latency(r runResult) string {
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

// roundRatios are anysched/bare per round (each pair ran back to back).
func roundRatios(p *pairResult) string {
	var s []string
	for i := range min(len(p.anysched), len(p.bare)) {
		if p.bare[i].rps > 0 {
			s = append(s, fmt.Sprintf("%.3f", p.anysched[i].rps/p.bare[i].rps))
		}
	}
	return strings.Join(s, ", ")
}

func cpuLine(p *pairResult) string {
	a, b := minCPU(p.anysched), minCPU(p.bare)
	if a <= 0 || b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s (x%.2f)", fmtCPU(a), fmtCPU(b), float64(a)/float64(b))
}

func runsList(rs []runResult) string {
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprintf("%.0f", r.rps))
	}
	return strings.Join(s, ", ")
}

// text is the human-readable summary.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "=== STB front ends vs bare baselines (%s) ===\n", r.env.date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine:  %s\n", r.env.machine())
	fmt.Fprintf(&b, "snapshot: %s\n", r.topo)
	fmt.Fprintf(&b, "access log: on, %s, %s lines to io.Discard; best of %d alternating runs of %s each\n",
		sampling(r.opts.sampleEvery), r.opts.logFormat, r.opts.rounds, r.opts.duration)
	for _, p := range r.pairs() {
		a, bb := best(p.anysched), best(p.bare)
		fmt.Fprintf(&b, "\n%s  [%s]\n", p.frontend, p.tool)
		fmt.Fprintf(&b, "  settings: %s\n", p.settings)
		fmt.Fprintf(&b, "  check:    %s\n", p.verified)
		unit := "req/s"
		if strings.HasPrefix(p.frontend, "DNS") {
			unit = "q/s"
		}
		latName := "p50 / p99"
		if a.p50 == 0 {
			latName = "latency"
		}
		fmt.Fprintf(&b, "  anysched: %10.0f %s   %s %s   (runs: %s)%s\n", a.rps, unit, latName, latency(a), runsList(p.anysched), problems(a))
		fmt.Fprintf(&b, "  bare:     %10.0f %s   %s %s   (runs: %s)%s\n", bb.rps, unit, latName, latency(bb), runsList(p.bare), problems(bb))
		fmt.Fprintf(&b, "  ratio anysched/bare: %.3f   target %s   (per round: %s)\n", p.ratio(), verdict(p.ratio()), roundRatios(p))
		per := "request"
		if unit == "q/s" {
			per = "query"
		}
		fmt.Fprintf(&b, "  server CPU per %s, anysched / bare (lowest of the runs): %s\n", per, cpuLine(p))
		for _, n := range p.notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		if p.profile != nil {
			fmt.Fprintf(&b, "\n  CPU profile of the anysched process, extra run at %.0f %s (not counted):\n", p.profiledRPS, unit)
			fmt.Fprintf(&b, "  -- by flat time --\n%s\n", indent(p.profile.flat, "    "))
			fmt.Fprintf(&b, "  -- by cumulative time --\n%s\n", indent(p.profile.cum, "    "))
			fmt.Fprintf(&b, "  -- where the process's CPU goes (cumulative, %% of all samples) --\n%s\n", indent(p.profile.componentTable(), "    "))
		}
	}
	fmt.Fprintf(&b, "\nload average (1 min): %s at start, %s at end; total time: %s\n", r.env.loadStart, r.loadEnd, r.elapsed.Round(time.Second))
	return b.String()
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
	fmt.Fprintf(&b, "Measured %s by `go run ./bench/frontends -doc docs/benchmarks.md` (also run by `scripts/bench.sh`).\n\n",
		r.env.date.Format("2006-01-02"))
	fmt.Fprintf(&b, "Machine: %s.\n\n", r.env.machine())
	fmt.Fprintf(&b, "anysched serves the %s; its access log is on (%s, %s format, to io.Discard, "+
		"its writer goroutine running), as a scheduler runs by default. The bare baselines (a net/http handler that only sets a fixed "+
		"`Location` and writes 302; a miekg/dns handler answering every query with one fixed A record) run in a separate process, "+
		"so they do not share the snapshot's heap. Each pair ran %d times alternating (anysched, bare, ...), %s per run, "+
		"on 127.0.0.1; the table shows the better run of each. Target: anysched at least %.2f of bare.\n\n",
		r.topo, sampling(r.opts.sampleEvery), r.opts.logFormat, r.opts.rounds, r.opts.duration, target)
	b.WriteString("| front end | tool | settings | anysched req/s | bare req/s | ratio | target | anysched p50 / p99 | bare p50 / p99 | server CPU per request, anysched / bare |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.pairs() {
		a, bb := best(p.anysched), best(p.bare)
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.3f | %s | %s | %s | %s |\n",
			p.frontend, p.tool, mdEscape(p.settings), a.rps, bb.rps, p.ratio(), verdict(p.ratio()), latency(a), latency(bb), cpuLine(p))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "The CPU column is the server process's user+system time per answered request (from /proc, lowest of the runs); "+
		"it does not depend on what else competes for the cores, unlike throughput. Load average (1 min) was %s at the start "+
		"and %s at the end of the run.\n\n", r.env.loadStart, r.loadEnd)
	for _, p := range r.pairs() {
		fmt.Fprintf(&b, "- %s: runs anysched %s, bare %s (ratio per round %s). %s.", p.frontend, runsList(p.anysched), runsList(p.bare), roundRatios(p), capitalize(p.verified))
		if a := best(p.anysched); a.p50 == 0 {
			b.WriteString(" dnsperf reports only the average latency, no percentiles.")
		}
		for _, n := range p.notes {
			b.WriteString(" " + capitalize(n) + ".")
		}
		b.WriteString("\n")
	}
	for _, p := range r.pairs() {
		if p.profile == nil {
			continue
		}
		unit := "req/s"
		if strings.HasPrefix(p.frontend, "DNS") {
			unit = "q/s"
		}
		fmt.Fprintf(&b, "\nCPU profile of the anysched process under the %s load (an extra run at %.0f %s, not counted above), "+
			"top %d by flat and by cumulative time, then the cumulative share of the parts of a request (%% of all samples):\n\n```\n%s\n\n%s\n\n%s\n```\n",
			p.frontend, p.profiledRPS, unit, r.opts.topN, p.profile.flat, p.profile.cum, p.profile.componentTable())
	}
	return b.String()
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
