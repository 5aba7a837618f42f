package allocator

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// benchRig: the test province with a token cache, as the daemon runs it.
func benchRig(b testing.TB, uncapped bool) (*Allocator, *steer.Engine) {
	b.Helper()
	e := etcdtest.Start(b)
	doc := province
	if uncapped {
		doc = regexp.MustCompile(`, capacity: \{[^}]*\}`).ReplaceAllString(doc, "")
	}
	eng := engineFor(b, doc)
	r := newRig(b, e, eng, "bench", Config{})
	v, err := token.NewVerifier([]token.Key{key1}, token.Options{CacheSize: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	r.a.cfg.Verifier, r.a.gate.verifier = v, v
	return r.a, eng
}

var benchReq = steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.iptv.example", Path: "/cctv1/index.m3u8"}

// BenchmarkAllocate_Baseline is the steer decision alone (what a nearest
// service costs).
func BenchmarkAllocate_Baseline(b *testing.B) {
	_, eng := benchRig(b, false)
	b.ReportAllocs()
	for b.Loop() {
		_ = eng.Decide(benchReq)
	}
}

// BenchmarkAllocate: a returning STB with its token (cached) gets its
// planned server and bitrate.
func BenchmarkAllocate(b *testing.B) {
	a, eng := benchRig(b, false)
	tok := signed(b, "viewer", 5000)
	d := eng.Decide(benchReq)
	if err := a.Allocate(eng, &d, benchReq, tok); err != nil {
		b.Fatal(err)
	}
	a.Solve(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		d := eng.Decide(benchReq)
		if err := a.Allocate(eng, &d, benchReq, tok); err != nil {
			b.Fatal(err)
		}
	}
	if st := a.Status(); st.PlannedN != 1 {
		b.Fatalf("plan %+v", st)
	}
}

// BenchmarkAllocateNewSession: an STB switching to a channel the plan does
// not know, without a token: its previous session ends (capacity given
// back) and the new one is priced at the plan's prices (uncapped servers,
// so it never runs out of headroom).
func BenchmarkAllocateNewSession(b *testing.B) {
	a, eng := benchRig(b, true)
	a.Solve(context.Background())
	clients := make([]netip.Addr, 256) // the north zone's /24
	for i := range clients {
		clients[i] = netip.AddrFrom4([4]byte{100, 64, 1, byte(i)})
	}
	paths := make([]string, 64)
	for i := range paths {
		paths[i] = fmt.Sprintf("/ch%d/index.m3u8", i)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		// Every STB zaps on each of its requests: the next channel each time
		// round, so each request ends the STB's session and prices a new one.
		req := steer.Request{Client: clients[i%len(clients)], Host: benchReq.Host, Path: paths[(i/len(clients))%len(paths)]}
		d := eng.Decide(req)
		if err := a.Allocate(eng, &d, req, ""); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSolveRegion: one period of the live loop with 10,000 sessions
// (etcd read and commit included).
func BenchmarkSolveRegion(b *testing.B) {
	a, eng := benchRig(b, false)
	for i := range 10000 { // 10,000 viewers (tokens) behind 512 addresses
		req := steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, byte(1 + i%2), byte(i)}), Host: benchReq.Host, Path: fmt.Sprintf("/ch%d/index.m3u8", i%50)}
		d := eng.Decide(req)
		if err := a.Allocate(eng, &d, req, signed(b, fmt.Sprintf("viewer-%d", i), 5000)); err != nil {
			b.Fatal(err)
		}
	}
	a.now = func() time.Time { return time.Now().Add(-time.Second) } // keep every session live
	b.ReportAllocs()
	for b.Loop() {
		a.Solve(context.Background())
	}
	if st := a.Status(); st.PlannedN != 10000 {
		b.Fatalf("plan %+v", st)
	}
}
