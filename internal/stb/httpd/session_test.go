package httpd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

// sampleServer serves the shipped sample province (16 regions).
func sampleServer(t testing.TB, rec *accesslog.Recorder) *Server {
	t.Helper()
	doc, err := os.ReadFile("../../../deploy/examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eng := steer.New(fixture.CompileYAML(t, string(doc), 1), steer.Options{})
	return New(Config{InstanceID: "bench-1"}, func() *steer.Engine { return eng }, rec, nil)
}

// newSession is a fast-path session for a client at peer, with its buffers.
func newSession(s *Server, peer string) (*session, *fbufs) {
	return &session{s: s, peer: netip.MustParseAddr(peer)}, s.bufPool.Get().(*fbufs)
}

// run feeds in to a session as one read and returns the answers written,
// what was consumed and the verdict.
func run(ss *session, b *fbufs, in string, full bool) (string, int, verdict) {
	b.out = b.out[:0]
	n, v := ss.process([]byte(in), &b.out, &b.scratch, &b.ar, full, false)
	return string(b.out), n, v
}

func readAnswers(t *testing.T, out string, methods ...string) []*http.Response {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(out))
	var rs []*http.Response
	for _, m := range methods {
		r, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("answer %d of %q: %v", len(rs), out, err)
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rs = append(rs, r)
	}
	if br.Buffered() > 0 {
		rest, _ := io.ReadAll(br)
		t.Fatalf("more than %d answers: %q", len(methods), rest)
	}
	return rs
}

const stbGet = "GET /cctv1/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\nUser-Agent: stb/1.0\r\n\r\n"

// TestProcessPipelined: several requests in one read are answered in
// order, a partial one waits, and the rest of the batch after a close is
// left unanswered.
func TestProcessPipelined(t *testing.T) {
	s := sampleServer(t, nil)
	ss, b := newSession(s, "100.64.1.7")
	second := "HEAD /cctv2/index.m3u8 HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n"
	third := "GET /cctv3/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n"
	partial := "GET /cctv4/index.m3u8 HTTP/1.1\r\nHo"
	in := stbGet + second + third + partial
	out, n, v := run(ss, b, in, false)
	if v != vContinue || n != len(in)-len(partial) {
		t.Fatalf("consumed %d of %d (%v), want all but the partial request", n, len(in), v)
	}
	rs := readAnswers(t, out, "GET", "HEAD", "GET")
	for i, want := range []string{"/cctv1/", "/cctv2/", ""} {
		if loc := rs[i].Header.Get("Location"); !strings.Contains(loc, want) || (want == "") != (loc == "") {
			t.Errorf("answer %d: Location %q, want one with %q", i, loc, want)
		}
	}
	if rs[2].StatusCode != 200 || rs[2].Header.Get("Content-Type") != "application/json" {
		t.Errorf("third answer %d %v, want the JSON decision", rs[2].StatusCode, rs[2].Header)
	}
	// The partial request completes with the next read.
	out, n, v = run(ss, b, partial+"st: live.iptv.example\r\n\r\n", false)
	if v != vContinue || readAnswers(t, out, "GET")[0].StatusCode != 302 || n != len(partial)+len("st: live.iptv.example\r\n\r\n") {
		t.Fatalf("completed request: %q %d %v", out, n, v)
	}
	// Connection: close ends the batch: what follows is not answered.
	closing := strings.Replace(stbGet, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
	out, n, v = run(ss, b, closing+stbGet, false)
	if v != vClose || n != len(closing) || !readAnswers(t, out, "GET")[0].Close {
		t.Fatalf("close: %q %d %v", out, n, v)
	}
}

// TestProcessRefusals: what the fast path answers itself, and closes on.
func TestProcessRefusals(t *testing.T) {
	s := sampleServer(t, nil)
	tests := []struct {
		name   string
		in     string
		full   bool
		status int
		v      verdict
	}{
		{"header block beyond the buffer", "GET / HTTP/1.1\r\nHost: live.iptv.example\r\nX-Pad: " + strings.Repeat("x", 100), true, 431, vClose},
		{"body", "GET / HTTP/1.1\r\nHost: live.iptv.example\r\nContent-Length: 3\r\n\r\nabc", false, 413, vClose},
		{"URI too long", "GET /" + strings.Repeat("a", MaxURILength) + " HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", false, 414, vContinue},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: live.iptv.example\r\n\r\n", false, 302, vClose},
		{"HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nHost: live.iptv.example\r\nConnection: keep-alive\r\n\r\n", false, 302, vContinue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ss, b := newSession(s, "100.64.1.7")
			out, _, v := run(ss, b, tc.in, tc.full)
			if r := readAnswers(t, out, "GET")[0]; r.StatusCode != tc.status || v != tc.v {
				t.Fatalf("%d %v, want %d %v: %q", r.StatusCode, v, tc.status, tc.v, out)
			}
		})
	}
	// Not the plain form: handed over, nothing answered, nothing consumed.
	for _, in := range []string{
		"GET http://live.iptv.example/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\nHost: live.iptv.example\n\n",
		"GET / HTTP/1.1\r\nHost: live.iptv.example\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: live.iptv.example\r\nExpect: 100-continue\r\n\r\n",
	} {
		ss, b := newSession(s, "100.64.1.7")
		if out, n, v := run(ss, b, in, false); v != vHandoff || n != 0 || out != "" {
			t.Errorf("%q: %q %d %v, want a handoff", in, out, n, v)
		}
	}
}

