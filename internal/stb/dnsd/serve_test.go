package dnsd

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// serveSockets runs s.ServeSockets until the test ends (or stop is
// called) and returns stop, which cancels it and returns its error.
func serveSockets(t *testing.T, s *Server, pcs []net.PacketConn, ln net.Listener) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeSockets(ctx, pcs, ln) }()
	wait.For(t, "the server listening", wait.DefaultTimeout, s.Listening)
	stopped := false
	var err error
	stop = func() error {
		if stopped {
			return err
		}
		stopped = true
		cancel()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("ServeSockets did not return after cancel")
		}
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("ServeSockets: %v", err)
		}
	})
	return stop
}

// TestListenSockets: n SO_REUSEPORT sockets on one port (port 0 read back
// from the first) and TCP on it; every socket is served, and all are
// closed when serving ends.
func TestListenSockets(t *testing.T) {
	const n = 4
	pcs, ln, err := ListenSockets("127.0.0.1:0", n)
	if err != nil {
		t.Fatal(err)
	}
	if len(pcs) != n {
		t.Fatalf("%d sockets, want %d", len(pcs), n)
	}
	addr := pcs[0].LocalAddr().String()
	for _, pc := range pcs {
		if pc.LocalAddr().String() != addr {
			t.Fatalf("socket on %s, want all on %s", pc.LocalAddr(), addr)
		}
	}
	if ln.Addr().String() != addr {
		t.Fatalf("TCP on %s, want %s", ln.Addr(), addr)
	}
	// A second daemon on the port: TCP has no SO_REUSEPORT, so it fails.
	if pcs2, ln2, err := ListenSockets(addr, 2); err == nil {
		for _, pc := range pcs2 {
			pc.Close()
		}
		ln2.Close()
		t.Fatal("a second ListenSockets on a taken port succeeded")
	}
	s := newTestServer(t, Config{}, steer.Options{})
	stop := serveSockets(t, s, pcs, ln)
	// The kernel spreads senders over the sockets by their port: many
	// senders reach every socket, and each must be answered.
	for i := range 32 {
		if r := exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("query %d: %v", i, r)
		}
	}
	if r := exchange(t, "tcp", addr, query("live.iptv.example.", dns.TypeA)); len(r.Answer) != 1 {
		t.Fatalf("TCP: %v", r)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, pc := range pcs {
		if _, err := pc.WriteTo([]byte{0}, pc.LocalAddr()); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("socket still open after serving: %v", err)
		}
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("listener still open after serving: %v", err)
	}
}

// TestServeSocketsEverySocket: each socket given is read (separate ports
// here, so that each can be asked on its own), by several readers each.
func TestServeSocketsEverySocket(t *testing.T) {
	var pcs []net.PacketConn
	for range 3 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, pc)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, Config{UDPReaders: 3}, steer.Options{})
	serveSockets(t, s, pcs, ln)
	for _, pc := range pcs {
		for _, qt := range []uint16{dns.TypeA, dns.TypeSOA} { // fast and full path
			if r := exchange(t, "udp", pc.LocalAddr().String(), query("live.iptv.example.", qt)); len(r.Answer) != 1 {
				t.Fatalf("%s %s: %v", pc.LocalAddr(), dns.TypeToString[qt], r)
			}
		}
	}
}

// TestServeNoGoroutineLeak: every reader, and the TCP server's
// goroutines, are gone when ServeSockets returns.
func TestServeNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	pcs, ln, err := ListenSockets("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, Config{UDPReaders: 2}, steer.Options{})
	stop := serveSockets(t, s, pcs, ln)
	if during := runtime.NumGoroutine(); during < before+6 {
		t.Fatalf("%d goroutines while serving, %d before: want at least 6 readers more", during, before)
	}
	addr := pcs[0].LocalAddr().String()
	exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeA))
	exchange(t, "tcp", addr, query("live.iptv.example.", dns.TypeA))
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !wait.Until(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after serving, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
	if s.Listening() {
		t.Fatal("still Listening after serving")
	}
}

// TestServeSocketClosed: a socket closed under the server stops it with
// an error, as a failed socket did before.
func TestServeSocketClosed(t *testing.T) {
	pc, ln := listen(t)
	s := newTestServer(t, Config{}, steer.Options{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context(), pc, ln) }()
	wait.For(t, "the server listening", wait.DefaultTimeout, s.Listening)
	pc.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "udp server stopped") {
			t.Fatalf("Serve returned %v, want the UDP server's failure", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its socket was closed")
	}
}

