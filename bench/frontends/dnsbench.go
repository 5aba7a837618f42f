package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
	"github.com/miekg/dns"
)

// targetDNS: anysched/gdnsd at least this, per core.
const targetDNS = 1.0

// dnsServers are the DNS servers of the run.
type dnsServers struct {
	any1, any2 *anyschedProc
	gdnsd      *gdnsdPeer
	gdnsdMiss  string
	bare       *goChild
	bareMiss   string
}

// benchDNS measures the DNS comparisons: plain queries, located by their
// source address, and queries with an ECS option, located by it.
func benchDNS(ctx context.Context, o opts, env *environment, l *lab) ([]*scenario, []row, *profileTop, float64, error) {
	tool, note := o.dnsTool, ""
	if tool == "auto" {
		tool = "dnsperf"
		if env.dnsperf == "" {
			tool = "internal"
			note = "dnsperf is not installed: the in-program miekg UDP load generator was used instead"
			fmt.Println("dns: " + note)
		}
	}
	if tool == "dnsperf" && env.dnsperf == "" {
		return nil, nil, nil, 0, errors.New("dnsperf is not installed (apt-get install dnsperf), use -dns-tool internal")
	}
	ds := dnsServers{any1: l.any1, any2: l.any2}
	if env.gdnsd == "" {
		ds.gdnsdMiss = "gdnsd is not installed"
	} else if g, err := startGdnsd(ctx, env.gdnsd, l.fam, env.pin, l.tmp); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, 0, ctx.Err()
		}
		ds.gdnsdMiss = "gdnsd did not start: " + firstLine(err.Error())
		fmt.Println("dns: " + ds.gdnsdMiss)
	} else {
		ds.gdnsd = g
		defer g.stop()
	}
	if b, err := startChild(ctx, env.pin, env.pin.server, "dns-bare", "-family", l.fam.name()); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, 0, ctx.Err()
		}
		ds.bareMiss = "did not start: " + firstLine(err.Error())
	} else {
		ds.bare = b
		defer b.stop()
	}

	f, rr := l.fam, l.fam.rrType()
	ecs := o.dnsECS
	if p, err := netip.ParsePrefix(ecs); err == nil && !f.of(p.Addr()) {
		ecs = "" // the other family's run's
	}
	if ecs == "" && len(l.any1.info.Clients) > 0 {
		// A /24 (IPv6: a /56) of an STB address, as a resolver would send it.
		if a, err := netip.ParseAddr(l.any1.info.Clients[0]); err == nil {
			ecs = netip.PrefixFrom(a, f.ecsBits()).Masked().String()
		}
	}
	qfile := filepath.Join(l.tmp, "queries.txt")
	if err := os.WriteFile(qfile, []byte(topogen.Hostname+" "+rr+"\n"), 0o644); err != nil {
		return nil, nil, nil, 0, err
	}
	base := dnsLoad{tool: tool, dnsperf: env.dnsperf, qfile: qfile, pin: env.pin, cpus: env.pin.load, fam: f,
		threads: o.threads, clients: o.connections, outstanding: o.dnsOutstanding, maxQPS: o.dnsMaxQPS}

	var scs []*scenario
	var rows []row
	for _, withECS := range []bool{false, true} {
		ld := base
		sc := &scenario{title: "DNS " + rr + ", plain queries", unit: "q/s", tool: env.dnsperfVersion, pin: env.pin}
		query := rr + " queries for " + topogen.Hostname + " from " + f.loopback().String() + " (in no zone: anysched answers from the default region)"
		if withECS {
			if ecs == "none" {
				continue
			}
			ld.ecs = ecs
			sc.title = "DNS " + rr + ", with ECS"
			query = rr + " queries for " + topogen.Hostname + " with ECS " + ecs + " (anysched locates the STB by it)"
		}
		if tool != "dnsperf" {
			sc.tool = "internal miekg UDP generator"
		}
		q, err := queryMsg(f, ld.ecs)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		ld.q = q
		checks, err := verifyDNS(ctx, ds, q, l.edges)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		sc.checks = checks
		for _, c := range checks {
			fmt.Printf("dns: %s\n", c)
		}
		sc.settings = ld.describe(o.duration) + "; " + query + "; the same load for every server"
		if tool == "dnsperf" {
			sc.settings += " (dnsperf reports the average latency only, no percentiles)"
		}
		if note != "" {
			sc.notes = append(sc.notes, note)
		}
		mk := func(name, miss string, pid int, logFile string, a *anyschedProc, ld dnsLoad, addr string) *side {
			return &side{name: name, missing: miss, pid: pid, logFile: logFile, any: a, target: addr,
				run: func(ctx context.Context, d time.Duration) (runResult, error) { return ld.run(ctx, addr, d) }}
		}
		a := mk("anysched", "", l.any1.pid(), l.any1.log, l.any1, ld, l.any1.info.DNS)
		g := &side{name: "gdnsd", missing: ds.gdnsdMiss}
		if env.gdnsdVersion != "" {
			g.name = env.gdnsdVersion
		}
		g.name += ", 1 UDP thread, static zone"
		if ds.gdnsd != nil {
			g = mk(g.name, "", ds.gdnsd.pid(), "", nil, ld, ds.gdnsd.addr)
		}
		bare := &side{name: "bare miekg/dns", missing: ds.bareMiss}
		if ds.bare != nil {
			bare = mk(bare.name, "", ds.bare.pid(), "", nil, ld, ds.bare.ready)
		}
		sc.sides = []*side{a, g, bare}
		rows = append(rows, row{sc: sc, peer: g.name, a: a, b: g, target: targetDNS}, row{sc: sc, peer: bare.name, a: a, b: bare})
		if !withECS {
			ld2 := ld
			ld2.cpus, ld2.threads = env.pin.load2, 2
			two := &side{name: "anysched on 2 cores", missing: l.any2Reason}
			if l.any2 != nil {
				two = mk(two.name, "", l.any2.pid(), l.any2.log, l.any2, ld2, l.any2.info.DNS)
			}
			two.twoCore = true
			sc.sides = append(sc.sides, two)
			if l.any2 != nil {
				sc.notes = append(sc.notes, "anysched on 2 cores: "+env.pin.twoCores()+", "+ld2.describe(o.duration)+"; compared with anysched on 1 core above")
			}
			rows = append(rows, row{sc: sc, what: "anysched on 2 cores", peer: "anysched on 1 core", a: two, b: a, target: targetScaling, shared: env.pin.shared})
		}
		scs = append(scs, sc)
	}
	for _, sc := range scs {
		if err := runScenario(ctx, o, sc); err != nil {
			return nil, nil, nil, 0, err
		}
	}
	if sc, rs := dnsAtRate(o, base, scs[0]); sc != nil {
		if err := runScenario(ctx, o, sc); err != nil {
			return nil, nil, nil, 0, err
		}
		scs, rows = append(scs, sc), append(rows, rs...)
	}
	var prof *profileTop
	var profRPS float64
	if o.profile {
		ld := base
		ld.q, _ = queryMsg(f, "")
		var r runResult
		var err error
		prof, err = profiled(ctx, l.any1, "dns", o, dnsParts, func() error {
			var err error
			r, err = ld.run(ctx, l.any1.info.DNS, o.duration)
			return err
		})
		if err != nil {
			return nil, nil, nil, 0, fmt.Errorf("profiled run: %w", err)
		}
		profRPS = r.rps
		fmt.Printf("dns: profiled anysched run %10.0f q/s (not counted)\n", r.rps)
	}
	return scs, rows, prof, profRPS, nil
}

