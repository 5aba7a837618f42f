package stbload

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
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
	rep, err := Run(context.Background(), Options{
		Cities: []City{{Name: "hefei", Scheduler: strings.TrimPrefix(srv.URL, "http://"), Networks: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/24")}}},
		Host:   "live.iptv.example", Requests: 500, Concurrency: 4, Channels: 50, Progress: &progress, Seed: 7,
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
	if !strings.Contains(progress.String(), "500 requests") {
		t.Fatalf("no final progress line: %q", progress.String())
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "hefei") {
		t.Fatalf("table: %v\n%s", err, table.String())
	}
}
