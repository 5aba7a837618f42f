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
// "norecord" is the handler alone; "json" is the operator path. The
// dual-stack ones ask the sample province made dual-stack
// (fixture.DualStack): an IPv4 STB, and an IPv6 STB in the same zone given
// the server's IPv6 address.
func BenchmarkHandler(b *testing.B) {
	snap := compile(b, readFile(b, "../../../deploy/examples/topology.yaml"))
	eng := steer.New(snap, steer.Options{})
	doc, err := topology.Parse(readFile(b, "../../../deploy/examples/topology.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	fixture.DualStack(doc)
	dual := steer.New(fixture.Compile(b, doc), steer.Options{})
	v6 := fixture.Zone6(0).Addr().Next()
	rec := accesslog.New(prometheus.NewRegistry(), io.Discard, accesslog.Options{SampleEvery: 1 << 62})
	for _, bc := range []struct {
		name   string
		eng    *steer.Engine
		rec    *accesslog.Recorder
		target string
		remote string
		status int
	}{
		{"record", eng, rec, "/cctv1/index.m3u8", "100.64.1.7:51234", http.StatusFound},
		{"norecord", eng, nil, "/cctv1/index.m3u8", "100.64.1.7:51234", http.StatusFound},
		{"json", eng, nil, "/cctv1/index.m3u8?format=json", "100.64.1.7:51234", http.StatusOK},
		{"dual/record-ipv4", dual, rec, "/cctv1/index.m3u8", "100.64.1.7:51234", http.StatusFound},
		{"dual/record-ipv6", dual, rec, "/cctv1/index.m3u8", "[" + v6.String() + "]:51234", http.StatusFound},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := httpd.New(httpd.Config{InstanceID: instance}, func() *steer.Engine { return bc.eng }, bc.rec, nil)
			h := s.Handler()
			r := httptest.NewRequest(http.MethodGet, "http://live.iptv.example"+bc.target, nil)
			r.RemoteAddr = bc.remote
			w := &discardWriter{h: make(http.Header, 8)}
			h.ServeHTTP(w, r)
			if w.code != bc.status {
				b.Fatalf("status %d, want %d", w.code, bc.status)
			}
			if loc := w.h.Get("Location"); bc.status == http.StatusFound && strings.HasPrefix(bc.remote, "[") != strings.Contains(loc, "//[") {
				b.Fatalf("%s from %s", loc, bc.remote)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}