// dnsParts are the functions whose cumulative share of the DNS profile is
// reported.
var dnsParts = [][2]string{
	{"UDP reader goroutines (batched, whole cycle)", "internal/stb/dnsd.(*udpReader).run"},
	{"  recvmmsg", "internal/stb/dnsd.(*mmsgConn).recv"},
	{"  sendmmsg", "internal/stb/dnsd.(*mmsgConn).send"},
	{"  fast path (parse, decide, patch the reply)", "internal/stb/dnsd.(*Server).serveFast"},
	{"    steer decision", "internal/stb/steer.(*Engine).Decide"},
	{"    access log Record (metrics, queue)", "internal/stb/accesslog.(*Recorder).Record"},
	{"  full path (miekg/dns handler)", "internal/stb/dnsd.(*Server).serveFull"},
	{"access log writer goroutine (JSON lines to the file)", "internal/stb/accesslog.(*Recorder).Run"},
	{"garbage collector (background mark workers)", "runtime.gcBgMarkWorker"},
	{"allocation (mallocgc, every caller)", "runtime.mallocgc"},
	{"system calls (every caller)", "internal/runtime/syscall/linux.Syscall6"},
}

// verifyDNS checks that every server answers q with NOERROR and one record
// of q's type (A or AAAA), anysched and gdnsd authoritatively, anysched's
// one of edges (over IPv6 a server's address6).
func verifyDNS(ctx context.Context, ds dnsServers, q *dns.Msg, edges edgeSet) ([]string, error) {
	want := dns.TypeToString[q.Question[0].Qtype]
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	ask := func(addr string) (*dns.Msg, error) {
		var last error
		for range 10 { // a server goroutine may not be reading yet
			r, _, err := c.ExchangeContext(ctx, q.Copy(), addr)
			if err == nil {
				return r, nil
			}
			last = err
			time.Sleep(100 * time.Millisecond)
		}
		return nil, last
	}
	type server struct {
		name, addr string
		aa         bool
	}
	var all []server
	for _, a := range []*anyschedProc{ds.any1, ds.any2} {
		if a != nil {
			all = append(all, server{"anysched", a.info.DNS, true})
		}
	}
	if ds.gdnsd != nil {
		all = append(all, server{"gdnsd", ds.gdnsd.addr, true})
	}
	if ds.bare != nil {
		all = append(all, server{"bare", ds.bare.ready, false})
	}
	seen := map[string]bool{}
	var got []string
	for _, s := range all {
		r, err := ask(s.addr)
		if err != nil {
			return nil, fmt.Errorf("%s sample query: %w", s.name, err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return nil, fmt.Errorf("%s answered %s with %d records; want NOERROR and one %s", s.name, dns.RcodeToString[r.Rcode], len(r.Answer), want)
		}
		a, ok := rrAddr(r.Answer[0])
		if !ok || r.Answer[0].Header().Rrtype != q.Question[0].Qtype || !edges.fam.of(a) {
			return nil, fmt.Errorf("%s answered %s; want an %s record", s.name, r.Answer[0], want)
		}
		if s.aa && !r.Authoritative {
			return nil, fmt.Errorf("%s's answer is not authoritative", s.name)
		}
		if s.name == "anysched" {
			if err := edges.check(bracket(a)); err != nil {
				return nil, fmt.Errorf("anysched answered %s: %w", r.Answer[0], err)
			}
		}
		desc := s.name + " " + a.String()
		if scope, ok := ecsScope(r); ok {
			desc += fmt.Sprintf(" (ECS scope /%d)", scope)
		}
		if !seen[desc] {
			seen[desc] = true
			got = append(got, desc)
		}
	}
	return []string{"sample answers are NOERROR with one " + want + " record, anysched's " + edges.what() + ": " + strings.Join(got, ", ")}, nil
}

// ecsScope is the scope prefix length of the answer's ECS option.
func ecsScope(m *dns.Msg) (uint8, bool) {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				return s.SourceScope, true
			}
		}
	}
	return 0, false
}

