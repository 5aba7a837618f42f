package httpd_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/wait"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRedirect drives the front end over real loopback TCP.
func TestRedirect(t *testing.T) {
	long := "/" + strings.Repeat("a", httpd.MaxURILength+100)
	tests := []struct {
		name     string
		avail    avail
		req      req
		status   int
		location string            // exact, for 302
		body     string            // substring of the body
		header   map[string]string // further exact headers
	}{
		{name: "CZ", req: req{from: "127.0.0.2"}, status: 302, location: locHefei},
		{name: "DEFAULT: no zone, default region", status: 302, location: locWuhu},
		{name: "host with port and any case", req: req{from: "127.0.0.2", host: "LIVE.Iptv.EXAMPLE:80"}, status: 302, location: locHefei},
		{name: "host with trailing dot", req: req{from: "127.0.0.2", host: "live.iptv.example."}, status: 302, location: locHefei},
		{name: "FALLBACK: own region down", avail: availNoHefei, req: req{from: "127.0.0.2"}, status: 302, location: locLuan},
		{name: "region down does not touch others", avail: availNoHefei, status: 302, location: locWuhu},
		{name: "escaped path kept escaped", req: req{from: "127.0.0.2", path: "/cctv%201/index.m3u8"}, status: 302,
			location: "http://10.1.1.10:8080/live/cctv%201/3000/index.m3u8"},
		{name: "ERROR: nothing available", avail: availNone, status: 503, body: steer.ReasonNoServer,
			header: map[string]string{"Retry-After": "5"}},
		{name: "no snapshot yet", avail: availNoSnap, status: 503, body: "no topology snapshot",
			header: map[string]string{"Retry-After": "5"}},
		{name: "MISS: unknown host", req: req{host: "vod.other.example"}, status: 404},
		{name: "the Anycast address as host: default service", req: req{host: "198.18.0.1"}, status: 302, location: locWuhu},
		{name: "the Anycast address with port", req: req{host: "198.18.0.1:80", from: "127.0.0.2"}, status: 302, location: locHefei},
		{name: "MISS: another IP literal host", req: req{host: "192.0.2.7"}, status: 404},
		{name: "POST", req: req{method: "POST"}, status: 405, header: map[string]string{"Allow": "GET, HEAD"}},
		{name: "PUT", req: req{method: "PUT"}, status: 405, header: map[string]string{"Allow": "GET, HEAD"}},
		{name: "OPTIONS", req: req{method: "OPTIONS"}, status: 405, header: map[string]string{"Allow": "GET, HEAD"}},
		{name: "HEAD", req: req{method: "HEAD", from: "127.0.0.2"}, status: 302, location: locHefei},
		{name: "HEAD 503", avail: availNone, req: req{method: "HEAD"}, status: 503, header: map[string]string{"Retry-After": "5"}},
		{name: "URI too long", req: req{path: long}, status: 414},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, tc.avail), nil, nil)
			resp, body := do(t, serve(t, s), tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("X-Anysched-Instance"); got != instance {
				t.Errorf("X-Anysched-Instance = %q, want %q", got, instance)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", got)
			}
			if got := resp.Header.Get("Location"); got != tc.location {
				t.Errorf("Location = %q, want %q", got, tc.location)
			}
			for k, v := range tc.header {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("body %q does not contain %q", body, tc.body)
			}
			if tc.req.method == "HEAD" && body != "" {
				t.Errorf("HEAD answered with a body: %q", body)
			}
			if tc.status == 302 && body != "" {
				t.Errorf("302 body = %q, want none", body)
			}
		})
	}
}

