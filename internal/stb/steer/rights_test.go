package steer_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// rightsDoc is poolDoc with a second hefei zone and rights on live: the
// derby is blacked out in hefei for its window, except in one network;
// sports channels in wuhu's zone; every channel in one network.
var rightsDoc = strings.NewReplacer(
	"  - {name: wuhu-z,", "  - {name: hefei-hotel, region: hefei, networks: [100.64.9.0/24]}\n  - {name: wuhu-z,",
	"    overflow: {rps_per_server: 100}\n", `    slate: {url: "http://slate.example/{region}/{channel}.m3u8?{query}", addresses: [192.0.2.50]}
    rights:
      - {name: hotel-ok, channels: [derby], networks: [100.64.1.128/25], action: allow}
      - name: derby
        channels: [derby]
        regions: [hefei]
        action: blackout
        from: "2026-12-06T18:00:00Z"
        until: "2026-12-06T21:00:00Z"
      - {channels: ["sport*"], zones: [wuhu-z], action: blackout, slate: {url: "http://sports-slate.example/{path}"}}
      - {networks: [100.64.2.64/26], action: blackout}
`).Replace(poolDoc)

func TestRights(t *testing.T) {
	s := fixture.CompileYAML(t, rightsDoc, 1)
	eng := steer.New(s, steer.Options{})
	during := time.Date(2026, 12, 6, 19, 0, 0, 0, time.UTC)
	before := time.Date(2026, 12, 6, 17, 59, 59, 0, time.UTC)
	until := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		client string
		path   string // "" : a DNS query
		now    time.Time
		want   steer.Result
		rule   int32
		loc    string // the slate's URL, or the serving node
	}{
		{"derby in hefei during the window", "100.64.1.7", "/derby/index.m3u8?a=1", during, steer.ResultBlackout, 1, "http://slate.example/hefei/derby.m3u8?a=1"},
		{"derby in hefei's other zone", "100.64.9.7", "/derby/index.m3u8", during, steer.ResultBlackout, 1, "http://slate.example/hefei/derby.m3u8?"},
		{"the allowed network: first match wins", "100.64.1.200", "/derby/index.m3u8", during, steer.ResultCZ, 0, "hefei-1"},
		{"before the window", "100.64.1.7", "/derby/index.m3u8", before, steer.ResultCZ, -1, "hefei-1"},
		{"until is exclusive", "100.64.1.7", "/derby/index.m3u8", until, steer.ResultCZ, -1, "hefei-1"},
		{"derby in wuhu", "100.64.2.7", "/derby/index.m3u8", during, steer.ResultCZ, -1, "wuhu-1"},
		{"another channel in hefei", "100.64.1.7", "/news/index.m3u8", during, steer.ResultCZ, -1, "hefei-1"},
		{"a sports prefix in wuhu's zone: the rule's slate", "100.64.2.7", "/sport5/x.m3u8", during, steer.ResultBlackout, 2, "http://sports-slate.example/sport5/x.m3u8"},
		{"a sports prefix in hefei", "100.64.1.7", "/sport5/x.m3u8", during, steer.ResultCZ, -1, "hefei-1"},
		{"every channel in a network", "100.64.2.70", "/news/index.m3u8", during, steer.ResultBlackout, 3, "http://slate.example/wuhu/news.m3u8?"},
		{"DNS: channel rules do not apply", "100.64.1.7", "", during, steer.ResultCZ, -1, ""},
		{"DNS: an every-channel rule does", "100.64.2.70", "", during, steer.ResultBlackout, 3, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, query, _ := strings.Cut(tc.path, "?")
			req := steer.Request{Client: netip.MustParseAddr(tc.client), Host: "live.example", Path: path, Query: query, Now: tc.now}
			d := eng.Decide(req)
			if d.Result != tc.want || d.Rule != tc.rule {
				t.Fatalf("%v rule %d, want %v rule %d", d.Result, d.Rule, tc.want, tc.rule)
			}
			if tc.loc != "" && !strings.HasPrefix(tc.loc, "http") { // a node's name
				if d.Node < 0 || s.Nodes[d.Node].Name != tc.loc {
					t.Errorf("served by node %d, want %s", d.Node, tc.loc)
				}
			} else if tc.path != "" {
				if got := string(eng.AppendLocation(nil, &d, path, query)); got != tc.loc {
					t.Errorf("location %q, want %q", got, tc.loc)
				}
			}
			if tc.want == steer.ResultBlackout && (d.Server >= 0 || d.Result.Served()) {
				t.Errorf("a blackout names server %d", d.Server)
			}
			x := eng.Explain(req)
			if x.Result != tc.want.String() {
				t.Errorf("explain says %s", x.Result)
			}
			if tc.rule >= 0 {
				label := s.Services[0].Rights.Rules[tc.rule].Label
				if x.Rule != label || !slices.ContainsFunc(x.Steps, func(st string) bool { return strings.HasPrefix(st, "rights: rule "+label+" matches first") }) {
					t.Errorf("explain does not name rule %q: %q %q", label, x.Rule, x.Steps)
				}
			}
		})
	}
}