// dnsAtRate is the plain-query load at a fixed offered rate (dnsperf -Q,
// with every query's latency), o.rateShare of the lower best throughput
// of anysched and gdnsd in the closed-loop scenario kept, compared by p99.
// Nil without dnsperf or a measured gdnsd.
func dnsAtRate(o opts, base dnsLoad, kept *scenario) (*scenario, []row) {
	if o.rateShare <= 0 || base.tool != "dnsperf" || len(kept.sides) < 2 {
		return nil, nil
	}
	a, g := kept.sides[0], kept.sides[1]
	if !a.measured() || !g.measured() {
		return nil, nil
	}
	ld := base
	ld.q, _ = queryMsg(base.fam, "")
	ld.perQuery = true
	ld.maxQPS = int(o.rateShare*min(a.top().rps, g.top().rps)/1000) * 1000
	if ld.maxQPS == 0 {
		return nil, nil
	}
	sc := &scenario{title: "DNS " + base.fam.rrType() + ", plain queries, fixed rate", unit: "q/s", tool: kept.tool, pin: kept.pin, rate: ld.maxQPS,
		settings: fmt.Sprintf("%s; %.0f%% of the lower best throughput above (anysched's and gdnsd's), rounded down to 1000; "+
			"latency of every query, as dnsperf -v prints it", ld.describe(o.duration), 100*o.rateShare)}
	ra, rg := a.under(ld), g.under(ld)
	sc.sides = []*side{ra, rg}
	return sc, []row{{sc: sc, peer: rg.name, a: ra, b: rg, target: targetLatency}}
}