// TestMalformed sends what net/http's client will not: every answer must be a
// 4xx (never a panic or a hang), and the ones the handler produces carry the
// instance header.
func TestMalformed(t *testing.T) {
	base := serve(t, httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil))
	tests := []struct {
		name     string
		raw      string
		status   int
		instance bool // the handler answered (net/http's own errors cannot carry it)
	}{
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, false},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400, false},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, false},
		{"HTTP/1.0 without Host", "GET /cctv1/index.m3u8 HTTP/1.0\r\n\r\n", 400, true},
		{"asterisk target", "GET * HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", 400, true},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", 405, true},
		{"absolute form", "GET http://live.iptv.example/cctv1/index.m3u8 HTTP/1.1\r\nHost: x\r\n\r\n", 302, true},
		{"header too large", "GET / HTTP/1.1\r\nHost: live.iptv.example\r\nX-Pad: " + strings.Repeat("x", 20<<10) + "\r\n\r\n", 431, false},
		{"URL beyond the header limit", "GET /" + strings.Repeat("a", 20<<10) + " HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", 431, false},
		{"control byte in path", "GET /a\x01b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", 400, false},
		{"garbage request line", "\x00\xff\r\n\r\n", 400, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := rawRequest(t, base, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got := resp.Header.Get("X-Anysched-Instance"); tc.instance && got != instance {
				t.Errorf("X-Anysched-Instance = %q, want %q", got, instance)
			}
		})
	}
	// The handler's own check, for Hosts net/http would have refused.
	for _, h := range []string{"", "a b", "live.iptv.example\x00", "live.iptv.example/x", strings.Repeat("a", 400)} {
		r := httptest.NewRequest("GET", "/cctv1/index.m3u8", nil)
		r.Host = h
		w := httptest.NewRecorder()
		httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil).ServeHTTP(w, r)
		if w.Code != 400 || w.Header().Get("X-Anysched-Instance") != instance {
			t.Errorf("Host %q: status %d, instance %q; want 400 with the instance header", h, w.Code, w.Header().Get("X-Anysched-Instance"))
		}
	}
}

func decodeAnswer(t *testing.T, body string) httpd.Answer {
	t.Helper()
	var a httpd.Answer
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return a
}

