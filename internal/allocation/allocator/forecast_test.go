package allocator

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/stb/geo"
	"github.com/anysched/anysched/internal/stb/steer"
	"github.com/anysched/anysched/internal/stb/token"
	"github.com/anysched/anysched/internal/testbed/etcdtest"
)

// drainProvince: the north zone sits on server a; b (100 m away, same node
// hefei-1) and d (node hefei-2, about 190 m away) cover it too. The east
// zone, 5 km off, has server e alone. wuhu is the fallback. 100 Mbps each,
// compute unlimited, so that the plan puts every north viewer on a.
const drainProvince = `
anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
  - name: hefei-1
    region: hefei
    location: {lat: 31.86, lon: 117.28}
    servers:
      - {name: a, address: 10.1.1.1:8080, location: {lat: 31.8600, lon: 117.2800}, coverage_radius_m: 1000, capacity: {bandwidth_mbps: 100}}
      - {name: b, address: 10.1.1.2:8080, location: {lat: 31.8609, lon: 117.2800}, coverage_radius_m: 1000, capacity: {bandwidth_mbps: 100}}
  - name: hefei-2
    region: hefei
    location: {lat: 31.86, lon: 117.282}
    servers:
      - {name: d, address: 10.1.2.1:8080, location: {lat: 31.8600, lon: 117.2820}, coverage_radius_m: 1000, capacity: {bandwidth_mbps: 100}}
  - name: hefei-3
    region: hefei
    location: {lat: 31.86, lon: 117.33}
    servers:
      - {name: e, address: 10.1.3.1:8080, location: {lat: 31.8600, lon: 117.3330}, coverage_radius_m: 300, capacity: {bandwidth_mbps: 100}}
  - name: wuhu-1
    region: wuhu
    location: {lat: 31.33, lon: 118.38}
    servers:
      - {name: w, address: 10.2.1.1:8080}
zones:
  - {name: north, region: hefei, networks: [100.64.1.0/24], location: {lat: 31.8600, lon: 117.2800}}
  - {name: east, region: hefei, networks: [100.64.3.0/24], location: {lat: 31.8600, lon: 117.3330}}
  - {name: wuhu, region: wuhu, networks: [100.64.9.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`

// drainRig is a solved plan of drainProvince: six north viewers on a, two
// east ones on e, all wanting 5 Mbps, all in one channel (one room), each
// having asked again since the solve (so each is where the plan put it).
type drainRig struct {
	*rig
	north, east []viewerReq
}

type viewerReq struct {
	req steer.Request
	tok string
}

func newDrainRig(t *testing.T) *drainRig {
	t.Helper()
	eng := engineFor(t, drainProvince)
	r := &drainRig{rig: newRig(t, etcdtest.Start(t), eng, "hefei-1", Config{})}
	for i := range 6 {
		r.north = append(r.north, viewerReq{steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 1, byte(10 + i)}), Host: "live.iptv.example", Path: "/ch1/index.m3u8"}, signed(t, fmt.Sprintf("n%d", i), 5000)})
	}
	for i := range 2 {
		r.east = append(r.east, viewerReq{steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, 3, byte(10 + i)}), Host: "live.iptv.example", Path: "/ch1/index.m3u8"}, signed(t, fmt.Sprintf("e%d", i), 5000)})
	}
	r.ask(t, eng)
	r.a.Solve(context.Background())
	r.ask(t, eng)
	st := r.a.Status()
	for _, s := range st.Servers {
		want := map[string]int{"a": 6, "e": 2}[s.Name]
		if s.Sessions != want || (want > 0 && s.Used[0] != float64(5000*want)) {
			t.Fatalf("plan: server %s has %d sessions using %v kbps, want %d at 5000 kbps: %+v", s.Name, s.Sessions, s.Used[0], want, st)
		}
	}
	return r
}

