// Command rollout reproduces the deployment report's experiment in the province lab: the
// operator deployed 0, 4, 8, 12 and 16 city schedulers (the report's modes 1
// to 5) and saw the center's CPU load fall from 30% to 4% and STB response
// latency fall.
//
// It brings up a 16-city lab once (network namespaces, BIRD routers, the
// real daemons; root), then for each number k of city schedulers stops all
// but the first k (starting stopped ones again as needed), waits until the
// routers agree (cities with a scheduler answered by it, the others by the
// center), measures the center's idle CPU, and runs the same open-loop STB
// load from every city's client namespace. It reports per mode the center's
// share of the requests, the center process's CPU use (utime+stime from
// /proc, % of one core), and the STBs' round trip p50/p99.
//
// With -steps one it starts instead from the center alone and rolls the 16
// cities out one by one, as an operator would: each city's scheduler is
// started while `schedctl rollout CITY` (internal/admin/ctl, in this process,
// inside the center's namespace) checks it against the center, and every
// step is measured as a mode is, over shorter windows (steps.go).
//
//	make build && go run ./bench/rollout [-doc docs/benchmarks.md] [-png docs/img/rollout.png]
//	make build && go run ./bench/rollout -steps one [-doc docs/benchmarks.md]
//	go run ./bench/rollout -results /tmp/anysched-rollout/results.json -doc docs/benchmarks.md   # re-render only
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anysched/anysched/bench/internal/host"
	"github.com/anysched/anysched/internal/testbed/lab"
)

// allCities is the whole sample province.
var allCities = lab.AllCities()

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "client":
		err = runClient(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "ctl":
		err = runCtl(os.Args[2:])
	default:
		err = run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(1)
	}
}

// Settings are the run's parameters (kept in the results file).
type Settings struct {
	Cities    int           `json:"cities"`
	Modes     []int         `json:"modes"`
	STBs      int           `json:"stbs_per_city"`
	Pause     time.Duration `json:"pause"`
	Duration  time.Duration `json:"duration"`
	Idle      time.Duration `json:"idle"`
	Delay     time.Duration `json:"delay"`
	KeepAlive bool          `json:"keepalive"`
	NoNetem   bool          `json:"no_netem"`
	// DistanceDelays: each city-core link has the one-way delay of the
	// city's distance to the capital (Links); DelayBy says what applied
	// them: "netem", "tun" (the lab's delayed TUN links) or "" (none).
	DistanceDelays bool            `json:"distance_delays,omitempty"`
	Links          []lab.CityDelay `json:"links,omitempty"`
	DelayBy        string          `json:"delay_by,omitempty"`
	// Steps is "one" when the cities were rolled out one by one, each
	// checked with schedctl rollout ("" for the modes).
	Steps string `json:"steps,omitempty"`
}

// Mode is one measured mode.
type Mode struct {
	K            int     `json:"k"` // city schedulers running
	Requests     int     `json:"requests"`
	Failures     int     `json:"failures"`
	Skipped      int     `json:"skipped"`
	Center       int     `json:"center"`          // answered by the center
	Local        int     `json:"local"`           // answered by the city's own scheduler
	Other        int     `json:"other"`           // answered by another city's scheduler (should be 0)
	CenterCPU    float64 `json:"center_cpu"`      // % of one core during the load window
	CenterIdle   float64 `json:"center_cpu_idle"` // % of one core without load, same mode
	CitiesCPU    float64 `json:"cities_cpu"`      // running city schedulers together, % of one core
	GenCPU       float64 `json:"generator_cpu"`   // the 16 STB client processes, % of one core
	MachineBusy  float64 `json:"machine_busy"`    // whole machine, % of all cores
	P50          float64 `json:"p50_ms"`
	P99          float64 `json:"p99_ms"`
	LocalP50     float64 `json:"local_p50_ms"`
	CenterP50    float64 `json:"center_p50_ms"`
	Window       float64 `json:"window_s"`
	FirstFailure string  `json:"first_failure,omitempty"`
	ForeignNS    int     `json:"foreign_namespaces"` // other labs' namespaces on the machine during the window
	// City and Rollout: with -steps one, the city this step added and
	// what its schedctl rollout found.
	City    string        `json:"city,omitempty"`
	Rollout *RolloutCheck `json:"rollout,omitempty"`
}

