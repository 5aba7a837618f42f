package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/miekg/dns"
)

// TestMain lets the test binary act as the harness's children, as the
// command does when re-executed with -child.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		args := os.Args[3:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if err := runChild(os.Args[2], args); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const wrkOutput = `Running 1s test @ http://127.0.0.1:18081/x
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   269.57us  545.32us   8.20ms   95.02%
    Req/Sec    12.70k     2.42k   14.91k    80.00%
  Latency Distribution
     50%  172.00us
     75%  205.00us
     90%  262.00us
     99%    3.06ms
  12647 requests in 1.00s, 3.65MB read
  Socket errors: connect 0, read 3, write 0, timeout 0
  Non-2xx or 3xx responses: 12647
Requests/sec:  12627.31
Transfer/sec:      3.65MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 12627.31 || r.total != 12647 || r.p50 != 172*time.Microsecond || r.p99 != 3060*time.Microsecond {
		t.Errorf("parsed %+v", r)
	}
	want := []string{"12647 non-2xx/3xx responses", "socket errors: connect 0, read 3, write 0, timeout 0"}
	if !slices.Equal(r.problems, want) {
		t.Errorf("problems %q, want %q", r.problems, want)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused"); err == nil {
		t.Error("output without a report parsed")
	}
	noLatency := strings.Replace(wrkOutput, "     50%  172.00us\n", "", 1)
	if _, err := parseWrk(noLatency); err == nil {
		t.Error("output without the median parsed")
	}
}

const dnsperfOutput = `Statistics:

  Queries sent:         154710
  Queries completed:    154700 (99.99%)
  Queries lost:         10 (0.01%)

  Response codes:       NOERROR 77355 (50.00%), REFUSED 77345 (50.00%)
  Average packet size:  request 31, response 39
  Run time (s):         1.000180
  Queries per second:   154682.157212

  Average Latency (s):  0.000369 (min 0.000015, max 0.002461)
  Latency StdDev (s):   0.000231
`

func TestParseDNSPerf(t *testing.T) {
	r, err := parseDNSPerf(dnsperfOutput)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 154682.157212 || r.total != 154700 || r.lost != 10 || r.avg != 369*time.Microsecond {
		t.Errorf("parsed %+v", r)
	}
	if len(r.problems) != 1 || !strings.Contains(r.problems[0], "REFUSED") {
		t.Errorf("problems %q, want the REFUSED answers", r.problems)
	}
	clean := strings.Replace(dnsperfOutput, ", REFUSED 77345 (50.00%)", "", 1)
	if r, err := parseDNSPerf(clean); err != nil || len(r.problems) != 0 {
		t.Errorf("all NOERROR: problems %q, err %v", r.problems, err)
	}
	if _, err := parseDNSPerf("Error: cannot reread input"); err == nil {
		t.Error("output without statistics parsed")
	}
}

// TestSideUnder: the fixed-rate copy of a side keeps the server (name,
// process, target, log) and starts without runs, best by p99; the
// closed-loop side keeps its runs.
func TestSideUnder(t *testing.T) {
	s := &side{name: "anysched", pid: 42, target: "127.0.0.1:53", logFile: "a.log", dropped: 3,
		runs: []runResult{{rps: 100000, p99: 2 * time.Millisecond}}}
	ld := &recordingLoad{}
	c := s.under(ld)
	if c.name != s.name || c.pid != s.pid || c.target != s.target || c.logFile != s.logFile {
		t.Errorf("copy %+v lost the server of %+v", c, s)
	}
	if len(c.runs) != 0 || c.dropped != 0 || !c.byP99 || len(s.runs) != 1 || s.byP99 {
		t.Errorf("copy runs %v dropped %v byP99 %v; original runs %v byP99 %v", c.runs, c.dropped, c.byP99, s.runs, s.byP99)
	}
	if r, err := c.run(context.Background(), time.Second); err != nil || r.p99 != time.Millisecond || ld.target != s.target {
		t.Errorf("copy runs the fixed-rate load: %+v, %v, aimed at %q", r, err, ld.target)
	}
}