func TestJSON(t *testing.T) {
	hefeiCZ := httpd.Answer{
		Result: "CZ", Client: "127.0.0.2", Host: host, Service: "live", Zone: "hefei-north",
		ClientRegion: "hefei", Region: "hefei", Node: "hefei-1", Server: "hefei-1-a",
		Address: "10.1.1.10:8080", BitrateKbps: 3000, Location: locHefei, Instance: instance,
		Family: "ipv4", AddressFamily: "ipv4",
	}
	fallback := hefeiCZ
	fallback.Result, fallback.Region, fallback.Node, fallback.Server, fallback.Address, fallback.Location =
		"FALLBACK", "luan", "luan-1", "luan-1-a", "10.13.1.10:8080", locLuan
	tests := []struct {
		name   string
		avail  avail
		req    req
		status int
		want   httpd.Answer
	}{
		{"?format=json", availAll, req{from: "127.0.0.2", path: "/cctv1/index.m3u8?format=json"}, 200, hefeiCZ},
		{"format among other parameters", availAll, req{from: "127.0.0.2", path: "/cctv1/index.m3u8?token=x&format=json"}, 200, hefeiCZ},
		{"Accept header", availAll, req{from: "127.0.0.2", header: map[string]string{"Accept": "text/plain, Application/JSON;q=0.9"}}, 200, hefeiCZ},
		{"fallback", availNoHefei, req{from: "127.0.0.2", path: "/cctv1/index.m3u8?format=json"}, 200, fallback},
		{"default", availAll, req{path: "/cctv1/index.m3u8?format=json"}, 200, httpd.Answer{
			Result: "DEFAULT", Client: "127.0.0.1", Host: host, Service: "live", ClientRegion: "wuhu", Region: "wuhu",
			Node: "wuhu-1", Server: "wuhu-1-a", Address: "10.2.1.10:8080", BitrateKbps: 3000, Location: locWuhu, Instance: instance,
			Family: "ipv4", AddressFamily: "ipv4",
		}},
		{"miss keeps 404", availAll, req{host: "nope.example", path: "/?format=json"}, 404, httpd.Answer{
			Result: "MISS", Reason: steer.ReasonUnknownHost, Client: "127.0.0.1", Host: "nope.example", Instance: instance, Family: "ipv4",
		}},
		{"error keeps 503", availNone, req{path: "/cctv1/index.m3u8?format=json"}, 503, httpd.Answer{
			Result: "ERROR", Reason: steer.ReasonNoServer, Client: "127.0.0.1", Host: host, Service: "live",
			ClientRegion: "wuhu", BitrateKbps: 3000, Instance: instance, Family: "ipv4",
		}},
		{"no snapshot keeps 503", availNoSnap, req{path: "/x?format=json"}, 503, httpd.Answer{
			Result: "ERROR", Reason: "no topology snapshot loaded yet", Client: "127.0.0.1", Host: host, Instance: instance,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, tc.avail), nil, nil)
			resp, body := do(t, serve(t, s), tc.req)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tc.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if resp.Header.Get("Location") != "" || resp.Header.Get("X-Anysched-Instance") != instance {
				t.Errorf("headers: %v", resp.Header)
			}
			if got := decodeAnswer(t, body); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("answer\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestForwardedFor: X-Forwarded-For is believed only from trusted proxies,
// and then only its right-most untrusted entry.
func TestForwardedFor(t *testing.T) {
	tests := []struct {
		name    string
		trusted []string
		xff     []string
		client  string
		result  string
	}{
		{"trusted proxy", []string{"127.0.0.1/32"}, []string{"100.64.1.9"}, "100.64.1.9", "CZ"},
		{"untrusted peer", []string{"10.0.0.0/8"}, []string{"100.64.1.9"}, "127.0.0.1", "DEFAULT"},
		{"no trusted proxies configured", nil, []string{"100.64.1.9"}, "127.0.0.1", "DEFAULT"},
		{"chain through a second trusted proxy", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"100.64.1.9, 10.9.9.9"}, "100.64.1.9", "CZ"},
		{"client-written entries ignored", []string{"127.0.0.0/8"}, []string{"100.64.1.9, 192.0.2.50"}, "192.0.2.50", "DEFAULT"},
		{"several header lines", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"192.0.2.50", "100.68.0.7", "10.1.1.1"}, "100.68.0.7", "CZ"},
		{"ports and brackets", []string{"127.0.0.0/8"}, []string{"[2001:db8::1]:4711, 100.64.1.9:5353"}, "100.64.1.9", "CZ"},
		{"IPv6 client", []string{"127.0.0.0/8"}, []string{"2001:db8::7"}, "2001:db8::7", "DEFAULT"},
		{"garbage: fall back to the peer", []string{"127.0.0.0/8"}, []string{"not-an-ip"}, "127.0.0.1", "DEFAULT"},
		{"garbage left of a valid hop", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"junk, 10.2.2.2"}, "10.2.2.2", "DEFAULT"},
		{"all hops trusted: the left-most", []string{"127.0.0.0/8", "10.0.0.0/8"}, []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3", "DEFAULT"},
		{"empty entries skipped", []string{"127.0.0.0/8"}, []string{"100.64.1.9,, "}, "100.64.1.9", "CZ"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := httpd.New(httpd.Config{InstanceID: instance, TrustedProxies: mustPrefixes(t, tc.trusted...)}, testEngine(t, availAll), nil, nil)
			base := serve(t, s)
			hr, _ := http.NewRequest("GET", base+"/cctv1/index.m3u8?format=json", nil)
			hr.Host = host
			for _, v := range tc.xff {
				hr.Header.Add("X-Forwarded-For", v)
			}
			resp, err := client("").Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var a httpd.Answer
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Fatal(err)
			}
			if a.Client != tc.client || a.Result != tc.result {
				t.Errorf("client %s result %s, want %s %s", a.Client, a.Result, tc.client, tc.result)
			}
		})
	}
}

