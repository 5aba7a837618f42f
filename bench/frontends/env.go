package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// environment describes the machine and the tools; a tool's path is ""
// when it is not installed.
type environment struct {
	cpu, kernel, goVersion string
	cores                  int
	date                   time.Time
	loadStart              string // /proc/loadavg's 1-minute average when the run began

	wrk, wrkVersion         string
	h2load, h2loadVersion   string
	dnsperf, dnsperfVersion string
	nginx, nginxVersion     string
	gdnsd, gdnsdVersion     string
	pin                     pinning
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// lookTool finds a command in PATH or, as daemons are often installed
// outside a user's PATH, in the sbin directories.
func lookTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// toolVersion runs path with args and returns name and the first match of
// re's group in its output (any exit status: some tools print their
// version only in a usage error); just name when there is none.
func toolVersion(ctx context.Context, name, path string, re *regexp.Regexp, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if m := re.FindSubmatch(out); m != nil {
		return name + " " + string(m[1])
	}
	return name
}

var (
	reWrkVersion     = regexp.MustCompile(`wrk (\S+)`)
	reH2loadVersion  = regexp.MustCompile(`nghttp2/(\S+)`)
	reDNSPerfVersion = regexp.MustCompile(`(?m)^Version (\S+)`)
	reNginxVersion   = regexp.MustCompile(`nginx/(\S+)`)
	reGdnsdVersion   = regexp.MustCompile(`gdnsd version (\S+)`)
)

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
	if e.wrk = lookTool("wrk"); e.wrk != "" {
		e.wrkVersion = toolVersion(ctx, "wrk", e.wrk, reWrkVersion, "-v")
	}
	if e.h2load = lookTool("h2load"); e.h2load != "" {
		e.h2loadVersion = toolVersion(ctx, "h2load", e.h2load, reH2loadVersion, "--version")
	}
	if o.dnsTool != "internal" {
		if e.dnsperf = lookTool("dnsperf"); e.dnsperf != "" {
			e.dnsperfVersion = toolVersion(ctx, "dnsperf", e.dnsperf, reDNSPerfVersion, "-h")
		}
	}
	if e.nginx = o.nginx; e.nginx == "" {
		e.nginx = lookTool("nginx")
	}
	if e.nginx != "" {
		e.nginxVersion = toolVersion(ctx, "nginx", e.nginx, reNginxVersion, "-v")
	}
	if e.gdnsd = o.gdnsd; e.gdnsd == "" {
		e.gdnsd = lookTool("gdnsd")
	}
	if e.gdnsd != "" {
		e.gdnsdVersion = toolVersion(ctx, "gdnsd", e.gdnsd, reGdnsdVersion, "-h")
	}
	e.pin = planPinning(o)
	return e
}

func (e *environment) machine() string {
	s := fmt.Sprintf("%s, %d cores, linux %s, %s", e.cpu, e.cores, e.kernel, e.goVersion)
	for _, v := range []string{e.wrkVersion, e.h2loadVersion, e.dnsperfVersion, e.nginxVersion, e.gdnsdVersion} {
		if v != "" {
			s += ", " + v
		}
	}
	return s
}

// pinning places the server on one core and the load generator on
// another, with taskset; the Go servers then run with GOMAXPROCS 1 (the
// runtime sizes it from the CPU affinity mask).
type pinning struct {
	taskset      string // path; "" when nothing is pinned
	server, load string // taskset CPU lists of the server and of the load generator
	cpus         [2]int // the server's and the load generator's CPU
	// The two-core runs: the server's and the load generator's CPU lists.
	// With four CPUs allowed each has two of its own; with fewer both
	// share the server's and the load generator's CPUs (shared), and
	// throughput cannot show what a second core adds.
	server2, load2 string
	shared         bool
	note           string // why nothing is pinned ("" when pinned)
}

func (p pinning) on() bool { return p.taskset != "" }

// wrap prefixes a command with taskset -c cpus (unchanged when unpinned).
func (p pinning) wrap(cpus, path string, args []string) (string, []string) {
	if p.taskset == "" || cpus == "" {
		return path, args
	}
	return p.taskset, append([]string{"-c", cpus, path}, args...)
}

// twoCores says where the two-core runs ran.
func (p pinning) twoCores() string {
	if p.shared {
		return fmt.Sprintf("the server may use CPUs %s (GOMAXPROCS 2), and so may the load generator", p.server2)
	}
	return fmt.Sprintf("the server on CPUs %s (GOMAXPROCS 2), the load generator on CPUs %s", p.server2, p.load2)
}

// describe says where the server and the load ran, for the report.
func (p pinning) describe() string {
	if !p.on() {
		return "unpinned (" + p.note + "): server and load generator share the cores"
	}
	return fmt.Sprintf("server pinned to CPU %s, load generator to CPU %s (taskset); Go servers run with GOMAXPROCS 1", p.server, p.load)
}

func planPinning(o opts) pinning {
	if !o.pin {
		return pinning{note: "-pin=false"}
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return pinning{note: "CPU affinity unknown: " + err.Error()}
	}
	server, load := o.serverCPU, o.loadCPU
	if server < 0 || load < 0 {
		if len(cpus) < 2 {
			return pinning{note: fmt.Sprintf("only %d CPU allowed", len(cpus))}
		}
		server, load = cpus[0], cpus[1]
	}
	if server == load || !slices.Contains(cpus, server) || !slices.Contains(cpus, load) {
		return pinning{note: fmt.Sprintf("CPUs %d and %d are not two distinct allowed CPUs (allowed: %v)", server, load, cpus)}
	}
	ts := lookTool("taskset")
	if ts == "" {
		return pinning{note: "taskset is not installed (util-linux)"}
	}
	s, l := strconv.Itoa(server), strconv.Itoa(load)
	p := pinning{taskset: ts, server: s, load: l, cpus: [2]int{server, load}}
	p.server2, p.load2, p.shared = twoCorePlan(server, load, cpus)
	return p
}

// twoCorePlan places the two-core runs: the server on its CPU and a spare
// one, the load generator on its CPU and another spare one; with fewer
// than two spare CPUs both get the server's and the load generator's.
func twoCorePlan(server, load int, cpus []int) (server2, load2 string, shared bool) {
	var spare []int
	for _, c := range cpus {
		if c != server && c != load {
			spare = append(spare, c)
		}
	}
	s, l := strconv.Itoa(server), strconv.Itoa(load)
	if len(spare) < 2 {
		return s + "," + l, s + "," + l, true
	}
	return s + "," + strconv.Itoa(spare[0]), l + "," + strconv.Itoa(spare[1]), false
}

// allowedCPUs is this process's CPU affinity, from /proc/self/status.
func allowedCPUs() ([]int, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			return parseCPUList(strings.TrimSpace(v))
		}
	}
	return nil, fmt.Errorf("no Cpus_allowed_list in /proc/self/status")
}

// maxCPUs bounds a CPU list (Linux's own limit, NR_CPUS, is at most 8192).
const maxCPUs = 1 << 13

// parseCPUList reads a kernel CPU list such as "0-3,6".
func parseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a >= maxCPUs {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		if a < 0 || len(out)+b-a >= maxCPUs {
			return nil, fmt.Errorf("CPU list %q: not a list of CPUs", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}