// recordingLoad is a targetLoad that notes where it was aimed.
type recordingLoad struct{ target string }

func (l *recordingLoad) run(_ context.Context, target string, _ time.Duration) (runResult, error) {
	l.target = target
	return runResult{rps: 1, p99: time.Millisecond}, nil
}

// TestDNSPerfPerQuery: dnsperf -v's query lines become latencies, the
// rest is its statistics; a query line without a latency is an error.
func TestDNSPerfPerQuery(t *testing.T) {
	out := "[Status] Sending queries\n> NOERROR live.iptv.example A 0.000093\n> NOERROR live.iptv.example A 0.001500\n" + dnsperfOutput
	rest, lat, err := readDNSPerf(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{93 * time.Microsecond, 1500 * time.Microsecond}; !slices.Equal(lat, want) {
		t.Errorf("latencies %v, want %v", lat, want)
	}
	if r, err := parseDNSPerf(rest); err != nil || r.total != 154700 {
		t.Errorf("statistics after the query lines: %+v, %v", r, err)
	}
	if _, _, err := readDNSPerf(strings.NewReader("> NOERROR live.iptv.example A soon\n")); err == nil {
		t.Error("a query line without a latency was accepted")
	}
}

// TestH2load: h2load's summary and per-request log.
func TestH2load(t *testing.T) {
	r, err := parseH2load(`finished in 8.00s, 51520.25 req/s, 9.88MB/s
requests: 412162 total, 412194 started, 412162 done, 412150 succeeded, 12 failed, 0 errored, 3 timeout
`)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 51520.25 || !slices.Equal(r.problems, []string{"12 requests failed", "3 requests timed out"}) {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseH2load("connect: Connection refused"); err == nil {
		t.Error("output without req/s parsed")
	}
	lat, bad, err := h2loadLatencies(strings.NewReader("1796156664070537\t302\t711\n1796156664070545\t404\t740\n1796156664070558\t302\t1500\n"))
	if err != nil || bad != 1 || !slices.Equal(lat, []time.Duration{711 * time.Microsecond, 1500 * time.Microsecond}) {
		t.Errorf("log: %v, %d not 302, %v", lat, bad, err)
	}
	if _, _, err := h2loadLatencies(strings.NewReader("1796156664070537 302 711\n")); err == nil {
		t.Error("a line without tabs was accepted")
	}
}

// TestPercentiles: nearest rank, on any order.
func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 1000; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	p50, p99, p999 := percentiles(lat)
	if p50 != 500*time.Microsecond || p99 != 990*time.Microsecond || p999 != 999*time.Microsecond {
		t.Errorf("p50 %v p99 %v p99.9 %v, want 500µs 990µs 999µs", p50, p99, p999)
	}
	if p50, p99, p999 := percentiles([]time.Duration{time.Millisecond}); p50 != time.Millisecond || p99 != p50 || p999 != p50 {
		t.Errorf("one sample: %v %v %v", p50, p99, p999)
	}
}

func TestParseStat(t *testing.T) {
	st, err := parseStat("4242 (nginx: worker) (x)) S 4241 4241 4241 0 -1 4194624 1 0 0 0 150 25 0 0 20 0 1 0 1 1 1")
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 4241 || st.cpu != 1750*time.Millisecond {
		t.Errorf("parsed %+v, want ppid 4241 and 1.75s", st)
	}
	if _, err := parseStat("4242 nginx S 1"); err == nil {
		t.Error("a line without the command in parentheses parsed")
	}
}

func TestDescendantsCPU(t *testing.T) {
	stats := map[int]procStat{
		11: {ppid: 10, cpu: 2 * time.Second}, // worker
		12: {ppid: 11, cpu: time.Second},     // worker's child
		13: {ppid: 1, cpu: 5 * time.Second},  // unrelated
		14: {ppid: 10, cpu: 3 * time.Second}, // another worker
	}
	if got := descendantsCPU(10, stats); got != 6*time.Second {
		t.Errorf("descendants of 10: %s, want 6s", got)
	}
	if got := descendantsCPU(13, stats); got != 0 {
		t.Errorf("descendants of 13: %s, want 0", got)
	}
	own, err := readStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := treeCPU(os.Getpid())
	if err != nil || tree < own.cpu {
		t.Errorf("treeCPU(self) = %s, %v; want at least the process's own %s", tree, err, own.cpu)
	}
}

func TestParseCPUTimes(t *testing.T) {
	const stat = `cpu  300 0 300 1000 0 0 0 0 0 0
cpu0 100 0 50 800 50 0 0 0 0 0
cpu1 200 0 250 200 0 10 40 0 0 0
intr 1 2 3
`
	got, err := parseCPUTimes(stat, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []cpuTimes{{busy: 500, tasks: 450, total: 700}, {busy: 150, tasks: 150, total: 1000}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseCPUTimes(stat, 2); err == nil {
		t.Error("a CPU missing from /proc/stat was not reported")
	}
	if s := busyShare(cpuTimes{busy: 100, total: 200}, cpuTimes{busy: 175, total: 300}); s != 0.75 {
		t.Errorf("busyShare = %v, want 0.75", s)
	}
	if s := busyShare(cpuTimes{busy: 1, total: 2}, cpuTimes{busy: 1, total: 2}); s != 0 {
		t.Errorf("busyShare without time passing = %v, want 0", s)
	}
	if s := tasksShare(cpuTimes{tasks: 10, total: 100}, cpuTimes{tasks: 60, total: 300}); s != 0.25 {
		t.Errorf("tasksShare = %v, want 0.25", s)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "0", want: []int{0}},
		{in: "0-1", want: []int{0, 1}},
		{in: "0,2-4,7", want: []int{0, 2, 3, 4, 7}},
		{in: "3-1", bad: true},
		{in: "a", bad: true},
		{in: "", bad: true},
	} {
		got, err := parseCPUList(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestPinningWrap(t *testing.T) {
	p := pinning{taskset: "/usr/bin/taskset", server: "0", load: "1", server2: "0,1", load2: "0,1", shared: true}
	path, args := p.wrap(p.server, "/usr/sbin/nginx", []string{"-c", "x"})
	if path != "/usr/bin/taskset" || !slices.Equal(args, []string{"-c", "0", "/usr/sbin/nginx", "-c", "x"}) {
		t.Errorf("pinned: %s %q", path, args)
	}
	path, args = pinning{}.wrap("0", "/usr/sbin/nginx", []string{"-c", "x"})
	if path != "/usr/sbin/nginx" || !slices.Equal(args, []string{"-c", "x"}) {
		t.Errorf("unpinned: %s %q", path, args)
	}
}

// TestTwoCorePlan: with two spare CPUs the two-core runs get cores of
// their own; with fewer they share the server's and the load's.
func TestTwoCorePlan(t *testing.T) {
	for _, tc := range []struct {
		server, load   int
		cpus           []int
		server2, load2 string
		shared         bool
	}{
		{0, 1, []int{0, 1}, "0,1", "0,1", true},
		{0, 1, []int{0, 1, 2}, "0,1", "0,1", true},
		{0, 1, []int{0, 1, 2, 3}, "0,2", "1,3", false},
		{2, 5, []int{0, 2, 4, 5, 7}, "2,0", "5,4", false},
	} {
		s, l, sh := twoCorePlan(tc.server, tc.load, tc.cpus)
		if s != tc.server2 || l != tc.load2 || sh != tc.shared {
			t.Errorf("server %d load %d of %v: %s / %s shared %v, want %s / %s shared %v",
				tc.server, tc.load, tc.cpus, s, l, sh, tc.server2, tc.load2, tc.shared)
		}
	}
}

func TestReplaceSection(t *testing.T) {
	doc := "# Benchmarks\n\nintro\n\n" + heading + "\n\n" + beginMarker + "\nold\n" + endMarker + "\n\n## After\n"
	got, err := replaceSection([]byte(doc), "new body\n\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nintro\n\n" + heading + "\n\n" + beginMarker + "\nnew body\n" + endMarker + "\n\n## After\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got, err = replaceSection([]byte("# Benchmarks\n\n"), "body")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Benchmarks\n\n" + heading + "\n\n" + beginMarker + "\nbody\n" + endMarker + "\n"; string(got) != want {
		t.Errorf("appended section:\n%s\nwant\n%s", got, want)
	}
	if _, err := replaceSection([]byte(endMarker+"\n"+beginMarker), "x"); err == nil {
		t.Error("markers out of order accepted")
	}
}

func TestRowVerdict(t *testing.T) {
	measured := func(rps float64) *side { return &side{name: "s", runs: []runResult{{rps: rps / 2}, {rps: rps}}} }
	for _, tc := range []struct {
		name  string
		r     row
		want  string
		ratio string
	}{
		{"met", row{a: measured(100), b: measured(100), target: 1}, "met (>= 1.00)", "1.000"},
		{"missed", row{a: measured(79), b: measured(100), target: 0.8}, "MISSED (< 0.80)", "0.790"},
		{"reference", row{a: measured(50), b: measured(100)}, "reference", "0.500"},
		{"peer missing", row{a: measured(50), b: &side{missing: "nginx is not installed"}, target: 1}, "not measured", "-"},
		{"anysched missing", row{a: &side{missing: "not available: x"}, b: measured(1), target: 0.8}, "not measured", "-"},
	} {
		if got := tc.r.verdict(); got != tc.want {
			t.Errorf("%s: verdict %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.r.ratioString(); got != tc.ratio {
			t.Errorf("%s: ratio %q, want %q", tc.name, got, tc.ratio)
		}
	}
	// Under a fixed rate the best run is the lowest p99, and the ratio is
	// the peer's p99 over anysched's.
	atRate := &scenario{rate: 50000}
	tails := func(p99s ...time.Duration) *side {
		s := &side{name: "s", byP99: true}
		for _, p := range p99s {
			s.runs = append(s.runs, runResult{rps: 50000, p50: p / 4, p99: p, p999: 2 * p})
		}
		return s
	}
	for _, tc := range []struct {
		name, want, ratio, rounds string
		r                         row
	}{
		{"shorter tail", "met (>= 1.00)", "1.250", "1.250, 0.500",
			row{sc: atRate, a: tails(800*time.Microsecond, 2*time.Millisecond), b: tails(time.Millisecond, time.Millisecond), target: 1}},
		{"longer tail", "MISSED (< 1.00)", "0.500", "0.500",
			row{sc: atRate, a: tails(2 * time.Millisecond), b: tails(time.Millisecond, 3*time.Millisecond), target: 1}},
	} {
		if got := tc.r.verdict(); got != tc.want {
			t.Errorf("%s: verdict %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.r.ratioString(); got != tc.ratio {
			t.Errorf("%s: ratio %q, want %q", tc.name, got, tc.ratio)
		}
		if got := tc.r.roundRatios(); got != tc.rounds {
			t.Errorf("%s: per round %q, want %q", tc.name, got, tc.rounds)
		}
	}
	// On a host whose load generator shares both cores, scaling is
	// estimated from CPU time per request.
	cpu := func(rps float64, c time.Duration) *side {
		return &side{name: "s", runs: []runResult{{rps: rps, cpu: c}}}
	}
	for _, tc := range []struct {
		r    row
		want string
	}{
		{row{a: cpu(98000, 10*time.Microsecond), b: cpu(105000, 9*time.Microsecond), target: 1.8, shared: true},
			"not measurable here (the load generator shares both cores); from CPU per request: 1.80, met (>= 1.80)"},
		{row{a: cpu(98000, 12*time.Microsecond), b: cpu(105000, 9*time.Microsecond), target: 1.8, shared: true},
			"not measurable here (the load generator shares both cores); from CPU per request: 1.50, MISSED (< 1.80)"},
		{row{a: cpu(190000, 12*time.Microsecond), b: cpu(100000, 9*time.Microsecond), target: 1.8},
			"met (>= 1.80)"},
	} {
		if got := tc.r.verdict(); got != tc.want {
			t.Errorf("scaling verdict %q, want %q", got, tc.want)
		}
	}
	if got := latency(tails(time.Millisecond)); got != "250µs / 1.00ms / 2.00ms" {
		t.Errorf("latency cell under a fixed rate: %q", got)
	}
	if got := value(&side{missing: "nginx is not installed"}); got != "not measured: nginx is not installed" {
		t.Errorf("value of a missing peer: %q", got)
	}
	if got := value(&side{missing: "not available: no TLS"}); got != "not available: no TLS" {
		t.Errorf("value of an unavailable side: %q", got)
	}
}

// TestRunScenario: the sides alternate round after round, a side that
// fails is reported and left out afterwards, the others go on.
func TestRunScenario(t *testing.T) {
	var calls []string
	fake := func(name string, fail bool) *side {
		return &side{name: name, pid: os.Getpid(), run: func(_ context.Context, d time.Duration) (runResult, error) {
			calls = append(calls, fmt.Sprintf("%s/%s", name, d))
			if fail && d > time.Second {
				return runResult{}, errors.New("peer gone\nmore output")
			}
			return runResult{rps: 100, total: 1000}, nil
		}}
	}
	a, b, c := fake("a", false), fake("b", true), fake("c", false)
	gone := &side{name: "gone", missing: "not installed"}
	sc := &scenario{title: "t", unit: "req/s", sides: []*side{a, gone, b, c}}
	o := opts{rounds: 2, duration: 2 * time.Second}
	if err := runScenario(context.Background(), o, sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/1s", "b/1s", "c/1s", "a/2s", "b/2s", "c/2s", "a/2s", "c/2s"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if len(a.runs) != 2 || len(c.runs) != 2 || len(b.runs) != 0 || len(gone.runs) != 0 {
		t.Errorf("runs: a %d, b %d, c %d, gone %d; want 2, 0, 2, 0", len(a.runs), len(b.runs), len(c.runs), len(gone.runs))
	}
	if b.missing != "failed in round 1: peer gone" {
		t.Errorf("failed side: missing %q", b.missing)
	}
	if a.runs[0].cpu < 0 || a.runs[0].own < 0 {
		t.Errorf("negative CPU figures: %+v", a.runs[0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := fake("d", false)
	d.run = func(ctx context.Context, _ time.Duration) (runResult, error) { return runResult{}, ctx.Err() }
	if err := runScenario(ctx, o, &scenario{title: "t", sides: []*side{d}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v, want context.Canceled", err)
	}
}

func TestOptsValidate(t *testing.T) {
	good := opts{duration: 8 * time.Second, connections: 32, threads: 1, rounds: 2, clients: 256, zones: 32, path: "/x",
		accessLog: "file", dnsTool: "auto", dnsOutstanding: 100, serverCPU: -1, loadCPU: -1, topN: 15, family: "both"}
	if err := good.validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	for name, mod := range map[string]func(*opts){
		"short duration":   func(o *opts) { o.duration = time.Millisecond },
		"threads > conns":  func(o *opts) { o.threads = 64 },
		"relative path":    func(o *opts) { o.path = "x" },
		"path with space":  func(o *opts) { o.path = "/a b" },
		"access log":       func(o *opts) { o.accessLog = "stdout" },
		"dns tool":         func(o *opts) { o.dnsTool = "flamethrower" },
		"ecs not a prefix": func(o *opts) { o.dnsECS = "10.0.0.1" },
		"family":           func(o *opts) { o.family = "ipx" },
		"one CPU given":    func(o *opts) { o.serverCPU = 0 },
	} {
		o := good
		mod(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, ecs := range []string{"", "none", "100.64.0.0/24", "fd00:0:1::/56"} {
		o := good
		o.dnsECS = ecs
		if err := o.validate(); err != nil {
			t.Errorf("-dns-ecs %q rejected: %v", ecs, err)
		}
	}
	for _, f := range []string{"ipv4", "ipv6", "both"} {
		o := good
		o.family = f
		if err := o.validate(); err != nil {
			t.Errorf("-family %q rejected: %v", f, err)
		}
	}
}

func TestWriteCert(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, cert, err := writeCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Errorf("key is %T, want ECDSA P-256", pair.PrivateKey)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := cert.VerifyHostname(topogen.Hostname); err != nil {
		t.Error(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm()&0o077 != 0 {
		t.Errorf("key file mode %v, %v: want private", st.Mode(), err)
	}
}

func TestTLSSummary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tls.log")
	lines := `127.0.0.1 - - [01/Dec/2026:07:00:00 +0000] "GET /x HTTP/1.1" 302 145 "-" "-" TLSv1.3 .
127.0.0.1 - - [01/Dec/2026:07:00:00 +0000] "GET /x HTTP/1.1" 302 145 "-" "-" TLSv1.3 r
127.0.0.1 - - [01/Dec/2026:07:00:00 +0000] "GET /x HTTP/1.1" 302 145 "-" "-" TLSv1.3 r
127.0.0.1 - - [01/Dec/2026:07:00:00 +0000] "GET /x HTTP/1.1" 302 145 "-" "-" TLSv1.2 r
`
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := tlsSummary(path), "TLSv1.2+TLSv1.3, 75.0% of connections resumed a session"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := tlsSummary(filepath.Join(t.TempDir(), "none")); got != "" {
		t.Errorf("missing file: %q", got)
	}
}

// TestNginxConfig checks the generated configuration with nginx -t.
func TestNginxConfig(t *testing.T) {
	nginx := lookTool("nginx")
	if nginx == "" {
		t.Skip("nginx is not installed")
	}
	dir := t.TempDir()
	certFile, keyFile, _, err := writeCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fam    family
		resume bool
		want   []string
	}{
		{ipv4, true, []string{"listen 127.0.0.1:1;", "listen 127.0.0.1:2;", "listen 127.0.0.1:3 ssl;", "return 302 http://10.1.1.1$request_uri;"}},
		{ipv4, false, nil},
		{ipv6, true, []string{"listen [::1]:1;", "listen [::1]:2;", "listen [::1]:3 ssl;", "return 302 http://[fd99::1]$request_uri;"}},
		{ipv6, false, nil},
	} {
		resume := tc.resume
		c := nginxConf{dir: dir, user: userDirective(), fam: tc.fam, plain: 1, logged: 2, tls: 3, cert: certFile, key: keyFile, resume: resume}
		conf := c.render()
		if got := strings.Contains(conf, "ssl_session_tickets off;"); got == resume {
			t.Errorf("resume %v: tickets off = %v", resume, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%s: no %q in\n%s", tc.fam.label(), w, conf)
			}
		}
		if strings.Contains(conf, "127.0.0.1") == tc.fam.v6 {
			t.Errorf("%s: the configuration mentions 127.0.0.1: %v", tc.fam.label(), tc.fam.v6)
		}
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(nginx, "-t", "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
		if err != nil {
			t.Fatalf("nginx -t: %v\n%s\n%s", err, out, conf)
		}
	}
}

// TestGdnsdConfig checks the generated configuration with gdnsd checkconf.
func TestGdnsdConfig(t *testing.T) {
	gdnsd := lookTool("gdnsd")
	if gdnsd == "" {
		t.Skip("gdnsd is not installed")
	}
	for _, tc := range []struct {
		fam          family
		addr, listen string
		record       *regexp.Regexp
	}{
		{ipv4, "127.0.0.1:5353", `listen => [ "127.0.0.1:5353" ]`, regexp.MustCompile(`(?m)^@\s+A\s+10\.1\.1\.1$`)},
		{ipv6, "[::1]:5353", `listen => [ "[::1]:5353" ]`, regexp.MustCompile(`(?m)^@\s+AAAA\s+fd99::1$`)},
	} {
		dir := t.TempDir()
		addr, err := writeGdnsd(dir, tc.fam, 5353)
		if err != nil {
			t.Fatal(err)
		}
		if addr != tc.addr {
			t.Errorf("%s: address %s, want %s", tc.fam.label(), addr, tc.addr)
		}
		if conf := gdnsdConfig(dir, tc.fam, 5353); !strings.Contains(conf, tc.listen) {
			t.Errorf("%s: no %s in\n%s", tc.fam.label(), tc.listen, conf)
		}
		if zone := gdnsdZone(tc.fam); !tc.record.MatchString(zone) {
			t.Errorf("%s: zone without %s:\n%s", tc.fam.label(), tc.record, zone)
		}
		out, err := exec.Command(gdnsd, "-c", dir, "checkconf").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: gdnsd checkconf: %v\n%s", tc.fam.label(), err, out)
		}
		if !bytes.Contains(out, []byte("live.iptv.example")) {
			t.Errorf("%s: checkconf did not load the zone:\n%s", tc.fam.label(), out)
		}
	}
}

// TestGdnsdIPv6 starts gdnsd on [::1] and asks it AAAA: the listen syntax
// and the record are what gdnsd serves, not only what checkconf reads.
func TestGdnsdIPv6(t *testing.T) {
	gdnsd := lookTool("gdnsd")
	if gdnsd == "" {
		t.Skip("gdnsd is not installed")
	}
	if !hasIPv6Loopback() {
		t.Skip("no ::1 on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := startGdnsd(ctx, gdnsd, ipv6, pinning{}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer g.stop()
	q, _ := queryMsg(ipv6, "")
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).ExchangeContext(ctx, q, g.addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("gdnsd over IPv6: %v, %v", r, err)
	}
	if a, ok := r.Answer[0].(*dns.AAAA); !ok || a.AAAA.String() != "fd99::1" {
		t.Errorf("gdnsd answered %s, want AAAA fd99::1", r.Answer[0])
	}
}

func hasIPv6Loopback() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestAnyschedChild starts the anysched child (unpinned) and checks what
// the harness relies on: the READY line, an HTTP 302 located by
// X-Forwarded-For, a DNS answer, the access log, the stats and profile
// endpoints, the HTTPS stub's reason, and that closing stdin stops it.
func TestAnyschedChild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the province-scale snapshot")
	}
	for _, f := range []family{ipv4, ipv6} {
		t.Run(f.name(), func(t *testing.T) {
			if f.v6 && !hasIPv6Loopback() {
				t.Skip("no ::1 on this host")
			}
			testAnyschedChild(t, f)
		})
	}
}

func testAnyschedChild(t *testing.T, f family) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	certFile, keyFile, _, err := writeCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "access.log")
	o := opts{sampleEvery: 1, zones: 4, clients: 8, tlsResume: true}
	a, err := startAnysched(ctx, o, f, pinning{}, "", logFile, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.stop()
		}
	}()
	clients, err := a.clients()
	if err != nil || len(clients) != 8 || a.info.Zones != 4 {
		t.Fatalf("clients %v (zones %d), %v; want 8 in 4 zones", clients, a.info.Zones, err)
	}
	for _, c := range clients {
		if !f.of(c) {
			t.Errorf("client %s is not %s", c, f.label())
		}
	}
	if a.info.Family != f.name() {
		t.Errorf("the child serves %q, want %s", a.info.Family, f.name())
	}
	if h, _, _ := net.SplitHostPort(a.info.HTTP); h != f.loopback().String() {
		t.Errorf("HTTP on %s, want %s", a.info.HTTP, f.loopback())
	}
	if h, _, _ := net.SplitHostPort(a.info.DNS); h != f.loopback().String() {
		t.Errorf("DNS on %s, want %s", a.info.DNS, f.loopback())
	}
	if a.info.HTTPS == "" && a.info.HTTPSMissing == "" {
		t.Error("no HTTPS listener and no reason why")
	}

	c := &http.Client{Timeout: 5 * time.Second, CheckRedirect: noRedirect}
	servers := map[string]bool{}
	edges := newEdgeSet(f)
	for _, cl := range clients {
		if err := checkAnysched(ctx, c, "http://"+a.info.HTTP+"/cctv1/index.m3u8", cl, servers, edges); err != nil {
			t.Fatal(err)
		}
	}
	// The other family's edges are not what the child answers with.
	other := newEdgeSet(family{v6: !f.v6})
	other.fam = f
	if err := checkAnysched(ctx, c, "http://"+a.info.HTTP+"/cctv1/index.m3u8", clients[0], map[string]bool{}, other); err == nil {
		t.Error("a Location outside the edge set passed the check")
	}
	ecs := netip.PrefixFrom(clients[0], f.ecsBits()).Masked().String()
	for _, e := range []string{"", ecs} {
		q, err := queryMsg(f, e)
		if err != nil {
			t.Fatal(err)
		}
		ds := dnsServers{any1: a}
		checks, err := verifyDNS(ctx, ds, q, edges)
		if err != nil {
			t.Fatalf("ECS %q: %v", e, err)
		}
		if want := "one " + f.rrType() + " record"; !strings.Contains(checks[0], want) {
			t.Errorf("ECS %q: check %q, want %q", e, checks[0], want)
		}
		if e != "" && !strings.Contains(checks[0], "ECS scope") {
			t.Errorf("ECS %q: no ECS scope in the answer: %s", e, checks[0])
		}
	}
	// Both decisions reach the log file (its writer flushes when idle).
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if bytes.Count(b, []byte("\n")) >= 2 && bytes.Contains(b, []byte(`"proto":"http"`)) && bytes.Contains(b, []byte(`"proto":"dns"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log after two decisions:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d, err := a.dropped(ctx); err != nil || d != 0 {
		t.Errorf("dropped %v, %v; want 0", d, err)
	}
	prof := filepath.Join(dir, "cpu.pprof")
	if err := a.profileTo(ctx, time.Second, prof)(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(prof); err != nil || st.Size() == 0 {
		t.Errorf("profile %v, %v: want a non-empty file", st, err)
	}

	a.stop()
	stopped = true
	if a.err != nil { // killed after the grace period, or failed
		t.Errorf("the child did not exit cleanly when its stdin closed: %v", a.err)
	}
	if _, err := net.DialTimeout("tcp", a.info.HTTP, time.Second); err == nil {
		t.Error("the HTTP port still accepts after stop")
	}
}

// TestFreePort: the port is free for TCP and UDP when returned.
func TestFreePort(t *testing.T) {
	for _, f := range []family{ipv4, ipv6} {
		if f.v6 && !hasIPv6Loopback() {
			continue
		}
		testFreePort(t, f)
	}
}

func testFreePort(t *testing.T, f family) {
	port, err := freePort(f, true)
	if err != nil {
		t.Fatal(err)
	}
	addr := f.hostPort(port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc.Close()
}

// FuzzParsers: what the tools and /proc print never makes a parser panic,
// and what they accept is consistent.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{wrkOutput, dnsperfOutput, "0-1,4", "1 (a) S 0 0 0 0 0 0 0 0 0 0 5 5", "cpu0 1 2 3 4 5 6 7 8\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := parseWrk(s); err == nil && (r.p50 <= 0 || r.p99 <= 0) {
			t.Errorf("wrk output accepted without latencies: %+v", r)
		}
		_, _ = parseDNSPerf(s)
		_, _ = parseStat(s)
		if cpus, err := parseCPUList(s); err == nil && (len(cpus) == 0 || len(cpus) > maxCPUs) {
			t.Errorf("CPU list %q gave %d CPUs", s, len(cpus))
		}
		if ts, err := parseCPUTimes(s, 0); err == nil && (ts[0].tasks > ts[0].busy || ts[0].busy > ts[0].total) {
			t.Errorf("tasks %d, busy %d, total %d: not in order", ts[0].tasks, ts[0].busy, ts[0].total)
		}
	})
}