// TestRecord: every decision reaches the access log and the metrics.
func TestRecord(t *testing.T) {
	rec, logs, reg, stop := recording(t)
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), rec, nil)
	base := serve(t, s)
	do(t, base, req{from: "127.0.0.2"})
	do(t, base, req{host: "nope.example"})
	do(t, base, req{method: "POST"}) // not a decision: not recorded
	stop()

	type line struct {
		Proto, Client, Host, Path, Result, Zone, Region, Server, Target string
		Status                                                          int
		Latency                                                         time.Duration
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, v)
	}
	if len(got) != 2 {
		t.Fatalf("want 2 decisions logged, got %d: %s", len(got), logs.String())
	}
	cz, miss := got[0], got[1]
	if cz.Proto != "http" || cz.Client != "127.0.0.2" || cz.Host != host || cz.Path != "/cctv1/index.m3u8" || cz.Result != "CZ" ||
		cz.Zone != "hefei-north" || cz.Region != "hefei" || cz.Server != "hefei-1-a" || cz.Target != "10.1.1.10:8080" || cz.Status != 302 {
		t.Errorf("CZ line: %+v", cz)
	}
	if cz.Latency <= 0 || cz.Latency > time.Second {
		t.Errorf("CZ latency %v", cz.Latency)
	}
	if miss.Result != "MISS" || miss.Status != 404 || miss.Target != "" {
		t.Errorf("MISS line: %+v", miss)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP anysched_requests_total STB requests answered, by protocol, region of the chosen server, and result type.
# TYPE anysched_requests_total counter
anysched_requests_total{proto="http",region="hefei",result="CZ"} 1
anysched_requests_total{proto="http",region="none",result="MISS"} 1
`), "anysched_requests_total"); err != nil {
		t.Error(err)
	}
}

// TestRun: Run listens on Config.Listen, reports its address, and returns nil
// promptly on cancel even with an idle keep-alive connection open.
func TestRun(t *testing.T) {
	s := httpd.New(httpd.Config{Listen: "127.0.0.1:0", InstanceID: instance}, testEngine(t, availAll), nil, nil)
	if s.Addr() != nil {
		t.Fatal("Addr before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	wait.For(t, "Run reporting its address", wait.DefaultTimeout, func() bool { return s.Addr() != nil })
	base := "http://" + s.Addr().String()
	keepAlive := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	hr, _ := http.NewRequest("GET", base+"/cctv1/index.m3u8", nil)
	hr.Host = host
	resp, err := keepAlive.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 302 || resp.Header.Get("Location") != locWuhu {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if s.Addr() != nil {
		t.Error("Addr after Run returned")
	}
	// A taken address is an error from Run, not a panic or a hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := httpd.New(httpd.Config{Listen: ln.Addr().String()}, nil, nil, nil)
	if err := busy.Run(context.Background()); err == nil {
		t.Error("Run on a busy address returned nil")
	}
}

func TestDefaults(t *testing.T) {
	c := httpd.New(httpd.Config{}, nil, nil, nil).Config()
	if c.Listen != ":80" || c.ReadTimeout != 5*time.Second || c.WriteTimeout != 5*time.Second || c.IdleTimeout != 60*time.Second ||
		c.ReadHeaderTimeout != 2*time.Second || c.MaxHeaderBytes != 8<<10 || c.InstanceID == "" {
		t.Errorf("defaults: %+v", c)
	}
}

// TestExampleTopology runs against the shipped sample province.
func TestExampleTopology(t *testing.T) {
	snap := compile(t, readFile(t, "../../../deploy/examples/topology.yaml"))
	all := steer.New(snap, steer.Options{})
	wuhu, _ := snap.Region("wuhu")
	noWuhu := steer.New(snap, steer.Options{Available: func(s int32) bool { return snap.Servers[s].Region != wuhu }})
	re := regexp.MustCompile(`^http://10\.(\d+)\.[12]\.1[0-3]:8080/live/cctv1/6000/index\.m3u8$`)
	tests := []struct {
		name                  string
		eng                   *steer.Engine
		xff                   string
		result, zone, cregion string
		region, regionOctet   string
	}{
		{"hefei zone", all, "100.64.1.7", "CZ", "hefei-z1", "hefei", "hefei", "1"},
		{"wuhu zone", all, "100.68.4.20", "CZ", "wuhu-z2", "wuhu", "wuhu", "2"},
		{"no zone: first region", all, "192.0.2.1", "DEFAULT", "", "hefei", "hefei", "1"},
		{"wuhu down: its first fallback", noWuhu, "100.68.0.1", "FALLBACK", "wuhu-z1", "wuhu", "maanshan", "5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eng := tc.eng
			s := httpd.New(httpd.Config{InstanceID: instance, TrustedProxies: mustPrefixes(t, "127.0.0.0/8")},
				func() *steer.Engine { return eng }, nil, nil)
			base := serve(t, s)
			resp, _ := do(t, base, req{header: map[string]string{"X-Forwarded-For": tc.xff}})
			loc := resp.Header.Get("Location")
			// Exactly what the engine itself decides for this client...
			d := eng.Decide(steer.Request{Client: netip.MustParseAddr(tc.xff), Host: host})
			want := string(eng.AppendLocation(nil, &d, "/cctv1/index.m3u8", ""))
			if resp.StatusCode != 302 || loc != want {
				t.Fatalf("%d %q, want 302 %q", resp.StatusCode, loc, want)
			}
			// ...which is a server of the expected region.
			if m := re.FindStringSubmatch(loc); m == nil || m[1] != tc.regionOctet {
				t.Errorf("Location %q is not a server of %s", loc, tc.region)
			}
			_, body := do(t, base, req{path: "/cctv1/index.m3u8?format=json", header: map[string]string{"X-Forwarded-For": tc.xff}})
			a := decodeAnswer(t, body)
			if a.Result != tc.result || a.Zone != tc.zone || a.ClientRegion != tc.cregion || a.Region != tc.region ||
				a.Location != want || a.Client != tc.xff || a.BitrateKbps != 6000 {
				t.Errorf("answer %+v", a)
			}
		})
	}
}

