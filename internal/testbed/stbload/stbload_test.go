package stbload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunCountsWhatSTBsSaw(t *testing.T) {
	var fromZone atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := netip.ParseAddr(r.Header.Get("X-Forwarded-For"))
		if err == nil && netip.MustParsePrefix("100.64.0.0/24").Contains(a) && r.Host == "live.iptv.example" && strings.HasPrefix(r.URL.Path, "/ch") {
			fromZone.Add(1)
		}
		if r.URL.Path == "/ch1/index.m3u8" { // the most popular channel fails, to be counted
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("X-Anysched-Instance", "hefei-1")
		w.Header().Set("X-Anysched-Result", "CZ")
		w.Header().Set("Server-Timing", "decide;dur=0.004")
		w.Header().Set("Location", "http://10.1.1.10:8080/x")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	var progress bytes.Buffer
	var seconds []Second
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(srv.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}},
		Host:   "live.iptv.example", Requests: 500, Concurrency: 4, Channels: 50, Progress: &progress, Seed: 7, Retries: -1,
		PerSecond: func(s Second) { seconds = append(seconds, s) }, // called from Run's own goroutine
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.PerCity["hefei"]
	if c.Requests != 500 || fromZone.Load() != 500 {
		t.Fatalf("requests %d, seen from the zone %d; want 500", c.Requests, fromZone.Load())
	}
	if c.Failures == 0 || c.Redirects+c.Failures != 500 || c.AnsweredBy["hefei-1"] != c.Redirects || c.Results["CZ"] != c.Redirects {
		t.Fatalf("stats %+v", c)
	}
	if d := Percentile(c.Decide, 50); d != 4*time.Microsecond {
		t.Fatalf("decision p50 %s, want the reported 4µs", d)
	}
	// Every second is handed over once, in order, and they add up to the run.
	var req, fail, by int
	for i, sec := range seconds {
		if sec.At != i || sec.City != "hefei" {
			t.Fatalf("second %d: %+v", i, sec)
		}
		req, fail, by = req+sec.Requests, fail+sec.Failures, by+sec.AnsweredBy["hefei-1"]
		if back, ok := ParseLine(sec.Line()); !ok || back.At != sec.At || back.Requests != sec.Requests || back.Failures != sec.Failures || len(back.AnsweredBy) != len(sec.AnsweredBy) {
			t.Fatalf("line %q read back as %+v", sec.Line(), back)
		}
	}
	if len(seconds) == 0 || req != 500 || fail != c.Failures || by != c.Redirects || len(seconds) != len(c.Seconds) {
		t.Fatalf("per second: %d seconds, %d requests, %d failed, %d by hefei-1; run: %+v", len(seconds), req, fail, by, c)
	}
	if !strings.Contains(progress.String(), "500 requests") {
		t.Fatalf("no final progress line: %q", progress.String())
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "hefei") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
}

// TestFollowPlaysFromTheEdge: with Follow the STB fetches the playlist and
// two segments from the redirect target, and a broken edge is counted.
func TestFollowPlaysFromTheEdge(t *testing.T) {
	var segs atomic.Int64
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/index.m3u8"):
			io.WriteString(w, "#EXTM3U\n#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\nseg1.ts\n#EXTINF:2.0,\nseg2.ts\n")
		case strings.HasSuffix(r.URL.Path, ".ts") && !strings.Contains(r.URL.Path, "broken"):
			segs.Add(1)
			w.Write(make([]byte, 1024))
		default:
			http.NotFound(w, r)
		}
	}))
	defer edge.Close()
	sched := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := edge.URL + "/live" + r.URL.Path
		if strings.HasPrefix(r.URL.Path, "/ch1/") {
			target = edge.URL + "/broken/index.m3u8"
		}
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusFound)
	}))
	defer sched.Close()
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(sched.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}},
		Host:   "live.iptv.example", Requests: 200, Concurrency: 2, Channels: 20, Follow: true, Seed: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.PerCity["hefei"]
	if c.EdgeFailures == 0 || len(c.Start)+c.EdgeFailures != 200 || segs.Load() != int64(2*len(c.Start)) {
		t.Fatalf("started %d, edge failures %d, segments fetched %d", len(c.Start), c.EdgeFailures, segs.Load())
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "START p50/p99") {
		t.Fatalf("no start column:\n%s", table.String())
	}
}