// ask sends every viewer's request through eng and returns where each went.
func (r *drainRig) ask(t *testing.T, eng *steer.Engine) (north, east []steer.Decision) {
	t.Helper()
	do := func(vs []viewerReq) []steer.Decision {
		var out []steer.Decision
		for _, v := range vs {
			d := eng.Decide(v.req)
			if err := r.a.Allocate(eng, &d, v.req, v.tok); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	return do(r.north), do(r.east)
}

// headroom sets the plan's headroom (kbps) on the named servers, as if
// arrivals had taken the rest.
func (r *drainRig) headroom(t *testing.T, kbps map[string]int64) {
	t.Helper()
	p := r.a.plan.Load()
	for name, left := range kbps {
		si, ok := p.snap.Server(name)
		if !ok || p.pos[si] < 0 {
			t.Fatalf("no server %s in the plan", name)
		}
		p.bwLeft[p.pos[si]].Store(left)
	}
}

func (r *drainRig) forecast() map[string]store.DrainForecast {
	out := map[string]store.DrainForecast{}
	for _, f := range forecastDrains(r.a.plan.Load(), r.eng) {
		out[string(f.Kind)+" "+f.Name] = f
	}
	return out
}

// moveLoss is, by hand, what moving one north viewer (2 danmaku an hour in
// a room of such viewers, no gift: Y = 1) from a at 5000 kbps to a server
// dist metres from it at the same bitrate costs: the switch, and the
// longer access latency's share of the interaction term.
func moveLoss(dist float64) float64 {
	p := qoe.DefaultParams()
	interaction := 2 / (2 + p.Lambda*2)
	return -p.D*p.S - p.A*interaction*p.AccessPerKm*dist/1000
}

// The summary carries the drain forecasts of the current plan, made once
// per plan when a summary first asks (off the solve goroutine), and a
// summary may be read while a solve runs (the instance registry's
// goroutine does).
func TestSummaryForecastsEachPlanOnce(t *testing.T) {
	r := newDrainRig(t)
	ctx := context.Background()
	same := func(what string, got []store.DrainForecast) {
		t.Helper()
		want := r.forecast()
		if len(got) != len(want) || len(got) == 0 {
			t.Fatalf("%s: %d forecasts, want %d", what, len(got), len(want))
		}
		for _, g := range got {
			if w := want[string(g.Kind)+" "+g.Name]; g != w {
				t.Fatalf("%s: %s %s: %+v, want %+v", what, g.Kind, g.Name, g, w)
			}
		}
	}
	first := r.a.Summary().Drain
	same("first plan", first)
	if again := r.a.Summary().Drain; &again[0] != &first[0] {
		t.Fatal("a second summary of the same plan made its forecasts again")
	}
	stop := make(chan struct{})
	read := make(chan int)
	go func() {
		n := 0
		defer func() { read <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if q := r.a.Summary(); q != nil && len(q.Drain) > 0 {
				n++
			}
		}
	}()
	for range 3 {
		r.ask(t, r.eng)
		r.a.Solve(ctx)
	}
	close(stop)
	if n := <-read; n == 0 {
		t.Fatal("no summary with forecasts was read beside the solves")
	}
	last := r.a.Summary().Drain
	if &last[0] == &first[0] {
		t.Fatal("a new plan kept the first plan's forecasts")
	}
	same("fourth plan", last)
}

func TestForecastDrains(t *testing.T) {
	north := topology.Location{Lat: 31.86, Lon: 117.28}
	toB := moveLoss(geo.DistanceM(north.Lat, north.Lon, 31.8609, 117.28))
	toD := moveLoss(geo.DistanceM(north.Lat, north.Lon, 31.86, 117.282))
	tests := []struct {
		name     string
		headroom map[string]int64 // kbps left after the solve; nil: as planned
		want     map[string]store.DrainForecast
		// delta is the hand computation of the objective's change, by
		// forecast (NaN: not checked here).
		delta map[string]float64
	}{
		{
			name: "room on a neighbour: every viewer moves at the same bitrate",
			want: map[string]store.DrainForecast{
				"server a":     {Sessions: 6, SameRung: 6},
				"server b":     {},
				"server d":     {},
				"server e":     {Sessions: 2, ToFallback: 2}, // nothing else covers east
				"node hefei-1": {Sessions: 6, SameRung: 6},   // a and b at once: to d
				"node hefei-2": {},
				"node hefei-3": {Sessions: 2, ToFallback: 2},
			},
			delta: map[string]float64{"server a": 6 * toB, "node hefei-1": 6 * toD, "server b": 0},
		},
		{
			name:     "room for a few: one at the same bitrate, two lower, the rest to the fallback",
			headroom: map[string]int64{"b": 5000 + 2500 + 1200, "d": 0},
			want: map[string]store.DrainForecast{
				"server a":     {Sessions: 6, SameRung: 1, LowerRung: 2, ToFallback: 3},
				"node hefei-1": {Sessions: 6, ToFallback: 6},
			},
		},
		{
			name:     "room for lower bitrates only",
			headroom: map[string]int64{"b": 4800, "d": 0},
			want: map[string]store.DrainForecast{
				// 2500 then 1200 fit; then nothing does.
				"server a":     {Sessions: 6, LowerRung: 2, ToFallback: 4},
				"node hefei-1": {Sessions: 6, ToFallback: 6},
			},
		},
		{
			name:     "no room anywhere: all to the fallback",
			headroom: map[string]int64{"b": 1000, "d": 1000},
			want: map[string]store.DrainForecast{
				"server a":     {Sessions: 6, ToFallback: 6},
				"node hefei-1": {Sessions: 6, ToFallback: 6},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newDrainRig(t)
			r.headroom(t, tt.headroom)
			p := r.a.plan.Load()
			before := make([]int64, len(p.servers))
			for pos := range p.servers {
				before[pos] = p.bwLeft[pos].Load()
			}
			got := r.forecast()
			if len(got) != 7 {
				t.Errorf("%d forecasts, want one per server (4) and node (3): %+v", len(got), got)
			}
			for k, w := range tt.want {
				g := got[k]
				w.Kind, w.Name = g.Kind, g.Name
				w.ObjectiveDelta = g.ObjectiveDelta
				if g != w {
					t.Errorf("%s: %+v, want %+v", k, g, w)
				}
				if g.Kind == "" || !strings.HasSuffix(k, " "+g.Name) || !strings.HasPrefix(k, string(g.Kind)) {
					t.Errorf("%s: named %s %q", k, g.Kind, g.Name)
				}
				if (g.Sessions == 0) != (g.ObjectiveDelta == 0) || g.ObjectiveDelta > 0 {
					t.Errorf("%s: objective delta %v for %d moves", k, g.ObjectiveDelta, g.Sessions)
				}
			}
			for k, w := range tt.delta {
				if g := got[k].ObjectiveDelta; math.Abs(g-w) > 1e-6 {
					t.Errorf("%s: objective delta %.9f, by hand %.9f", k, g, w)
				}
			}
			for pos := range p.servers {
				if p.bwLeft[pos].Load() != before[pos] {
					t.Fatalf("the forecast changed the plan's headroom at position %d: %d -> %d", pos, before[pos], p.bwLeft[pos].Load())
				}
			}
		})
	}
}

// The forecast is what happens: after the drain, each viewer of the
// drained server or node, asking again, lands where the forecast said (as
// counted), the others stay, and the plan's headroom pays for the moves.
func TestForecastMatchesTheDrain(t *testing.T) {
	tests := []struct {
		name     string
		kind     opstate.DrainKind
		target   string
		headroom map[string]int64
	}{
		{"server, room", opstate.DrainServer, "a", nil},
		{"server, little room", opstate.DrainServer, "a", map[string]int64{"b": 5000 + 2500 + 1200, "d": 0}},
		{"server, room for lower bitrates", opstate.DrainServer, "a", map[string]int64{"b": 4800, "d": 0}},
		{"server, room on two", opstate.DrainServer, "a", map[string]int64{"b": 1200 * 6, "d": 5000}},
		{"node, room", opstate.DrainNode, "hefei-1", nil},
		{"node, little room", opstate.DrainNode, "hefei-1", map[string]int64{"d": 5000 + 2500 + 1200}},
		{"server alone in its zone", opstate.DrainServer, "e", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newDrainRig(t)
			r.headroom(t, tt.headroom)
			fc := r.forecast()[string(tt.kind)+" "+tt.target]
			if fc.Sessions == 0 {
				t.Fatalf("no sessions on %s %s to forecast: %+v", tt.kind, tt.target, r.forecast())
			}
			snap := r.eng.Snapshot()
			drained := func(si int32) bool {
				if tt.kind == opstate.DrainNode {
					return snap.Nodes[snap.Servers[si].Node].Name == tt.target
				}
				return snap.Servers[si].Name == tt.target
			}
			// Where each viewer is now: the plan's place.
			beforeN, beforeE := r.ask(t, r.eng)
			before := append(beforeN, beforeE...)
			after := steer.New(snap, steer.Options{DefaultRegion: "hefei", Available: func(i int32) bool { return !drained(i) }})
			afterN, afterE := r.ask(t, after)
			var got store.DrainForecast
			hefei, _ := snap.Region("hefei")
			for i, d := range append(afterN, afterE...) {
				was := before[i]
				if !drained(was.Server) {
					if d.Server != was.Server || d.BitrateKbps != was.BitrateKbps {
						t.Errorf("viewer %d moved from %s at %d to %s at %d, its server stays in service", i, snap.Servers[was.Server].Name, was.BitrateKbps, snap.Servers[d.Server].Name, d.BitrateKbps)
					}
					continue
				}
				got.Sessions++
				switch {
				case d.Server < 0 || drained(d.Server):
					t.Fatalf("viewer %d sent to %v after the drain", i, d.Server)
				case snap.Servers[d.Server].Region != hefei:
					got.ToFallback++
				case d.BitrateKbps >= was.BitrateKbps:
					got.SameRung++
				default:
					got.LowerRung++
				}
			}
			got.Kind, got.Name, got.ObjectiveDelta = fc.Kind, fc.Name, fc.ObjectiveDelta
			if got != fc {
				t.Fatalf("after the drain: %+v; the forecast said %+v", got, fc)
			}
		})
	}
}

// benchProvince is one city of 20 servers (5 nodes of 4) of mbps each,
// each covering the whole city (every viewer is priced against all 20: the
// worst case), and 8 zones.
func benchProvince(mbps int) string {
	var b strings.Builder
	b.WriteString(`anycast: {service_ip: 198.18.0.1, center_prefix: 198.18.0.0/26}
regions:
  - {name: hefei, location: {lat: 31.82, lon: 117.23}, fallback: [wuhu]}
  - {name: wuhu, location: {lat: 31.33, lon: 118.38}}
nodes:
`)
	for n := range 5 {
		fmt.Fprintf(&b, "  - name: hefei-%d\n    region: hefei\n    location: {lat: %.3f, lon: %.3f}\n    servers:\n", n+1, 31.80+0.01*float64(n), 117.20+0.02*float64(n))
		for s := range 4 {
			fmt.Fprintf(&b, "      - {name: s%d-%d, address: 10.1.%d.%d:8080, location: {lat: %.3f, lon: %.3f}, capacity: {bandwidth_mbps: %d}}\n",
				n+1, s+1, n+1, s+1, 31.80+0.01*float64(n), 117.20+0.02*float64(n)+0.001*float64(s), mbps)
		}
	}
	b.WriteString("  - name: wuhu-1\n    region: wuhu\n    location: {lat: 31.33, lon: 118.38}\n    servers:\n      - {name: w, address: 10.2.1.1:8080}\nzones:\n")
	for z := range 8 {
		fmt.Fprintf(&b, "  - {name: z%d, region: hefei, networks: [100.64.%d.0/19], location: {lat: %.3f, lon: %.3f}}\n", z, 32*z, 31.78+0.015*float64(z), 117.18+0.015*float64(z))
	}
	b.WriteString(`  - {name: wuhu, region: wuhu, networks: [100.65.0.0/24]}
services:
  - name: live
    hostnames: [live.iptv.example]
    url_template: "http://{server}/live/{channel}/{bitrate}/index.m3u8"
    bitrates_kbps: [1200, 2500, 5000]
    selection: qoe
`)
	return b.String()
}

// BenchmarkForecastDrains: the forecast of one solve of 10,000 sessions on
// 20 servers (20 server drains and 5 node drains), as it runs on the solve
// goroutine after each solve: with servers the plan fills (2 Gbps each,
// demand 50 Gbps: most prices are refused for lack of headroom) and with
// room for every move (every rung of every server is valued); the STBs
// without a token (one profile: the viewers of a zone on a server share
// their values) or each with its own profile (a token each, none alike).
func BenchmarkForecastDrains(b *testing.B) {
	for _, c := range []struct {
		name     string
		mbps     int
		profiles bool
	}{{"full", 2000, false}, {"room", 20000, false}, {"room-distinct-viewers", 20000, true}} {
		b.Run(c.name, func(b *testing.B) {
			eng := engineFor(b, benchProvince(c.mbps))
			r := newRig(b, etcdtest.Start(b), eng, "bench", Config{})
			for i := range 10000 { // 10,000 STBs, 50 channels
				req := steer.Request{Client: netip.AddrFrom4([4]byte{100, 64, byte(i / 256), byte(i)}), Host: "live.iptv.example", Path: fmt.Sprintf("/ch%d/index.m3u8", i%50)}
				tok := ""
				if c.profiles {
					var err error
					tok, err = token.Sign(key1, token.Claims{Subject: fmt.Sprintf("v%d", i), Expires: time.Now().Add(time.Hour), DesiredKbps: 5000, DanmakuPerHour: float64(i) / 100, Gift: math.NaN()})
					if err != nil {
						b.Fatal(err)
					}
				}
				d := eng.Decide(req)
				if err := r.a.Allocate(eng, &d, req, tok); err != nil {
					b.Fatal(err)
				}
			}
			r.a.Solve(context.Background())
			st := r.a.Status()
			if st.PlannedN != 10000 || len(st.Servers) != 20 {
				b.Fatalf("plan: %d sessions on %d servers", st.PlannedN, len(st.Servers))
			}
			p := r.a.plan.Load()
			fc := forecastDrains(p, eng)
			var on, same, lower, fallback int
			for _, f := range fc {
				if f.Kind == opstate.DrainServer {
					on, same, lower, fallback = on+f.Sessions, same+f.SameRung, lower+f.LowerRung, fallback+f.ToFallback
				}
			}
			b.Logf("solve %.0f ms; %d forecasts; server drains: %d sessions, %d same, %d lower, %d fallback", st.SolveMS, len(fc), on, same, lower, fallback)
			b.ReportAllocs()
			for b.Loop() {
				forecastDrains(p, eng)
			}
		})
	}
}
