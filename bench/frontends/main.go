// Command frontends measures anysched's STB-facing front ends against the
// servers an operator would otherwise pick, per core, in one run on one
// machine:
//
//   - HTTP 302, keep-alive and with a new connection per request (a zapping
//     STB): anysched's httpd against nginx (one worker, `return 302`, access
//     log off and on), and a bare net/http 302 as a reference;
//   - HTTPS 302, a new TLS connection per request: anysched's TLS listener
//     (when the build has one) against nginx with the same ECDSA P-256
//     certificate, which the harness generates;
//   - DNS A over UDP, plain and with EDNS Client Subnet: anysched's dnsd
//     against gdnsd (one UDP thread, a static zone), and a bare miekg/dns
//     server as a reference;
//   - scaling: anysched on two cores against one, HTTP keep-alive and DNS.
//
// All of it once per address family (-family, both by default): IPv4, every
// server on 127.0.0.1 and A queries, then IPv6, every server on [::1]
// (nginx `listen [::1]:port`, gdnsd `listen => [ "[::1]:port" ]`), the
// load generators aimed there, AAAA queries, the STB addresses cycled
// through X-Forwarded-For and the ECS client subnets (/56) in the zones'
// IPv6 networks of the province made dual-stack (fixture.DualStack), and
// the peers answering the equivalent (a 302 to http://[fd99::1]/..., a
// static AAAA). anysched must answer every sample with an edge address of
// the family (over IPv6 a server's address6), or the run fails. Each
// family's ratios are against the baselines measured in its own run; the
// report puts the two side by side.
//
// anysched serves the province-scale snapshot with its access log on (JSON
// lines appended to a file, every decision by default), as a scheduler
// does. Every server runs in its own process, pinned with taskset to one
// core, and the load generator (wrk, dnsperf) to the other; Go servers then
// run with GOMAXPROCS 1. anysched and the bare Go servers are this program
// re-executed; nginx and gdnsd run as the current user with configuration,
// pid file and logs in a temporary directory, on free ports of 127.0.0.1
// (or ::1), and are stopped when the run ends, also on Ctrl-C. A peer that is not
// installed is reported as such and the run goes on.
//
// The servers of one kind of load are measured in alternation, round after
// round (anysched, nginx, ..., anysched, nginx, ...), and the best run of
// each counts, which reduces the noise of a small machine. The server's
// CPU time per request (its whole process tree, from /proc) is reported
// beside the throughput, and so is the share of the run its core was busy
// and the server itself ran: a server core well short of busy means the
// load generator was the limit, and a run where other processes took the
// server's core is flagged as unreliable. Closed-loop latencies (wrk,
// dnsperf) are compared at the same connection count, where the faster
// server is also the more loaded one; the fixed-rate runs then offer
// anysched and its peer the same load, a share of the slower one's best
// (h2load --rps, dnsperf -Q -v), and compare their p99. A further, unmeasured run of
// each anysched front end takes a CPU profile of the anysched process,
// whose top entries are printed.
//
//	go run ./bench/frontends                          # print the summary
//	go run ./bench/frontends -doc docs/benchmarks.md  # and rewrite its section
//
// With -doc, the section between <!-- frontends:begin --> and
// <!-- frontends:end --> of the document is replaced (the markers and a
// "## STB front ends" heading are appended when the document lacks them).
// With the defaults a run takes about 11 minutes, 5½ per family: 17
// measured servers and loads, 2 rounds of 8 s each, plus warm-ups, and in
// the first family's run the two profiled runs (some 20 s more per family
// once anysched's HTTPS listener is measured too). -family ipv4 (or ipv6)
// measures one family only.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// opts are the command-line settings.
type opts struct {
	duration    time.Duration
	connections int
	threads     int
	rounds      int
	clients     int
	zones       int
	path        string
	sampleEvery uint64
	accessLog   string

	dnsTool        string
	dnsOutstanding int
	dnsMaxQPS      int
	dnsECS         string
	rateShare      float64

	pin                bool
	serverCPU, loadCPU int
	scaling            bool
	nginx, gdnsd       string
	tlsResume          bool

	profile    bool
	profileDir string
	topN       int
	doc        string
	skipHTTP   bool
	skipDNS    bool
	family     string // ipv4, ipv6 or both
}

