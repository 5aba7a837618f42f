package httpd_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/httpd"
	"github.com/anysched/anysched/internal/stb/pathway"
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

// BenchmarkSteeringManifest: a content steering manifest for a player on a
// drained server of the sample province (moved, so the whole path: the
// decision, the move bucket, the clones' hosts, RELOAD-URI), beside its
// baseline, the plain 302 of the same request in the same run.
//
//	go test ./internal/stb/httpd -run '^$' -bench SteeringManifest -benchmem
func BenchmarkSteeringManifest(b *testing.B) {
	eng, from := steeringEngine(b)
	target := pathway.Prefix + "/cctv1/index.m3u8?_anysched_base=" + from + "&_HLS_pathway=.&_HLS_throughput=2000000"
	// One move a nanosecond: every manifest moves its player.
	benchTarget(b, eng, target, http.StatusOK, pathway.New(nil))
}

func BenchmarkSteeringManifest_Baseline(b *testing.B) {
	eng, _ := steeringEngine(b)
	benchTarget(b, eng, "/cctv1/index.m3u8", http.StatusFound, nil)
}

// steeringEngine is the sample province with steering on its first
// service and the server a client of 100.64.1.7 gets drained; it returns
// that server's name.
func steeringEngine(b *testing.B) (*steer.Engine, string) {
	snap := compile(b, readFile(b, "../../../deploy/examples/topology.yaml"))
	snap.Services[0].Steering = &topology.SteeringView{TTL: 10, Retry: 2, MovesPerSecond: 1e9, MoveBurst: 1, Pathways: 3}
	req := steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: snap.Services[0].Hostnames[0], Path: "/cctv1/index.m3u8"}
	first := steer.New(snap, steer.Options{}).Peek(req)
	if first.Server < 0 {
		b.Fatalf("no server for %+v", req)
	}
	drained := first.Server
	eng := steer.New(snap, steer.Options{Available: func(s int32) bool { return s != drained }, Down: func(int32) bool { return false }})
	return eng, snap.Servers[drained].Name
}

func benchTarget(b *testing.B, eng *steer.Engine, target string, status int, st httpd.Steerer) {
	s := httpd.New(httpd.Config{InstanceID: instance, Steering: st}, func() *steer.Engine { return eng }, nil, nil)
	h := s.Handler()
	r := httptest.NewRequest(http.MethodGet, "http://"+eng.Snapshot().Services[0].Hostnames[0]+target, nil)
	r.RemoteAddr = "100.64.1.7:51234"
	w := &discardWriter{h: make(http.Header, 8)}
	h.ServeHTTP(w, r)
	if w.code != status {
		b.Fatalf("status %d, want %d", w.code, status)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, r)
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