// FuzzParse: the parser and the session never panic or loop on any bytes,
// consume only what they were given, and what parse accepts is what
// net/http reads the same way (method, target, Host).
//
//	go test ./internal/stb/httpd -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		stbGet, stbGet + stbGet, "GET / HTTP/1.0\r\n\r\n", "\r\n\r\n", "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a?b=%zz&c=\"d\" HTTP/1.1\r\nHost: a:1\r\nConnection: keep-alive, close\r\nContent-Length: 00\r\n\r\n",
	} {
		f.Add([]byte(seed), false)
	}
	s := New(Config{InstanceID: "fuzz-1"}, nil, nil, nil)
	f.Fuzz(func(t *testing.T, in []byte, full bool) {
		var p parsed
		switch parse(in, &p) {
		case parseOK:
			if p.end <= 0 || p.end > len(in) {
				t.Fatalf("end %d of %d", p.end, len(in))
			}
			r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in[:p.end])))
			if err != nil {
				t.Fatalf("parse accepted %q, net/http: %v", in[:p.end], err)
			}
			if r.Method != string(in[p.method.from:p.method.to]) || r.RequestURI != string(in[p.target.from:p.target.to]) ||
				r.URL.EscapedPath() != string(in[p.path.from:p.path.to]) || r.URL.RawQuery != string(in[p.query.from:p.query.to]) ||
				r.Host != string(in[p.host.from:p.host.to]) {
				t.Fatalf("%q: parse and net/http disagree: %q %q %q %q", in[:p.end], r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Host)
			}
		case parseMore, parseOther:
		}
		ss, b := newSession(s, "192.0.2.1")
		n, _ := ss.process(in, &b.out, &b.scratch, &b.ar, full, false)
		if n < 0 || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
	})
}

// BenchmarkFastPath: one STB request through the fast path's parser,
// handler core and answer writer (no network), on the sample province.
// The redirect allocates nothing; "json" is the operator's path.
//
//	go test ./internal/stb/httpd -run '^$' -bench BenchmarkFastPath -benchmem
func BenchmarkFastPath(b *testing.B) {
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{SampleEvery: 1 << 62})
	for _, bc := range []struct {
		name string
		rec  *accesslog.Recorder
		in   string
		want string
	}{
		{"redirect", nil, stbGet, "HTTP/1.1 302 Found\r\n"},
		{"redirect-record", rec, stbGet, "HTTP/1.1 302 Found\r\n"},
		{"redirect-xff-debug", nil, "GET /cctv1/index.m3u8?x=1 HTTP/1.1\r\nHost: live.iptv.example\r\nX-Forwarded-For: 100.64.1.9\r\nX-Anysched-Debug: 1\r\nAccept: */*\r\n\r\n", "HTTP/1.1 302 Found\r\n"},
		{"json", nil, "GET /cctv1/index.m3u8?format=json HTTP/1.1\r\nHost: live.iptv.example\r\n\r\n", "HTTP/1.1 200 OK\r\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := sampleServer(b, bc.rec)
			ss, bufs := newSession(s, "100.64.1.7")
			in := []byte(bc.in)
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				bufs.out = bufs.out[:0]
				if n, v := ss.process(in, &bufs.out, &bufs.scratch, &bufs.ar, false, false); n != len(in) || v != vContinue {
					b.Fatalf("consumed %d, %v", n, v)
				}
			}
			if !bytes.HasPrefix(bufs.out, []byte(bc.want)) {
				b.Fatalf("answer %q", bufs.out)
			}
		})
	}
}
