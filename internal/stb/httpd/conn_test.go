package httpd_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/prometheus/client_golang/prometheus"
)

// TestConnectionCap: with max_connections 3, three idle connections fill the
// server, two more are reset at once and counted, and STBs are redirected
// again as soon as a connection closes; on either server.
func TestConnectionCap(t *testing.T) {
	for _, server := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		t.Run(server, func(t *testing.T) { testConnectionCap(t, server) })
	}
}

func testConnectionCap(t *testing.T, server string) {
	s := httpd.New(httpd.Config{InstanceID: instance, MaxConnections: 3, Server: server}, testEngine(t, availAll), nil, nil)
	reg := prometheus.NewRegistry()
	s.Register(reg)
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Fatalf("metric lint: %v", problems)
	}
	base := serve(t, s)
	addr := strings.TrimPrefix(base, "http://")
	metric := func(name string) float64 { return readMetric(t, reg, name) }

	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	wait.For(t, "3 connections open", 5*time.Second, func() bool { return metric("anysched_http_connections_open") == 3 })
	for range 2 {
		code, _, err := get(base)
		if err == nil {
			t.Fatalf("request beyond the cap answered %d, want the connection reset", code)
		}
	}
	wait.For(t, "2 refused", 5*time.Second, func() bool { return metric("anysched_http_connections_refused_total") == 2 })
	if got := metric("anysched_http_connections_open"); got != 3 {
		t.Fatalf("open = %v, want 3", got)
	}

	held[0].Close()
	wait.For(t, "a place freed", 5*time.Second, func() bool { return metric("anysched_http_connections_open") == 2 })
	code, loc, err := get(base)
	if err != nil || code != http.StatusFound || loc != locWuhu {
		t.Fatalf("after a place was freed: %d %q %v, want 302 to %s", code, loc, err, locWuhu)
	}
	wait.For(t, "the request's connection closed", 5*time.Second, func() bool { return metric("anysched_http_connections_open") == 2 })
}

func get(base string) (int, string, error) {
	r, _ := http.NewRequest("GET", base+"/cctv1/index.m3u8", nil)
	r.Host = host
	resp, err := client("").Do(r)
	if err != nil {
		return 0, "", err
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// readMetric reads one unlabelled gauge or counter from reg.
func readMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
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
