package steer_test

import (
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// Three cities on a line west to east; north has no servers of its own.
const doc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: west, location: {lat: 31.0, lon: 116.0}}
  - {name: mid, location: {lat: 31.0, lon: 117.0}, fallback: [west]}
  - {name: east, location: {lat: 31.0, lon: 118.0}, fallback: [mid, west]}
  - {name: north, location: {lat: 33.0, lon: 117.0}, fallback: [east]}
nodes:
  - name: west-1
    region: west
    location: {lat: 31.0, lon: 116.0}
    servers:
      - {name: west-1-a, address: "10.0.1.1:8080"}
  - name: mid-near
    region: mid
    location: {lat: 31.0, lon: 116.9}
    servers:
      - {name: mid-near-a, address: "10.0.2.1:8080", weight: 300}
      - {name: mid-near-b, address: "10.0.2.2:8080", weight: 100}
  - name: mid-far
    region: mid
    location: {lat: 31.0, lon: 117.3}
    servers:
      - {name: mid-far-a, address: "10.0.2.3:8080"}
  - name: east-1
    region: east
    location: {lat: 31.0, lon: 118.0}
    servers:
      - {name: east-1-a, address: "[2001:db8::1]:8080"}
      - {name: east-1-b, address: "10.0.3.2:8080", location: {lat: 31.5, lon: 118.0}}
