package steer_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// channelDoc has one service per way of naming the channel, all selecting
// by chash in a node of four servers.
const channelDoc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: west, location: {lat: 31.0, lon: 116.0}}
nodes:
  - name: west-1
    region: west
    location: {lat: 31.0, lon: 116.0}
    servers:
      - {name: west-1-a, address: "10.0.1.1:8080"}
      - {name: west-1-b, address: "10.0.1.2:8080"}
      - {name: west-1-c, address: "10.0.1.3:8080"}
      - {name: west-1-d, address: "10.0.1.4:8080"}
zones:
  - {name: west-z, region: west, networks: [100.64.1.0/24]}
services:
  - name: plain
    hostnames: [plain.example]
    url_template: "http://{server}/c/{channel}/i.m3u8"
    bitrates_kbps: [2000]
    selection: chash
  - name: pltv
    hostnames: [pltv.example]
    url_template: "http://{server}/c/{channel}/i.m3u8"
    bitrates_kbps: [2000]
    selection: chash
    channel: {path: '^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/'}
  - name: live
    hostnames: [live.example]
    url_template: "http://{server}/c/{channel}/i.m3u8"
    bitrates_kbps: [2000]
    selection: chash
    channel: {path: '^/live/(?P<channel>[^/]+)/', query: [bitrate]}
  - name: byquery
    hostnames: [q.example]
    url_template: "http://{server}/c/{channel}/i.m3u8"
    bitrates_kbps: [2000]
    selection: chash
    channel: {query: [channel, bitrate]}
  - name: rx
    hostnames: [rx.example]
    url_template: "http://{server}/c/{channel}/i.m3u8"
    bitrates_kbps: [2000]
    selection: chash
    channel: {path: '^/(live|tv)/(?P<channel>[^/]+)/'}