// packetOnly hides *net.UDPConn: the server falls back to ReadFrom.
type packetOnly struct{ net.PacketConn }

// TestServeGenericPacketConn: a PacketConn that is not a *net.UDPConn is
// served a datagram at a time, on both paths.
func TestServeGenericPacketConn(t *testing.T) {
	pc, ln := listen(t)
	s := newTestServer(t, Config{}, steer.Options{})
	serveSockets(t, s, []net.PacketConn{packetOnly{pc}}, ln)
	addr := pc.LocalAddr().String()
	if r := exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeA, ecs("100.65.0.0/24"))); len(r.Answer) != 1 || rrs(r.Answer)[0] != south1 {
		t.Fatalf("A: %v", r)
	}
	if r := exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeSOA)); len(r.Answer) != 1 {
		t.Fatalf("SOA: %v", r)
	}
}

// TestWildcardReplySource: a socket bound to a wildcard address answers
// from the address it was asked at (the anycast address in production),
// for IPv4 on an IPv4 socket and on a dual-stack one. A client connected to
// 127.0.0.2 takes no reply from 127.0.0.1, where the kernel would send it
// from by itself.
func TestWildcardReplySource(t *testing.T) {
	for _, tc := range []struct{ bind, ask string }{
		{"0.0.0.0:0", "127.0.0.2"},
		{"[::]:0", "127.0.0.2"},
		{"[::]:0", "::1"},
	} {
		t.Run(tc.bind+"/"+tc.ask, func(t *testing.T) {
			pcs, ln, err := ListenSockets(tc.bind, 2)
			if err != nil {
				t.Skipf("cannot bind %s: %v", tc.bind, err)
			}
			s := newTestServer(t, Config{}, steer.Options{})
			serveSockets(t, s, pcs, ln)
			_, port, _ := net.SplitHostPort(pcs[0].LocalAddr().String())
			addr := net.JoinHostPort(tc.ask, port)
			for _, qt := range []uint16{dns.TypeA, dns.TypeSOA} { // fast and full path
				if r := exchange(t, "udp", addr, query("live.iptv.example.", qt)); len(r.Answer) != 1 {
					t.Fatalf("%s: %v", dns.TypeToString[qt], r)
				}
			}
		})
	}
}

// TestQueryMetrics: queries are counted by the path that answered them.
func TestQueryMetrics(t *testing.T) {
	s := newTestServer(t, Config{}, steer.Options{})
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Fatalf("metric lint: %v", problems)
	}
	addr := start(t, s)
	exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeA))
	exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeAAAA, withEDNS, ecs("100.65.0.0/24")))
	exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeSOA))
	exchange(t, "tcp", addr, query("live.iptv.example.", dns.TypeA))
	count := func(path string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "anysched_dns_queries_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == path {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	// The reply is sent before it is counted: poll.
	wait.For(t, "the queries counted", 5*time.Second, func() bool { return count("fast") == 2 && count("full") == 2 })
}

// TestFastPathUDPLimit: a reply that might not fit the client's UDP size
// is left to the full path, which compresses or truncates it.
func TestFastPathUDPLimit(t *testing.T) {
	long := strings.Repeat(strings.Repeat("n", 60)+".", 4) // 244 octets
	c := Config{NSName: long + "example.", Hostmaster: long + "example."}
	p := newPair(t, testTopology, c, nil)
	src := netip.MustParseAddr("100.64.0.7")
	nodata := func(opts ...qopt) []byte {
		wire, err := query("live.iptv.example.", dns.TypeAAAA, opts...).Pack()
		if err != nil {
			t.Fatal(err)
		}
		return wire
	}
	// 512 without EDNS: the SOA does not fit.
	if p.compare(t, nodata(), src) {
		t.Fatal("fast path answered a reply larger than 512 octets")
	}
	// ... which compresses it (or truncates it) to fit.
	if full := fullReply(p.full, nodata(), src); len(full) > dns.MinMsgSize {
		t.Fatalf("full path: a %d-octet reply to a 512-octet client", len(full))
	}
	if !p.compare(t, nodata(withEDNS), src) {
		t.Fatal("fast path declined a reply that fits 1232 octets")
	}
}
