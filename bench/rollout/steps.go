package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/admin/ctl"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// -steps one: the cities rolled out one by one, each checked with
// schedctl rollout, each step measured as a mode is.
const (
	// The windows per step are shorter than a mode's so that 17 steps
	// and the lab's start stay within about a quarter of an hour.
	stepDuration = 12 * time.Second
	stepIdle     = 4 * time.Second
	// stepPNG: no plot unless -png asks for one (the table has every step).
	stepPNG    = ""
	stepsBegin = "<!-- rollout-steps:begin -->"
	stepsEnd   = "<!-- rollout-steps:end -->"
	// probeEvery is how often the city's probe STB asks while its rollout
	// is checked: without requests from the city the center's count of
	// them stands still anyway, and the check could not tell "answered
	// locally" from "not asked".
	probeEvery = 100 * time.Millisecond
	// afterRollout lets the new scheduler's start-up work (snapshot, etcd
	// watch, BGP) pass before the idle window.
	afterRollout = 2 * time.Second
	// The limits given to schedctl rollout: a lab scheduler is ready and
	// announcing within seconds, the routers follow within a second.
	rolloutReady, rolloutLocal = 2 * time.Minute, time.Minute
)

// stepModes is -modes for the steps: 0 to 16 city schedulers.
func stepModes() string {
	ks := make([]string, len(allCities)+1)
	for k := range ks {
		ks[k] = strconv.Itoa(k)
	}
	return strings.Join(ks, ",")
}

// RolloutCheck is what `schedctl rollout CITY -o json` reported (its field
// names), what the city's probe STB saw while it ran, and how long it took.
type RolloutCheck struct {
	OK                bool          `json:"ok"`
	Reason            string        `json:"reason,omitempty"`
	Steps             []RolloutStep `json:"steps"`
	AnnouncedSeconds  *float64      `json:"announced_seconds,omitempty"`
	LastCenterSeconds *float64      `json:"last_center_answer_seconds,omitempty"`
	CenterAnswered    uint64        `json:"center_answered"` // the city's STBs the center answered while it ran
	CenterFailed      uint64        `json:"center_failed"`
	Seconds           float64       `json:"seconds"` // the rollout (probe and command), start to end
	ProbeCenter       int           `json:"probe_center"`
	ProbeLocal        int           `json:"probe_local"`
	ProbeOther        int           `json:"probe_other"`
	ProbeFailed       int           `json:"probe_failed"`
	ProbeFirstErr     string        `json:"probe_first_error,omitempty"`
	ProbeFailedAt     []float64     `json:"probe_failed_at,omitempty"` // seconds from the rollout's start
}

