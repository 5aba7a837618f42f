package httpd_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus"
)

const plainGet = "GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n"

// waitClosed reads from c until the server closes it (EOF or reset) and
// returns how long that took; it fails if c is still open after limit.
func waitClosed(t *testing.T, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", limit)
	}
	return time.Since(start)
}

func dial(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFastTimeouts: the header timeout runs from the accept and from the
// first byte of each later request; the idle timeout between requests.
func TestFastTimeouts(t *testing.T) {
	const hdr, idle = 300 * time.Millisecond, 1500 * time.Millisecond
	s := httpd.New(httpd.Config{InstanceID: instance, ReadHeaderTimeout: hdr, IdleTimeout: idle}, testEngine(t, availAll), nil, nil)
	base := serve(t, s)

	t.Run("nothing sent", func(t *testing.T) {
		if d := waitClosed(t, dial(t, base), 5*time.Second); d < hdr/2 {
			t.Errorf("closed after %v, before the header timeout %v", d, hdr)
		}
	})
	t.Run("a request that never completes", func(t *testing.T) {
		c := dial(t, base)
		_, _ = io.WriteString(c, "GET /cctv1/index.m3u8 HTTP/1.1\r\nHo")
		if d := waitClosed(t, c, 5*time.Second); d < hdr/2 || d > idle {
			t.Errorf("closed after %v, want about the header timeout %v", d, hdr)
		}
	})
	t.Run("idle after an answer", func(t *testing.T) {
		c := dial(t, base)
		br := bufio.NewReader(c)
		_, _ = io.WriteString(c, plainGet)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 302 {
			t.Fatalf("%v %v", resp, err)
		}
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(5 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("data after the answer")
		}
		if d := time.Since(start); d < idle/2 {
			t.Errorf("idle connection closed after %v, before the idle timeout %v", d, idle)
		}
	})
	t.Run("a slow request after an answer", func(t *testing.T) {
		c := dial(t, base)
		br := bufio.NewReader(c)
		_, _ = io.WriteString(c, plainGet)
		if _, err := http.ReadResponse(br, nil); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n")
		start := time.Now()
		_ = c.SetReadDeadline(start.Add(5 * time.Second))
		_, _ = br.ReadByte()
		if d := time.Since(start); d > idle-hdr/4 {
			t.Errorf("a begun request held the connection %v, want the header timeout %v", d, hdr)
		}
	})
}

// TestFastWriteTimeout: a client that sends requests but never reads the
// answers loses its connection once a write has blocked for WriteTimeout.
func TestFastWriteTimeout(t *testing.T) {
	s := httpd.New(httpd.Config{InstanceID: instance, WriteTimeout: 300 * time.Millisecond}, testEngine(t, availAll), nil, nil)
	reg := prometheus.NewRegistry()
	s.Register(reg)
	c := dial(t, serve(t, s))
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	done := make(chan error, 1)
	go func() { // pipelined requests until the server stops reading them
		batch := []byte(strings.Repeat(plainGet, 64))
		_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		for {
			if _, err := c.Write(batch); err != nil {
				done <- err
				return
			}
		}
	}()
	wait.For(t, "the connection open", 5*time.Second, func() bool { return readMetric(t, reg, "anysched_http_connections_open") == 1 })
	wait.For(t, "the connection closed by the write timeout", 10*time.Second, func() bool { return readMetric(t, reg, "anysched_http_connections_open") == 0 })
	select {
	case err := <-done:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the client's writes timed out instead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client can still write")
	}
}

// TestFastKeepAlive: answers on one connection until the client says
// close; the connection is then closed after the answer.
func TestFastKeepAlive(t *testing.T) {
	for _, server := range []string{httpd.ServerFast, httpd.ServerNetHTTP} {
		t.Run(server, func(t *testing.T) {
			s := httpd.New(httpd.Config{InstanceID: instance, Server: server}, testEngine(t, availAll), nil, nil)
			c := dial(t, serve(t, s))
			br := bufio.NewReader(c)
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			for i := range 3 {
				_, _ = io.WriteString(c, plainGet)
				resp, err := http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 302 || resp.Header.Get("Location") != locWuhu || resp.Close {
					t.Fatalf("request %d: %v %v", i, resp, err)
				}
			}
			_, _ = io.WriteString(c, strings.Replace(plainGet, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 302 || !resp.Close {
				t.Fatalf("closing request: %v %v", resp, err)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after Connection: close: %v, want EOF", err)
			}
		})
	}
}

// TestFastEventLoop: kept-open connections live in the accept loops'
// event loops, not a goroutine each, and every one of them is still
// answered, in any order; a request and a FIN sent together get the answer
// and the close at once.
func TestFastEventLoop(t *testing.T) {
	s := httpd.New(httpd.Config{InstanceID: instance, AcceptLoops: 2}, testEngine(t, availAll), nil, nil)
	addr := serve(t, s)
	before := runtime.NumGoroutine()
	const n = 200
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	for i := range conns {
		conns[i] = dial(t, addr)
		readers[i] = bufio.NewReader(conns[i])
		_ = conns[i].SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conns[i], plainGet)
		if resp, err := http.ReadResponse(readers[i], nil); err != nil || resp.StatusCode != 302 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
	}
	if now := runtime.NumGoroutine(); now > before+n/10 {
		t.Fatalf("%d goroutines with %d kept-open connections, %d before: want no goroutine per connection", now, n, before)
	}
	for i := n - 1; i >= 0; i-- { // the other way round
		_, _ = io.WriteString(conns[i], plainGet)
		if resp, err := http.ReadResponse(readers[i], nil); err != nil || resp.StatusCode != 302 || resp.Header.Get("Location") != locWuhu {
			t.Fatalf("connection %d, second request: %v %v", i, resp, err)
		}
	}
	c := conns[0].(*net.TCPConn)
	_, _ = io.WriteString(c, plainGet)
	_ = c.CloseWrite()
	start := time.Now()
	if resp, err := http.ReadResponse(readers[0], nil); err != nil || resp.StatusCode != 302 {
		t.Fatalf("request with FIN: %v %v", resp, err)
	}
	if _, err := readers[0].ReadByte(); err != io.EOF {
		t.Fatalf("after the FIN: %v, want EOF", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed %v after the FIN", d)
	}
}

// TestUnknownServer: a Config.Server that is neither is an error of Serve.
func TestUnknownServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httpd.New(httpd.Config{Server: "nginx"}, nil, nil, nil)
	if err := s.Serve(t.Context(), ln); err == nil || !strings.Contains(err.Error(), "nginx") {
		t.Fatalf("Serve: %v", err)
	}
}

// TestHandoff: a request the fast path leaves to net/http moves the
// connection to net/http, which answers it and what follows; the
// connection keeps its place under the cap until it closes.
func TestHandoff(t *testing.T) {
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil)
	reg := prometheus.NewRegistry()
	s.Register(reg)
	c := dial(t, serve(t, s))
	br := bufio.NewReader(c)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	for i, raw := range []string{
		plainGet,
		"GET http://live.iptv.example/cctv1/index.m3u8 HTTP/1.1\r\nHost: other\r\n\r\n", // absolute form: net/http's
		"GET /cctv1/index.m3u8 HTTP/1.1\nHost: live.iptv.example\n\n",                   // bare LF
		plainGet,
	} {
		_, _ = io.WriteString(c, raw)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 302 || resp.Header.Get("Location") != locWuhu {
			t.Fatalf("request %d: %v %v", i, resp, err)
		}
	}
	if got := readMetric(t, reg, "anysched_http_connections_open"); got != 1 {
		t.Fatalf("open = %v, want 1", got)
	}
	c.Close()
	wait.For(t, "the handed-over connection's place freed", 5*time.Second, func() bool { return readMetric(t, reg, "anysched_http_connections_open") == 0 })
}

// TestFastDualStack: on a dual-stack listener an IPv4 STB arrives as an
// IPv4-mapped address; the fast path unmaps it, so IPv4 zones match.
func TestFastDualStack(t *testing.T) {
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Skipf("no IPv6 listener: %v", err)
	}
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	base := "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	resp, _ := do(t, base, req{from: "127.0.0.2"})
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || loc != locHefei {
		t.Fatalf("%d %q, want 302 to %s (the client's IPv4 zone)", resp.StatusCode, loc, locHefei)
	}
}
