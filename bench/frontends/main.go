// Command frontends measures the STB-facing front ends against bare
// baselines, on the same machine, in the same run, with the same load:
//
//   - HTTP: anysched's httpd (province-scale snapshot, access log on, the
//     client located from X-Forwarded-For) against a bare net/http server
//     that only writes a fixed 302, both loaded by wrk;
//   - DNS: anysched's dnsd (same snapshot) against a bare miekg/dns server
//     that answers every query with one fixed A record, both loaded by
//     dnsperf (or, when dnsperf is missing, by a small miekg UDP load
//     generator of this program, which the output then says).
//
// Each pair is run twice, alternating (anysched, bare, anysched, bare), and
// the better run of each side is reported, which reduces the noise of a
// small machine where the load generator and the server share the CPUs.
// anysched runs in this process, over the province-scale topology; the bare
// servers run in a child process (this program re-executed), so their
// garbage collector does not pay for the snapshot's heap. A further,
// unmeasured run of each anysched front end takes a CPU profile of this
// process, whose top entries are printed.
//
//	go run ./bench/frontends                          # print the summary
//	go run ./bench/frontends -doc docs/benchmarks.md  # and rewrite its section
//
// With -doc, the section between <!-- frontends:begin --> and
// <!-- frontends:end --> of the document is replaced (the markers and a
// "## STB front ends" heading are appended when the document lacks them).
// Everything listens on 127.0.0.1 only, and every server and child process
// is stopped before the program exits. With the defaults it takes about
// 110 s.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
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
	logFormat   string

	dnsTool        string
	dnsOutstanding int
	dnsMaxQPS      int
	dnsECS         string

	profile    bool
	profileDir string
	topN       int
	doc        string
	skipHTTP   bool
	skipDNS    bool
}

// target is the documented goal: anysched's throughput at least this share
// of the bare server's.
const target = 0.85

func main() {
	var o opts
	child := flag.String("child", "", "internal: run as a child process (http-bare, dns-bare, dns-load)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of every measured run")
	flag.IntVar(&o.connections, "connections", 64, "wrk connections; also dnsperf clients (-c)")
	flag.IntVar(&o.threads, "threads", 2, "wrk threads; also dnsperf threads (-T)")
	flag.IntVar(&o.rounds, "rounds", 2, "alternating rounds (anysched, bare) per front end; the best run of each side counts")
	flag.IntVar(&o.clients, "clients", 256, "distinct STB addresses cycled through X-Forwarded-For")
	flag.IntVar(&o.zones, "zones", 32, "coverage zones (spread over every region) the STB addresses come from")
	flag.StringVar(&o.path, "path", "/cctv1/index.m3u8", "request path of the HTTP load")
	flag.Uint64Var(&o.sampleEvery, "sample-every", 1, "access log: log one decision in N (the daemon's default is 1: every decision)")
	flag.StringVar(&o.logFormat, "log-format", "text", "access log format, text or json (the daemon's default is text); lines go to io.Discard")
	flag.StringVar(&o.dnsTool, "dns-tool", "auto", "DNS load generator: auto (dnsperf if installed), dnsperf, or internal")
	flag.IntVar(&o.dnsOutstanding, "dns-outstanding", 100, "dnsperf -q: queries in flight at most (closed loop; 100 is dnsperf's default)")
	flag.IntVar(&o.dnsMaxQPS, "dns-max-qps", 0, "dnsperf -Q: cap on queries per second (0: no cap)")
	flag.StringVar(&o.dnsECS, "dns-ecs", "", "optional EDNS Client Subnet prefix sent with every query (e.g. 100.64.0.0/24); empty: plain queries, located by source address")
	flag.BoolVar(&o.profile, "profile", true, "take a CPU profile in an extra (unmeasured) run of each anysched front end")
	flag.StringVar(&o.profileDir, "profile-dir", "", "keep the CPU profiles as http.pprof and dns.pprof in this directory (default: temporary, removed)")
	flag.IntVar(&o.topN, "top", 15, "profile entries shown, by flat and by cumulative time")
	flag.StringVar(&o.doc, "doc", "", "markdown document whose frontends section is rewritten (e.g. docs/benchmarks.md)")
	flag.BoolVar(&o.skipHTTP, "skip-http", false, "do not measure the HTTP front end")
	flag.BoolVar(&o.skipDNS, "skip-dns", false, "do not measure the DNS front end")
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
	if o.connections < 1 || o.threads < 1 || o.connections < o.threads {
		errs = append(errs, "-connections and -threads must be >= 1, and connections >= threads")
	}
	if o.rounds < 1 {
		errs = append(errs, "-rounds must be >= 1")
	}
	if o.clients < 1 || o.zones < 1 {
		errs = append(errs, "-clients and -zones must be >= 1")
	}
	if !strings.HasPrefix(o.path, "/") {
		errs = append(errs, "-path must start with /")
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		errs = append(errs, "-log-format must be text or json")
	}
	switch o.dnsTool {
	case "auto", "dnsperf", "internal":
	default:
		errs = append(errs, "-dns-tool must be auto, dnsperf or internal")
	}
	if o.dnsOutstanding < 1 || o.dnsMaxQPS < 0 {
		errs = append(errs, "-dns-outstanding must be >= 1 and -dns-max-qps >= 0")
	}
	if o.topN < 1 {
		errs = append(errs, "-top must be >= 1")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func run(ctx context.Context, o opts) error {
	if err := o.validate(); err != nil {
		return err
	}
	started := time.Now()
	env := newEnvironment(ctx, o)
	w, err := buildWorld(o)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot: %s, built in %s\n", w.describe(), w.buildTime.Round(time.Millisecond))
	runtime.GC() // the build's garbage is not the front ends' to collect

	rep := &report{env: env, opts: o, topo: w.describe()}
	if !o.skipHTTP {
		r, err := benchHTTP(ctx, o, w)
		if err != nil {
			return fmt.Errorf("http: %w", err)
		}
		rep.http = r
	}
	if !o.skipDNS {
		r, err := benchDNS(ctx, o, w, env)
		if err != nil {
			return fmt.Errorf("dns: %w", err)
		}
		rep.dns = r
	}
	w.stop()
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
