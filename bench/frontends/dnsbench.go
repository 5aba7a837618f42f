package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/dnsd"
	"github.com/miekg/dns"
)

// benchDNS measures anysched's dnsd against the bare miekg/dns server.
func benchDNS(ctx context.Context, o opts, w *world, env *environment) (*pairResult, error) {
	tool := o.dnsTool
	var note string
	if tool == "auto" {
		tool = "dnsperf"
		if env.dnsperf == "" {
			tool = "internal"
			note = "dnsperf is not installed: the in-program miekg UDP load generator was used instead"
			fmt.Println("dns: " + note)
		}
	}
	if tool == "dnsperf" && env.dnsperf == "" {
		return nil, errors.New("dnsperf is not installed (apt-get install dnsperf), use -dns-tool internal")
	}
	q, err := queryMsg(o.dnsECS)
	if err != nil {
		return nil, err
	}

	// (a) anysched's DNS front end: UDP and TCP on one port, as Run binds.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		return nil, err
	}
	// The load generator speaks for its STBs with ECS, as a resolver would.
	srv := dnsd.New(dnsd.Config{
		Listen: pc.LocalAddr().String(), InstanceID: "bench-frontends",
		TrustedResolvers: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}, w.engineFunc, w.rec, nil)
	sctx, stopSrv := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, pc, ln) }()
	defer func() {
		stopSrv()
		<-served
	}()
	anyAddr := pc.LocalAddr().String()

	// (b) the bare server, in a child process.
	bare, err := startChild(ctx, "dns-bare")
	if err != nil {
		return nil, err
	}
	defer bare.stop()

	verified, err := verifyDNS(ctx, anyAddr, bare.addr, q)
	if err != nil {
		return nil, err
	}
	fmt.Println("dns: " + verified)

	secs := int(o.duration.Round(time.Second) / time.Second)
	p := &pairResult{frontend: "DNS A (UDP)", verified: verified}
	if note != "" {
		p.notes = append(p.notes, note)
	}
	query := "plain A queries for live.iptv.example from 127.0.0.1 (in no zone: the default region answers)"
	if o.dnsECS != "" {
		query = "A queries for live.iptv.example with ECS " + o.dnsECS + " (located by the ECS address)"
	}
	var measure func(addr string) (runResult, error)
	switch tool {
	case "dnsperf":
		tmp, err := os.MkdirTemp("", "frontends-dns-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		qfile := filepath.Join(tmp, "queries.txt")
		if err := os.WriteFile(qfile, []byte("live.iptv.example A\n"), 0o644); err != nil {
			return nil, err
		}
		args := []string{"-d", qfile, "-l", strconv.Itoa(secs), "-c", strconv.Itoa(o.connections), "-T", strconv.Itoa(o.threads),
			"-q", strconv.Itoa(o.dnsOutstanding), "-t", "2"}
		if o.dnsMaxQPS > 0 {
			args = append(args, "-Q", strconv.Itoa(o.dnsMaxQPS))
		}
		if o.dnsECS != "" {
			args = append(args, "-e", "-E", "8:"+ecsHex(q))
		}
		p.tool = env.dnsperfVersion
		p.settings = fmt.Sprintf("dnsperf -c%d -T%d -l%d -q%d", o.connections, o.threads, secs, o.dnsOutstanding)
		if o.dnsMaxQPS > 0 {
			p.settings += fmt.Sprintf(" -Q%d", o.dnsMaxQPS)
		} else {
			p.settings += " (no -Q)"
		}
		p.settings += "; closed loop of " + strconv.Itoa(o.dnsOutstanding) + " queries in flight; " + query
		measure = func(addr string) (runResult, error) { return runDNSPerf(ctx, env.dnsperf, args, addr, o.duration) }
	default:
		p.tool = "internal miekg UDP generator"
		p.settings = fmt.Sprintf("%d UDP clients, 1 query in flight each, %ds; %s", o.connections, secs, query)
		measure = func(addr string) (runResult, error) { return runInternalDNS(ctx, addr, o, secs) }
	}

	warm := o
	warm.duration = time.Second
	for _, addr := range []string{anyAddr, bare.addr} { // unmeasured warm-up
		if _, err := runInternalDNS(ctx, addr, warm, 1); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	droppedBefore := w.dropped()
	for round := 1; round <= o.rounds; round++ {
		for _, side := range []string{"anysched", "bare"} {
			addr, pid := anyAddr, os.Getpid()
			if side == "bare" {
				addr, pid = bare.addr, bare.cmd.Process.Pid
			}
			var r runResult
			err := withCPU(pid, &r, func() error {
				var err error
				r, err = measure(addr)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", side, round, err)
			}
			lat := "avg " + fmtDur(r.avg)
			if r.p50 > 0 {
				lat = "p50 " + fmtDur(r.p50) + " p99 " + fmtDur(r.p99)
			}
			fmt.Printf("dns:  round %d %-8s %10.0f q/s    %-20s server CPU %s/query%s\n", round, side, r.rps, lat, fmtCPU(r.cpu), problems(r))
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
		prof, err := profiled(ctx, "dns", o.topN, o.profileDir, dnsParts, func() error {
			var err error
			r, err = measure(anyAddr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("profiled run: %w", err)
		}
		p.profiledRPS, p.profile = r.rps, prof
		fmt.Printf("dns:  profiled anysched run %10.0f q/s (not counted)\n", r.rps)
	}
	return p, nil
}

// dnsParts are the functions whose cumulative share of the DNS profile is
// reported.
var dnsParts = [][2]string{
	{"miekg read loop (recvmsg, spawning per packet)", "github.com/miekg/dns.(*Server).serveUDP"},
	{"miekg per-packet goroutine", "github.com/miekg/dns.(*Server).serveUDPPacket"},
	{"  unpack the query", "github.com/miekg/dns.(*Msg).unpack"},
	{"  dnsd handler", "internal/dnsd.(*Server).ServeDNS"},
	{"    build the answer", "internal/dnsd.(*Server).answer"},
	{"      steer decision", "internal/steer.(*Engine).Decide"},
	{"    truncate check (Msg.Len)", "github.com/miekg/dns.(*Msg).Truncate"},
	{"    pack and send the reply", "github.com/miekg/dns.(*response).WriteMsg"},
	{"    access log Record (metrics, queue)", "internal/accesslog.(*Recorder).Record"},
	{"access log writer goroutine (slog line to io.Discard)", "internal/accesslog.(*Recorder).Run"},
	{"garbage collector (background mark workers)", "runtime.gcBgMarkWorker"},
	{"allocation (mallocgc, every caller)", "runtime.mallocgc"},
	{"network syscalls (recvmsg, sendmsg)", "syscall.Syscall"},
}

// verifyDNS checks that both servers answer the query with one A record
// (and anysched authoritatively).
func verifyDNS(ctx context.Context, anyAddr, bareAddr string, q *dns.Msg) (string, error) {
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	ask := func(addr string) (*dns.Msg, error) {
		var last error
		for range 10 { // the server goroutine may not be reading yet
			r, _, err := c.ExchangeContext(ctx, q.Copy(), addr)
			if err == nil {
				return r, nil
			}
			last = err
			time.Sleep(100 * time.Millisecond)
		}
		return nil, last
	}
	var got []string
	for _, side := range []struct{ name, addr string }{{"anysched", anyAddr}, {"bare", bareAddr}} {
		r, err := ask(side.addr)
		if err != nil {
			return "", fmt.Errorf("%s sample query: %w", side.name, err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return "", fmt.Errorf("%s answered %s with %d records; want NOERROR and one A", side.name, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		a, ok := r.Answer[0].(*dns.A)
		if !ok {
			return "", fmt.Errorf("%s answered %s; want an A record", side.name, r.Answer[0])
		}
		if side.name == "anysched" && !r.Authoritative {
			return "", errors.New("anysched's answer is not authoritative")
		}
		got = append(got, side.name+" "+a.A.String())
	}
	return "sample answers are NOERROR with one A record (" + strings.Join(got, ", ") + ")", nil
}

// ecsHex is the value of the query's ECS option as dnsperf -E wants it.
func ecsHex(q *dns.Msg) string {
	for _, rr := range q.Extra {
		if opt, ok := rr.(*dns.OPT); ok {
			for _, o := range opt.Option {
				if s, ok := o.(*dns.EDNS0_SUBNET); ok { // RFC 7871 §6
					b := []byte{byte(s.Family >> 8), byte(s.Family), s.SourceNetmask, 0}
					b = append(b, s.Address.To4()[:(int(s.SourceNetmask)+7)/8]...)
					return hex.EncodeToString(b)
				}
			}
		}
	}
	return ""
}

var (
	reQPS       = regexp.MustCompile(`(?m)Queries per second:\s+([0-9.]+)`)
	reCompleted = regexp.MustCompile(`(?m)Queries completed:\s+(\d+)`)
	reLost      = regexp.MustCompile(`(?m)Queries lost:\s+(\d+)`)
	reAvgLat    = regexp.MustCompile(`(?m)Average Latency \(s\):\s+([0-9.]+)`)
	reRcodes    = regexp.MustCompile(`(?m)Response codes:\s+(.*)$`)
)

func runDNSPerf(ctx context.Context, dnsperf string, args []string, addr string, d time.Duration) (runResult, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return runResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, dnsperf, append([]string{"-s", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		return runResult{}, fmt.Errorf("dnsperf: %w\n%s", err, out)
	}
	return parseDNSPerf(string(out))
}

func parseDNSPerf(out string) (runResult, error) {
	var r runResult
	m := reQPS.FindStringSubmatch(out)
	a := reAvgLat.FindStringSubmatch(out)
	if m == nil || a == nil {
		return r, fmt.Errorf("no Queries per second / Average Latency in dnsperf output:\n%s", out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	sec, _ := strconv.ParseFloat(a[1], 64)
	r.avg = time.Duration(sec * 1e9)
	if m := reCompleted.FindStringSubmatch(out); m != nil {
		r.total, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reLost.FindStringSubmatch(out); m != nil {
		r.lost, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reRcodes.FindStringSubmatch(out); m != nil && strings.TrimSpace(m[1]) != "" {
		if rc := strings.TrimSpace(m[1]); !strings.HasPrefix(rc, "NOERROR") || strings.Contains(rc, ",") {
			r.problems = append(r.problems, "response codes: "+rc)
		}
	}
	return r, nil
}

// runInternalDNS runs the fallback load generator in a child process, so
// it neither shares the anysched process's heap nor shows in its profile.
func runInternalDNS(ctx context.Context, addr string, o opts, secs int) (runResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return runResult{}, err
	}
	d := time.Duration(secs) * time.Second
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "-child", "dns-load", "--", "-target", addr, "-duration", d.String(),
		"-clients", strconv.Itoa(o.connections), "-ecs", o.dnsECS).Output()
	if err != nil {
		return runResult{}, fmt.Errorf("internal load generator: %w", err)
	}
	var r runResult
	var sent, completed, lost, avg, p50, p99 int64
	var qps float64
	line := strings.TrimSpace(string(out))
	if _, err := fmt.Sscanf(line, "RESULT %d %d %d %f %d %d %d", &sent, &completed, &lost, &qps, &avg, &p50, &p99); err != nil {
		return r, fmt.Errorf("internal load generator printed %q: %w", line, err)
	}
	r.rps, r.total, r.lost = qps, completed, lost
	r.avg, r.p50, r.p99 = time.Duration(avg), time.Duration(p50), time.Duration(p99)
	return r, nil
}
