package lab_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/anysched/anysched/internal/testbed/lab"
	"github.com/anysched/anysched/internal/testbed/stbload"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestPrivilegedRollout: `schedctl rollout` adds a city to a running
// province under STB load, and `--undo` takes it back out. The city's
// STBs are served by the center until its scheduler starts; the command's
// steps and figures (the center's answers to the city before and after)
// are checked against what the STBs saw: who answered each request
// (X-Anysched-Instance), and that none failed.
func TestPrivilegedRollout(t *testing.T) {
	cities := []string{"hefei", "wuhu", "bengbu", "huainan"}
	const ci, city = 1, "wuhu"
	l := province(t, "asr", cities, nil)
	for i, c := range cities {
		answeredBy(t, l, i, lab.PrimaryID(c), 60*time.Second)
	}
	// wuhu before its rollout: no scheduler of its own (a planned stop
	// withdraws the route and deletes the record), the center answers it.
	sched := l.Proc(lab.PrimaryID(city))
	sched.Signal(syscall.SIGTERM)
	if !sched.Wait(15 * time.Second) {
		t.Fatal("wuhu's scheduler did not stop within 15s")
	}
	answeredBy(t, l, ci, lab.CenterID, 10*time.Second)
	base := centerAnswered(t, l, city) // the probes' answers, before the load

	ld := startLoad(t, l, cities)
	ld.waitBy(t, city, lab.CenterID, 20)

	// Roll wuhu out: schedctl waits for the scheduler, the operator
	// starts it.
	rollStart := time.Now()
	var out bytesBuf
	rolled := make(chan error, 1)
	go func() { rolled <- runCtl(l, &out, "rollout", city) }()
	if err := l.Restart(lab.PrimaryID(city)); err != nil {
		t.Fatal(err)
	}
	err := <-rolled
	rollEnd := time.Now()
	t.Logf("rollout report (%.1fs):\n%s", rollEnd.Sub(rollStart).Seconds(), out.String())
	if err != nil {
		t.Fatalf("rollout: %v", err)
	}
	roll := parseRollout(t, out.String())

	// Take it back out: schedctl waits for the withdrawal, the operator
	// stops the scheduler (the planned stop: GRACEFUL_SHUTDOWN, withdraw,
	// drain), schedctl sees the center take the city over.
	undoStart := time.Now()
	var undoOut bytesBuf
	undone := make(chan error, 1)
	go func() { undone <- runCtl(l, &undoOut, "rollout", city, "--undo", "--window", "3s") }()
	sched.Signal(syscall.SIGTERM)
	if !sched.Wait(15 * time.Second) {
		t.Fatal("wuhu's scheduler did not stop within 15s")
	}
	err = <-undone
	t.Logf("rollout --undo report (%.1fs):\n%s", time.Since(undoStart).Seconds(), undoOut.String())
	if err != nil {
		t.Fatalf("rollout --undo: %v", err)
	}
	undo := parseRollout(t, undoOut.String())
	ld.waitBy(t, city, lab.CenterID, ld.by(city, lab.CenterID, time.Time{}, time.Now())+10) // the center keeps answering
	ld.stop(t)
	final := centerAnswered(t, l, city)

	// No STB request failed, in any city; the others were answered by
	// their own schedulers throughout.
	for _, c := range cities {
		req, failed, retried, by := ld.totals(c)
		t.Logf("%s: %d requests, %d failed, %d needed a retry, answered by %v", c, req, failed, retried, by)
		if failed != 0 || req == 0 {
			t.Errorf("%s: %d of %d STB requests failed", c, failed, req)
		}
		if c != city && (len(by) != 1 || by[lab.PrimaryID(c)] == 0) {
			t.Errorf("%s: answered by %v, want its own scheduler only", c, by)
		}
	}
	_, _, retried, _ := ld.totals(city)
	// A request the center counted may not reach the STB: one caught by a
	// route change is reset and retried, and the requests in flight when
	// the load stops are dropped uncounted (at most one per STB).
	slack := retried + loadConcurrency

	// The rollout: what the center answered of wuhu's STBs until the
	// rollout ended (the report's "after") is what the STBs saw from the
	// center before the undo began. After the rollout the center answered
	// none of them for --settle, so whole seconds before the undo hold
	// every one of those answers.
	stbBefore := ld.by(city, lab.CenterID, time.Time{}, undoStart)
	if got := roll.after - base; got < stbBefore || got > stbBefore+slack {
		t.Errorf("rollout: the center counts %d answers to wuhu's STBs (%d -> %d) until the rollout's end; the STBs saw %d (slack %d)", got, base, roll.after, stbBefore, slack)
	}
	// Its "before": between the STBs' count up to the command's start and
	// a second later (schedctl's own start in the namespace).
	lo, hi := ld.by(city, lab.CenterID, time.Time{}, rollStart), ld.by(city, lab.CenterID, time.Time{}, rollStart.Add(2*time.Second))
	if got := roll.before - base; got < lo || got > hi+slack {
		t.Errorf("rollout: the center had answered %d of wuhu's STBs at the command's start; the STBs saw %d to %d by then", got, lo, hi)
	}
	// The center's last answer, as the report places it, falls in the
	// second in which the STBs saw their last answer from the center.
	lastSTB := ld.last(city, lab.CenterID, undoStart)
	if lastReport := rollStart.Add(time.Duration(roll.lastAt * float64(time.Second))); lastReport.Before(lastSTB.Add(-1500*time.Millisecond)) || lastReport.After(lastSTB.Add(time.Second)) {
		t.Errorf("rollout: the report's last center answer +%.1fs (%s) is not in the STBs' second of it (%s)", roll.lastAt, lastReport.Format("15:04:05.000"), lastSTB.Format("15:04:05.000"))
	}
	if after := ld.by(city, lab.PrimaryID(city), rollStart, undoStart); after == 0 {
		t.Error("rollout: wuhu's scheduler answered none of its STBs before the undo")
	}

	// The undo: the center's count grew by what the STBs saw from it
	// since (every answer of the center after the quiet end of the
	// rollout); the report's figures lie inside the STBs'.
	stbAfter := ld.by(city, lab.CenterID, time.Time{}, time.Now().Add(time.Hour)) - stbBefore
	if got := final - roll.after; got < stbAfter || got > stbAfter+slack {
		t.Errorf("undo: the center counts %d more answers to wuhu's STBs (%d -> %d); the STBs saw %d from it (slack %d)", got, roll.after, final, stbAfter, slack)
	}
	if undo.before < roll.after || undo.after <= undo.before || undo.after > final || undo.after-undo.before > stbAfter+slack {
		t.Errorf("undo: the report's center count %d -> %d, outside the rollout's %d, the end's %d and the STBs' %d after the undo began", undo.before, undo.after, roll.after, final, stbAfter)
	}
	t.Logf("figures: center answered wuhu %d before the load, %d -> %d in the rollout, %d -> %d in the undo, %d at the end; STBs saw the center %d times before the undo, %d after; rollout steps at %v, undo steps at %v",
		base, roll.before, roll.after, undo.before, undo.after, final, stbBefore, stbAfter, roll.steps, undo.steps)
}

