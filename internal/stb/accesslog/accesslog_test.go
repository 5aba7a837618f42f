package accesslog

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/wiring/obs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLinesAreJSON(t *testing.T) {
	var buf bytes.Buffer
	r := New(prometheus.NewRegistry(), &buf, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	odd := "/ch1/\"quoted\"\\back\nslash/\xff/é"
	r.Record(Entry{Time: time.Unix(1, 5000).UTC(), Proto: "http", Client: netip.MustParseAddr("100.64.0.7"), Host: "live.iptv.example", Path: odd, Result: steer.ResultCZ, Zone: "z", Region: "hefei", Server: "s", Target: "10.0.0.1:80", Status: 302, Latency: 1500})
	r.Record(Entry{Time: time.Unix(2, 0), Proto: "dns", Result: steer.ResultMiss, Status: 3}) // invalid client address
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	var v struct {
		TS, Proto, Client, Path, Result, Region string
		Status                                  int
		Latency                                 int64
	}
	if err := json.Unmarshal([]byte(lines[0]), &v); err != nil {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	if v.TS != "1970-01-01T00:00:01.000005Z" || v.Proto != "http" || v.Client != "100.64.0.7" || v.Path != strings.ToValidUTF8(odd, "\uFFFD") || v.Result != "CZ" || v.Status != 302 || v.Latency != 1500 {
		t.Errorf("decoded %+v", v)
	}
	if err := json.Unmarshal([]byte(lines[1]), &v); err != nil || v.Client != "" || v.Result != "MISS" {
		t.Errorf("line %q: %v %+v", lines[1], err, v)
	}
}

func TestFullQueueDropsAndCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(reg, io.Discard, Options{Queue: 2})
	for range 5 { // nobody drains: 2 queued, 3 dropped
		r.Record(Entry{Proto: "http", Result: steer.ResultCZ, Region: "hefei"})
	}
	if got := testutil.ToFloat64(r.dropped); got != 3 {
		t.Fatalf("dropped = %v, want 3", got)
	}
	if got := testutil.ToFloat64(r.requests.WithLabelValues("http", "hefei", "CZ")); got != 5 {
		t.Fatalf("requests_total = %v, want 5 (metrics count every decision)", got)
	}
}

func TestSamplingKeepsErrors(t *testing.T) {
	r := New(prometheus.NewRegistry(), io.Discard, Options{Queue: 100, SampleEvery: 10})
	for range 20 {
		r.Record(Entry{Result: steer.ResultCZ})
	}
	for range 3 {
		r.Record(Entry{Result: steer.ResultError})
	}
	if got := r.q.queued(); got != 2+3 {
		t.Fatalf("%d lines queued, want 2 sampled + 3 errors", got)
	}
}

// TestErrorLinesRateLimited: a flood of MISS and ERROR decisions (spoofed
// UDP queries) is logged at most max_errors_per_second, the rest counted by
// result; sampled normal lines and the request metrics are unaffected, and
// the budget refills with time.
func TestErrorLinesRateLimited(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(reg, io.Discard, Options{Queue: 10000, MaxErrorsPerSecond: 50})
	if problems := obs.LintMetrics(reg); len(problems) > 0 {
		t.Fatalf("metric lint: %v", problems)
	}
	at := time.Unix(1000, 0)
	for range 150 {
		r.Record(Entry{Time: at, Proto: "dns", Result: steer.ResultMiss})
	}
	for range 50 {
		r.Record(Entry{Time: at, Proto: "dns", Result: steer.ResultError})
	}
	for range 100 {
		r.Record(Entry{Time: at, Proto: "http", Result: steer.ResultCZ, Region: "hefei"})
	}
	if got := r.q.queued(); got != 50+100 {
		t.Fatalf("%d lines queued, want 50 errors (the burst) + 100 normal", got)
	}
	limited := func(result string) float64 {
		return testutil.ToFloat64(r.limited.WithLabelValues(result))
	}
	if m, e := limited("MISS"), limited("ERROR"); m != 100 || e != 50 {
		t.Fatalf("rate-limited MISS %v ERROR %v, want 100 and 50", m, e)
	}
	if got := testutil.ToFloat64(r.requests.WithLabelValues("dns", "none", "MISS")); got != 150 {
		t.Fatalf("requests_total MISS = %v, want 150 (metrics count every decision)", got)
	}
	if got := testutil.ToFloat64(r.dropped); got != 0 {
		t.Fatalf("queue drops = %v, want 0: rate limiting is counted apart", got)
	}
	// 100 ms later: 5 more tokens (50/s).
	for range 20 {
		r.Record(Entry{Time: at.Add(100 * time.Millisecond), Proto: "dns", Result: steer.ResultMiss})
	}
	if got := r.q.queued(); got != 150+5 {
		t.Fatalf("%d lines queued after 100ms, want 155", got)
	}
	// A quiet second refills the whole burst, no more.
	for range 60 {
		r.Record(Entry{Time: at.Add(5 * time.Second), Proto: "dns", Result: steer.ResultError})
	}
	if got := r.q.queued(); got != 155+50 {
		t.Fatalf("%d lines queued after a quiet spell, want 205", got)
	}
}

func TestLimiterDoesNotAllocate(t *testing.T) {
	l := newLimiter(50)
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() { now += 1e6; l.allow(now) }); n != 0 {
		t.Fatalf("allow allocates %v times", n)
	}
}

// TestFamilies: a line says the family asked and the family of the target
// (only when there is one, so IPv4-only lines keep their shape), and
// anysched_answers_by_family_total counts answers by both.
func TestFamilies(t *testing.T) {
	var buf bytes.Buffer
	reg := prometheus.NewRegistry()
	r := New(reg, &buf, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	r.Record(Entry{Time: time.Unix(1, 0), Proto: "http", Client: netip.MustParseAddr("2001:db8::7"), Result: steer.ResultCZ, Target: "10.0.0.1:80", Status: 302, Family: steer.FamilyV6, TargetFamily: steer.FamilyV4})
	r.Record(Entry{Time: time.Unix(2, 0), Proto: "dns", Client: netip.MustParseAddr("2001:db8::7"), Result: steer.ResultCZ, Target: "2001:db8::1", Family: steer.FamilyV6, TargetFamily: steer.FamilyV6})
	r.Record(Entry{Time: time.Unix(3, 0), Proto: "dns", Result: steer.ResultCZ, Target: "10.0.0.1"})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i, want := range []string{`,"family":"ipv6","target_family":"ipv4"}`, `,"family":"ipv6","target_family":"ipv6"}`, `,"latency":0}`} {
		if !strings.HasSuffix(lines[i], want) {
			t.Errorf("line %d %q does not end %q", i, lines[i], want)
		}
	}
	// Every series exists from the start (2 protocols, 3 families asked, 2
	// given); byFamily[proto][asked][given-1] are they.
	if n := testutil.CollectAndCount(reg, "anysched_answers_by_family_total"); n != 12 {
		t.Errorf("%d series, want 12", n)
	}
	for _, c := range []struct {
		proto, asked, given int
		want                float64
	}{{0, 2, 0, 1}, {1, 2, 1, 1}, {0, 2, 1, 0}, {1, 0, 0, 0}} {
		if got := testutil.ToFloat64(r.byFamily[c.proto][c.asked][c.given]); got != c.want {
			t.Errorf("byFamily[%d][%d][%d] = %v, want %v", c.proto, c.asked, c.given, got, c.want)
		}
	}
}