// Viewers are fixed STBs: each keeps its address and sends its own token;
// the bitrate the scheduler chose is counted per city.
func TestViewersKeepAddressAndToken(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]map[string]bool{} // token -> addresses
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.URL.Query().Get("token")
		mu.Lock()
		if seen[tok] == nil {
			seen[tok] = map[string]bool{}
		}
		seen[tok][r.Header.Get("X-Forwarded-For")] = true
		mu.Unlock()
		w.Header().Set("X-Anysched-Bitrate", map[bool]string{true: "1200", false: "5000"}[strings.HasSuffix(tok, "7")])
		w.Header().Set("Location", "http://10.1.1.10:8080/x")
		w.WriteHeader(http.StatusFound)
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(srv.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}}},
		Host:   "live.iptv.example", Requests: 400, Concurrency: 4, Channels: 10, Seed: 3, Viewers: 10,
		Token: func(city string, v int) string { return fmt.Sprintf("%s-viewer-%d", city, v) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 10 {
		t.Fatalf("%d distinct tokens, want 10 viewers", len(seen))
	}
	for tok, addrs := range seen {
		if len(addrs) != 1 || !strings.HasPrefix(tok, "hefei-viewer-") {
			t.Fatalf("viewer %q came from %v, want one fixed address", tok, addrs)
		}
	}
	b := rep.PerCity["hefei"].Bitrates
	if b["1200"] == 0 || b["5000"] == 0 || b["1200"]+b["5000"] != 400 {
		t.Fatalf("bitrates %v", b)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "1200=") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
}

func TestViewerProfilesFollowTheSeed(t *testing.T) {
	n := 20000
	one, under10, top := 0, 0, 0
	for v := range n {
		p := ViewerProfile("hefei", v, 1)
		if p != ViewerProfile("hefei", v, 1) {
			t.Fatal("profiles are not reproducible")
		}
		if p.DanmakuPerHour == 1 {
			one++
		}
		if p.DanmakuPerHour < 10 {
			under10++
		}
		if p.DesiredKbps == 5000 {
			top++
		}
		if p.Gift < 0 || p.DesiredKbps <= 0 {
			t.Fatalf("bad profile %+v", p)
		}
	}
	share := func(k int) float64 { return float64(k) / float64(n) }
	if s := share(one); s < 0.57 || s > 0.61 {
		t.Errorf("%.3f send one comment an hour, want 0.59", s)
	}
	if s := share(under10); s < 0.95 || s > 0.97 {
		t.Errorf("%.3f send fewer than ten, want 0.96", s)
	}
	if s := share(top); s < 0.48 || s > 0.52 {
		t.Errorf("%.3f want 5000 kbps, want 0.50", s)
	}
}

// A failed try is retried through the same address after a backoff; the
// request fails only when every try did.
func TestRetries(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/ch2/index.m3u8": // always down
			w.WriteHeader(http.StatusServiceUnavailable)
		case n%2 == 1: // every other try fails
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.Header().Set("Location", "http://10.1.1.10:8080/x")
			w.WriteHeader(http.StatusFound)
		}
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(srv.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}},
		Host:   "live.iptv.example", Requests: 60, Concurrency: 1, Channels: 3, Seed: 5,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.PerCity["hefei"]
	if c.Retried == 0 || c.Failures == 0 || c.Failures == c.Requests || c.Redirects+c.Failures != 60 {
		t.Fatalf("stats %+v", c)
	}
	// Every request of the always-down channel failed after 3 tries; no
	// other one failed.
	if int64(c.Failures)*3+int64(c.Redirects) > calls.Load() {
		t.Fatalf("%d failures, %d redirects from %d tries: a failure was not retried twice", c.Failures, c.Redirects, calls.Load())
	}
}

