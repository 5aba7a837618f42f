package steer_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health/avail"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/balance"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/testbed/fixture"
)

// Two cities; live runs on the edge caches, vod on storage servers with
// label fleet=vod, the edge caches fleet=edge (hefei has one VOD node, wuhu none: its VOD STBs fall back).
const poolDoc = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.8, lon: 117.2}}
  - {name: wuhu, location: {lat: 31.3, lon: 118.4}, fallback: [hefei]}
pools:
  - {name: vod, match: {fleet: vod}}
nodes:
  - name: hefei-1
    labels: {fleet: edge}
    region: hefei
    location: {lat: 31.8, lon: 117.2}
    servers:
      - {name: hefei-1-a, address: "10.0.1.1:80"}
      - {name: hefei-1-b, address: "10.0.1.2:80"}
  - name: hefei-2
    labels: {fleet: edge}
    region: hefei
    location: {lat: 31.9, lon: 117.3}
    servers:
      - {name: hefei-2-a, address: "10.0.1.3:80"}
  - name: hefei-vod
    region: hefei
    location: {lat: 31.85, lon: 117.25}
    labels: {fleet: vod}
    servers:
      - {name: hefei-vod-a, address: "10.0.1.9:80"}
      - {name: hefei-vod-b, address: "10.0.1.10:80"}
  - name: wuhu-1
    labels: {fleet: edge}
    region: wuhu
    location: {lat: 31.3, lon: 118.4}
    servers:
      - {name: wuhu-1-a, address: "10.0.2.1:80"}
zones:
  - {name: hefei-z, region: hefei, networks: [100.64.1.0/24], location: {lat: 31.8, lon: 117.2}}
  - {name: wuhu-z, region: wuhu, networks: [100.64.2.0/24]}
services:
  - name: live
    hostnames: [live.example]
    url_template: "http://{server}/live/{channel}/index.m3u8"
    bitrates_kbps: [2000]
    answers: 3
    match: {fleet: edge}
    overflow: {rps_per_server: 100}
  - name: vod
    hostnames: [vod.example]
    url_template: "http://{server}/vod/{channel}/index.m3u8"
    bitrates_kbps: [2000]
    pool: vod
    selection: chash