// Results is everything a run measured.
type Results struct {
	When     time.Time `json:"when"`
	Machine  string    `json:"machine"`
	Settings Settings  `json:"settings"`
	Modes    []Mode    `json:"modes"`
	// LoadAvg is /proc/loadavg when the run began (other engineers' work).
	LoadAvg string `json:"loadavg,omitempty"`
	// Took is how long the steps took, lab start excluded (-steps one).
	Took float64 `json:"took_s,omitempty"`
	// Others: the busiest processes outside the lab during the steps.
	Others []OtherProc `json:"others,omitempty"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("rollout", flag.ContinueOnError)
	prefix := fs.String("prefix", "ass", "namespace name prefix (keep it your own)")
	bin := fs.String("bin", "bin", "directory with the built daemons and schedctl (make build)")
	dir := fs.String("dir", "/tmp/anysched-rollout", "work directory: configs, logs, results.json")
	modesFlag := fs.String("modes", "0,4,8,12,16", "numbers of city schedulers to measure")
	stbs := fs.Int("stbs", 4, "STBs per city")
	pause := fs.Duration("pause", 100*time.Millisecond, "each STB sends one request this often")
	dur := fs.Duration("duration", 20*time.Second, "load window per mode")
	idle := fs.Duration("idle", 5*time.Second, "idle window per mode (center CPU without STB load)")
	delay := fs.Duration("delay", 0, "a fixed round-trip delay on every city-core link instead of the distance-derived ones")
	keepalive := fs.Bool("keepalive", false, "STBs reuse one connection (default: a new connection per request, as a zapping STB)")
	doc := fs.String("doc", "", "write the section into this markdown file (docs/benchmarks.md)")
	png := fs.String("png", "docs/img/rollout.png", "plot file (empty: none)")
	resultsIn := fs.String("results", "", "render a saved results.json instead of running the lab")
	steps := fs.String("steps", "", `"one": from the center alone, roll the cities out one by one, each started while schedctl rollout checks it, measured after each (-duration 12s, -idle 4s and no plot unless given)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch *steps {
	case "":
	case "one":
		if given["modes"] {
			return errors.New("-modes and -steps one: the steps are 0 to 16 city schedulers, one more each")
		}
		*modesFlag = stepModes()
		if !given["duration"] {
			*dur = stepDuration
		}
		if !given["idle"] {
			*idle = stepIdle
		}
		if !given["png"] {
			*png = stepPNG
		}
	default:
		return fmt.Errorf("-steps %q: want one", *steps)
	}
	var res *Results
	if *resultsIn != "" {
		res = &Results{}
		if err := host.ReadResults(*resultsIn, res); err != nil {
			return err
		}
	} else {
		var modes []int
		for _, s := range strings.Split(*modesFlag, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || k < 0 || k > len(allCities) {
				return fmt.Errorf("-modes: %q is not 0..16", s)
			}
			modes = append(modes, k)
		}
		set := Settings{Cities: len(allCities), Modes: modes, STBs: *stbs, Pause: *pause, Duration: *dur,
			Idle: *idle, Delay: *delay, KeepAlive: *keepalive, DistanceDelays: *delay == 0, Steps: *steps}
		var err error
		res, err = measure(*prefix, *bin, *dir, set)
		if res != nil && len(res.Modes) > 0 {
			host.SaveResults(*dir, res)
		}
		if err != nil {
			return err
		}
	}
	if res.Settings.Steps == "one" {
		if !given["png"] { // also when re-rendering: never over the modes' plot
			*png = stepPNG
		}
		return renderSteps(res, *png, *doc)
	}
	fmt.Println()
	fmt.Print(table(res))
	return host.Publish(*png, *doc, docBegin, docEnd, func(png string) error { return plotResults(res, png) },
		func(png string) string { return section(res, png) })
}

