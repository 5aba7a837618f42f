package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/anysched/anysched/internal/province/topology/topogen"
)

// Targets of the HTTP comparisons, per core: anysched/peer at least this.
const (
	targetHTTP    = 1.0 // keep-alive and new connection, against nginx
	targetHTTPS   = 0.8 // new TLS connection, against nginx
	targetScaling = 1.8 // anysched on 2 cores against 1 core
	targetLatency = 1.0 // under a fixed rate: peer's p99 over anysched's (anysched's tail no longer)
)

// fasthttpMissing: a bare fasthttp baseline needs the module, which the
// project does not depend on.
const fasthttpMissing = "github.com/valyala/fasthttp is not a module dependency"

// httpSides are the HTTP servers of the run.
type httpSides struct {
	any1, any2 *anyschedProc // anysched on the server's core, and on both cores (nil: not measured)
	any2Reason string        // why any2 is nil
	nginx      *nginxPeer    // nil: nginxMiss says why
	nginxName  string
	nginxMiss  string
	bare       *goChild // bare net/http
	bareMiss   string
}

// benchHTTP measures the HTTP comparisons: keep-alive, a new connection
// per request, and a new TLS connection per request.
func benchHTTP(ctx context.Context, o opts, env *environment, l *lab) ([]*scenario, []row, *profileTop, float64, error) {
	hs := httpSides{any1: l.any1, any2: l.any2, any2Reason: l.any2Reason, nginxName: "nginx"}
	if env.nginxVersion != "" {
		hs.nginxName = env.nginxVersion
	}
	if env.nginx == "" {
		hs.nginxMiss = "nginx is not installed"
	} else if n, err := startNginx(ctx, env.nginx, l.fam, env.pin, l.tmp, l.certFile, l.keyFile, o.tlsResume); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, 0, ctx.Err()
		}
		hs.nginxMiss = "nginx did not start: " + firstLine(err.Error())
		fmt.Println("http: " + hs.nginxMiss)
	} else {
		hs.nginx = n
		defer n.stop()
	}
	if b, err := startChild(ctx, env.pin, env.pin.server, "http-bare", "-family", l.fam.name()); err != nil {
		if ctx.Err() != nil {
			return nil, nil, nil, 0, ctx.Err()
		}
		hs.bareMiss = "did not start: " + firstLine(err.Error())
	} else {
		hs.bare = b
		defer b.stop()
	}

	clients, err := l.any1.clients()
	if err != nil {
		return nil, nil, nil, 0, err
	}
	script := filepath.Join(l.tmp, "stb.lua")
	if err := os.WriteFile(script, []byte(luaScript(topogen.Hostname, clients)), 0o644); err != nil {
		return nil, nil, nil, 0, err
	}
	load := wrkLoad{wrk: env.wrk, script: script, pin: env.pin, cpus: env.pin.load, threads: o.threads, conns: o.connections}
	wrkMissing := ""
	if env.wrk == "" {
		wrkMissing = "wrk is not installed"
	}
	checks, tlsChecks, err := verifyHTTP(ctx, hs, l, clients, o.path)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	for _, c := range append(checks, tlsChecks...) {
		fmt.Println("http: " + c)
	}
	stbs := fmt.Sprintf("Host %s, X-Forwarded-For cycling %d %s STBs in %d zones; same connection count for every server (closed loop; the fixed-rate scenario below compares latency at equal offered load)",
		topogen.Hostname, len(clients), l.fam.label(), l.any1.info.Zones)

	// side builds the side of a server at u under load ld.
	mk := func(name string, miss string, pid int, logFile string, a *anyschedProc, ld wrkLoad, u string) *side {
		if wrkMissing != "" {
			miss = wrkMissing
		}
		return &side{name: name, missing: miss, pid: pid, logFile: logFile, any: a, target: u,
			run: func(ctx context.Context, d time.Duration) (runResult, error) { return ld.run(ctx, u, d) }}
	}
	anySide := func(name string, a *anyschedProc, ld wrkLoad, addr, scheme, miss string) *side {
		if a == nil {
			return mk(name, miss, 0, "", nil, ld, "")
		}
		return mk(name, miss, a.pid(), a.log, a, ld, scheme+"://"+addr+o.path)
	}
	nginxSide := func(name string, port int, scheme string, logged bool, ld wrkLoad) *side {
		if hs.nginx == nil {
			return mk(name, hs.nginxMiss, 0, "", nil, ld, "")
		}
		logFile := ""
		switch {
		case scheme == "https":
			logFile = hs.nginx.tlsLog
		case logged:
			logFile = hs.nginx.accessLog
		}
		s := mk(name, "", hs.nginx.pid(), logFile, nil, ld, hs.nginx.url(port, scheme, o.path))
		s.tlsLog = scheme == "https"
		return s
	}
	bareSide := func(ld wrkLoad) *side {
		if hs.bare == nil {
			return mk("bare net/http 302", hs.bareMiss, 0, "", nil, ld, "")
		}
		return mk("bare net/http 302", "", hs.bare.pid(), "", nil, ld, "http://"+hs.bare.ready+o.path)
	}
	port := func(f func(*nginxPeer) int) int {
		if hs.nginx == nil {
			return 0
		}
		return f(hs.nginx)
	}

	var scs []*scenario
	var rows []row
	for _, closeConn := range []bool{false, true} {
		ld := load
		ld.close = closeConn
		sc := &scenario{title: "HTTP 302, keep-alive", unit: "req/s", tool: env.wrkVersion, checks: checks, pin: env.pin}
		if closeConn {
			sc.title, sc.checks = "HTTP 302, new connection per request", nil // the same servers as keep-alive
		}
		sc.settings = ld.describe(o.duration) + "; " + stbs
		a := anySide("anysched", l.any1, ld, l.any1.info.HTTP, "http", "")
		off := nginxSide(hs.nginxName+", access log off", port(func(n *nginxPeer) int { return n.plain }), "http", false, ld)
		on := nginxSide(hs.nginxName+", access log on", port(func(n *nginxPeer) int { return n.logged }), "http", true, ld)
		bare := bareSide(ld)
		fast := &side{name: "bare fasthttp 302", missing: fasthttpMissing}
		sc.sides = []*side{a, off, on, bare, fast}
		rows = append(rows,
			row{sc: sc, peer: off.name, a: a, b: off, target: targetHTTP},
			row{sc: sc, peer: on.name + " (combined format, to a file)", a: a, b: on, target: targetHTTP},
			row{sc: sc, peer: bare.name, a: a, b: bare},
			row{sc: sc, peer: fast.name, a: a, b: fast})
		if !closeConn {
			ld2 := ld
			ld2.cpus, ld2.threads = env.pin.load2, 2
			two := anySide("anysched on 2 cores", l.any2, ld2, addrOf(l.any2, func(i anyschedInfo) string { return i.HTTP }), "http", l.any2Reason)
			two.twoCore = true
			sc.sides = append(sc.sides, two)
			if l.any2 != nil {
				sc.notes = append(sc.notes, "anysched on 2 cores: "+env.pin.twoCores()+", "+ld2.describe(o.duration)+"; compared with anysched on 1 core above")
			}
			rows = append(rows, row{sc: sc, what: "anysched on 2 cores", peer: "anysched on 1 core", a: two, b: a, target: targetScaling, shared: env.pin.shared})
		}
		scs = append(scs, sc)
	}

	ld := load
	ld.close = true
	sc := &scenario{title: "HTTPS 302, new TLS connection per request", unit: "req/s", tool: env.wrkVersion, checks: tlsChecks, pin: env.pin,
		settings: ld.describe(o.duration) + " over https; ECDSA P-256 certificate (the same file for both), TLS 1.2/1.3 as the client negotiates; " + stbs}
	anyHTTPSMiss := ""
	if l.any1.info.HTTPS == "" {
		anyHTTPSMiss = "not available: " + l.any1.info.HTTPSMissing
	}
	a := anySide("anysched", l.any1, ld, l.any1.info.HTTPS, "https", anyHTTPSMiss)
	ngx := nginxSide(hs.nginxName+" TLS, access log on", port(func(n *nginxPeer) int { return n.tls }), "https", true, ld)
	sc.sides = []*side{a, ngx}
	rows = append(rows, row{sc: sc, peer: ngx.name + " (combined format plus TLS protocol and session reuse, to a file)", a: a, b: ngx, target: targetHTTPS})
	scs = append(scs, sc)

	for _, sc := range scs {
		if err := runScenario(ctx, o, sc); err != nil {
			return nil, nil, nil, 0, err
		}
	}
	if sc, rs := httpAtRate(o, env, l, scs[0], clients[0]); sc != nil {
		if err := runScenario(ctx, o, sc); err != nil {
			return nil, nil, nil, 0, err
		}
		scs, rows = append(scs, sc), append(rows, rs...)
	}
	var prof *profileTop
	var profRPS float64
	if o.profile && wrkMissing == "" {
		var r runResult
		prof, err = profiled(ctx, l.any1, "http", o, httpParts, func() error {
			var err error
			r, err = load.run(ctx, "http://"+l.any1.info.HTTP+o.path, o.duration)
			return err
		})
		if err != nil {
			return nil, nil, nil, 0, fmt.Errorf("profiled run: %w", err)
		}
		profRPS = r.rps
		fmt.Printf("http: profiled anysched run %10.0f req/s (not counted)\n", r.rps)
	}
	return scs, rows, prof, profRPS, nil
}

