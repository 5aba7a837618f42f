package httpd_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/anysched/anysched/internal/testbed/syncbuf"
	"github.com/prometheus/client_golang/prometheus"
)

// testTopology: three cities with one single-server node each, so every
// decision has exactly one right answer. 127.0.0.2 is in hefei's zone so a
// test can be "an STB inside a zone" over loopback without X-Forwarded-For.
const testTopology = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - name: hefei
    location: {lat: 31.82, lon: 117.23}
    fallback: [luan]
  - name: luan
    location: {lat: 31.73, lon: 116.52}
  - name: wuhu
    location: {lat: 31.35, lon: 118.43}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.82, lon: 117.26}
    servers: [{name: hefei-1-a, address: "10.1.1.10:8080"}]
  - name: luan-1
    region: luan
    location: {lat: 31.73, lon: 116.55}
    servers: [{name: luan-1-a, address: "10.13.1.10:8080"}]
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.35, lon: 118.46}
    servers: [{name: wuhu-1-a, address: "10.2.1.10:8080"}]
zones:
  - name: hefei-north
    region: hefei
    networks: [100.64.1.0/24, 127.0.0.2/32]
    location: {lat: 31.88, lon: 117.23}
  - name: wuhu-z1
    region: wuhu
    networks: [100.68.0.0/24]
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [730, 3000]
    steering: {}
`

const (
	host     = "live.iptv.example"
	instance = "test-1"
	// Expected redirects for /cctv1/index.m3u8 (top of the ladder: 3000).
	locHefei = "http://10.1.1.10:8080/live/cctv1/3000/index.m3u8"
	locLuan  = "http://10.13.1.10:8080/live/cctv1/3000/index.m3u8"
	locWuhu  = "http://10.2.1.10:8080/live/cctv1/3000/index.m3u8"
)

func compile(t testing.TB, doc []byte) *topology.Snapshot {
	t.Helper()
	return fixture.CompileYAML(t, string(doc), 1)
}

// engines of the test topology, by what is available.
type avail int

const (
	availAll     avail = iota
	availNoHefei       // hefei's servers down: hefei's clients fall back to luan
	availNone          // nothing anywhere
	availNoSnap        // no snapshot yet: EngineFunc returns nil
)

func testEngine(t testing.TB, a avail) httpd.EngineFunc {
	t.Helper()
	if a == availNoSnap {
		return func() *steer.Engine { return nil }
	}
	snap := compile(t, []byte(testTopology))
	opts := steer.Options{DefaultRegion: "wuhu"}
	switch a {
	case availNoHefei:
		hefei, _ := snap.Region("hefei")
		opts.Available = func(s int32) bool { return snap.Servers[s].Region != hefei }
	case availNone:
		opts.Available = func(int32) bool { return false }
	}
	e := steer.New(snap, opts)
	return func() *steer.Engine { return e }
}

func mustPrefixes(t testing.TB, ps ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

// serve runs s on a real loopback listener until the test ends and returns
// the base URL. The cleanup checks Serve returns nil promptly.
func serve(t testing.TB, s *httpd.Server) string {
	t.Helper()
	return serveOn(t, s, "127.0.0.1:0")
}

// serveOn is serve on a listener at addr ("[::1]:0": IPv6 loopback;
// "[::]:0": a dual-stack socket, which sees IPv4 peers 4-in-6).
func serveOn(t testing.TB, s *httpd.Server, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return "http://" + ln.Addr().String()
}

// client does not follow redirects and dials from the given loopback source
// address ("" for the default 127.0.0.1).
func client(from string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return &http.Client{
		Timeout:       10 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type req struct {
	from   string // loopback source address; "" = 127.0.0.1
	method string // "" = GET
	path   string // "" = /cctv1/index.m3u8
	host   string // "" = live.iptv.example
	header map[string]string
}

func do(t testing.TB, base string, r req) (*http.Response, string) {
	t.Helper()
	if r.method == "" {
		r.method = http.MethodGet
	}
	if r.path == "" {
		r.path = "/cctv1/index.m3u8"
	}
	if r.host == "" {
		r.host = host
	}
	hr, err := http.NewRequest(r.method, base+r.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	hr.Host = r.host
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := client(r.from).Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// rawRequest writes raw bytes to the server and returns the status line and
// headers of the answer, for requests net/http's client refuses to send.
func rawRequest(t testing.TB, base, raw string) *http.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", raw, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recording is an access-log recorder writing to a buffer, its registry,
// and a stop that returns once it has written everything.
func recording(t testing.TB) (*accesslog.Recorder, *syncbuf.Buffer, *prometheus.Registry, func()) {
	t.Helper()
	var logs syncbuf.Buffer
	reg := prometheus.NewRegistry()
	rec := accesslog.New(reg, &logs, accesslog.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rec.Run(ctx); close(done) }()
	return rec, &logs, reg, func() { cancel(); <-done }
}