// measure runs the lab through every mode. The lab is always torn down.
func measure(prefix, bin, dir string, set Settings) (res *Results, err error) {
	absBin, self, err := host.Prepare(bin, []string{"ip", "bird", "birdc", "curl", "tc"}, []string{"central-scheduler", "regional-scheduler", "schedctl"})
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	_ = os.RemoveAll(dir)
	res = &Results{When: time.Now().UTC(), Machine: host.Machine(), Settings: set, LoadAvg: loadAvg()}
	step("bringing up the lab: %d cities, BIRD routers, core, center (namespaces %s-*)", len(allCities), prefix)
	t0 := time.Now()
	l, err := lab.Up(ctx, lab.Options{Prefix: prefix, Cities: allCities, Bin: absBin, Dir: dir, Delay: set.Delay, DistanceDelays: set.DistanceDelays})
	if err != nil {
		lab.Cleanup(prefix)
		return nil, err
	}
	defer func() { err = errors.Join(err, host.Down(l, prefix, dir)) }()
	res.Settings.NoNetem = l.NoNetem
	res.Settings.Links = l.LinkDelays()
	res.Settings.DelayBy = "netem"
	if l.NoNetem {
		res.Settings.DelayBy = "tun"
	}
	fmt.Printf("  city-core link delays (one-way, by %s): %s\n", res.Settings.DelayBy, lab.FormatDelays(res.Settings.Links))
	step("applying the topology through the center's admin API")
	out, err := host.Apply(ctx, l, absBin, dir, 60*time.Second)
	if err != nil {
		return res, err
	}
	fmt.Print("  " + out)
	fmt.Printf("  lab up in %s\n", time.Since(t0).Round(time.Second))
	if set.Steps == "one" {
		return res, rollOneByOne(ctx, l, self, dir, set, res)
	}

	for _, k := range set.Modes {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		step("mode: %d city schedulers (report mode %s)", k, reportMode(k))
		if err := setMode(ctx, l, k); err != nil {
			return res, err
		}
		m, err := runMode(ctx, l, self, dir, k, set)
		if err != nil {
			return res, err
		}
		res.Modes = append(res.Modes, m)
		fmt.Print(table(&Results{Modes: []Mode{m}}))
	}
	return res, nil
}