// RolloutStep is one of schedctl rollout's steps as it ended.
type RolloutStep struct {
	Name           string  `json:"name"`
	OK             bool    `json:"ok"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Detail         string  `json:"detail"`
}

// runCtl is the hidden `rollout ctl` mode: schedctl (internal/admin/ctl) run in
// this process inside the center's namespace, where the lab's admin API
// listens.
func runCtl(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return ctl.Run(ctx, args, os.Stdout, os.Stderr)
}

// rollOneByOne starts from the center alone and adds the cities in order:
// each city's scheduler is started while schedctl rollout checks it, then
// the step is measured. A check that fails ends the run (the steps before
// it are kept).
func rollOneByOne(ctx context.Context, l *lab.Lab, self, dir string, set Settings, res *Results) error {
	t0 := time.Now()
	ours := host.NetNS(l.NS(""))
	before := host.Procs()
	defer func() {
		res.Took = time.Since(t0).Seconds()
		res.Others = busiest(before, host.Procs(), time.Since(t0), ours)
	}()
	step("step 0: the center alone (every city scheduler stopped: SIGTERM, withdraw, drain, exit)")
	if err := setMode(ctx, l, 0); err != nil {
		return err
	}
	m, err := runMode(ctx, l, self, dir, 0, set)
	if err != nil {
		return err
	}
	res.Modes = append(res.Modes, m)
	fmt.Print(stepTable(&Results{Modes: []Mode{m}}))
	for i, c := range allCities {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		step("step %d: %s's scheduler started while schedctl rollout %s checks it", i+1, c, c)
		rc, err := rollOut(ctx, l, self, i)
		if err != nil {
			return err
		}
		host.Sleep(ctx, afterRollout)
		m, err := runMode(ctx, l, self, dir, i+1, set)
		if err != nil {
			return err
		}
		m.City, m.Rollout = c, rc
		res.Modes = append(res.Modes, m)
		fmt.Print(stepTable(&Results{Modes: []Mode{m}}))
	}
	return nil
}

// rollOut is one city's rollout as an operator runs it: schedctl rollout
// CITY first, the city's scheduler started once it watches, a probe STB in
// the city asking throughout.
func rollOut(ctx context.Context, l *lab.Lab, self string, i int) (*RolloutCheck, error) {
	city := allCities[i]
	rc := &RolloutCheck{}
	t0 := time.Now() // the probe's and the command's start
	pctx, stopProbe := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for pctx.Err() == nil {
			inst, code, err := l.Request(pctx, i)
			switch {
			case pctx.Err() != nil: // cut off by the end of the rollout: not counted
				return
			case err != nil || code != 302:
				rc.ProbeFailed++
				rc.ProbeFailedAt = append(rc.ProbeFailedAt, time.Since(t0).Seconds())
				if rc.ProbeFirstErr == "" {
					rc.ProbeFirstErr = fmt.Sprintf("HTTP %d", code)
					if err != nil {
						rc.ProbeFirstErr = err.Error()
					}
				}
			case inst == lab.CenterID:
				rc.ProbeCenter++
			case inst == lab.PrimaryID(city):
				rc.ProbeLocal++
			default:
				rc.ProbeOther++
			}
			host.Sleep(pctx, probeEvery)
		}
	}()
	defer func() { stopProbe(); pwg.Wait() }()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	argv := append([]string{"netns", "exec", l.NS("ctr"), self, "ctl"}, l.SchedctlArgs()...)
	argv = append(argv, "rollout", city, "-o", "json", "--ready-timeout", rolloutReady.String(), "--local-timeout", rolloutLocal.String())
	cmd := exec.CommandContext(cctx, "ip", argv...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("schedctl rollout %s: %w", city, err)
	}
	// The progress lines go to standard error; the first says the command
	// has read the center's counts, so the scheduler starts after it.
	watching, read := make(chan struct{}), make(chan struct{})
	var progress strings.Builder
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		for n := 0; sc.Scan(); n++ {
			fmt.Println("  " + sc.Text())
			progress.WriteString(sc.Text() + "\n")
			if n == 0 {
				close(watching)
			}
		}
	}()
	select {
	case <-watching:
	case <-read:
	case <-time.After(15 * time.Second):
	case <-ctx.Done():
	}
	if err := l.Restart(lab.PrimaryID(city)); err != nil {
		cancel()
		<-read
		_ = cmd.Wait()
		return nil, err
	}
	<-read
	werr := cmd.Wait()
	rc.Seconds = time.Since(t0).Seconds()
	stopProbe()
	pwg.Wait()
	if err := json.Unmarshal(out.Bytes(), rc); err != nil {
		return nil, fmt.Errorf("schedctl rollout %s: %v, and no report (%v): %s", city, werr, err, strings.TrimSpace(progress.String()))
	}
	if !rc.OK || werr != nil {
		return rc, fmt.Errorf("schedctl rollout %s failed: %s", city, cmp(rc.Reason, fmt.Sprint(werr)))
	}
	fmt.Printf("  checked in %.1fs; the probe STB got %d answers from the center, %d from %s, %d failed\n",
		rc.Seconds, rc.ProbeCenter, rc.ProbeLocal, lab.PrimaryID(city), rc.ProbeFailed)
	return rc, nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// renderSteps prints the steps' table and writes the plot and the section.
func renderSteps(res *Results, png, doc string) error {
	fmt.Println()
	fmt.Print(stepTable(res))
	if png != "" {
		if err := plotResults(res, png); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Println("plot:", png)
	}
	if doc != "" {
		old, _ := os.ReadFile(doc)
		if err := writeDocAt(doc, stepSection(res, png, modesFromDoc(old)), stepsBegin, stepsEnd, docEnd); err != nil {
			return err
		}
		fmt.Println("section written to", doc)
	}
	return nil
}

// stepTable renders the steps as a markdown table.
func stepTable(r *Results) string {
	var b strings.Builder
	b.WriteString("| step: city added | city schedulers (report mode) | schedctl rollout: checked in, announcing at, center's last answer | probe STB during it: center / own / failed | STB requests | failed | center share | center CPU under load | center CPU idle | city schedulers' CPU (sum) | machine busy | RTT p50 | RTT p99 | p50 local / center | other labs' namespaces |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Modes {
		name, check, probe := "0: center alone", "-", "-"
		if m.City != "" {
			name = fmt.Sprintf("%d: %s", m.K, m.City)
		}
		if rc := m.Rollout; rc != nil {
			check = fmt.Sprintf("%s %.1f s, %s, %s", okText(rc.OK), rc.Seconds, secs(rc.AnnouncedSeconds), secsOr(rc.LastCenterSeconds, "none"))
			probe = fmt.Sprintf("%d / %d / %d", rc.ProbeCenter, rc.ProbeLocal, rc.ProbeFailed)
		}
		local, center := m.p50s()
		fmt.Fprintf(&b, "| %s | %d (%s) | %s | %s | %d | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.0f%% | %s | %s | %s / %s | %d |\n",
			name, m.K, reportMode(m.K), check, probe, m.Requests, m.Failures, m.share(), m.CenterCPU, m.CenterIdle, m.CitiesCPU, m.MachineBusy,
			ms(m.P50), ms(m.P99), local, center, m.ForeignNS)
	}
	return b.String()
}

func okText(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAILED"
}

func secs(v *float64) string { return secsOr(v, "-") }

func secsOr(v *float64, none string) string {
	if v == nil {
		return none
	}
	return fmt.Sprintf("+%.1f s", *v)
}

// docModes are the modes' figures as the modes' section in the document
// shows them (so the steps can be set against a run of the modes).
type docModes struct {
	ok                           bool
	cpu0, idle0, cpu16, cities16 float64
	p50at0, p50at16              string
	window                       string
}

// modesFromDoc reads the 0- and 16-scheduler rows of the modes' table.
func modesFromDoc(doc []byte) docModes {
	var d docModes
	i := bytes.Index(doc, []byte(docBegin))
	j := bytes.Index(doc, []byte(docEnd))
	if i < 0 || j < i {
		return d
	}
	var got0, got16 bool
	for _, line := range strings.Split(string(doc[i:j]), "\n") {
		f := strings.Split(line, "|")
		if len(f) < 12 {
			if w, ok := strings.CutPrefix(strings.TrimSpace(line), "- CPU: utime+stime of the process from `/proc/<pid>/stat` over the "); ok {
				d.window, _, _ = strings.Cut(w, " ")
			}
			continue
		}
		pc := func(s string) float64 {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
			return v
		}
		switch strings.TrimSpace(f[1]) {
		case "0 (1)":
			d.cpu0, d.idle0, d.p50at0, got0 = pc(f[5]), pc(f[6]), strings.TrimSpace(f[10]), true
		case "16 (5)":
			d.cpu16, d.cities16, d.p50at16, got16 = pc(f[5]), pc(f[7]), strings.TrimSpace(f[10]), true
		}
	}
	d.ok = got0 && got16 && d.cpu0 > 0
	return d
}

// stepSection is the markdown written between the steps' markers, right
// after the modes' section.
func stepSection(r *Results, png string, modes docModes) string {
	s := r.Settings
	var b strings.Builder
	b.WriteString(stepsBegin + "\n")
	b.WriteString("### City by city, verified with schedctl rollout\n\n")
	b.WriteString("The report's operator added the city schedulers a few at a time. `-steps one` adds them one at a time in the\n" +
		"same 16-city lab, the way `docs/operations.md` (\"Rolling out a new city\") has an operator do it: from the\n" +
		"center alone (every city scheduler stopped, every city checked to be answered by the center), city k's\n" +
		"scheduler is started while `schedctl rollout CITY` checks it against the center (`internal/admin/ctl` run by the\n" +
		"bench inside the center's namespace, with the lab's admin certificate): 1/3 the region, its servers and\n" +
		"zones in the applied topology; 2/3 its scheduler registered, ready and announcing the /32 over an\n" +
		"established BGP session; 3/3 the center's count of the city's STBs it answered standing still for 3 s,\n" +
		"none of them answered with an error. A probe STB in the city asks every 100 ms while the check runs, so\n" +
		"that there are STBs for the center to give up. Once the check has passed, the step is measured as a mode\n" +
		"above, over shorter windows.\n\n")
	b.WriteString("```sh\nmake build && go run ./bench/rollout -steps one -doc docs/benchmarks.md\n```\n\n")
	b.WriteString("Settings:\n\n")
	load := ""
	if f := strings.Fields(r.LoadAvg); len(f) >= 3 {
		load = fmt.Sprintf("; load average %s (1 / 5 / 15 min) when the run began", strings.Join(f[:3], " / "))
	}
	took := ""
	if r.Took > 0 {
		took = fmt.Sprintf(", the 17 steps in %.1f minutes", r.Took/60)
	}
	others := ""
	if len(r.Others) > 0 {
		parts := make([]string, len(r.Others))
		for i, o := range r.Others {
			parts[i] = fmt.Sprintf("%s (nice %d) %.0f%%", o.Comm, o.Nice, o.CPU)
		}
		others = fmt.Sprintf("; outside this lab, the busiest processes still running at the end used over the steps, in %% of one core: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "- Machine: %s; measured %s%s%s. Other engineers' labs and tests ran on it meanwhile%s:\n"+
		"  \"machine busy\" (all cores) and the last column (their namespaces) say how much.\n", r.Machine, r.When.Format("2006-01-02"), load, took, others)
	rate := float64(s.Cities*s.STBs) / s.Pause.Seconds()
	fmt.Fprintf(&b, "- Load and CPU as for the modes (%d STBs per city, one request every %s each, %.0f requests/s in all, a new\n"+
		"  connection per request), over a %s load window per step and a %s idle window before it; the probe STB's\n"+
		"  requests are not in the load's figures.\n", s.STBs, s.Pause, rate, s.Duration, s.Idle)
	if s.DistanceDelays && s.DelayBy != "" {
		lo, hi := linkRange(s.Links)
		how := "netem"
		if s.DelayBy == "tun" {
			how = "the lab's delayed TUN links"
		}
		fmt.Fprintf(&b, "- Network: as for the modes, each city-core link delayed by the city's distance to Hefei, %s to %s one way (%s).\n", lo, hi, how)
	}
	b.WriteString("- schedctl rollout: `--ready-timeout " + rolloutReady.String() + " --local-timeout " + rolloutLocal.String() + "`, `--settle` 3 s (its default); \"checked in\" is the command's\n" +
		"  run, \"announcing at\" when it saw the scheduler ready and announcing, \"center's last answer\" the center's last\n" +
		"  answer to the city (both from the command's start; the scheduler is started once the command watches).\n\n")
	b.WriteString(stepTable(r))
	b.WriteString("\n")
	b.WriteString(host.ImageLink("center share, center CPU and STB latency as the cities are rolled out one by one", png))

	var rolled, failedLoad, probeCenter, probeLocal, probeFailed, probeFailedSteps int
	var took3, ann, last []float64
	var probeErrs []string
	for _, m := range r.Modes {
		failedLoad += m.Failures
		rc := m.Rollout
		if rc == nil {
			continue
		}
		if rc.OK {
			rolled++
		}
		probeCenter += rc.ProbeCenter
		probeLocal += rc.ProbeLocal
		probeFailed += rc.ProbeFailed
		if rc.ProbeFailed > 0 {
			probeFailedSteps++
			if !slices.Contains(probeErrs, rc.ProbeFirstErr) {
				probeErrs = append(probeErrs, rc.ProbeFirstErr)
			}
		}
		took3 = append(took3, rc.Seconds)
		if rc.AnnouncedSeconds != nil {
			ann = append(ann, *rc.AnnouncedSeconds)
		}
		if rc.LastCenterSeconds != nil {
			last = append(last, *rc.LastCenterSeconds)
		}
	}
	fmt.Fprintf(&b, "- **Every step checked**: %d of %d rollouts passed all three checks, in %s (median %s); the scheduler was seen\n"+
		"  ready and announcing %s after the start, the center's last answer to the city came %s after it. None of the %d load\n"+
		"  windows' requests failed%s.\n", rolled, len(allCities), spread(took3, "s"), median(took3, "s"), spread(ann, "s"), spread(last, "s"),
		len(r.Modes), map[bool]string{true: "", false: fmt.Sprintf(" (%d did)", failedLoad)}[failedLoad == 0])
	if probeFailed > 0 {
		fmt.Fprintf(&b, "- **The STB side sees what the check cannot.** The probe STBs got %d answers from the center and %d from their\n"+
			"  own scheduler during the checks; %d request(s), in %d of the %d rollouts, failed (%s%s). A request\n"+
			"  that reaches no scheduler is counted by no center, so `schedctl rollout` cannot see it (its step 3 counts\n"+
			"  the center's answers with an error); count such failures on the STB side, as for the drills.\n",
			probeCenter, probeLocal, probeFailed, probeFailedSteps, len(allCities), curlText(probeErrs), failedAt(r))
	} else {
		fmt.Fprintf(&b, "- The probe STBs got %d answers from the center and %d from their own scheduler during the checks, none failed.\n",
			probeCenter, probeLocal)
	}
	m0, ok0 := mode(r, 0)
	m16, ok16 := mode(r, 16)
	if ok0 && ok16 && m0.CenterCPU > 0 {
		var ks, cpus []float64
		for _, m := range r.Modes {
			ks = append(ks, float64(m.K))
			cpus = append(cpus, m.CenterCPU)
		}
		a, sl, r2 := fit(ks, cpus)
		var res2 float64
		for i := range ks {
			e := cpus[i] - (a + sl*ks[i])
			res2 += e * e
		}
		sd := math.Sqrt(res2 / float64(max(len(ks)-2, 1)))
		fmt.Fprintf(&b, "- **The center's share falls by one sixteenth a step**, %.0f%% to %.0f%%, (16-k)/16 as in the modes. **Its CPU under\n"+
			"  load goes from %.1f%% to %.1f%% of a core, to %.0f%% of step 0, against 30%% -> 4%% (%.0f%%) in the report**: the\n"+
			"  STB-driven part (under load minus idle, same step) falls from %s to %s points, but the idle part grows\n"+
			"  from %.1f%% to %.1f%%, most likely because each city scheduler is a client of the center's embedded etcd\n"+
			"  (as in the modes). A least-squares line through the 17 steps gives %.1f %+.2f x k (R² = %.2f; the steps\n"+
			"  scatter about it by %.1f points with %s windows).\n",
			m0.share(), m16.share(), m0.CenterCPU, m16.CenterCPU, 100*m16.CenterCPU/m0.CenterCPU, 100*reportCPU16/reportCPU0,
			points(m0.CenterCPU-m0.CenterIdle), points(m16.CenterCPU-m16.CenterIdle), m0.CenterIdle, m16.CenterIdle, a, sl, r2, sd, s.Duration)
		if stb0 := m0.CenterCPU - m0.CenterIdle; modes.ok && stb0 > 0 {
			fmt.Fprintf(&b, "- **Against the modes above** (%s windows, another run, another build): they went from %.1f%% to %.1f%%\n"+
				"  (%.0f%%). Their center spent %.1f points above idle on the same %.0f requests/s with no city scheduler, this\n"+
				"  one %s (%.1f times as much there; why was not measured)%s. RTT p50 went %s -> %s there, %s -> %s\n"+
				"  here; the city schedulers together used %.1f%% of a core at 16 there, %.1f%% here.\n",
				cmp(modes.window, "longer"), modes.cpu0, modes.cpu16, 100*modes.cpu16/modes.cpu0, modes.cpu0-modes.idle0, rate,
				points(stb0), (modes.cpu0-modes.idle0)/stb0, fallText(stb0, m16.CenterIdle-m0.CenterIdle),
				modes.p50at0, modes.p50at16, ms(m0.P50), ms(m16.P50), modes.cities16, m16.CitiesCPU)
		}
	}
	b.WriteString(stepsEnd + "\n")
	return b.String()
}

// spread is "a to b unit" over vs.
func spread(vs []float64, unit string) string {
	if len(vs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f to %.1f %s", slices.Min(vs), slices.Max(vs), unit)
}

func median(vs []float64, unit string) string {
	if len(vs) == 0 {
		return "-"
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return fmt.Sprintf("%.1f %s", s[len(s)/2], unit)
}

// loadAvg is /proc/loadavg.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

// curlText names curl's exit codes in the probe's errors.
func curlText(errs []string) string {
	known := map[string]string{
		"curl: exit status 7":  "curl could not connect: refused or unreachable",
		"curl: exit status 28": "curl timed out",
		"curl: exit status 56": "curl: connection reset",
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e
		for k, v := range known {
			if strings.HasSuffix(e, k) {
				out[i] = v
			}
		}
	}
	return strings.Join(out, "; ")
}

// failedAt lists when the probes failed, if the results say.
func failedAt(r *Results) string {
	var at []string
	for _, m := range r.Modes {
		if m.Rollout != nil {
			for _, t := range m.Rollout.ProbeFailedAt {
				at = append(at, fmt.Sprintf("%s +%.1f s", m.City, t))
			}
		}
	}
	if len(at) == 0 {
		return ""
	}
	return "; at " + strings.Join(at, ", ")
}

// OtherProc is a process outside the lab and its CPU use over the steps.
type OtherProc struct {
	Comm string  `json:"comm"`
	Nice int     `json:"nice"`
	CPU  float64 `json:"cpu"` // % of one core
}

// busiest are the (at most 3) processes outside the lab and this one
// still running at the end that used at least 5% of a core over the steps
// (one started meanwhile counts all its time; one that ended is missed).
func busiest(before, after map[int]host.Proc, d time.Duration, ours map[string]string) []OtherProc {
	var out []OtherProc
	for pid, a := range after {
		if _, lab := ours[a.NetNS]; pid == os.Getpid() || lab {
			continue
		}
		b, ok := before[pid]
		if !ok || b.Comm != a.Comm {
			b = host.Proc{}
		}
		if c := host.Pct(a.Ticks-b.Ticks, d); c >= 5 {
			out = append(out, OtherProc{Comm: a.Comm, Nice: a.Nice, CPU: c})
		}
	}
	slices.SortFunc(out, func(x, y OtherProc) int { return int(y.CPU*100 - x.CPU*100) })
	return out[:min(len(out), 3)]
}

// points is a difference of CPU figures, without a "-0.0".
func points(v float64) string {
	if math.Abs(v) < 0.05 {
		return "0.0"
	}
	return fmt.Sprintf("%.1f", v)
}

// fallText says whether the STB-driven part at 0 could outweigh the idle
// part's growth.
func fallText(stb0, idleGrowth float64) string {
	if stb0 <= idleGrowth {
		return fmt.Sprintf(": here all of it going (%.1f points) was less than the idle part's growth (%.1f), so the total could not fall", stb0, idleGrowth)
	}
	return ""
}