// A play cut short by the run's time bound is neither a success nor an
// edge failure.
func TestTimeBoundIsNotAFailure(t *testing.T) {
	// The first segments are served at once (some plays complete); later
	// ones hang until the run's bound cancels them: the bound falls inside
	// a play, whatever the machine's speed.
	var segments atomic.Int64
	release := make(chan struct{})
	edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".m3u8") {
			io.WriteString(w, "#EXTM3U\n#EXTINF:2,\ns1.ts\n#EXTINF:2,\ns2.ts\n")
			return
		}
		if segments.Add(1) > 8 {
			select {
			case <-r.Context().Done():
				return
			case <-release:
			}
		}
		io.WriteString(w, "segment")
	}))
	defer edge.Close()
	defer close(release) // before Close, which waits for the handlers
	sched := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", edge.URL+"/live/index.m3u8")
		w.WriteHeader(http.StatusFound)
	}))
	defer sched.Close()
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(sched.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}},
		Host:   "live.iptv.example", Requests: 1000, Concurrency: 4, Follow: true, MaxDuration: 700 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.PerCity["hefei"]
	if c.EdgeFailures != 0 || c.Failures != 0 || c.Requests == 0 || c.Requests >= 1000 {
		t.Fatalf("stats %+v", c)
	}
	if segments.Load() <= 8 {
		t.Fatalf("no play was cut short: %d segment requests", segments.Load())
	}
}

func TestParseLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		ok   bool
		want Second
	}{
		{"sec=5 city=wuhu requests=75 failed=1 by=center:60,wuhu-1:14", true, Second{City: "wuhu", At: 5, Requests: 75, Failures: 1, AnsweredBy: map[string]int{"center": 60, "wuhu-1": 14}}},
		{"sec=0 city=hefei requests=0 failed=0 by=", true, Second{City: "hefei", AnsweredBy: map[string]int{}}},
		{"  12.0s  500 requests, 0 failed (done)", false, Second{}},
		{"sec=x city=wuhu requests=1 failed=0 by=", false, Second{}},
		{"sec=1 city=wuhu requests=1 failed=0 by=center:x", false, Second{}},
		{"sec=1 requests=1 failed=0 by=", false, Second{}},
		{"sec=1 city=wuhu colour=red", false, Second{}},
	} {
		got, ok := ParseLine(tt.line)
		if ok != tt.ok {
			t.Errorf("%q: ok %v", tt.line, ok)
			continue
		}
		if ok && (got.City != tt.want.City || got.At != tt.want.At || got.Requests != tt.want.Requests || got.Failures != tt.want.Failures || fmt.Sprint(got.AnsweredBy) != fmt.Sprint(tt.want.AnsweredBy)) {
			t.Errorf("%q: %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

// TestOnlyFamily: a dual-stack city's STBs of one family come from its
// client networks of that family only; a city with none is refused.
func TestOnlyFamily(t *testing.T) {
	cs := []City{{Name: "hefei", Networks: []netip.Prefix{netip.MustParsePrefix("10.1.1.0/24"), netip.MustParsePrefix("fd00:1:1::/64")}}}
	v6, err := OnlyFamily(cs, true)
	if err != nil || len(v6) != 1 || len(v6[0].Networks) != 1 || v6[0].Networks[0] != netip.MustParsePrefix("fd00:1:1::/64") {
		t.Fatalf("IPv6: %v %v", v6, err)
	}
	v4, err := OnlyFamily(cs, false)
	if err != nil || len(v4[0].Networks) != 1 || !v4[0].Networks[0].Addr().Is4() {
		t.Fatalf("IPv4: %v %v", v4, err)
	}
	if len(cs[0].Networks) != 2 {
		t.Fatal("OnlyFamily changed its input")
	}
	if _, err := OnlyFamily(v4, true); err == nil || !strings.Contains(err.Error(), `city "hefei" has no client network`) {
		t.Fatalf("an IPv4-only city asked for IPv6 STBs: %v", err)
	}
}