// setMode leaves the first k cities' schedulers running and the rest stopped,
// then waits until every city's STBs reach the expected scheduler.
func setMode(ctx context.Context, l *lab.Lab, k int) error {
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i, c := range allCities {
		p := l.Proc(lab.PrimaryID(c))
		running := p != nil && !p.Wait(0)
		switch {
		case i >= k && running:
			wg.Add(1)
			go func() { // graceful: withdraw, drain, exit
				defer wg.Done()
				_ = p.Signal(syscall.SIGTERM)
				if !p.Wait(20 * time.Second) {
					_ = p.Signal(syscall.SIGKILL)
					p.Wait(5 * time.Second)
				}
			}()
		case i < k && !running:
			if err := l.Restart(lab.PrimaryID(c)); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Wait for routing: each city answered by its own scheduler or the center,
	// twice in a row.
	want := func(i int) string {
		if i < k {
			return lab.PrimaryID(allCities[i])
		}
		return lab.CenterID
	}
	if err := host.Converge(ctx, l, allCities, want, 120*time.Second, 200*time.Millisecond); err != nil {
		return err
	}
	fmt.Printf("  routing converged in %s: %d cities answered by their own scheduler, %d by the center\n",
		time.Since(t0).Round(100*time.Millisecond), k, len(allCities)-k)
	host.Sleep(ctx, 5*time.Second) // let the BGP sessions and etcd watches of restarted schedulers settle
	return ctx.Err()
}

// runMode measures one mode: the idle window, then the STB load window.
func runMode(ctx context.Context, l *lab.Lab, self, dir string, k int, set Settings) (Mode, error) {
	m := Mode{K: k}
	center, err := pidIn(l.NS("ctr"), "central-schedul")
	if err != nil {
		return m, err
	}
	var cityPIDs []int
	for i := range k {
		pid, err := pidIn(l.NS(fmt.Sprintf("s%d", i+1)), "regional-sched")
		if err != nil {
			return m, err
		}
		cityPIDs = append(cityPIDs, pid)
	}

	// Idle: the center's own background work (etcd, BGP, the schedulers' watches and leases).
	c0, _ := procCPU(center)
	t0 := time.Now()
	host.Sleep(ctx, set.Idle)
	c1, _ := procCPU(center)
	m.CenterIdle = host.Pct(c1-c0, time.Since(t0))

	// Load: every city's client namespace, the same open-loop load.
	start := time.Now().Add(1500 * time.Millisecond)
	results := make([]clientResult, len(allCities))
	genCPU := make([]time.Duration, len(allCities))
	errs := make([]error, len(allCities))
	var wg sync.WaitGroup
	for i, c := range allCities {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "ip", "netns", "exec", l.NS(fmt.Sprintf("c%d", i+1)), self, "client",
				"-topology", filepath.Join(dir, "topology.yaml"), "-city", c, "-stbs", strconv.Itoa(set.STBs),
				"-pause", set.Pause.String(), "-duration", set.Duration.String(), "-start", strconv.FormatInt(start.UnixNano(), 10),
				"-seed", strconv.Itoa(i+1), "-keepalive="+strconv.FormatBool(set.KeepAlive))
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			// One thread and little GC per client: the 16 generators must stay light.
			cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GOGC=400")
			if err := cmd.Run(); err != nil {
				errs[i] = fmt.Errorf("client %s: %v: %s", c, err, bytes.TrimSpace(stderr.Bytes()))
				return
			}
			genCPU[i] = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			errs[i] = json.Unmarshal(out.Bytes(), &results[i])
		}()
	}
	fmt.Printf("  load: %d cities x %d STBs, one request per STB every %s, for %s\n", len(allCities), set.STBs, set.Pause, set.Duration)
	host.Sleep(ctx, time.Until(start))
	cc0, _ := procCPU(center)
	var sum0 int64
	for _, p := range cityPIDs {
		v, _ := procCPU(p)
		sum0 += v
	}
	busy0, total0 := host.MachineCPU()
	m.ForeignNS = host.ForeignNS(l.NS(""))
	w0 := time.Now()
	host.Sleep(ctx, time.Until(start.Add(set.Duration)))
	cc1, _ := procCPU(center)
	var sum1 int64
	for _, p := range cityPIDs {
		v, _ := procCPU(p)
		sum1 += v
	}
	busy1, total1 := host.MachineCPU()
	m.ForeignNS = max(m.ForeignNS, host.ForeignNS(l.NS("")))
	window := time.Since(w0)
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return m, err
	}
	m.Window = window.Seconds()
	m.CenterCPU = host.Pct(cc1-cc0, window)
	m.CitiesCPU = host.Pct(sum1-sum0, window)
	if total1 > total0 {
		m.MachineBusy = 100 * float64(busy1-busy0) / float64(total1-total0)
	}
	var gen time.Duration
	for _, d := range genCPU {
		gen += d
	}
	m.GenCPU = 100 * gen.Seconds() / set.Duration.Seconds()

	var all, local, centerLat []int64
	for i, r := range results {
		m.Requests += r.Requests
		m.Failures += r.Failures
		m.Skipped += r.Skipped
		if m.FirstFailure == "" && r.FirstErr != "" {
			m.FirstFailure = r.City + ": " + r.FirstErr
		}
		for inst, n := range r.Answered {
			switch inst {
			case lab.CenterID:
				m.Center += n
			case lab.PrimaryID(allCities[i]):
				m.Local += n
			default:
				m.Other += n
			}
		}
		local = append(local, r.LocalUS...)
		centerLat = append(centerLat, r.CenterUS...)
	}
	all = append(append(all, local...), centerLat...)
	m.P50, m.P99 = percentileMS(all, 50), percentileMS(all, 99)
	m.LocalP50, m.CenterP50 = percentileMS(local, 50), percentileMS(centerLat, 50)
	return m, nil
}

// pidIn finds the process whose comm starts with name inside a namespace.
func pidIn(ns, name string) (int, error) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return 0, fmt.Errorf("ip netns pids %s: %w", ns, err)
	}
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if strings.HasPrefix(strings.TrimSpace(string(comm)), name) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process in %s", name, ns)
}

// procCPU is utime+stime of a process (all its threads), in clock ticks.
func procCPU(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return ut + st, nil
}

func percentileMS(us []int64, p float64) float64 {
	if len(us) == 0 {
		return 0
	}
	s := append([]int64(nil), us...)
	slices.Sort(s)
	return float64(s[int(float64(len(s)-1)*p/100)]) / 1000
}

func step(format string, args ...any) { fmt.Printf("\n== "+format+"\n", args...) }

// reportMode names the report's mode for k city schedulers (1 for 0, ..., 5 for 16).
func reportMode(k int) string {
	switch k {
	case 0, 4, 8, 12, 16:
		return strconv.Itoa(k/4 + 1)
	}
	return "-"
}
