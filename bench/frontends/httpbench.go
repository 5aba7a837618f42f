package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/httpd"
	"github.com/anysched/anysched/internal/steer"
	"github.com/anysched/anysched/internal/topology/topogen"
)

// runResult is one measured run.
type runResult struct {
	rps      float64
	p50, p99 time.Duration // zero when the tool gives no percentiles
	avg      time.Duration // DNS: dnsperf's average latency
	total    int64         // requests or queries completed
	lost     int64         // DNS: queries lost
	cpu      time.Duration // server process CPU time (user+system) per answered request
	problems []string      // errors the tool reported (non-3xx answers, socket errors)
}

// pairResult is one front end measured against its baseline.
type pairResult struct {
	frontend, tool, settings string
	anysched, bare           []runResult
	verified                 string // what the sample responses showed
	profiledRPS              float64
	profile                  *profileTop
	dropped                  float64 // access-log lines dropped during the measured runs
	notes                    []string
}

func best(rs []runResult) runResult {
	var b runResult
	for _, r := range rs {
		if r.rps > b.rps {
			b = r
		}
	}
	return b
}

func (p *pairResult) ratio() float64 {
	b := best(p.bare).rps
	if b == 0 {
		return 0
	}
	return best(p.anysched).rps / b
}

// benchHTTP measures anysched's httpd against the bare net/http server.
func benchHTTP(ctx context.Context, o opts, w *world) (*pairResult, error) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return nil, errors.New("wrk is not installed (apt-get install wrk)")
	}
	tmp, err := os.MkdirTemp("", "frontends-http-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	script := filepath.Join(tmp, "stb.lua")
	if err := os.WriteFile(script, []byte(luaScript(topogen.Hostname, w.clients)), 0o644); err != nil {
		return nil, err
	}

	// (a) anysched's front end, as a scheduler runs it behind a proxy.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := httpd.New(httpd.Config{
		Listen:         ln.Addr().String(),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		InstanceID:     "bench-frontends",
	}, w.engineFunc, w.rec, nil)
	sctx, stopSrv := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	defer func() {
		stopSrv()
		<-served
	}()
	anyURL := "http://" + ln.Addr().String() + o.path

	// (b) the bare server, in a child process.
	bare, err := startChild(ctx, "http-bare")
	if err != nil {
		return nil, err
	}
	defer bare.stop()
	bareURL := "http://" + bare.addr + o.path

	verified, err := verifyHTTP(ctx, anyURL, bareURL, w)
	if err != nil {
		return nil, err
	}
	fmt.Println("http: " + verified)

	secs := int(o.duration.Round(time.Second) / time.Second)
	args := []string{"-t", strconv.Itoa(o.threads), "-c", strconv.Itoa(o.connections), "-d", strconv.Itoa(secs) + "s",
		"--latency", "--timeout", "2s", "-s", script}
	p := &pairResult{
		frontend: "HTTP 302",
		tool:     wrkVersion(),
		settings: fmt.Sprintf("wrk -t%d -c%d -d%ds --latency, keep-alive; Host %s, X-Forwarded-For cycling %d STBs in %d zones",
			o.threads, o.connections, secs, topogen.Hostname, len(w.clients), w.zonesUsed),
		verified: verified,
	}
	// A short unmeasured warm-up of each side: connections, goroutine
	// stacks and the first GC cycles over the snapshot's heap.
	warm := slices.Clone(args)
	warm[slices.Index(warm, "-d")+1] = "1s"
	for _, u := range []string{anyURL, bareURL} {
		if _, err := runWrk(ctx, wrk, warm, u, time.Second); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	droppedBefore := w.dropped()
	for round := 1; round <= o.rounds; round++ {
		for _, side := range []string{"anysched", "bare"} {
			u, pid := anyURL, os.Getpid()
			if side == "bare" {
				u, pid = bareURL, bare.cmd.Process.Pid
			}
			var r runResult
			err := withCPU(pid, &r, func() error {
				var err error
				r, err = runWrk(ctx, wrk, args, u, o.duration)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", side, round, err)
			}
			fmt.Printf("http: round %d %-8s %10.0f req/s  p50 %-9s p99 %-9s server CPU %s/req%s\n", round, side, r.rps, fmtDur(r.p50), fmtDur(r.p99), fmtCPU(r.cpu), problems(r))
			if side == "anysched" {
				p.anysched = append(p.anysched, r)
			} else {
				p.bare = append(p.bare, r)
			}
		}
	}
	p.dropped = w.dropped() - droppedBefore
	if p.dropped > 0 {
		p.notes = append(p.notes, fmt.Sprintf("the access log dropped %.0f lines (queue full) during the measured anysched runs", p.dropped))
	}
	if o.profile {
		var r runResult
		prof, err := profiled(ctx, "http", o.topN, o.profileDir, httpParts, func() error {
			var err error
			r, err = runWrk(ctx, wrk, args, anyURL, o.duration)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("profiled run: %w", err)
		}
		p.profiledRPS, p.profile = r.rps, prof
		fmt.Printf("http: profiled anysched run %10.0f req/s (not counted)\n", r.rps)
	}
	return p, nil
}

// httpParts are the functions whose cumulative share of the HTTP profile
// is reported (names as trimPprof prints them).
var httpParts = [][2]string{
	{"net/http connection loop (whole request cycle)", "net/http.(*conn).serve"},
	{"  read and parse the request", "net/http.(*conn).readRequest"},
	{"  httpd handler", "internal/httpd.(*Server).ServeHTTP"},
	{"    client address from X-Forwarded-For", "internal/httpd.(*Server).clientAddr"},
	{"    steer decision", "internal/steer.(*Engine).Decide"},
	{"      zone lookup (bart)", "internal/topology.(*Snapshot).ZoneOf"},
	{"      server in node (rendezvous hash)", "internal/steer.(*Engine).pickInNode"},
	{"    Location rendering", "internal/steer.(*Engine).AppendLocation"},
	{"    Server-Timing value (FormatFloat)", "strconv.FormatFloat"},
	{"    access log Record (metrics, queue)", "internal/accesslog.(*Recorder).Record"},
	{"      CounterVec.WithLabelValues", "github.com/prometheus/client_golang/prometheus.(*CounterVec).WithLabelValues"},
	{"      histogram Observe", "github.com/prometheus/client_golang/prometheus.(*histogram).Observe"},
	{"  write the response (finishRequest)", "net/http.(*response).finishRequest"},
	{"access log writer goroutine (slog line to io.Discard)", "internal/accesslog.(*Recorder).Run"},
	{"garbage collector (background mark workers)", "runtime.gcBgMarkWorker"},
	{"allocation (mallocgc, every caller)", "runtime.mallocgc"},
	{"network syscalls (read, write, epoll)", "syscall.Syscall"},
}

// verifyHTTP checks that both servers answer 302, and that anysched locates
// every STB address in its coverage zone (result CZ).
func verifyHTTP(ctx context.Context, anyURL, bareURL string, w *world) (string, error) {
	c := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	get := func(u, xff string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Host = topogen.Hostname
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
			req.Header.Set("X-Anysched-Debug", "1") // the check reads the result type
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, nil
	}
	servers := map[string]bool{}
	for _, a := range w.clients {
		resp, err := get(anyURL, a.String())
		if err != nil {
			return "", fmt.Errorf("anysched sample request: %w", err)
		}
		res := resp.Header.Get("X-Anysched-Result")
		if resp.StatusCode != http.StatusFound || res != steer.ResultCZ.String() {
			return "", fmt.Errorf("anysched answered STB %s with %d, result %q; want 302 and CZ", a, resp.StatusCode, res)
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || loc.Host == "" {
			return "", fmt.Errorf("anysched answered STB %s with Location %q", a, resp.Header.Get("Location"))
		}
		servers[loc.Host] = true
	}
	resp, err := get(bareURL, "")
	if err != nil {
		return "", fmt.Errorf("bare sample request: %w", err)
	}
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != bareLocation {
		return "", fmt.Errorf("bare server answered %d Location %q; want 302", resp.StatusCode, resp.Header.Get("Location"))
	}
	return fmt.Sprintf("sample responses are 302; anysched located all %d STB addresses in their zones (CZ) and sent them to %d distinct servers",
		len(w.clients), len(servers)), nil
}

var (
	reRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	reTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	rePct     = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+[a-z]+)\s*$`)
	reNon3xx  = regexp.MustCompile(`(?m)Non-2xx or 3xx responses:\s+(\d+)`)
	reSockErr = regexp.MustCompile(`(?m)Socket errors:\s+(.*)$`)
)

// runWrk runs wrk once and parses its report.
func runWrk(ctx context.Context, wrk string, args []string, u string, d time.Duration) (runResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, wrk, append(args, u)...).CombinedOutput()
	if err != nil {
		return runResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	return parseWrk(string(out))
}

func parseWrk(out string) (runResult, error) {
	var r runResult
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m := reTotal.FindStringSubmatch(out); m != nil {
		r.total, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, m := range rePct.FindAllStringSubmatch(out, -1) {
		v, err := time.ParseDuration(m[2])
		if err != nil {
			return r, fmt.Errorf("wrk latency %q: %w", m[2], err)
		}
		if m[1] == "50" {
			r.p50 = v
		} else {
			r.p99 = v
		}
	}
	if r.p50 == 0 || r.p99 == 0 {
		return r, fmt.Errorf("no latency distribution in wrk output:\n%s", out)
	}
	if m := reNon3xx.FindStringSubmatch(out); m != nil {
		r.problems = append(r.problems, m[1]+" non-2xx/3xx responses")
	}
	if m := reSockErr.FindStringSubmatch(out); m != nil {
		r.problems = append(r.problems, "socket errors: "+strings.TrimSpace(m[1]))
	}
	return r, nil
}

func wrkVersion() string {
	out, _ := exec.Command("wrk", "-v").CombinedOutput()
	f := strings.Fields(string(out))
	if len(f) >= 2 && f[0] == "wrk" {
		return "wrk " + f[1]
	}
	return "wrk"
}

func problems(r runResult) string {
	var s string
	if r.lost > 0 {
		s += fmt.Sprintf("  (%d lost)", r.lost)
	}
	if len(r.problems) > 0 {
		s += "  (" + strings.Join(r.problems, "; ") + ")"
	}
	return s
}

// fmtDur prints a latency with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// withCPU runs load and sets r.cpu to the CPU time process pid spent per
// request r counts (load sets r). The figure does not depend on what else
// competes for the CPUs, so it is steadier than throughput on a busy box.
func withCPU(pid int, r *runResult, load func() error) error {
	before, err := procCPU(pid)
	if err != nil {
		return err
	}
	if err := load(); err != nil {
		return err
	}
	after, err := procCPU(pid)
	if err != nil {
		return err
	}
	if r.total > 0 {
		r.cpu = (after - before) / time.Duration(r.total)
	}
	return nil
}

// procCPU is the user plus system CPU time of a process so far, from
// /proc/PID/stat (in clock ticks of 1/100 s, Linux's USER_HZ).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// fmtCPU prints a per-request CPU time in microseconds.
func fmtCPU(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fµs", float64(d)/1e3)
}