// addrOf is one of a's addresses, "" when a is nil.
func addrOf(a *anyschedProc, f func(anyschedInfo) string) string {
	if a == nil {
		return ""
	}
	return f(a.info)
}

// httpParts are the functions whose cumulative share of the HTTP profile
// is reported (names as trimPprof prints them).
var httpParts = [][2]string{
	{"accept loops (accept4, first request answered there)", "internal/stb/httpd.(*acceptor).loop"},
	{"  first request of a connection", "internal/stb/httpd.(*acceptor).first"},
	{"event loops: kept-open connections (epoll, read, answer, write)", "internal/stb/httpd.(*loop).run"},
	{"  parse and answer (session)", "internal/stb/httpd.(*session).process"},
	{"    steer decision", "internal/stb/steer.(*Engine).Decide"},
	{"      zone lookup (bart)", "internal/province/topology.(*Snapshot).ZoneOf"},
	{"    Location rendering", "internal/stb/steer.(*Engine).AppendLocation"},
	{"    access log Record (metrics, queue)", "internal/stb/accesslog.(*Recorder).Record"},
	{"net/http (handed-over requests, HTTPS)", "net/http.(*conn).serve"},
	{"access log writer goroutine (JSON lines to the file)", "internal/stb/accesslog.(*Recorder).Run"},
	{"garbage collector (background mark workers)", "runtime.gcBgMarkWorker"},
	{"allocation (mallocgc, every caller)", "runtime.mallocgc"},
	{"system calls (every caller)", "internal/runtime/syscall/linux.Syscall6"},
}