zones:
  - {name: mid-west-side, region: mid, networks: [100.64.2.0/24], location: {lat: 31.0, lon: 116.8}}
  - {name: mid-east-side, region: mid, networks: [100.64.3.0/24, "2001:db8:3::/48"], location: {lat: 31.0, lon: 117.4}}
  - {name: east-z, region: east, networks: [100.64.4.0/24]}
  - {name: north-z, region: north, networks: [100.64.5.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8?r={region}&h={host}&p={port}&s={service}&path={path}"
    bitrates_kbps: [730, 2000, 6000]
`

func snapshot(t testing.TB) *topology.Snapshot {
	t.Helper()
	return fixture.CompileYAML(t, doc, 1)
}

func down(s *topology.Snapshot, names ...string) func(int32) bool {
	return func(i int32) bool {
		for _, n := range names {
			if s.Servers[i].Name == n {
				return false
			}
		}
		return true
	}
}

func TestDecide(t *testing.T) {
	s := snapshot(t)
	tests := []struct {
		name       string
		client     string
		host       string
		defRegion  string
		down       []string
		wantResult steer.Result
		wantServer string // "" for none
		wantZone   string
		wantRegion string
	}{
		{"zone hit, nearest node", "100.64.2.7", "live.iptv.example", "", nil, steer.ResultCZ, "mid-near-?", "mid-west-side", "mid"},
		{"zone hit, other side of the city", "100.64.3.7", "live.iptv.example", "", nil, steer.ResultCZ, "mid-far-a", "mid-east-side", "mid"},
		{"nearest node down, next node", "100.64.2.7", "live.iptv.example", "", []string{"mid-near-a", "mid-near-b"}, steer.ResultCZ, "mid-far-a", "mid-west-side", "mid"},
		{"one of two equal servers down", "100.64.2.7", "live.iptv.example", "", []string{"mid-near-a"}, steer.ResultCZ, "mid-near-b", "mid-west-side", "mid"},
		{"region empty: first fallback, nearest node there", "100.64.4.9", "live.iptv.example", "", []string{"east-1-a", "east-1-b"}, steer.ResultFallback, "mid-far-a", "east-z", "mid"},
		{"fallbacks in order", "100.64.4.9", "live.iptv.example", "", []string{"east-1-a", "east-1-b", "mid-near-a", "mid-near-b", "mid-far-a"}, steer.ResultFallback, "west-1-a", "east-z", "west"},
		{"region without servers uses its fallback", "100.64.5.1", "live.iptv.example", "", nil, steer.ResultFallback, "east-1-?", "north-z", "east"},
		{"fallbacks exhausted: nearest region", "100.64.5.1", "live.iptv.example", "", []string{"east-1-a", "east-1-b"}, steer.ResultFallback, "mid-near-?", "north-z", "mid"},
		{"nothing available", "100.64.2.7", "live.iptv.example", "", []string{"west-1-a", "mid-near-a", "mid-near-b", "mid-far-a", "east-1-a", "east-1-b"}, steer.ResultError, "", "mid-west-side", ""},
		{"no zone: default region", "192.0.2.1", "live.iptv.example", "west", nil, steer.ResultDefault, "west-1-a", "", "west"},
		{"no zone, no default: first region", "192.0.2.1", "live.iptv.example", "", nil, steer.ResultDefault, "west-1-a", "", "west"},
		{"IPv6 client in a zone", "2001:db8:3::42", "live.iptv.example", "", nil, steer.ResultCZ, "mid-far-a", "mid-east-side", "mid"},
		{"IPv4-mapped client", "::ffff:100.64.3.7", "live.iptv.example", "", nil, steer.ResultCZ, "mid-far-a", "mid-east-side", "mid"},
		{"host with port and case", "100.64.3.7", "LIVE.iptv.example:80", "", nil, steer.ResultCZ, "mid-far-a", "mid-east-side", "mid"},
		{"host with trailing dot", "100.64.3.7", "live.iptv.example.", "", nil, steer.ResultCZ, "mid-far-a", "mid-east-side", "mid"},
		{"unknown host", "100.64.3.7", "vod.iptv.example", "", nil, steer.ResultMiss, "", "", ""},
		{"server-level location: nearest server wins", "100.64.4.9", "live.iptv.example", "", nil, steer.ResultCZ, "east-1-a", "east-z", "east"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := steer.New(s, steer.Options{DefaultRegion: tt.defRegion, Available: down(s, tt.down...)})
			d := e.Decide(steer.Request{Client: netip.MustParseAddr(tt.client), Host: tt.host})
			n := e.Names(&d)
			if d.Result != tt.wantResult {
				t.Fatalf("result %s, want %s (decision %+v)", d.Result, tt.wantResult, n)
			}
			if !match(n.Server, tt.wantServer) || n.Zone != tt.wantZone || n.Region != tt.wantRegion {
				t.Fatalf("got server %q zone %q region %q, want %q %q %q", n.Server, n.Zone, n.Region, tt.wantServer, tt.wantZone, tt.wantRegion)
			}
			if d.Server >= 0 && !e.Available(d.Server) {
				t.Fatalf("chose unavailable server %s", n.Server)
			}
			if (d.Result == steer.ResultError || d.Result == steer.ResultMiss) && d.Reason == "" {
				t.Fatal("no reason given")
			}
			if d.Service >= 0 && d.BitrateKbps != 6000 {
				t.Fatalf("bitrate %d, want the top of the ladder", d.BitrateKbps)
			}
		})
	}
}

// match treats a trailing ? as "any one character" (for weighted ties).
func match(got, want string) bool {
	if strings.HasSuffix(want, "?") {
		return len(got) == len(want) && strings.HasPrefix(got, want[:len(want)-1])
	}
	return got == want
}

// TestTiesFollowWeights: equally near servers share clients 3:1 by weight,
// and a client keeps its server while the set is unchanged.
func TestTiesFollowWeights(t *testing.T) {
	s := snapshot(t)
	e := steer.New(s, steer.Options{})
	counts := map[string]int{}
	for i := range 256 { // every client of the zone's /24
		d := e.Decide(steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 2, byte(i)}), Host: "live.iptv.example"})
		counts[s.Servers[d.Server].Name]++
	}
	total := counts["mid-near-a"] + counts["mid-near-b"]
	share := float64(counts["mid-near-a"]) / float64(total)
	if math.Abs(share-0.75) > 0.1 {
		t.Fatalf("weight-300 server got %.2f of clients, want about 0.75 (%v)", share, counts)
	}
	// Another engine (another scheduler, or a rebuild after any change)
	// gives every client the same server.
	other := steer.New(snapshot(t), steer.Options{})
	for i := range 256 {
		r := steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 2, byte(i)}), Host: "live.iptv.example"}
		if e.Decide(r).Server != other.Decide(r).Server {
			t.Fatalf("client %s: two engines over the same topology disagree", r.Client)
		}
	}
	a := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.2.99"), Host: "live.iptv.example"})
	for range 10 {
		if b := e.Decide(steer.Request{Client: netip.MustParseAddr("100.64.2.99"), Host: "live.iptv.example"}); b.Server != a.Server {
			t.Fatal("the same client moved between equal servers")
		}
	}
}

func TestAppendLocation(t *testing.T) {
	s := snapshot(t)
	e := steer.New(s, steer.Options{})
	for _, tt := range []struct{ client, path, want string }{
		{"100.64.3.7", "/cctv1/index.m3u8", "http://10.0.2.3:8080/live/cctv1/6000/index.m3u8?r=mid&h=10.0.2.3&p=8080&s=live&path=cctv1/index.m3u8"},
		{"100.64.4.7", "/", "http://[2001:db8::1]:8080/live//6000/index.m3u8?r=east&h=[2001:db8::1]&p=8080&s=live&path="},
	} {
		d := e.Decide(steer.Request{Client: netip.MustParseAddr(tt.client), Host: "live.iptv.example"})
		if got := string(e.AppendLocation(nil, &d, tt.path, "")); got != tt.want {
			t.Errorf("client %s path %s:\n got %s\nwant %s", tt.client, tt.path, got, tt.want)
		}
	}
}

func TestDecideDoesNotAllocate(t *testing.T) {
	s := snapshot(t)
	e := steer.New(s, steer.Options{Available: down(s, "east-1-a", "east-1-b")})
	reqs := []steer.Request{
		{Client: netip.MustParseAddr("100.64.2.7"), Host: "live.iptv.example"},
		{Client: netip.MustParseAddr("100.64.4.7"), Host: "LIVE.iptv.example"}, // fallback path
		{Client: netip.MustParseAddr("192.0.2.1"), Host: "live.iptv.example:80"},
	}
	buf := make([]byte, 0, 256)
	for _, r := range reqs {
		allocs := testing.AllocsPerRun(100, func() {
			d := e.Decide(r)
			buf = e.AppendLocation(buf[:0], &d, "/cctv1/index.m3u8", "token=abc")
		})
		// ServiceByHost lowercases a mixed-case host (1 allocation); everything else is free.
		limit := 0.0
		if r.Host != strings.ToLower(r.Host) {
			limit = 1
		}
		if allocs > limit {
			t.Errorf("%+v: %v allocations per decision, want <= %v", r, allocs, limit)
		}
	}
}

func TestExplain(t *testing.T) {
	s := snapshot(t)
	e := steer.New(s, steer.Options{Available: down(s, "east-1-a", "east-1-b", "mid-near-a")})
	x := e.Explain(steer.Request{Client: netip.MustParseAddr("100.64.4.7"), Host: "live.iptv.example"})
	if x.Result != "FALLBACK" || x.Names.Region != "mid" {
		t.Fatalf("explain %+v", x)
	}
	why := map[string]string{}
	for _, c := range x.Candidates {
		why[c.Server] = c.Why
	}
	want := map[string]string{
		"east-1-a":   "unavailable",
		"east-1-b":   "unavailable",
		"mid-near-a": "unavailable",
		"mid-near-b": "its node is not the nearest with an available server",
		"mid-far-a":  "chosen: nearest available",
	}
	for srv, w := range want {
		if why[srv] != w {
			t.Errorf("%s: why %q, want %q", srv, why[srv], w)
		}
	}
	if !x.Candidates[0].Chosen {
		t.Error("the chosen candidate is not listed first")
	}
	joined := strings.Join(x.Steps, "\n")
	for _, step := range []string{"coverage zone east-z", "region east has no available server", "chose node mid-far in region mid"} {
		if !strings.Contains(joined, step) {
			t.Errorf("steps lack %q:\n%s", step, joined)
		}
	}
	if miss := e.Explain(steer.Request{Client: netip.MustParseAddr("100.64.4.7"), Host: "nope.example"}); miss.Result != "MISS" {
		t.Errorf("unknown host explained as %s", miss.Result)
	}
}