`

var stb = netip.MustParseAddr("100.64.1.7")

func channelEngine(t testing.TB) *steer.Engine {
	t.Helper()
	s := fixture.CompileYAML(t, channelDoc, 1)
	cfg := balance.DefaultConfig()
	cfg.CHash.Epsilon = 100 // nothing spills: the key alone picks
	e, err := steer.Build(s, steer.Inputs{Balance: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestChannelPatternRequests(t *testing.T) {
	e := channelEngine(t)
	for _, c := range []struct {
		name, host, path, query string
		channel, key            string
		matched                 bool
	}{
		{"PLTV", "pltv.example", "/PLTV/88888888/224/3221225618/index.m3u8", "token=t", "3221225618", "3221225618", true},
		{"PLTV segment", "pltv.example", "/PLTV/88888888/224/3221225618/10.ts", "", "3221225618", "3221225618", true},
		{"PLTV no match: whole path", "pltv.example", "/crossdomain.xml", "", "crossdomain.xml", "crossdomain.xml", false},
		{"PLTV too few segments", "pltv.example", "/PLTV/88888888/3221225618.m3u8", "", "PLTV", "PLTV/88888888/3221225618.m3u8", false},
		{"live", "live.example", "/live/CCTV1/1.m3u8", "token=t&bitrate=2000", "CCTV1", "CCTV1?bitrate=2000", true},
		{"live other file", "live.example", "/live/CCTV1/seg-7.ts", "", "CCTV1", "CCTV1", true},
		{"live no match keeps the parameters", "live.example", "/vod/film/1.mp4", "bitrate=2000", "vod", "vod/film/1.mp4?bitrate=2000", false},
		{"query", "q.example", "/play.m3u8", "token=t&bitrate=2000&channel=CCTV1", "CCTV1", "CCTV1?channel=CCTV1&bitrate=2000", true},
		{"query absent", "q.example", "/play.m3u8", "bitrate=2000", "play.m3u8", "play.m3u8?bitrate=2000", false},
		{"query dot segment refused", "q.example", "/play.m3u8", "channel=..", "play.m3u8", "play.m3u8?channel=..", false},
		{"query encoded slash refused", "q.example", "/play.m3u8", "channel=a%2Fb", "play.m3u8", "play.m3u8?channel=a%2Fb", false},
		{"query empty refused", "q.example", "/play.m3u8", "channel=", "play.m3u8", "play.m3u8?channel=", false},
		{"regexp", "rx.example", "/tv/CCTV5/1.m3u8", "", "CCTV5", "CCTV5", true},
		{"no pattern: as before", "plain.example", "/live/ch1/index.m3u8", "x=1", "live", "live", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := e.Decide(steer.Request{Client: stb, Host: c.host, Path: c.path, Query: c.query})
			if d.Server < 0 {
				t.Fatalf("no server: %+v", d)
			}
			if got := e.Channel(d.Service, c.path, c.query); got != c.channel {
				t.Errorf("channel %q, want %q", got, c.channel)
			}
			if got := e.ContentKey(d.Service, c.path, c.query); got != c.key {
				t.Errorf("content key %q, want %q", got, c.key)
			}
			wantLoc := "http://" + e.Snapshot().Servers[d.Server].AddrString + "/c/" + c.channel + "/i.m3u8"
			if got := string(e.AppendLocation(nil, &d, c.path, c.query)); got != wantLoc {
				t.Errorf("location %s, want %s", got, wantLoc)
			}
			x := e.Explain(steer.Request{Client: stb, Host: c.host, Path: c.path, Query: c.query})
			if x.Channel == nil || x.Channel.Matched != c.matched || x.Channel.Channel != c.channel || x.Channel.Key != c.key {
				t.Errorf("explained channel %+v", x.Channel)
			}
			if x.Decision.Server != d.Server {
				t.Errorf("explain picked %d, decide %d", x.Decision.Server, d.Server)
			}
		})
	}
}

// TestChannelPatternKeepsAChannelTogether: with a pattern, every request
// of one channel (playlists and segments under any path prefix) goes to one
// server, and channels spread over the node; keyed by the first segment, as
// without a pattern, every PLTV channel went to one server.
func TestChannelPatternKeepsAChannelTogether(t *testing.T) {
	e := channelEngine(t)
	servers := map[int32]bool{}
	firstSegment := map[int32]bool{}
	for ch := range 40 {
		id := fmt.Sprint(3221225600 + ch)
		one := map[int32]bool{}
		for i, file := range []string{"index.m3u8", "1.ts", "2.ts"} {
			path := fmt.Sprintf("/PLTV/8888888%d/22%d/%s/%s", i, i, id, file)
			one[e.Decide(steer.Request{Client: stb, Host: "pltv.example", Path: path}).Server] = true
			firstSegment[e.Decide(steer.Request{Client: stb, Host: "plain.example", Path: path}).Server] = true
		}
		if len(one) != 1 {
			t.Errorf("channel %s on %d servers", id, len(one))
		}
		for s := range one {
			servers[s] = true
		}
	}
	if len(servers) < 3 {
		t.Errorf("40 channels on %d of 4 servers", len(servers))
	}
	if len(firstSegment) != 1 {
		t.Errorf("keyed by the first segment, PLTV paths used %d servers, want 1", len(firstSegment))
	}
}

func TestExplainShowsChannel(t *testing.T) {
	e := channelEngine(t)
	for _, c := range []struct{ host, path, query, step string }{
		{"live.example", "/live/CCTV1/1.m3u8", "bitrate=2000",
			`channel "CCTV1" from path pattern "^/live/(?P<channel>[^/]+)/" (segments matcher); content key "CCTV1?bitrate=2000"`},
		{"live.example", "/vod/a.mp4", "",
			`channel "vod" from the first path segment: channel pattern path "^/live/(?P<channel>[^/]+)/" query [bitrate] (segments): path "/vod/a.mp4" does not match, so the content key is the whole path; content key "vod/a.mp4"`},
		{"q.example", "/p.m3u8", "channel=CCTV3", `channel "CCTV3" from query parameter channel; content key "CCTV3?channel=CCTV3"`},
		{"q.example", "/p.m3u8", "", `channel "p.m3u8" from the first path segment: channel pattern query [channel, bitrate] (query): query parameter channel is absent`},
		{"rx.example", "/tv/CCTV5/1.m3u8", "", `(regexp matcher)`},
		{"plain.example", "/ch1/index.m3u8", "", `channel "ch1" from the first path segment (the service has no channel pattern); content key "ch1"`},
	} {
		x := e.Explain(steer.Request{Client: stb, Host: c.host, Path: c.path, Query: c.query})
		if !strings.Contains(strings.Join(x.Steps, "\n"), c.step) {
			t.Errorf("%s%s?%s: no step with %s in\n%s", c.host, c.path, c.query, c.step, strings.Join(x.Steps, "\n"))
		}
	}
	// An unknown host has no service and so no channel.
	if x := e.Explain(steer.Request{Client: stb, Host: "nope.example", Path: "/a"}); x.Channel != nil {
		t.Errorf("channel for an unknown host: %+v", x.Channel)
	}
}

// TestNoPatternUnchanged: a service without a pattern keys as the balance
// policy's key says and renders the first segment, as before patterns.
func TestNoPatternUnchanged(t *testing.T) {
	s := fixture.CompileYAML(t, channelDoc, 1)
	cfg := balance.DefaultConfig()
	cfg.Key = balance.KeyOptions{By: balance.KeyPath, Query: []string{"rendition"}}
	e, err := steer.Build(s, steer.Inputs{Balance: cfg})
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := s.Service("plain")
	for _, pq := range [][2]string{{"/ch1/index.m3u8", "rendition=hd&t=1"}, {"/", ""}, {"/../x", ""}} {
		if got, want := e.ContentKey(svc, pq[0], pq[1]), balance.ContentKey(pq[0], pq[1], cfg.Key); got != want {
			t.Errorf("%v: key %q, want %q", pq, got, want)
		}
		if got, want := e.Channel(svc, pq[0], pq[1]), steer.Channel(pq[0]); got != want {
			t.Errorf("%v: channel %q, want %q", pq, got, want)
		}
	}
}

// TestChannelPatternAllocations: deciding and rendering the redirect
// allocate nothing for the segment and query matchers; the regexp matcher
// allocates its submatch slice on each use (and, under the race detector,
// its matcher, whose pool the detector empties).
func TestChannelPatternAllocations(t *testing.T) {
	e := channelEngine(t)
	buf := make([]byte, 0, 256)
	for _, c := range []struct {
		host, path, query string
		regexp            bool
	}{
		{"plain.example", "/ch1/index.m3u8", "token=t", false},
		{"pltv.example", "/PLTV/88888888/224/3221225618/index.m3u8", "token=t", false},
		{"live.example", "/live/CCTV1/1.m3u8", "token=t&bitrate=2000", false},
		{"live.example", "/vod/no/match.mp4", "bitrate=2000", false},
		{"q.example", "/play.m3u8", "token=t&channel=CCTV1&bitrate=2000", false},
		{"rx.example", "/tv/CCTV5/1.m3u8", "", true},
	} {
		req := steer.Request{Client: stb, Host: c.host, Path: c.path, Query: c.query}
		n := testing.AllocsPerRun(200, func() {
			d := e.Decide(req)
			buf = e.AppendLocation(buf[:0], &d, req.Path, req.Query)
		})
		if (n > 0) != c.regexp {
			t.Errorf("%s%s: %v allocations (regexp matcher: %v)", c.host, c.path, n, c.regexp)
		}
	}
}

// BenchmarkDecideChannel: one chash decision and its redirect on the
// province-scale snapshot, for each way of naming the channel (compare
// BenchmarkDecide, nearest without a path). The segment and query
// matchers allocate nothing; regexp allocates per match.
func BenchmarkDecideChannel(b *testing.B) {
	for _, c := range []struct {
		name, path, query string
		spec              *topology.ChannelSpec
	}{
		{"none", "/cctv1/index.m3u8", "token=0123456789abcdef", nil},
		{"pltv", "/PLTV/88888888/224/3221225618/index.m3u8", "token=0123456789abcdef",
			&topology.ChannelSpec{Path: `^/PLTV/[^/]+/[^/]+/(?P<channel>[^/]+)/`}},
		{"live+query", "/live/CCTV1/1.m3u8", "token=0123456789abcdef&bitrate=2000",
			&topology.ChannelSpec{Path: `^/live/(?P<channel>[^/]+)/`, Query: []string{"bitrate"}}},
		{"query", "/play.m3u8", "token=0123456789abcdef&channel=CCTV1",
			&topology.ChannelSpec{Query: []string{"channel"}}},
		{"regexp", "/tv/CCTV5/1.m3u8", "token=0123456789abcdef",
			&topology.ChannelSpec{Path: `^/(live|tv)/(?P<channel>[^/]+)/`}},
	} {
		b.Run(c.name, func(b *testing.B) {
			top := fixture.Scale()
			top.Services[0].Selection = topology.SelectCHash
			top.Services[0].Channel = c.spec
			s := fixture.CompileAt(b, top, 1)
			e, err := steer.Build(s, steer.Inputs{Balance: balance.DefaultConfig()})
			if err != nil {
				b.Fatal(err)
			}
			cs := clients(s, 4096)
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d := e.Decide(steer.Request{Client: cs[i&4095], Host: "live.iptv.example", Path: c.path, Query: c.query})
				if d.Server < 0 {
					b.Fatal("no server")
				}
				buf = e.AppendLocation(buf[:0], &d, c.path, c.query)
				i++
			}
		})
	}
}

// FuzzChannelLocation: whatever path and query an STB sends to a service
// with a channel pattern, the redirect holds only URI bytes and {channel}
// is never a dot segment, empty, or an encoded slash.
//
//	go test ./internal/stb/steer -run '^$' -fuzz FuzzChannelLocation -fuzztime 60s
func FuzzChannelLocation(f *testing.F) {
	for _, s := range [][2]string{
		{"/PLTV/8/2/3221225618/index.m3u8", "token=t"}, {"/live/CCTV1/1.m3u8", "bitrate=1"}, {"/play.m3u8", "channel=.."},
		{"/play.m3u8", "channel=%2e%2E"}, {"/PLTV/a/b/../x", ""}, {"/live/%2F/x", ""}, {"/tv/a b/1", "channel=a/../b"},
	} {
		f.Add(s[0], s[1])
	}
	e := channelEngine(f)
	hosts := []string{"plain.example", "pltv.example", "live.example", "q.example", "rx.example"}
	f.Fuzz(func(t *testing.T, path, query string) {
		if steer.PathReason(path) != "" {
			return // the front end answers 400
		}
		for _, h := range hosts {
			d := e.Decide(steer.Request{Client: stb, Host: h, Path: path, Query: query})
			if d.Server < 0 {
				t.Fatalf("%s: no server", h)
			}
			loc := e.AppendLocation(nil, &d, path, query)
			checkURIBytes(t, loc, '&')
			ch := e.Channel(d.Service, path, query)
			if ch != "" && steer.PathReason(ch) != "" {
				t.Fatalf("%s %q?%q: channel %q: %s", h, path, query, ch, steer.PathReason(ch))
			}
			if ch == "." || ch == ".." {
				t.Fatalf("%s %q?%q: channel %q", h, path, query, ch)
			}
		}
	})
}