// httpAtRate is the keep-alive load at a fixed offered rate, o.rateShare
// of the lower best throughput of anysched and nginx (access log off) in
// the closed-loop scenario kept: anysched against nginx with its access
// log off and on, compared by p99. Nil when h2load or a side is missing.
func httpAtRate(o opts, env *environment, l *lab, kept *scenario, stb netip.Addr) (*scenario, []row) {
	if o.rateShare <= 0 || env.h2load == "" || len(kept.sides) < 3 {
		return nil, nil
	}
	a, off, on := kept.sides[0], kept.sides[1], kept.sides[2]
	if !a.measured() || !off.measured() {
		return nil, nil
	}
	ld := rateLoad{h2load: env.h2load, dir: l.tmp, pin: env.pin, cpus: env.pin.load, conns: o.connections,
		rate: int(o.rateShare * min(a.top().rps, off.top().rps)), host: topogen.Hostname, xff: stb.String()}
	sc := &scenario{title: "HTTP 302, keep-alive, fixed rate", unit: "req/s", tool: env.h2loadVersion, pin: env.pin, rate: ld.offered(),
		settings: fmt.Sprintf("%s; %.0f%% of the lower best keep-alive throughput above (anysched's and nginx's, access log off); "+
			"Host %s, X-Forwarded-For %s (an STB in a coverage zone); latency of each request from its sending to the end of its answer (h2load's log)",
			ld.describe(o.duration), 100*o.rateShare, topogen.Hostname, stb)}
	ra := a.under(ld)
	rows := []row{}
	sc.sides = []*side{ra}
	for _, p := range []*side{off, on} {
		if !p.measured() {
			continue
		}
		rp := p.under(ld)
		sc.sides = append(sc.sides, rp)
		rows = append(rows, row{sc: sc, peer: rp.name, a: ra, b: rp, target: targetLatency})
	}
	return sc, rows
}
