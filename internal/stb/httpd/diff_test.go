package httpd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
)

// The differential test: the fast path and net/http, each a real server on
// loopback with the same engine, get the same raw bytes on a connection
// that is then half-closed, and must answer alike: the same number of
// answers, each with the same status, Location, body and headers. Left
// out, as legitimate differences: Date (the clock) and Server-Timing's
// value (a measured time); and inputs with a header block between
// MaxHeaderBytes and net/http's MaxHeaderBytes + 4 KiB, which the fast
// path refuses (431) where net/http still reads.

// diffPair is a fast-path server and a net/http one with the same engine.
type diffPair struct{ fast, std string }

func startPair(t testing.TB, engine httpd.EngineFunc, trusted ...string) diffPair {
	t.Helper()
	return startPairOn(t, engine, "127.0.0.1:0", trusted...)
}

// startPairOn is startPair on listeners at addr.
func startPairOn(t testing.TB, engine httpd.EngineFunc, addr string, trusted ...string) diffPair {
	t.Helper()
	cfg := httpd.Config{InstanceID: instance, TrustedProxies: mustPrefixes(t, trusted...)}
	fc, sc := cfg, cfg
	fc.Server, sc.Server = httpd.ServerFast, httpd.ServerNetHTTP
	// Each its own move buckets: both see the same requests in the same
	// order, so they move the same players.
	fc.Steering, sc.Steering = pathway.New(nil), pathway.New(nil)
	return diffPair{
		fast: strings.TrimPrefix(serveOn(t, httpd.New(fc, engine, nil, nil), addr), "http://"),
		std:  strings.TrimPrefix(serveOn(t, httpd.New(sc, engine, nil, nil), addr), "http://"),
	}
}

// exchange sends raw on a new connection, half-closes it, and returns
// everything the server wrote until it closed (or the deadline).
func exchange(t testing.TB, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { // write while reading: a server may answer before all is sent
		_, _ = c.Write(raw)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	start := time.Now()
	out, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("read answer to %q from %s: %v", raw, addr, err)
	}
	// Both servers see the half-close at once: neither has a reason to wait.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answer to %q from %s took %v", raw, addr, d)
	}
	return out
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// answer is what is compared of one response.
type answerView struct {
	Status int
	Header http.Header
	Body   string
	Close  bool // Connection: close (ReadResponse takes it out of Header)
}

// answers splits a connection's output into responses (to requests of the
// given methods, in order: a HEAD answer has no body).
func answers(out []byte, methods []string) ([]answerView, []byte) {
	var views []answerView
	br := bufio.NewReader(bytes.NewReader(out))
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err != nil {
			return views, nil
		}
		var req *http.Request
		if i < len(methods) {
			req = &http.Request{Method: methods[i]}
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			rest, _ := io.ReadAll(br)
			return views, rest
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		h := resp.Header.Clone()
		h.Del("Date")
		if h.Get("Server-Timing") != "" {
			h.Set("Server-Timing", "(measured)")
		}
		views = append(views, answerView{Status: resp.StatusCode, Header: h, Body: string(body), Close: resp.Close})
	}
}

// methodsOf guesses the method of each request in raw, for HEAD answers.
func methodsOf(raw []byte) []string {
	var ms []string
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if i := bytes.IndexByte(line, ' '); i > 0 && bytes.Contains(line, []byte(" HTTP/")) {
			ms = append(ms, string(line[:i]))
		}
	}
	return ms
}

