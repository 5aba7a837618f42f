package health

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
)

const stubBody = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n"

// closedAddr returns a loopback address nothing listens on, held for the
// test so that nothing starts listening there either.
func closedAddr(t testing.TB) netip.AddrPort {
	t.Helper()
	return port.Hold(t).AddrPort()
}

func TestProbeHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/nginx_status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, stubBody)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"cpu": 0.42, "bandwidth_mbps": 812.5, "connections": 1200, "version": "1.2"}`)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "OK") })
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/badstats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"cpu": 42}`)
	})
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "draining", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		// A valid status page followed by far more than MaxBody: the probe
		// reads MaxBody and stops.
		fmt.Fprint(w, stubBody)
		junk := []byte(strings.Repeat("x", 32<<10))
		for range 256 { // 8 MiB
			if _, err := w.Write(junk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/cutoff", func(w http.ResponseWriter, r *http.Request) {
		// Promise 1000 bytes, send 10, hang up.
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: text/plain\r\n\r\nActive con")
		buf.Flush()
		conn.Close()
	})
	var ua atomic.Value
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) { ua.Store(r.UserAgent()) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		path    string
		ok      bool
		kind    string
		hasLoad bool
		load    avail.Load
		errHas  string
	}{
		{"/nginx_status", true, "", true, avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"/stats", true, "", true, avail.Load{CPU: 0.42, BandwidthMbps: 812.5, Connections: 1200}, ""},
		{"/ok", true, "", false, avail.Load{}, ""},
		{"/nocontent", true, "", false, avail.Load{}, ""},
		{"/huge", true, "", true, avail.Load{Connections: 291, Requests: 31070465}, ""},
		{"/badstats", true, KindBody, false, avail.Load{}, "cpu 42"},
		{"/unavailable", false, KindStatus, false, avail.Load{}, "HTTP 503"},
		{"/redirect", false, KindStatus, false, avail.Load{}, "HTTP 302"},
		{"/missing", false, KindStatus, false, avail.Load{}, "HTTP 404"},
		{"/cutoff", false, KindBody, false, avail.Load{}, "reading body"},
	}
	p := &Prober{Timeout: 2 * time.Second}
	for _, tc := range tests {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			start := time.Now()
			res := p.Probe(context.Background(), Target{Server: "edge-1", URL: srv.URL + tc.path})
			if res.OK != tc.ok || res.Kind != tc.kind || res.HasLoad != tc.hasLoad || res.Load != tc.load {
				t.Fatalf("got %+v; want ok=%v kind=%q hasLoad=%v load=%+v", res, tc.ok, tc.kind, tc.hasLoad, tc.load)
			}
			if !strings.Contains(res.Err, tc.errHas) || (tc.kind == "") != (res.Err == "") {
				t.Fatalf("err %q, want it to mention %q", res.Err, tc.errHas)
			}
			if tc.kind != "" && !strings.HasPrefix(res.Err, tc.kind+": ") {
				t.Errorf("err %q does not start with its kind", res.Err)
			}
			if res.RTT <= 0 || res.RTT > time.Since(start) {
				t.Errorf("rtt %v", res.RTT)
			}
		})
	}

	p.Probe(context.Background(), Target{URL: srv.URL + "/ua"})
	if got, _ := ua.Load().(string); got != userAgent {
		t.Errorf("User-Agent %q", got)
	}
}

func TestProbeFailures(t *testing.T) {
	// A server that answers too late, one that sends headers then stalls.
	release := make(chan struct{})
	slowEntered := make(chan struct{}, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case slowEntered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release) // runs before srv.Close, which waits for the handlers
	closed := closedAddr(t)

	const timeout = 150 * time.Millisecond
	p := &Prober{Timeout: timeout}
	tests := []struct {
		name   string
		target Target
		kind   string
		slow   bool // takes the whole timeout
	}{
		{"http refused", Target{URL: "http://" + closed.String() + "/nginx_status"}, KindRefused, false},
		{"tcp refused", Target{Address: closed}, KindRefused, false},
		{"headers timeout", Target{URL: srv.URL + "/slow"}, KindTimeout, true},
		{"body timeout", Target{URL: srv.URL + "/stall"}, KindTimeout, true},
		{"no url or address", Target{Server: "x"}, KindConnect, false},
		{"bad url", Target{URL: "http://[::1"}, KindConnect, false},
		{"unsupported scheme", Target{URL: "gopher://127.0.0.1/"}, KindConnect, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := p.Probe(context.Background(), tc.target)
			took := time.Since(start)
			if res.OK || res.Kind != tc.kind || res.Err == "" {
				t.Fatalf("got %+v, want kind %q", res, tc.kind)
			}
			if took > timeout+time.Second {
				t.Fatalf("took %v with a %v timeout", took, timeout)
			}
			if tc.slow && took < timeout {
				t.Fatalf("timed out after %v, before the %v timeout", took, timeout)
			}
		})
	}

	t.Run("context deadline is a timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res := (&Prober{}).Probe(ctx, Target{URL: srv.URL + "/slow"})
		if res.Kind != KindTimeout {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		// Cancelled once the server holds the request; no timeout could
		// come first.
		for len(slowEntered) > 0 {
			<-slowEntered
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-slowEntered; cancel() }()
		res := (&Prober{Timeout: time.Hour}).Probe(ctx, Target{URL: srv.URL + "/slow"})
		if res.OK || res.Kind != KindCanceled {
			t.Fatalf("got %+v", res)
		}
	})
}

func TestProbeTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	p := &Prober{}
	res := p.Probe(context.Background(), Target{Server: "edge-tcp", Address: netip.MustParseAddrPort(ln.Addr().String())})
	if !res.OK || res.Kind != "" || res.Err != "" || res.HasLoad || res.RTT <= 0 {
		t.Fatalf("got %+v", res)
	}
	// The probe closes its connection: the listener saw it arrive.
	wait.For(t, "the probe's connection accepted", wait.DefaultTimeout, func() bool { return accepted.Load() > 0 })
	if accepted.Load() != 1 {
		t.Fatalf("accepted %d connections", accepted.Load())
	}
}

// TestProbeNewConnectionEachTime: the default client does not keep
// connections alive, so every probe exercises the server's accept path.
func TestProbeNewConnectionEachTime(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, stubBody) }))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	p := &Prober{}
	for range 3 {
		if res := p.Probe(context.Background(), Target{URL: srv.URL}); !res.OK {
			t.Fatal(res)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("3 probes used %d connections", n)
	}
}

func TestClassify(t *testing.T) {
	bg := context.Background()
	canceled, cancel := context.WithCancel(bg)
	cancel()
	for _, tc := range []struct {
		ctx  context.Context
		err  error
		want string
	}{
		{bg, context.DeadlineExceeded, KindTimeout},
		{bg, &net.OpError{Op: "dial", Err: timeoutErr{}}, KindTimeout},
		{bg, fmt.Errorf("wrapped: %w", &net.OpError{Op: "read", Err: fmt.Errorf("x")}), KindConnect},
		{canceled, context.DeadlineExceeded, KindCanceled},
		{bg, context.Canceled, KindCanceled},
	} {
		if got := classify(tc.ctx, tc.err); got != tc.want {
			t.Errorf("classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