// TestRightsClock: a request without a time is judged at the clock's.
func TestRightsClock(t *testing.T) {
	doc := strings.Replace(rightsDoc, `from: "2026-12-06T18:00:00Z"`, `from: "2000-01-01T00:00:00Z"`, 1)
	doc = strings.Replace(doc, `until: "2026-12-06T21:00:00Z"`, `until: "2199-01-01T00:00:00Z"`, 1)
	eng := steer.New(fixture.CompileYAML(t, doc, 1), steer.Options{})
	d := eng.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.example", Path: "/derby/i.m3u8"})
	if d.Result != steer.ResultBlackout {
		t.Fatalf("%v, want BLACKOUT", d.Result)
	}
}

// bypassDoc is poolDoc's live with a bypass.
func bypassDoc(t *testing.T) *topology.Snapshot {
	doc := strings.Replace(poolDoc, "    overflow: {rps_per_server: 100}\n",
		"    overflow: {rps_per_server: 100}\n    bypass: {url_template: \"https://cdn.example/{region}/{path}?{query}\", cname: live.national-cdn.example}\n", 1)
	return fixture.CompileYAML(t, doc, 1)
}

func TestBypass(t *testing.T) {
	s := bypassDoc(t)
	live, _ := s.Service("live")
	h1, h2, w1 := node(t, s, "hefei-1"), node(t, s, "hefei-2"), node(t, s, "wuhu-1")
	req := steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.example", Path: "/cctv1/i.m3u8", Query: "b=1"}
	tests := []struct {
		name  string
		over  overState
		avail func(int32) bool
		want  steer.Result
		node  string
	}{
		{"nothing over", overState{}, nil, steer.ResultCZ, "hefei-1"},
		{"the city over: the next region, no bypass", overState{{live, h1}: true, {live, h2}: true}, nil, steer.ResultOverflow, "wuhu-1"},
		{"the province over: bypass", overState{{live, h1}: true, {live, h2}: true, {live, w1}: true}, nil, steer.ResultBypass, ""},
		{"the city down, the rest over: bypass", overState{{live, w1}: true},
			func(i int32) bool { return s.Servers[i].Region != 0 }, steer.ResultBypass, ""},
		{"nothing available: no bypass", overState{}, func(int32) bool { return false }, steer.ResultError, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cnt := &counter{}
			eng := steer.New(s, steer.Options{Overflow: tc.over, Count: cnt, Available: tc.avail})
			d := eng.Decide(req)
			got := ""
			if d.Node >= 0 {
				got = s.Nodes[d.Node].Name
			}
			if d.Result != tc.want || got != tc.node {
				t.Fatalf("%v at %q, want %v at %q", d.Result, got, tc.want, tc.node)
			}
			if tc.want != steer.ResultBypass {
				return
			}
			if loc := string(eng.AppendLocation(nil, &d, req.Path, req.Query)); loc != "https://cdn.example/hefei/cctv1/i.m3u8?b=1" {
				t.Errorf("location %q", loc)
			}
			// Demand counts where the STB would have gone: hefei-1, or
			// with hefei down the fallback's wuhu-1.
			want := h1
			if tc.avail != nil {
				want = w1
			}
			if cnt.n[[2]int32{live, want}] != 1 {
				t.Errorf("demand not counted at the preferred node: %v", cnt.n)
			}
			x := eng.Explain(req)
			if x.Result != "BYPASS" || !slices.ContainsFunc(x.Steps, func(st string) bool { return strings.Contains(st, "bypass takes the client") }) {
				t.Errorf("explain: %s %q", x.Result, x.Steps)
			}
		})
	}
	// Without overflow set up in the engine there is no bypass.
	if d := steer.New(s, steer.Options{}).Decide(req); d.Result != steer.ResultCZ {
		t.Errorf("without an overflow controller: %v", d.Result)
	}
}

// BenchmarkDecideRights: Decide for a service with rights rules (a window,
// networks, zones, a channel) and a request path to take the channel from,
// the clients of two regions and a zone blacked out. Target: within 1.5x
// of BenchmarkDecide, 0 allocations.
func BenchmarkDecideRights(b *testing.B) {
	doc := scaleDoc(b)
	doc.Services[0].Slate = &topology.Slate{URL: "http://slate.example/{channel}"}
	doc.Services[0].Rights = []topology.Rule{
		{Channels: []string{"sport*"}, Networks: []string{"10.0.0.0/8"}, Action: topology.ActionAllow},
		{Channels: []string{"cctv1"}, Regions: []string{doc.Regions[0].Name, doc.Regions[1].Name}, Action: topology.ActionBlackout,
			From: "2026-01-01T00:00:00Z", Until: "2199-01-01T00:00:00Z"},
		{Zones: []string{doc.Zones[1].Name}, Action: topology.ActionBlackout},
	}
	s, err := topology.Compile(doc, 2)
	if err != nil {
		b.Fatal(err)
	}
	e := steer.New(s, steer.Options{DefaultRegion: s.Regions[0].Name})
	cs := clients(s, 4096)
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		d := e.Decide(steer.Request{Client: cs[i&4095], Host: "live.iptv.example", Path: "/cctv1/index.m3u8", Now: now})
		if d.Server < 0 && d.Result != steer.ResultBlackout {
			b.Fatal("no server")
		}
		i++
	}
}