func main() {
	var o opts
	child := flag.String("child", "", "internal: run as a child process (anysched, http-bare, dns-bare, dns-load)")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of every measured run (whole seconds)")
	flag.IntVar(&o.connections, "connections", 32, "wrk connections (-c); also dnsperf clients (-c)")
	flag.IntVar(&o.threads, "threads", 1, "wrk threads (-t) and dnsperf threads (-T) on the load generator's core; the 2-core runs use 2")
	flag.IntVar(&o.rounds, "rounds", 2, "alternating rounds per kind of load; the best run of each server counts")
	flag.IntVar(&o.clients, "clients", 256, "distinct STB addresses cycled through X-Forwarded-For")
	flag.IntVar(&o.zones, "zones", 32, "coverage zones (spread over every region) the STB addresses come from")
	flag.StringVar(&o.path, "path", "/cctv1/index.m3u8", "request path of the HTTP load")
	flag.Uint64Var(&o.sampleEvery, "sample-every", 1, "anysched's access log: log one decision in N (the daemon's default is 1: every decision)")
	flag.StringVar(&o.accessLog, "access-log", "file", "where anysched's access log goes: file (appended to a file, like nginx's), discard (encoded, then io.Discard) or off (access_log.enabled: false: counters only, no lines)")
	flag.StringVar(&o.dnsTool, "dns-tool", "auto", "DNS load generator: auto (dnsperf if installed), dnsperf, or internal")
	flag.IntVar(&o.dnsOutstanding, "dns-outstanding", 100, "dnsperf -q: queries in flight at most (closed loop; 100 is dnsperf's default)")
	flag.IntVar(&o.dnsMaxQPS, "dns-max-qps", 0, "dnsperf -Q: cap on queries per second, the same offered load for every server (0: no cap)")
	flag.StringVar(&o.dnsECS, "dns-ecs", "", "ECS prefix of the ECS runs of its family (e.g. 100.64.0.0/24, or an IPv6 one for the IPv6 run); empty: a /24 (IPv6: a /56) of an STB address in a coverage zone; none: no ECS runs")
	flag.Float64Var(&o.rateShare, "rate-share", 0.6, "fixed-rate runs offer this share of the lower closed-loop throughput of anysched and its peer (h2load --rps, dnsperf -Q), to compare latency at equal offered load; 0: no fixed-rate runs")
	flag.BoolVar(&o.pin, "pin", true, "pin the server to one CPU and the load generator to another (taskset)")
	flag.IntVar(&o.serverCPU, "server-cpu", -1, "CPU of the server (-1: the first allowed CPU)")
	flag.IntVar(&o.loadCPU, "load-cpu", -1, "CPU of the load generator (-1: the second allowed CPU)")
	flag.BoolVar(&o.scaling, "scaling", true, "also measure anysched on two CPUs (needs pinning; with four CPUs allowed the load generator gets two others)")
	flag.BoolVar(&o.tlsResume, "tls-resume", true, "HTTPS servers offer TLS session resumption, as they do by default (wrk resumes when offered); false: full handshakes only")
	flag.StringVar(&o.nginx, "nginx", "", "nginx binary (default: nginx in PATH or the sbin directories)")
	flag.StringVar(&o.gdnsd, "gdnsd", "", "gdnsd binary (default: gdnsd in PATH or the sbin directories)")
	flag.BoolVar(&o.profile, "profile", true, "take a CPU profile of the anysched process in an extra (unmeasured) run of each front end")
	flag.StringVar(&o.profileDir, "profile-dir", "", "keep the CPU profiles as http.pprof and dns.pprof in this directory (default: temporary, removed)")
	flag.IntVar(&o.topN, "top", 15, "profile entries shown, by flat and by cumulative time")
	flag.StringVar(&o.doc, "doc", "", "markdown document whose frontends section is rewritten (e.g. docs/benchmarks.md)")
	flag.BoolVar(&o.skipHTTP, "skip-http", false, "do not measure the HTTP front end")
	flag.BoolVar(&o.skipDNS, "skip-dns", false, "do not measure the DNS front end")
	flag.StringVar(&o.family, "family", "both", "address family of the runs: ipv4 (every server on 127.0.0.1, A queries), ipv6 (on [::1], AAAA queries, STBs and ECS subnets in the zones' IPv6 networks of the province made dual-stack), or both, one after the other, each with its own baselines")
	flag.Parse()

	if *child != "" {
		if err := runChild(*child, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "frontends child:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	if ctx.Err() != nil {
		err = errors.New("interrupted; every server it started is stopped")
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "frontends:", err)
		os.Exit(1)
	}
}