// TestCurl: the real curl binary, as an operator would check a scheduler.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	base := serve(t, httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "-H", "Host: live.iptv.example", base + "/cctv1/index.m3u8"},
			"302 " + locWuhu},
		{[]string{"-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "--interface", "127.0.0.2", "-H", "Host: live.iptv.example", base + "/cctv1/index.m3u8"},
			"302 " + locHefei},
		{[]string{"-s", "-I", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "-H", "Host: live.iptv.example", base + "/cctv1/index.m3u8"},
			"302 " + locWuhu},
		{[]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", "Host: live.iptv.example", base + "/cctv1/index.m3u8"},
			"405"},
		{[]string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: unknown.example", base + "/cctv1/index.m3u8"},
			"404"},
		{[]string{"-s", "-D", "-", "-o", "/dev/null", "-H", "Host: live.iptv.example", base + "/cctv1/index.m3u8"},
			"X-Anysched-Instance: " + instance},
	}
	for _, tc := range tests {
		out, err := exec.Command(curl, tc.args...).Output()
		if err != nil {
			t.Fatalf("curl %v: %v", tc.args, err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("curl %v:\n got %q\nwant %q", tc.args, out, tc.want)
		}
	}
}

// TestLocationParses: every redirect is a valid absolute URL, whatever bytes
// the path carried.
func TestLocationParses(t *testing.T) {
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil)
	for _, p := range []string{"/", "/a%2Fb/c", "/%ZZ", "/ü/x", "/a b", "/\"><script>", "//evil.example/x", "/cctv1?x=\"y\""} { // dot segments: TestDotSegmentsRefused
		r := httptest.NewRequest("GET", "http://live.iptv.example/", nil)
		r.URL = &url.URL{Path: p}
		r.RequestURI = p
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		loc := w.Header().Get("Location")
		u, err := url.Parse(loc)
		if w.Code != 302 || err != nil || u.Host != "10.2.1.10:8080" || strings.ContainsAny(loc, " \"<>") {
			t.Errorf("path %q: %d %q (%v)", p, w.Code, loc, err)
		}
	}
}

