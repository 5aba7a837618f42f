package httpd_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
	"github.com/prometheus/client_golang/prometheus"
)

// discardWriter is the least a ResponseWriter can be, so the benchmark
// measures the handler rather than net/http's response machinery.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// BenchmarkHandler: the 302 path for an STB inside a zone of the sample
// province (16 regions, 128 servers).
//
//	go test ./internal/stb/httpd -run '^$' -bench BenchmarkHandler -benchmem
//
// "record" includes the access-log Recorder's metrics (log lines sampled
// away so the log writer's own work on another goroutine is not counted);
// "norecord" is the handler alone; "json" is the operator path.
func BenchmarkHandler(b *testing.B) {
	snap := compile(b, readFile(b, "../../../deploy/examples/topology.yaml"))
	eng := steer.New(snap, steer.Options{})
	engine := func() *steer.Engine { return eng }
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{SampleEvery: 1 << 62})
	for _, bc := range []struct {
		name   string
		rec    *accesslog.Recorder
		target string
		status int
	}{
		{"record", rec, "/cctv1/index.m3u8", http.StatusFound},
		{"norecord", nil, "/cctv1/index.m3u8", http.StatusFound},
		{"json", nil, "/cctv1/index.m3u8?format=json", http.StatusOK},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := httpd.New(httpd.Config{InstanceID: instance}, engine, bc.rec, nil)
			h := s.Handler()
			r := httptest.NewRequest(http.MethodGet, "http://live.iptv.example"+bc.target, nil)
			r.RemoteAddr = "100.64.1.7:51234"
			w := &discardWriter{h: make(http.Header, 8)}
			h.ServeHTTP(w, r)
			if w.code != bc.status {
				b.Fatalf("status %d, want %d", w.code, bc.status)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkHandlerIPv6: Handler/record on the sample province made
// dual-stack (fixture.DualStack) for an IPv6 STB, given the server's IPv6
// address; its baseline is an IPv4 STB of the same zone and province.
func BenchmarkHandlerIPv6(b *testing.B) {
	benchDual(b, "["+fixture.Zone6(0).Addr().Next().String()+"]:51234", "//[")
}
func BenchmarkHandlerIPv6_Baseline(b *testing.B) { benchDual(b, "100.64.1.7:51234", "//10.") }

func benchDual(b *testing.B, remote, want string) {
	doc, err := topology.Parse(readFile(b, "../../../deploy/examples/topology.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	fixture.DualStack(doc)
	eng := steer.New(fixture.Compile(b, doc), steer.Options{})
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{SampleEvery: 1 << 62})
	h := httpd.New(httpd.Config{InstanceID: instance}, func() *steer.Engine { return eng }, rec, nil).Handler()
	r := httptest.NewRequest(http.MethodGet, "http://live.iptv.example/cctv1/index.m3u8", nil)
	r.RemoteAddr = remote
	w := &discardWriter{h: make(http.Header, 8)}
	h.ServeHTTP(w, r)
	if loc := w.h.Get("Location"); w.code != http.StatusFound || !strings.Contains(loc, want) {
		b.Fatalf("%d %s from %s", w.code, loc, remote)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}