func (o opts) validate() error {
	var errs []string
	if o.duration < time.Second {
		errs = append(errs, "-duration must be at least 1s")
	}
	if o.connections < 1 || o.threads < 1 || o.connections < o.threads || o.connections < 2 {
		errs = append(errs, "-connections (>= 2) and -threads must be >= 1, and connections >= threads")
	}
	if o.rounds < 1 {
		errs = append(errs, "-rounds must be >= 1")
	}
	if o.clients < 1 || o.zones < 1 {
		errs = append(errs, "-clients and -zones must be >= 1")
	}
	if !strings.HasPrefix(o.path, "/") || strings.ContainsAny(o.path, " \t\r\n") {
		errs = append(errs, "-path must start with / and hold no white space")
	}
	if o.accessLog != "file" && o.accessLog != "discard" && o.accessLog != "off" {
		errs = append(errs, "-access-log must be file, discard or off")
	}
	switch o.dnsTool {
	case "auto", "dnsperf", "internal":
	default:
		errs = append(errs, "-dns-tool must be auto, dnsperf or internal")
	}
	if o.dnsOutstanding < 1 || o.dnsMaxQPS < 0 {
		errs = append(errs, "-dns-outstanding must be >= 1 and -dns-max-qps >= 0")
	}
	if o.dnsECS != "" && o.dnsECS != "none" {
		if _, err := netip.ParsePrefix(o.dnsECS); err != nil {
			errs = append(errs, "-dns-ecs must be a prefix, empty or none")
		}
	}
	if _, err := families(o.family); err != nil {
		errs = append(errs, err.Error())
	}
	if (o.serverCPU < 0) != (o.loadCPU < 0) {
		errs = append(errs, "-server-cpu and -load-cpu go together")
	}
	if o.topN < 1 {
		errs = append(errs, "-top must be >= 1")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// lab is what every comparison of one family's run shares: the temporary
// directory, the TLS certificate, the anysched processes, and the edge
// addresses anysched may answer with.
type lab struct {
	tmp               string
	certFile, keyFile string
	cert              *x509.Certificate
	fam               family
	edges             edgeSet
	any1              *anyschedProc // on the server's core
	any2              *anyschedProc // on both cores; nil when not measured
	any2Reason        string        // why any2 is nil
}

func run(ctx context.Context, o opts) error {
	if err := o.validate(); err != nil {
		return err
	}
	fams, _ := families(o.family)
	started := time.Now()
	env := newEnvironment(ctx, o)
	fmt.Println("placement: " + env.pin.describe())
	tmp, err := os.MkdirTemp("", "frontends-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	certFile, keyFile, cert, err := writeCert(tmp)
	if err != nil {
		return err
	}
	rep := &report{env: env, opts: o, args: os.Args[1:]}
	for i, f := range fams {
		dir := filepath.Join(tmp, f.name())
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		l := &lab{tmp: dir, certFile: certFile, keyFile: keyFile, cert: cert, fam: f}
		// One profile of each front end: in the first family's run.
		fo := o
		fo.profile = o.profile && i == 0
		fr, err := runFamily(ctx, fo, env, l)
		if err != nil {
			return fmt.Errorf("%s: %w", f.label(), err)
		}
		rep.runs = append(rep.runs, fr)
		rep.profiles = append(rep.profiles, fr.profiles...)
	}
	rep.elapsed, rep.loadEnd = time.Since(started), loadAvg()
	fmt.Println()
	fmt.Print(rep.text())
	if o.doc != "" {
		if err := rewriteDoc(o.doc, rep.markdown()); err != nil {
			return err
		}
		fmt.Printf("\n%s: frontends section rewritten\n", o.doc)
	}
	return nil
}

// runFamily measures every load of one family: its anysched processes,
// started here and stopped when it returns, against the family's peers.
func runFamily(ctx context.Context, o opts, env *environment, l *lab) (*familyRun, error) {
	fmt.Printf("%s: every server on %s\n", l.fam.label(), l.fam.urlHost())
	l.edges = newEdgeSet(l.fam)
	logFile := func(name string) string {
		switch o.accessLog {
		case "discard":
			return ""
		case "off":
			return "-"
		}
		return filepath.Join(l.tmp, name)
	}
	var err error
	if l.any1, err = startAnysched(ctx, o, l.fam, env.pin, env.pin.server, logFile("anysched-1.log"), l.certFile, l.keyFile); err != nil {
		return nil, err
	}
	defer l.any1.stop()
	switch {
	case !o.scaling:
		l.any2Reason = "-scaling=false"
	case !env.pin.on():
		l.any2Reason = "nothing is pinned (" + env.pin.note + ")"
	default:
		if l.any2, err = startAnysched(ctx, o, l.fam, env.pin, env.pin.server2, logFile("anysched-2.log"), l.certFile, l.keyFile); err != nil {
			return nil, err
		}
		defer l.any2.stop()
	}
	fmt.Printf("snapshot: %s, built in %s (in the anysched process, GOMAXPROCS %d)\n",
		l.any1.info.Topology, l.any1.info.BuildTime.Round(time.Millisecond), l.any1.info.GOMAXPROCS)

	fr := &familyRun{fam: l.fam, topo: l.any1.info.Topology}
	if !o.skipHTTP {
		scs, rows, prof, rps, err := benchHTTP(ctx, o, env, l)
		if err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		fr.scenarios, fr.rows = append(fr.scenarios, scs...), append(fr.rows, rows...)
		fr.profiles = append(fr.profiles, profileRun{"HTTP 302, keep-alive (" + l.fam.label() + ")", "req/s", rps, prof})
	}
	if !o.skipDNS {
		scs, rows, prof, rps, err := benchDNS(ctx, o, env, l)
		if err != nil {
			return nil, fmt.Errorf("dns: %w", err)
		}
		fr.scenarios, fr.rows = append(fr.scenarios, scs...), append(fr.rows, rows...)
		fr.profiles = append(fr.profiles, profileRun{"DNS " + l.fam.rrType() + ", plain queries", "q/s", rps, prof})
	}
	return fr, nil
}