// rolloutFigures are what a rollout's report says.
type rolloutFigures struct {
	before, after int       // the center's count for the city, "(B -> A)"
	lastAt        float64   // "the last at +Xs" (rollout), "the first at +Xs" (undo)
	steps         []float64 // each step's time, in order
}

// parseRollout reads the step lines of a rollout report.
func parseRollout(t *testing.T, report string) rolloutFigures {
	t.Helper()
	var f rolloutFigures
	for _, line := range splitLines(report) {
		var at float64
		var n int
		if _, err := fmt.Sscanf(strings.TrimLeft(line, " +"), "%fs  %d/", &at, &n); err == nil && n > 0 {
			f.steps = append(f.steps, at)
		}
		if i := strings.Index(line, " since the rollout began ("); i >= 0 {
			fmt.Sscanf(line[i:], " since the rollout began (%d -> %d)", &f.before, &f.after)
			for _, w := range []string{"the last at +", "the first at +"} {
				if j := strings.Index(line, w); j >= 0 {
					fmt.Sscanf(line[j+len(w):], "%fs", &f.lastAt)
				}
			}
		}
	}
	if f.after == 0 || len(f.steps) == 0 {
		t.Fatalf("no figures in the report:\n%s", report)
	}
	return f
}

// centerAnswered is the center's count of answers to city's STBs (schedctl
// status -o json).
func centerAnswered(t *testing.T, l *lab.Lab, city string) int {
	t.Helper()
	var out bytesBuf
	if err := runCtl(l, &out, "status", "-o", "json"); err != nil {
		t.Fatalf("status: %v\n%s", err, out.String())
	}
	var st struct {
		CenterTraffic []struct {
			ClientRegion string `json:"client_region"`
			Answered     uint64 `json:"answered,string"`
		} `json:"center_traffic"`
	}
	if err := json.Unmarshal([]byte(out.String()), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out.String())
	}
	for _, rt := range st.CenterTraffic {
		if rt.ClientRegion == city {
			return int(rt.Answered)
		}
	}
	return 0
}

// The load per city: a few STBs, each zapping every 50 ms, bounded in
// requests and time (the test stops it sooner).
const (
	loadConcurrency = 2
	loadPause       = 50 * time.Millisecond
	loadRequests    = 20_000
	loadMaxDuration = 4 * time.Minute
)

// load is the lab's load generator (stbload) running in every city's STB
// namespace, one process each (TestHelperSTBLoad), and the per-second
// figures they print as they go.
type load struct {
	mu      sync.Mutex
	procs   []*exec.Cmd
	done    sync.WaitGroup
	start   map[string]time.Time        // each city's run start
	secs    map[string][]stbload.Second // by city, as printed
	retried map[string]int              // by city, at the end
}