func TestDebugHeadersOnRequest(t *testing.T) {
	s := httpd.New(httpd.Config{InstanceID: instance}, testEngine(t, availAll), nil, nil)
	h := s.Handler()
	for _, debug := range []bool{false, true} {
		r := httptest.NewRequest("GET", "http://live.iptv.example/cctv1/index.m3u8", nil)
		r.RemoteAddr = "127.0.0.2:5555"
		if debug {
			r.Header.Set(httpd.DebugHeader, "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res, timing := w.Header().Get("X-Anysched-Result"), w.Header().Get("Server-Timing")
		if debug != (res == "CZ") || debug != strings.HasPrefix(timing, "decide;dur=") {
			t.Errorf("debug=%v: X-Anysched-Result %q, Server-Timing %q", debug, res, timing)
		}
	}
}

// hook is an httpd.Allocator that records the token it is given and either
// refuses the request or lowers the bitrate. It is called on the server's
// goroutine (which the race detector does not see synchronised with the
// client by the socket when the fast path writes).
type hook struct {
	mu     sync.Mutex
	got    string
	refuse bool
}

func (h *hook) token() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got
}

func (h *hook) Allocate(_ *steer.Engine, d *steer.Decision, _ steer.Request, tok string) error {
	h.mu.Lock()
	h.got = tok
	h.mu.Unlock()
	if h.refuse {
		return errors.New("forbidden: token expired")
	}
	d.BitrateKbps = 730
	return nil
}

func TestAllocatorHook(t *testing.T) {
	tests := []struct {
		name      string
		req       req
		refuse    bool
		status    int
		wantToken string
		wantIn    string // in the Location or the body
	}{
		{"token in the query", req{from: "127.0.0.2", path: "/cctv1/index.m3u8?a=1&token=abc.def.ghi"}, false, 302, "abc.def.ghi", "/730/"},
		{"bearer header", req{from: "127.0.0.2", path: "/cctv1/index.m3u8", header: map[string]string{"Authorization": "bearer  abc.def"}}, false, 302, "abc.def", "/730/"},
		{"no token", req{from: "127.0.0.2", path: "/cctv1/index.m3u8?tokens=x"}, false, 302, "", "/730/"},
		{"refused", req{from: "127.0.0.2", path: "/cctv1/index.m3u8?token=x"}, true, 403, "x", "token expired"},
		{"refused, JSON", req{from: "127.0.0.2", path: "/cctv1/index.m3u8?token=x&format=json"}, true, 403, "x", `"reason":"forbidden: token expired"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &hook{refuse: tc.refuse}
			s := httpd.New(httpd.Config{InstanceID: instance, Allocator: h}, testEngine(t, availAll), nil, nil)
			resp, body := do(t, serve(t, s), tc.req)
			if resp.StatusCode != tc.status || h.token() != tc.wantToken {
				t.Fatalf("status %d token %q, want %d %q (%s)", resp.StatusCode, h.token(), tc.status, tc.wantToken, body)
			}
			if !strings.Contains(resp.Header.Get("Location")+body, tc.wantIn) {
				t.Fatalf("want %q in Location %q / body %q", tc.wantIn, resp.Header.Get("Location"), body)
			}
		})
	}
}

// rightsTopology is testTopology with cctv1 blacked out in hefei and a
// bypass for when every node is over the overflow thresholds.
const rightsTopology = testTopology + `    slate: {url: "http://slate.example/{region}/{channel}.m3u8"}
    overflow: {rps_per_server: 100}
    bypass: {url_template: "https://cdn.example/{path}"}
    rights:
      - {name: derby, channels: [cctv1], regions: [hefei], action: blackout}
`

// overAll puts every node over the thresholds, or none.
type overAll bool

func (o overAll) Over(int32, int32) bool     { return bool(o) }
func (o overAll) Reason(int32, int32) string { return "test" }

func rightsEngine(t *testing.T, over bool) httpd.EngineFunc {
	snap := compile(t, []byte(rightsTopology))
	e := steer.New(snap, steer.Options{DefaultRegion: "wuhu", Overflow: overAll(over)})
	return func() *steer.Engine { return e }
}

func TestBlackoutAndBypass(t *testing.T) {
	rec, logs, reg, stop := recording(t)
	base := serve(t, httpd.New(httpd.Config{InstanceID: instance}, rightsEngine(t, false), rec, nil))
	over := serve(t, httpd.New(httpd.Config{InstanceID: instance}, rightsEngine(t, true), rec, nil))
	for _, tc := range []struct {
		name, base, from, path, want string
		result                       string
	}{
		{"blacked out in hefei", base, "127.0.0.2", "", "http://slate.example/hefei/cctv1.m3u8", "BLACKOUT"},
		{"another channel in hefei", base, "127.0.0.2", "/cctv2/index.m3u8", "http://10.1.1.10:8080/live/cctv2/3000/index.m3u8", "CZ"},
		{"not blacked out in wuhu", base, "127.0.0.1", "", locWuhu, "DEFAULT"},
		{"the province over: bypass", over, "127.0.0.1", "/cctv2/index.m3u8?x=1", "https://cdn.example/cctv2/index.m3u8", "BYPASS"},
		{"a blackout wins over the bypass", over, "127.0.0.2", "", "http://slate.example/hefei/cctv1.m3u8", "BLACKOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := do(t, tc.base, req{from: tc.from, path: tc.path, header: map[string]string{httpd.DebugHeader: "1"}})
			if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != tc.want || resp.Header.Get("X-Anysched-Result") != tc.result {
				t.Errorf("%d %q %q, want 302 to %q %s", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("X-Anysched-Result"), tc.want, tc.result)
			}
		})
	}
	// The JSON answer names the rule.
	resp, body := do(t, base, req{from: "127.0.0.2", header: map[string]string{"Accept": "application/json"}})
	var an httpd.Answer
	if err := json.Unmarshal([]byte(body), &an); err != nil || resp.StatusCode != http.StatusOK || an.Result != "BLACKOUT" || an.Rule != "0 (derby)" || an.Location != "http://slate.example/hefei/cctv1.m3u8" || an.Server != "" {
		t.Errorf("JSON %d %s (%v)", resp.StatusCode, body, err)
	}
	stop()
	if !strings.Contains(logs.String(), `"result":"BLACKOUT","zone":"hefei-north","client_region":"hefei","region":"","server":"","target":"http://slate.example/{region}/{channel}.m3u8","status":302`) ||
		!strings.Contains(logs.String(), `"rule":"0 (derby)","family":"ipv4"}`) || !strings.Contains(logs.String(), `"result":"BYPASS"`) {
		t.Errorf("access log:\n%s", logs.String())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP anysched_requests_total STB requests answered, by protocol, region of the chosen server, and result type.
# TYPE anysched_requests_total counter
anysched_requests_total{proto="http",region="hefei",result="CZ"} 1
anysched_requests_total{proto="http",region="none",result="BLACKOUT"} 3
anysched_requests_total{proto="http",region="none",result="BYPASS"} 1
anysched_requests_total{proto="http",region="wuhu",result="DEFAULT"} 1
`), "anysched_requests_total"); err != nil {
		t.Error(err)
	}
}