`

type overState map[[2]int32]bool

func (o overState) Over(svc, node int32) bool     { return o[[2]int32{svc, node}] }
func (o overState) Reason(svc, node int32) string { return "test threshold" }

func names(s *topology.Snapshot, idx []int32) []string {
	out := make([]string, len(idx))
	for i, x := range idx {
		out[i] = s.Servers[x].Name
	}
	return out
}

func node(t *testing.T, s *topology.Snapshot, name string) int32 {
	t.Helper()
	n, ok := s.Node(name)
	if !ok {
		t.Fatalf("no node %s", name)
	}
	return n
}

func TestPools(t *testing.T) {
	s := fixture.CompileYAML(t, poolDoc, 1)
	eng, err := steer.Build(s, steer.Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, client, host string
		wantNode           []string // one of
		wantResult         steer.Result
	}{
		{"live in hefei avoids the vod node", "100.64.1.7", "live.example", []string{"hefei-1"}, steer.ResultCZ},
		{"vod in hefei uses only the vod pool", "100.64.1.7", "vod.example", []string{"hefei-vod"}, steer.ResultCZ},
		{"vod in wuhu has no pool server: falls back", "100.64.2.7", "vod.example", []string{"hefei-vod"}, steer.ResultFallback},
		{"live in wuhu stays", "100.64.2.7", "live.example", []string{"wuhu-1"}, steer.ResultCZ},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 50 { // many clients and channels: never outside the pool
				c := netip.MustParseAddr(tc.client).As4()
				c[3] = byte(i)
				d := eng.Decide(steer.Request{Client: netip.AddrFrom4(c), Host: tc.host, Path: "/ch" + string(rune('a'+i%26)) + "/x"})
				if d.Result != tc.wantResult || !slices.Contains(tc.wantNode, s.Nodes[d.Node].Name) {
					t.Fatalf("client %v: %v at node %s, want %v at %v", netip.AddrFrom4(c), d.Result, s.Nodes[d.Node].Name, tc.wantResult, tc.wantNode)
				}
				if !s.InPool(d.Service, d.Server) || !eng.AvailableFor(d.Service, d.Server) {
					t.Fatalf("server %s is not in service %d's pool", s.Servers[d.Server].Name, d.Service)
				}
			}
		})
	}
	// Every VOD server down: VOD has nowhere to go, live is untouched.
	avail := func(i int32) bool { return s.Servers[i].Labels["fleet"] != "vod" }
	eng = steer.New(s, steer.Options{Available: avail})
	if d := eng.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "vod.example", Path: "/a/b"}); d.Result != steer.ResultError {
		t.Errorf("vod with its pool down: %v, want ERROR", d.Result)
	}
	if d := eng.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.example", Path: "/a/b"}); d.Result != steer.ResultCZ {
		t.Errorf("live with the vod pool down: %v, want CZ", d.Result)
	}
	// Explain names the pool and why other servers were not used.
	x := steer.New(s, steer.Options{}).Explain(steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "vod.example", Path: "/a/b"})
	found := false
	for _, c := range x.Candidates {
		if c.Server == "hefei-1-a" && c.Why == "not in the service's pool" {
			found = true
		}
	}
	if !found || !slices.ContainsFunc(x.Steps, func(s string) bool { return s == "service vod uses pool vod (labels {fleet=vod}): 2 servers" }) {
		t.Errorf("explain: steps %q, candidates %+v", x.Steps, x.Candidates)
	}
}

func TestOverflow(t *testing.T) {
	s := fixture.CompileYAML(t, poolDoc, 1)
	live, _ := s.Service("live")
	h1, h2 := node(t, s, "hefei-1"), node(t, s, "hefei-2")
	client := steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.example", Path: "/a/b"}
	tests := []struct {
		name       string
		over       overState
		wantNode   string
		wantResult steer.Result
	}{
		{"nothing over", overState{}, "hefei-1", steer.ResultCZ},
		{"nearest node over: next node", overState{{live, h1}: true}, "hefei-2", steer.ResultOverflow},
		{"the whole city over: next region", overState{{live, h1}: true, {live, h2}: true}, "wuhu-1", steer.ResultOverflow},
		{"everything over: served at home", overState{{live, h1}: true, {live, h2}: true, {live, node(t, s, "wuhu-1")}: true}, "hefei-1", steer.ResultCZ},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cnt := &counter{}
			eng, _ := steer.Build(s, steer.Inputs{Overflow: tc.over, Count: cnt})
			d := eng.Decide(client)
			if d.Result != tc.wantResult || s.Nodes[d.Node].Name != tc.wantNode {
				t.Fatalf("%v at %s, want %v at %s", d.Result, s.Nodes[d.Node].Name, tc.wantResult, tc.wantNode)
			}
			// Demand counts where the STB would have gone: hefei-1.
			if len(cnt.n) != 1 || cnt.n[[2]int32{live, h1}] != 1 {
				t.Errorf("counts %v: want one at hefei-1", cnt.n)
			}
			eng.Explain(client)
			if len(cnt.n) != 1 || cnt.n[[2]int32{live, h1}] != 1 {
				t.Errorf("explain counted: %v", cnt.n)
			}
		})
	}
}

type counter struct{ n map[[2]int32]int }

func (c *counter) Add(svc, node int32) {
	if c.n == nil {
		c.n = map[[2]int32]int{}
	}
	c.n[[2]int32{svc, node}]++
}

func TestGeo(t *testing.T) {
	s := fixture.CompileYAML(t, poolDoc, 1)
	// 203.0.113.0/24 is placed near wuhu by the database.
	locate := func(a netip.Addr) (topology.Location, bool) {
		if netip.MustParsePrefix("203.0.113.0/24").Contains(a) {
			return topology.Location{Lat: 31.35, Lon: 118.3}, true
		}
		return topology.Location{}, false
	}
	eng := steer.New(s, steer.Options{Locate: locate, DefaultRegion: "hefei"})
	d := eng.Decide(steer.Request{Client: netip.MustParseAddr("203.0.113.9"), Host: "live.example"})
	if d.Result != steer.ResultGeo || s.Regions[d.ClientRegion].Name != "wuhu" || s.Nodes[d.Node].Name != "wuhu-1" {
		t.Errorf("geo client: %v region %d node %d", d.Result, d.ClientRegion, d.Node)
	}
	d = eng.Decide(steer.Request{Client: netip.MustParseAddr("198.51.100.9"), Host: "live.example"})
	if d.Result != steer.ResultDefault || s.Regions[d.ClientRegion].Name != "hefei" {
		t.Errorf("unknown client: %v in region %d, want DEFAULT hefei", d.Result, d.ClientRegion)
	}
	// A zone wins over the database.
	if d = eng.Decide(steer.Request{Client: netip.MustParseAddr("100.64.1.1"), Host: "live.example"}); d.Result != steer.ResultCZ {
		t.Errorf("zone client: %v", d.Result)
	}
	if n := testing.AllocsPerRun(100, func() { eng.Decide(steer.Request{Client: netip.MustParseAddr("203.0.113.9"), Host: "live.example"}) }); n != 0 {
		t.Errorf("GEO decision allocates %v times", n)
	}
}

func TestAlternates(t *testing.T) {
	s := fixture.CompileYAML(t, poolDoc, 1)
	eng := steer.New(s, steer.Options{})
	req := steer.Request{Client: netip.MustParseAddr("100.64.1.7"), Host: "live.example", Path: "/a/b"}
	d := eng.Decide(req)
	alts := names(s, eng.Alternates(&d, req, 3, nil))
	// The other hefei node first, then the other region; never the vod
	// node (not live's pool), never the first answer's node again.
	if want := []string{"hefei-2-a", "wuhu-1-a"}; !slices.Equal(alts, want) {
		t.Errorf("alternates %v, want %v", alts, want)
	}
	if got := eng.Alternates(&d, req, 1, nil); len(got) != 0 {
		t.Errorf("answers 1: %v", got)
	}
	// With the nearer alternate node over its thresholds, it comes last.
	live, _ := s.Service("live")
	eng, _ = steer.Build(s, steer.Inputs{Overflow: overState{{live, node(t, s, "hefei-2")}: true}})
	d = eng.Decide(req)
	if got, want := names(s, eng.Alternates(&d, req, 3, nil)), []string{"wuhu-1-a", "hefei-2-a"}; !slices.Equal(got, want) {
		t.Errorf("with hefei-2 over: %v, want %v", got, want)
	}
}

func TestSlowStartNearest(t *testing.T) {
	s := fixture.CompileYAML(t, poolDoc, 1)
	a, _ := s.Server("hefei-1-a")
	now := time.Now()
	back := make([]time.Time, len(s.Servers))
	back[a] = now.Add(-time.Second) // hefei-1-a just came back
	bc := balance.DefaultConfig()
	bc.SlowStart = balance.SlowStart{Window: 100 * time.Second}
	share := func(eng *steer.Engine) float64 {
		n := 0
		for i := range 256 {
			d := eng.Decide(steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 1, byte(i)}), Host: "live.example"})
			if d.Server == a {
				n++
			}
		}
		return float64(n) / 256
	}
	ramped, _ := steer.Build(s, steer.Inputs{Balance: bc, Back: back, Now: now})
	full, _ := steer.Build(s, steer.Inputs{Balance: bc, Now: now})
	if f := ramped.Ramp(a); f < 0.09 || f > 0.11 {
		t.Errorf("ramp %v, want ~0.1 one second into a 100s window", f)
	}
	if until := ramped.RampingUntil(); !until.Equal(back[a].Add(100 * time.Second)) {
		t.Errorf("ramping until %v", until)
	}
	rs, fs := share(ramped), share(full)
	if !(rs < fs/2) || fs < 0.3 {
		t.Errorf("hefei-1-a's share: %.2f ramping, %.2f at full weight", rs, fs)
	}
	// Health's own verdict change counts the same as a scheduler-seen return.
	av := &avail.Availability{Figures: make([]avail.Figures, len(s.Servers)), Available: make([]bool, len(s.Servers)), Why: make([]string, len(s.Servers))}
	for i := range av.Available {
		av.Available[i] = true
	}
	av.Figures[a].Since = now.Add(-50 * time.Second)
	e, _ := steer.Build(s, steer.Inputs{Balance: bc, Avail: av, Now: now})
	if f := e.Ramp(a); f < 0.45 || f > 0.55 {
		t.Errorf("ramp after 50s of 100s: %v", f)
	}
}
