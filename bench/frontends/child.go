package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Every Go server runs in a child process, this program re-executed with
// -child, so it can be pinned to the server's core: anysched's front ends
// over the province-scale snapshot, and the bare baselines (which would
// otherwise pay for marking the snapshot's heap on every GC cycle). The
// fallback DNS load generator is a child too, pinned to the load core. A child serving prints "ADDR host:port" on
// stdout and serves until its stdin is closed (the parent's exit closes it
// too, so no child outlives the run).

func runChild(kind string, args []string) error {
	switch kind {
	case "anysched":
		return childAnysched(args)
	case "http-bare", "dns-bare":
		var fam family
		fs := flag.NewFlagSet(kind, flag.ContinueOnError)
		fs.Var(&fam, "family", "ipv4 or ipv6")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if kind == "http-bare" {
			return childHTTPBare(fam)
		}
		return childDNSBare(fam)
	case "dns-load":
		return childDNSLoad(args)
	}
	return fmt.Errorf("unknown child kind %q", kind)
}

// untilStdinCloses returns a context cancelled when stdin reaches EOF.
func untilStdinCloses() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return ctx
}

// childHTTPBare answers every request with a fixed 302 to the family's
// bare edge address, on the family's loopback address.
func childHTTPBare(f family) error {
	ln, err := net.Listen("tcp", f.listen())
	if err != nil {
		return err
	}
	loc := f.bareLocation()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusFound)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("READY %s\n", ln.Addr())
	select {
	case <-untilStdinCloses().Done():
	case err := <-errc:
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

// childDNSBare answers every query with one fixed record of the family's
// (A or AAAA of its bare edge address), on the family's loopback address.
func childDNSBare(f family) error {
	pc, err := net.ListenPacket("udp", f.listen())
	if err != nil {
		return err
	}
	started := make(chan struct{})
	srv := &dns.Server{
		PacketConn: pc,
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
			m := new(dns.Msg)
			m.SetReply(req)
			m.Authoritative = true
			name := "live.iptv.example."
			if len(req.Question) == 1 {
				name = req.Question[0].Name
			}
			m.Answer = []dns.RR{addrRR(name, f.bareAddr(), 30)}
			_ = w.WriteMsg(m)
		}),
		NotifyStartedFunc: func() { close(started) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-errc:
		return err
	}
	fmt.Printf("READY %s\n", pc.LocalAddr())
	select {
	case <-untilStdinCloses().Done():
	case err := <-errc:
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.ShutdownContext(ctx)
	pc.Close()
	return nil
}

// goChild is this program re-executed with -child kind, serving until its
// stdin closes.
type goChild struct {
	*proc
	ready string // what its READY line says it serves
}

// startChild starts this program with -child kind on cpus and waits for
// the "READY ..." line it prints once it serves.
func startChild(ctx context.Context, pin pinning, cpus, kind string, args ...string) (*goChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p, err := startProc(pin, procSpec{name: "child " + kind, cpus: cpus, path: exe,
		args: append([]string{"-child", kind, "--"}, args...), stdin: true, stdout: w})
	w.Close() // the child holds its own copy
	if err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if v, found := strings.CutPrefix(l, "READY "); ok && found {
			return &goChild{proc: p, ready: v}, nil
		}
		p.stop()
		return nil, fmt.Errorf("child %s: first line %q, not READY: %s", kind, l, strings.TrimSpace(p.log.String()))
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("child %s: not ready within 30s", kind)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// dnsLoadResult is what the internal DNS load generator reports.
type dnsLoadResult struct {
	sent, completed, lost int
	qps                   float64
	avg, p50, p99         time.Duration
}

// childDNSLoad is the fallback DNS load generator: `clients` UDP sockets,
// each a closed loop of one query in flight, for a fixed duration. It
// prints one RESULT line.
func childDNSLoad(args []string) error {
	fs := flag.NewFlagSet("dns-load", flag.ContinueOnError)
	target := fs.String("target", "", "server host:port")
	duration := fs.Duration("duration", 10*time.Second, "")
	clients := fs.Int("clients", 64, "")
	ecs := fs.String("ecs", "", "")
	var fam family
	fs.Var(&fam, "family", "ipv4 or ipv6: A or AAAA queries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q, err := queryMsg(fam, *ecs)
	if err != nil {
		return err
	}
	r, err := udpLoad(*target, *duration, *clients, q)
	if err != nil {
		return err
	}
	fmt.Printf("RESULT %d %d %d %f %d %d %d\n", r.sent, r.completed, r.lost, r.qps, r.avg, r.p50, r.p99)
	return nil
}

// queryMsg is the family's query for the service (A or AAAA), with an ECS
// option when ecs is a prefix (of either family: a resolver may speak for
// an STB of the other family than its own transport's, though the runs
// send one of the queries' family).
func queryMsg(f family, ecs string) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion("live.iptv.example.", f.qtype())
	if ecs == "" {
		return q, nil
	}
	p, err := netip.ParsePrefix(ecs)
	if err != nil {
		return nil, fmt.Errorf("-dns-ecs %q: not a prefix", ecs)
	}
	p = p.Masked()
	ecsFamily, addr := uint16(1), net.IP(p.Addr().AsSlice())
	if p.Addr().Is6() {
		ecsFamily = 2
	}
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: ecsFamily, SourceNetmask: uint8(p.Bits()), Address: addr})
	q.Extra = append(q.Extra, o)
	return q, nil
}

func udpLoad(target string, d time.Duration, clients int, q *dns.Msg) (dnsLoadResult, error) {
	wire, err := q.Pack()
	if err != nil {
		return dnsLoadResult{}, err
	}
	type stats struct {
		sent, completed, lost int
		lat                   []time.Duration
	}
	all := make([]stats, clients)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	deadline := time.Now().Add(d)
	for i := range clients {
		wg.Go(func() {
			st := &all[i]
			conn, err := net.Dial("udp", target)
			if err != nil {
				errOnce.Do(func() { firstErr = err })
				return
			}
			defer conn.Close()
			pkt := append([]byte(nil), wire...)
			buf := make([]byte, 1500)
			id := uint16(i * 7919)
			for time.Now().Before(deadline) {
				id++
				pkt[0], pkt[1] = byte(id>>8), byte(id)
				t0 := time.Now()
				if _, err := conn.Write(pkt); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				st.sent++
				_ = conn.SetReadDeadline(t0.Add(time.Second))
				for {
					n, err := conn.Read(buf)
					if err != nil {
						st.lost++
						break
					}
					if n >= 2 && buf[0] == byte(id>>8) && buf[1] == byte(id) {
						st.completed++
						st.lat = append(st.lat, time.Since(t0))
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return dnsLoadResult{}, firstErr
	}
	var r dnsLoadResult
	var lat []time.Duration
	for _, st := range all {
		r.sent += st.sent
		r.completed += st.completed
		r.lost += st.lost
		lat = append(lat, st.lat...)
	}
	if len(lat) == 0 {
		return r, errors.New("no query answered")
	}
	r.qps = float64(r.completed) / d.Seconds()
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	r.avg = sum / time.Duration(len(lat))
	r.p50, r.p99, _ = percentiles(lat)
	return r, nil
}
