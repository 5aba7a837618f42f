package dnsd

import (
	"net"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// TestTCPConnectionCap: with max_tcp_connections 2, two idle connections
// fill the server, two more are reset at once (counted), and TCP queries
// are answered again as soon as a place is free. UDP is not affected.
func TestTCPConnectionCap(t *testing.T) {
	s := newTestServer(t, Config{MaxTCPConnections: 2}, steer.Options{})
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Fatalf("metric lint: %v", problems)
	}
	addr := start(t, s)
	open := func() float64 { return gauge(t, reg, "anysched_dns_tcp_connections_open") }
	refused := func() float64 { return gauge(t, reg, "anysched_dns_tcp_connections_refused_total") }

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	wait.For(t, "2 connections open", 5*time.Second, func() bool { return open() == 2 })
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			continue // reset as the handshake completed
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("connection beyond the cap: read %v, want it reset", err)
		}
	}
	wait.For(t, "2 refused", 5*time.Second, func() bool { return refused() == 2 })
	if got := open(); got != 2 {
		t.Fatalf("open = %v, want 2", got)
	}
	if r := exchange(t, "udp", addr, query("live.iptv.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("UDP while TCP is full: %v", r)
	}

	held[0].Close()
	wait.For(t, "a place freed", 5*time.Second, func() bool { return open() == 1 })
	if r := exchange(t, "tcp", addr, query("live.iptv.example.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("TCP after a place was freed: %v", r)
	}
}

// TestTCPSilentClientClosed: a connection that sends nothing (slowloris) is
// closed by the server after the read timeout, freeing its place.
func TestTCPSilentClientClosed(t *testing.T) {
	s := newTestServer(t, Config{}, steer.Options{})
	addr := start(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Half a length prefix: the server waits for the rest until its deadline.
	if _, err := c.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(tcpReadTimeout + 10*time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read %v, want the server to close the connection", err)
	}
	if took := time.Since(began); took > tcpReadTimeout+5*time.Second {
		t.Fatalf("closed after %v, want about %v", took, tcpReadTimeout)
	}
	wait.For(t, "its place freed", 5*time.Second, func() bool { return s.tcp.Open() == 0 })
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// gauge reads one unlabelled gauge or counter from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