// startLoad starts STB load from every city; it is stopped when the test
// ends at the latest.
func startLoad(t *testing.T, l *lab.Lab, cities []string) *load {
	t.Helper()
	ld := &load{start: map[string]time.Time{}, secs: map[string][]stbload.Second{}, retried: map[string]int{}}
	for i, c := range cities {
		cmd := exec.Command("ip", "netns", "exec", l.NS(fmt.Sprintf("c%d", i+1)), os.Args[0], "-test.run=^TestHelperSTBLoad$", "--",
			filepath.Join(l.Dir(), "topology.yaml"), c, strconv.Itoa(i+1))
		cmd.Env = append(os.Environ(), "ANYSCHED_STBLOAD=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			t.Fatalf("load from %s: %v", c, err)
		}
		ld.procs = append(ld.procs, cmd)
		ld.done.Add(1)
		go func() {
			defer ld.done.Done()
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				if ns, ok := strings.CutPrefix(line, "start="); ok {
					n, _ := strconv.ParseInt(ns, 10, 64)
					ld.mu.Lock()
					ld.start[c] = time.Unix(0, n)
					ld.mu.Unlock()
				} else if n, ok := strings.CutPrefix(line, "retried="); ok {
					k, _ := strconv.Atoi(strings.Fields(n)[0])
					ld.mu.Lock()
					ld.retried[c] = k
					ld.mu.Unlock()
				} else if s, ok := stbload.ParseLine(line); ok {
					ld.mu.Lock()
					ld.secs[s.City] = append(ld.secs[s.City], s)
					ld.mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Logf("load from %s: %v\n%s", c, err, stderr.String())
			}
		}()
	}
	t.Cleanup(func() { ld.stop(t) })
	return ld
}

// stop ends every load generator and waits for their last figures.
func (ld *load) stop(t *testing.T) {
	for _, cmd := range ld.procs {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	ld.done.Wait()
}

// by is how many of city's STB requests inst answered in the whole
// seconds of the run inside [from, until).
func (ld *load) by(city, inst string, from, until time.Time) int {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	n := 0
	for _, s := range ld.secs[city] {
		begin := ld.start[city].Add(time.Duration(s.At) * time.Second)
		if !begin.Before(from) && !begin.Add(time.Second).After(until) {
			n += s.AnsweredBy[inst]
		}
	}
	return n
}

// last is the middle of the last second before until in which inst
// answered one of city's STBs.
func (ld *load) last(city, inst string, until time.Time) time.Time {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	var at time.Time
	for _, s := range ld.secs[city] {
		begin := ld.start[city].Add(time.Duration(s.At) * time.Second)
		if s.AnsweredBy[inst] > 0 && begin.Before(until) {
			at = begin.Add(500 * time.Millisecond)
		}
	}
	return at
}

// waitBy waits until inst has answered n of city's STB requests in all.
func (ld *load) waitBy(t *testing.T, city, inst string, n int) {
	t.Helper()
	wait.For(t, fmt.Sprintf("%d answers by %s to %s's STBs", n, inst, city), 30*time.Second, func() bool {
		return ld.by(city, inst, time.Time{}, time.Now().Add(time.Hour)) >= n
	})
}

// totals is what city's STBs saw in all: requests, failures, requests that
// needed a retry (the load generator's last line), and answers by instance.
func (ld *load) totals(city string) (requests, failed, retried int, by map[string]int) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	by = map[string]int{}
	for _, s := range ld.secs[city] {
		requests += s.Requests
		failed += s.Failures
		for k, v := range s.AnsweredBy {
			by[k] += v
		}
	}
	return requests, failed, ld.retried[city], by
}

// TestHelperSTBLoad is the load generator run in a city's STB namespace
// (see startLoad): STB requests to the Anycast address until SIGTERM or
// its bounds, a line per second (stbload.Second.Line), and the requests
// that needed a retry at the end.
func TestHelperSTBLoad(t *testing.T) {
	if os.Getenv("ANYSCHED_STBLOAD") != "1" {
		return
	}
	args := helperArgs()
	if err := stbLoad(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func stbLoad(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want TOPOLOGY CITY SEED, got %q", args)
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	topo, err := topology.Parse(data)
	if err != nil {
		return err
	}
	seed, err := strconv.ParseUint(args[2], 10, 64)
	if err != nil {
		return err
	}
	cs, err := stbload.CitiesFromTopology(topo, []string{args[1]}, nil, lab.ServiceIP.String()+":80")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var mu sync.Mutex // PerSecond is called from Run's goroutine; the start line first
	fmt.Printf("start=%d\n", time.Now().UnixNano())
	rep, err := stbload.Run(ctx, stbload.Options{
		Cities: cs, Host: topogen.Hostname, Requests: loadRequests, Concurrency: loadConcurrency, MaxDuration: loadMaxDuration,
		Channels: 50, Pause: loadPause, Timeout: 2 * time.Second, Seed: seed,
		PerSecond: func(s stbload.Second) { mu.Lock(); fmt.Println(s.Line()); mu.Unlock() },
	})
	if err != nil {
		return err
	}
	fmt.Printf("retried=%d city=%s\n", rep.PerCity[args[1]].Retried, args[1])
	return nil
}