// compare sends raw to both servers and fails on any difference.
func (p diffPair) compare(t testing.TB, raw []byte) {
	t.Helper()
	fastOut, stdOut := exchange(t, p.fast, raw), exchange(t, p.std, raw)
	ms := methodsOf(raw)
	fa, frest := answers(fastOut, ms)
	sa, srest := answers(stdOut, ms)
	if len(fa) != len(sa) || !bytes.Equal(frest, srest) {
		t.Fatalf("for %q:\nfast answered %d (rest %q):\n%s\nnet/http answered %d (rest %q):\n%s", raw, len(fa), frest, fastOut, len(sa), srest, stdOut)
	}
	for i := range fa {
		f, s := fa[i], sa[i]
		if f.Status != s.Status || f.Body != s.Body || f.Close != s.Close || !equalHeaders(f.Header, s.Header) {
			t.Fatalf("for %q, answer %d:\nfast:     %+v\nnet/http: %+v", raw, i, f, s)
		}
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// diffSeeds are raw requests both servers must answer alike: the plain
// forms the fast path answers itself and the forms it hands to net/http.
var diffSeeds = []string{
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"HEAD /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\nAccept: text/html\r\nAccept: Application/JSON\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nhost: LIVE.iptv.example:80\r\nx-anysched-debug: 1\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: vod.other.example\r\n\r\n",
	"GET /x?format=json HTTP/1.1\r\nHost: vod.other.example\r\n\r\n",
	"HEAD /x HTTP/1.1\r\nHost: vod.other.example\r\n\r\n",
	"POST /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"POST /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\nGET /a HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	// Stray CR/LF after a POST, then the end of the stream: net/http
	// drops up to four and reads on; fewer than four between requests
	// it does not read at all.
	"POST / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\n\r",
	"POST / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\n\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\n\r\nGET",
	"GET / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n\r\n\r\n",
	"get /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /../etc/passwd HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /%2e%2e/x HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a%00/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /cctv%201/a!$&'()*+,;=:@[]~/b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /" + strings.Repeat("a", httpd.MaxURILength+10) + " HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	// The watchdog's probe (204, no Content-Length), with and without a Host.
	"HEAD " + httpd.AlivePath + " HTTP/1.1\r\nHost: watchdog\r\nConnection: close\r\n\r\n",
	"GET " + httpd.AlivePath + " HTTP/1.1\r\n\r\nGET " + httpd.AlivePath + " HTTP/1.0\r\n\r\n",
	// Keep-alive and close, HTTP/1.0 and 1.1, pipelined.
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\n\r\nGET /b HTTP/1.1\r\nHost: live.iptv.example\r\nConnection: close\r\n\r\nGET /c HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a HTTP/1.0\r\nHost: live.iptv.example\r\n\r\nGET /b HTTP/1.0\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a HTTP/1.0\r\nHost: live.iptv.example\r\nConnection: Keep-Alive\r\n\r\nHEAD /b HTTP/1.0\r\nHost: live.iptv.example\r\nConnection: keep-alive\r\n\r\n",
	"GET /a HTTP/1.0\r\nHost: live.iptv.example\r\nConnection: keep-alive, close\r\n\r\nGET /b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nConnection: x close\r\n\r\nGET /b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a HTTP/1.0\r\n\r\n",
	// Bodies: refused and closed.
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: 0\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"POST /a HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: 3\r\n\r\nabc",
	"GET /a HTTP/1.0\r\nHost: live.iptv.example\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nab",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: +5\r\n\r\nhello",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nTransfer-Encoding: gzip\r\n\r\n",
	// Expect.
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nExpect: 100-continue\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nabcd",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nExpect: something\r\n\r\n",
	// What the fast path leaves to net/http.
	"GET http://live.iptv.example/cctv1/index.m3u8 HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\nHost: live.iptv.example\n\n",
	"GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nX-Folded: a\r\n b\r\n\r\n",
	"GET /a HTTP/1.1\r\nHost : live.iptv.example\r\n\r\n",
	"GET /ü/x#frag HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET /a\"b<c> HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET * HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: live.iptv.example/x\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: live.iptv.example\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: live.iptv.example\r\nX: a\x01b\r\n\r\n",
	"GET /a\x01b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"\x00\xff\r\n\r\n",
	"\r\nGET / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\nGET http://x/y HTTP/1.1\r\nHost: z\r\n\r\nGET /b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	// Cut short.
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n",
	"GET /cctv1/ind",
	"GET / HTTP/1.1\r\nHost: live.iptv.example\r\n\r\nGET /b HT",
	"",
	// The client's address from X-Forwarded-For (127.0.0.0/8 trusted in
	// one mode).
	"GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\nX-Forwarded-For: 192.0.2.1, 100.64.1.9\r\nX-Forwarded-For: 10.9.9.9\r\n\r\n",
	"GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\nX-Forwarded-For: [2001:db8::1]:80, junk\r\n\r\n",
	"GET /cctv1/index.m3u8?token=abc&format=json HTTP/1.1\r\nHost: live.iptv.example\r\nAuthorization: Bearer x.y\r\n\r\n",
	// Content steering manifests: the first (pinning), through RELOAD-URI,
	// moving off a server that is down, DASH's keys, HEAD, and refusals.
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_HLS_pathway=.&_HLS_throughput=800000 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_anysched_base=hefei-1-a&_HLS_pathway=.&_HLS_throughput=1 HTTP/1.1\r\nHost: live.iptv.example\r\nX-Forwarded-For: 100.64.1.9\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?token=a.b&_anysched_base=wuhu-1-a&_HLS_pathway=luan-1-a HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_DASH_pathway=gone-1&_DASH_throughput=5 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"HEAD " + pathway.Prefix + "/cctv1/index.m3u8?_HLS_pathway=. HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_HLS_pathway=a%20b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_HLS_throughput=fast HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8?_HLS_pathway=a&_HLS_pathway=b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + " HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/ HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "x/cctv1 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/index.m3u8 HTTP/1.1\r\nHost: vod.other.example\r\n\r\n",
	"GET " + pathway.Prefix + "/cctv1/a\"b HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n",
	// Dual-stack: an IPv6 STB (the peer, or X-Forwarded-For from a
	// trusted proxy) on a service that falls back to the other family
	// and on one that skips, with alternates.
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: skip.iptv.example\r\n\r\n",
	"GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: skip.iptv.example\r\n\r\n",
	"GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\nX-Forwarded-For: 2001:db8:99::1\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: skip.iptv.example\r\nX-Forwarded-For: 2001:db8:99::1\r\nX-Anysched-Debug: 1\r\n\r\n",
	"GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: [2001:db8:ff::1]\r\n\r\n",
}

// diffSetups are the engines (and trust) a differential input is tried
// with; dual: dualTopology's engine on IPv6 loopback (v6Down: hefei-1-a's
// IPv6 address down).
type diffSetup struct {
	avail        avail
	trusted      []string
	dual, v6Down bool
}

var diffSetups = []diffSetup{
	{avail: availAll}, {avail: availNoHefei, trusted: []string{"127.0.0.0/8"}}, {avail: availNone}, {avail: availNoSnap},
	{dual: true, trusted: []string{"::1/128"}}, {dual: true, v6Down: true},
}

// start starts su's pair of servers.
func (su diffSetup) start(t testing.TB) diffPair {
	t.Helper()
	if su.dual {
		return startPairOn(t, dualEngine(t, su.v6Down), "[::1]:0", su.trusted...)
	}
	return startPair(t, testEngine(t, su.avail), su.trusted...)
}

func TestDifferential(t *testing.T) {
	for _, su := range diffSetups {
		p := su.start(t)
		for _, raw := range append(slices.Clone(diffSeeds), corpusRequests(t)...) {
			p.compare(t, []byte(raw))
		}
	}
}

// FuzzDifferential holds the fast path to net/http's answers for any
// request bytes (below the 431 band, see above).
//
//	go test ./internal/stb/httpd -run '^$' -fuzz FuzzDifferential -fuzztime 60s
func FuzzDifferential(f *testing.F) {
	for _, raw := range diffSeeds {
		f.Add(uint8(0), []byte(raw))
	}
	for i, raw := range corpusRequests(f) {
		f.Add(uint8(i), []byte(raw))
	}
	pairs := make([]diffPair, len(diffSetups))
	for i, su := range diffSetups {
		pairs[i] = su.start(f)
	}
	f.Fuzz(func(t *testing.T, mode uint8, raw []byte) {
		if len(raw) > httpd.DefaultMaxHeaderBytes {
			return
		}
		pairs[int(mode)%len(pairs)].compare(t, raw)
	})
}

// corpusRequests turns FuzzHandler's corpus (testdata/fuzz/FuzzHandler)
// into raw requests, as that fuzz target builds them.
func corpusRequests(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/fuzz/FuzzHandler/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus: %v (%d files)", err, len(files))
	}
	var out []string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var strs []string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "string("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				strs = append(strs, s)
			}
		}
		if len(strs) != 5 {
			t.Fatalf("%s: %d strings, want 5", name, len(strs))
		}
		method, target, host, header := strs[0], strs[1], strs[2], strs[3]
		out = append(out, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n", method, target, host, header))
	}
	return out
}

// TestDifferentialSeesTheFastPath guards the comparison itself: the
// "fast" member of a pair must be the fast path. The tell is the header
// limit, where the fast path answers 431 and net/http still reads.
func TestDifferentialSeesTheFastPath(t *testing.T) {
	p := startPair(t, testEngine(t, availAll))
	raw := []byte("GET /a HTTP/1.1\r\nHost: live.iptv.example\r\nX-Pad: " + strings.Repeat("x", httpd.DefaultMaxHeaderBytes) + "\r\n\r\n")
	fa, _ := answers(exchange(t, p.fast, raw), []string{"GET"})
	sa, _ := answers(exchange(t, p.std, raw), []string{"GET"})
	if len(fa) != 1 || fa[0].Status != 431 || len(sa) != 1 || sa[0].Status != 302 {
		t.Fatalf("fast %+v, net/http %+v; want 431 and 302", fa, sa)
	}
}
