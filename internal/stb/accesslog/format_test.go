package accesslog

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/stb/steer"
)

// TestTimestamp: the cached-second encoder writes what tsLayout does,
// across second, day and year boundaries, before 1970 and for the zero time.
func TestTimestamp(t *testing.T) {
	var c encoder
	for _, tm := range []time.Time{
		time.Unix(1, 5000), time.Unix(1, 999_999_999), time.Unix(2, 0),
		time.Date(2025, 12, 31, 23, 59, 59, 999_999_000, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(2026, 3, 1, 8, 0, 0, 123_456_789, time.FixedZone("CST", 8*3600)), // not UTC: converted
		time.Unix(-1, 500_000), {}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Now(),
	} {
		got := string(c.appendTime(nil, tm))
		if want := tm.UTC().Format(tsLayout); got != want {
			t.Errorf("%v: got %s, want %s", tm, got, want)
		}
	}
}

func FuzzTimestamp(f *testing.F) {
	f.Add(int64(1_800_000_000), int64(123_456_789), int64(1))
	f.Add(int64(-62135596800), int64(0), int64(999_999_999))
	f.Fuzz(func(t *testing.T, sec, nsec, step int64) {
		var c encoder
		for _, tm := range []time.Time{time.Unix(sec, nsec), time.Unix(sec, nsec+step)} {
			if got, want := string(c.appendTime(nil, tm)), tm.UTC().Format(tsLayout); got != want {
				t.Fatalf("%d.%d: got %s, want %s", tm.Unix(), tm.Nanosecond(), got, want)
			}
		}
	})
}

// FuzzLine: whatever the strings, a line is one JSON object, on one line,
// whose fields decode to the entry's (invalid UTF-8 replaced as
// encoding/json does).
func FuzzLine(f *testing.F) {
	f.Add("live.iptv.example", "/ch1/\"q\"\\\n\xff/é", "hefei", "10.0.0.1:80", []byte{100, 64, 0, 7}, 302)
	f.Add("", "", "", "", []byte(nil), 0)
	f.Add("\xa3\x9b", "", "", "", []byte(nil), 0) // two invalid bytes: two replacement characters
	f.Fuzz(func(t *testing.T, host, path, region, target string, ip []byte, status int) {
		client, _ := netip.AddrFromSlice(ip)
		e := Entry{Time: time.Unix(1_800_000_000, 42_000), Proto: "dns", Client: client, Host: host, Path: path,
			Result: steer.ResultFallback, Zone: host, ClientRegion: region, Region: region, Server: path,
			Target: target, Status: status, Latency: 1234}
		var c encoder
		line := c.appendLine(nil, &e)
		if strings.Count(string(line), "\n") != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("not one line: %q", line)
		}
		var v struct {
			Host, Path, Region, Target, Client string
			Status                             int
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		valid := func(s string) string { // what encoding/json makes of s: invalid bytes replaced one by one
			b, _ := json.Marshal(s)
			var v string
			_ = json.Unmarshal(b, &v)
			return v
		}
		wantClient := ""
		if client.IsValid() {
			wantClient = client.String()
		}
		if v.Host != valid(host) || v.Path != valid(path) || v.Region != valid(region) || v.Target != valid(target) || v.Client != wantClient || v.Status != status {
			t.Fatalf("decoded %+v from %q", v, line)
		}
	})
}

// TestLineKeys: the keys and their order are the documented format.
func TestLineKeys(t *testing.T) {
	var c encoder
	line := string(c.appendLine(nil, &Entry{}))
	want := []string{"ts", "proto", "client", "host", "path", "result", "zone", "client_region", "region", "server", "target", "status", "latency"}
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q: %v %v", line, tok, err)
	}
	var got []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, k.(string))
		var skip any
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("keys %v, want %v", got, want)
	}
}

// FuzzNeedsEscape: the eight-bytes-at-a-time scan agrees with the obvious one.
func FuzzNeedsEscape(f *testing.F) {
	for _, s := range []string{"", "live.iptv.example", "/ch1/index.m3u8\"", "0123456\\89", "abcdefgh\x1f", "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", "héllo-world", " !#$%&'()*+,-./[]^_`{|}~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := false
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				want = true
			}
		}
		if got := needsEscape(s); got != want {
			t.Fatalf("needsEscape(%q) = %v, want %v", s, got, want)
		}
	})
}
